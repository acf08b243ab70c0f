"""A Trace whose fields are mapped from the spans on first read (what the live evaluation pipeline builds).

A cheap evaluator reads one or two fields (``output.final_answer``, ``tool_calls``), yet mapping every field
(messages, metrics, model steps, timestamps, retrieved contexts) was the largest part of evaluating a span.
:class:`LazyTrace` holds the fields that cost nothing (identity, ``schema_version``) and maps each other field
the first time it is read, then keeps it.

It is a ``Trace`` in every way a reader can see: the same values, fields set and field order, and the same
dumps. Anything that reads the model whole rather than one field at a time (``model_dump``, ``==``, ``repr``,
pickling, copying, assignment) maps the fields still missing first and turns the object into a plain
:class:`~evaltrace.schema.Trace` (``type(trace) is Trace`` from then on), so pickles, stores and the process
engine see exactly what the eager mapping gave.

Thread safety: a field is mapped without a lock and published with ``dict.setdefault`` (atomic under the GIL).
Two threads reading the same missing field at once may both map it (mapping is a pure function of the ended
spans, so both get equal values), and both return the one value published first. A first read racing a whole
read (which swaps the instance dict and then the class) returns the value the whole read publishes.

A field whose mapping raises (a bug of ours) raises :class:`FieldMappingFailed` on every read of it (the cause
is kept, logged once): the evaluation job records the reader as not evaluated (``mapping_failed``), as when the
eager mapping fails, never as the evaluator's error.
"""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel

from evaltrace._internal.errors import FieldMappingFailed, log_internal_error
from evaltrace.schema import Trace

# The real instance dict (the slot BaseModel declares), read and written past LazyTrace's ``__dict__`` property.
_DICT: Any = BaseModel.__dict__["__dict__"]
_PRIVATE: Any = BaseModel.__dict__["__pydantic_private__"]  # the slot a LazyTrace keeps its FieldSource in
# Every model's four slots, set through their descriptors (to build a model unchecked, as ``trusted()`` does):
# ``object.__setattr__`` finds the same descriptor by name first, with its argument tuple (~2k instructions a slot;
# a TraceOutput's four were ~9k of the 15k ``trusted()`` spent on it).
SET_DICT = _DICT.__set__
SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
SET_PRIVATE = _PRIVATE.__set__
_GET_DICT = _DICT.__get__
_GET_PRIVATE = _PRIVATE.__get__
_new = object.__new__
FIELDS: tuple[str, ...] = tuple(Trace.model_fields)


class FieldSource:
    """Maps one field of a Trace on demand (the base of a LazyTrace's source, kept in its unused private slot)."""

    __slots__ = ("failures",)

    def __init__(self) -> None:
        self.failures: dict[str, Exception] = {}  # field -> what its mapping raised (kept: mapped once)

    def field(self, name: str) -> Any:
        """The value of field ``name`` (an equal value on every call for the same name)."""
        raise NotImplementedError

    def value_of(self, name: str) -> Any:
        """``field(name)``; raises FieldMappingFailed (from the kept cause) when it raised, now or before."""
        cause = self.failures.get(name)
        if cause is None:
            try:
                return self.field(name)
            except Exception as exc:
                self.failed(name, exc)
        # A new wrapper per read (threads may raise at once), all chained to the one kept cause.
        raise FieldMappingFailed(name) from cause

    def failed(self, name: str, exc: Exception) -> NoReturn:
        """Keep ``exc`` as field ``name``'s cause (the first one kept: logged once) and raise FieldMappingFailed."""
        cause = self.failures.setdefault(name, exc)
        if cause is exc:  # the first failure of this field: logged once, at our boundary
            log_internal_error(f"mapping Trace.{name} on first read (its readers are not evaluated)")
        raise FieldMappingFailed(name) from cause


