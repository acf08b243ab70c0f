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
spans, so both get equal values), and both return the one value published first.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from evaltrace.schema import Trace

# The real instance dict (the slot BaseModel declares), read and written past LazyTrace's ``__dict__`` property.
_DICT: Any = BaseModel.__dict__["__dict__"]
FIELDS: tuple[str, ...] = tuple(Trace.model_fields)
_FIELD_NAMES = frozenset(FIELDS)


class FieldSource:
    """Maps one field of a Trace on demand (the base of a LazyTrace's source, kept in its unused private slot)."""

    __slots__ = ()

    def field(self, name: str) -> Any:
        """The value of field ``name`` (an equal value on every call for the same name)."""
        raise NotImplementedError


class LazyTrace(Trace):
    """A :class:`~evaltrace.schema.Trace` whose missing fields come from a :class:`FieldSource` on first read.

    Build it with :func:`lazy_trace`. Never pickled or dumped as itself: it becomes a plain Trace first.
    """

    def __getattr__(self, name: str) -> Any:
        # Only called for names missing from the instance dict: a field not mapped yet, or a real miss.
        source = object.__getattribute__(self, "__pydantic_private__")
        if name in _FIELD_NAMES and isinstance(source, FieldSource):
            real: dict[str, Any] = _DICT.__get__(self)
            if name not in real:
                real.setdefault(name, source.field(name))
            return real[name]
        return super().__getattr__(name)  # type: ignore[misc]  # pydantic's (private attributes, errors)

    @property
    def __dict__(self) -> dict[str, Any]:
        """Every field, mapped: read whole (dumps, copies, ``repr``), the trace becomes a plain Trace."""
        materialize(self)
        real: dict[str, Any] = _DICT.__get__(self)
        return real

    @__dict__.setter
    def __dict__(self, value: dict[str, Any]) -> None:
        _DICT.__set__(self, value)

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


def lazy_trace(ready: dict[str, Any], fields_set: set[str], fields: FieldSource) -> Trace:
    """A Trace holding ``ready`` (field -> value) that maps its other fields with ``fields`` when read.

    Args:
        ready: Values known already (at least the identity); every other field comes from ``fields``.
        fields_set: The fields set, as the eager mapping's Trace reports them (``model_fields_set``).
        fields: Maps the other fields.
    """
    trace = LazyTrace.__new__(LazyTrace)
    _DICT.__set__(trace, ready)
    object.__setattr__(trace, "__pydantic_fields_set__", fields_set)
    object.__setattr__(trace, "__pydantic_extra__", None)
    object.__setattr__(trace, "__pydantic_private__", fields)
    return trace


def materialize(trace: Trace) -> None:
    """Map every field of ``trace`` still missing and make it a plain Trace (nothing to do for one already)."""
    if type(trace) is not LazyTrace:
        return
    source = object.__getattribute__(trace, "__pydantic_private__")
    real: dict[str, Any] = _DICT.__get__(trace)
    if isinstance(source, FieldSource):
        for name in FIELDS:
            if name not in real:
                real.setdefault(name, source.field(name))
        # The eager Trace's field order (dumps and repr follow the dict's order), with the values published.
        _DICT.__set__(trace, {name: real[name] for name in FIELDS})
    object.__setattr__(trace, "__pydantic_private__", None)
    object.__setattr__(trace, "__class__", Trace)