class _Field:
    """A field of LazyTrace: the instance dict's value, else mapped by the trace's source (a non-data descriptor).

    Python reads the instance dict before a non-data descriptor: a field mapped already is read as from any
    model, and ``__get__`` runs only for a field still missing. Without it, that read failed the generic lookup
    first (an AttributeError built, formatted and cleared) and then called ``__getattr__``: ~4k instructions more
    per first read, two per evaluated span (``output``, and ``input`` for the monitor's query preview).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, trace: Any, owner: Any = None) -> Any:
        if trace is None:  # read on the class
            return self
        # A whole read in another thread may be turning this object into a plain Trace meanwhile (materialize:
        # the full dict, then no source, then the class), so the source is read first and the dict after it: a
        # dict without the field is then either the old one (its values are the ones the new dict copies) or the
        # source is still there to map it.
        name = self.name
        source = _GET_PRIVATE(trace)
        real: dict[str, Any] = _GET_DICT(trace)
        if name in real:
            return real[name]
        if isinstance(source, FieldSource):
            # FieldSource.value_of, inline for a field that has not failed (a first read of ``output`` and ``input``
            # on every evaluated span: one Python frame fewer each).
            if name in source.failures:
                return real.setdefault(name, source.value_of(name))  # raises from the kept cause
            try:
                value = source.field(name)
            except Exception as exc:
                source.failed(name, exc)
            return real.setdefault(name, value)
        return BaseModel.__getattr__(trace, name)  # type: ignore[attr-defined]  # pydantic's error (unreachable)


class LazyTrace(Trace):
    """A :class:`~evaltrace.schema.Trace` whose missing fields come from a :class:`FieldSource` on first read.

    Build it with :func:`lazy_trace`. Never pickled or dumped as itself: it becomes a plain Trace first. Each field
    is a :class:`_Field` on the class (set after the class body: pydantic would take one there for a field).
    """

    def __getattr__(self, name: str) -> Any:
        # Only called for names missing from the instance dict and the class: a field's read goes to its _Field
        # (while this is a LazyTrace), so what is left is a real miss or a private attribute.
        # Explicit, not zero-arg super(): ``self`` may be a plain Trace by now, which super(LazyTrace) refuses.
        return BaseModel.__getattr__(self, name)  # type: ignore[attr-defined]  # pydantic's (private attributes, errors)

    @property
    def __dict__(self) -> dict[str, Any]:
        """Every field, mapped: read whole (dumps, copies, ``repr``), the trace becomes a plain Trace."""
        materialize(self)
        real: dict[str, Any] = _DICT.__get__(self)
        return real

    @__dict__.setter
    def __dict__(self, value: dict[str, Any]) -> None:
        _DICT.__set__(self, value)

    # Dumps map first here, not from inside pydantic's serializer (through ``__dict__``), which would turn a
    # field's FieldMappingFailed into a PydanticSerializationError without its cause.
    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        materialize(self)
        return self.model_dump(*args, **kwargs)

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        materialize(self)
        return self.model_dump_json(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        materialize(self)
        return self == other  # a plain Trace now (also asked first for ``eager == lazy``: a subclass's __eq__)

    __hash__ = None  # type: ignore[assignment]  # as Trace's (a model that defines __eq__ is unhashable)

    def __reduce_ex__(self, protocol: Any) -> Any:
        materialize(self)
        return self.__reduce_ex__(protocol)  # a plain Trace's: unpickled as a Trace

    def __getstate__(self) -> dict[Any, Any]:
        materialize(self)
        return self.__getstate__()

    def __copy__(self) -> Any:
        materialize(self)
        return self.__copy__()  # a plain Trace's copy

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        materialize(self)
        return self.__deepcopy__(memo)

    def __repr_name__(self) -> str:
        return "Trace"


for _name in FIELDS:
    type.__setattr__(LazyTrace, _name, _Field(_name))
del _name


def lazy_trace(ready: dict[str, Any], fields_set: set[str], fields: FieldSource) -> Trace:
    """A Trace holding ``ready`` (field -> value) that maps its other fields with ``fields`` when read.

    Args:
        ready: Values known already (at least the identity); every other field comes from ``fields``.
        fields_set: The fields set, as the eager mapping's Trace reports them (``model_fields_set``).
        fields: Maps the other fields.
    """
    trace = _new(LazyTrace)
    SET_DICT(trace, ready)
    SET_FIELDS_SET(trace, fields_set)
    SET_EXTRA(trace, None)
    SET_PRIVATE(trace, fields)
    return trace


class _Failures(FieldSource):
    """What a LazyTrace keeps of its source once every field that maps is mapped: the failures, no spans."""

    __slots__ = ()

    def field(self, name: str) -> Any:  # never reached for a failed field: value_of raises its kept cause
        raise AttributeError(name)


def release(trace: Trace) -> None:
    """Map every field of ``trace`` that maps and let go of its spans; a field that failed stays unreadable.

    For a Trace kept long after its mapping (a turn held until its session is judged): a LazyTrace's source holds
    every span of the subtree, with their attributes, until every field is mapped. A trace whose fields all map
    becomes a plain Trace (:func:`materialize`); otherwise it stays a LazyTrace whose missing fields raise
    FieldMappingFailed from the kept cause, as before, without the spans.
    """
    if type(trace) is not LazyTrace:
        return
    source = object.__getattribute__(trace, "__pydantic_private__")
    if not isinstance(source, FieldSource) or isinstance(source, _Failures):
        return
    real: dict[str, Any] = _DICT.__get__(trace)
    for name in FIELDS:
        if name not in real:
            try:
                real.setdefault(name, source.value_of(name))
            except FieldMappingFailed:
                pass
    if not source.failures:
        materialize(trace)
        return
    kept = _Failures()
    # Without their tracebacks (logged already): a traceback's frames hold the mapping's locals, the spans too.
    kept.failures.update((name, cause.with_traceback(None)) for name, cause in source.failures.items())
    # A reader holding the old source still maps from it (the spans live as long as that read); new reads of a
    # failed field raise from the kept cause, and every other field is in the dict already.
    object.__setattr__(trace, "__pydantic_private__", kept)


def materialize(trace: Trace) -> None:
    """Map every field of ``trace`` still missing and make it a plain Trace (nothing to do for one already)."""
    if type(trace) is not LazyTrace:
        return
    source = object.__getattribute__(trace, "__pydantic_private__")
    real: dict[str, Any] = _DICT.__get__(trace)
    if isinstance(source, FieldSource):
        for name in FIELDS:
            if name not in real:
                real.setdefault(name, source.value_of(name))  # FieldMappingFailed: the trace stays lazy
        # The eager Trace's field order (dumps and repr follow the dict's order), with the values published: a
        # concurrent first read publishes into ``real`` with setdefault, so it returns these very objects.
        _DICT.__set__(trace, {name: real[name] for name in FIELDS})
    object.__setattr__(trace, "__pydantic_private__", None)
    object.__setattr__(trace, "__class__", Trace)
