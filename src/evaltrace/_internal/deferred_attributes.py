"""Span attributes built when first read, not on the application thread. The one module that knows SDK internals.

Why: most of an LLM span's attributes (request parameters, message JSON, response fields, usage, cost) are
read only by processors and exporters, and with ``BatchSpanProcessor`` (and our evaluation processor) that
happens on a worker thread. Building them on the application thread is the largest part of our per-call cost.

How: in opentelemetry-sdk 1.x a ``Span`` keeps its attributes in ``span._attributes``, a ``BoundedAttributes``,
and ``Span.end()`` hands that same object to every processor inside the ``ReadableSpan`` (whose
``.attributes`` is a read-only view over it). :func:`install` switches that object's class to
:class:`DeferredAttributes`, a subclass whose read methods first run the registered builders, exactly once,
under a lock, then store their output through the SDK's own cleaning (``_clean_attribute_value`` and the
locked setter), so what readers see is what eager ``set_attributes`` would have stored. Reads of keys the
builders can never produce (``evaltrace.span.kind``, ``gen_ai.operation.name``...) are answered without
building. Processors usually write ``span.attributes or {}``; ``ReadableSpan.attributes`` is a
``MappingProxyType`` whose truth test calls ``len()``, which would build on the application thread, so
:func:`install` also replaces, once, the ``ReadableSpan.attributes`` property (which the SDK's ``Span`` inherits) with one
that answers exactly as the SDK's for every other span and, for a deferred one, with a read-only view whose
truth test does not build. If the SDK's shape is not the expected one,
:func:`install` returns False and callers build the attributes eagerly, as before.

Builders run on whichever thread reads first; they must only use data snapshotted at call time. Their errors
go through ``handle_internal_errors`` (logged; re-raised under tests), so a read never fails outside tests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import opentelemetry.attributes as otel_attributes
import opentelemetry.sdk.trace.sampling as otel_sampling
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.trace import Span, SpanKind, Tracer, get_current_span

from evaltrace._internal.errors import handle_internal_errors, reraise_internal_errors

# Private: the SDK's own value cleaning, so built values are stored exactly as set_attributes would store them.
_clean_attribute_value: Callable[[Any, int | None], Any] | None = getattr(
    otel_attributes, "_clean_attribute_value", None
)
# What install() relies on finding in a BoundedAttributes instance.
_EXPECTED_STATE = ("_dict", "_lock", "_immutable", "maxlen", "max_value_len", "dropped")


def _sdk_shape_ok() -> bool:
    """Checked once: does this SDK's BoundedAttributes keep the state and methods we build on?"""
    if _clean_attribute_value is None or not callable(getattr(BoundedAttributes, "_setitem_locked", None)):
        return False
    if not isinstance(ReadableSpan.__dict__.get("attributes"), property):
        return False
    try:
        probe = BoundedAttributes(8, {"k": "v"}, immutable=False)
    except Exception:
        return False
    return all(name in probe.__dict__ for name in _EXPECTED_STATE) and probe._dict == {"k": "v"}


_SDK_SHAPE_OK = _sdk_shape_ok()

Builder = Callable[[], Mapping[str, Any]]


# Held only while one span's build lock is made (never during a build): two first readers get the same lock.
_MAKING_LOCKS = threading.Lock()


class DeferredAttributes(BoundedAttributes):
    """A ``BoundedAttributes`` whose pending builders run on the first read of a key they may produce.

    Instances are never constructed: :func:`install` switches the class of a span's existing object, so
    no attribute is copied and the SDK's own state (lock, limits, ``_immutable``) stays as it is.
    """

    # Set by install(): builders as (builder, overwrite) pairs, or None once built; the keys they may
    # produce. Then: the thread building (its own reads see the dict); the build lock, made on first need.
    _pending: list[tuple[Builder, bool]] | None
    _deferred_keys: frozenset[str]
    _builder_thread: int | None = None

    def _build_lock(self) -> threading.RLock:
        """The lock serialising the build and later registrations, made by the first who needs it.

        Not made at install: for a plain call nobody on the application thread needs it, and making one costs
        about as much as the rest of install.
        """
        lock: threading.RLock | None = self.__dict__.get("_lock_for_build")
        if lock is None:
            with _MAKING_LOCKS:
                lock = self.__dict__.get("_lock_for_build")
                if lock is None:
                    lock = self.__dict__["_lock_for_build"] = threading.RLock()
        return lock

    def _build(self) -> None:
        with self._build_lock():
            pending = self._pending
            if pending is None or self._builder_thread is not None:
                return  # built by another reader meanwhile, or a read from inside our own builder
            self._builder_thread = threading.get_ident()
            try:
                for builder, overwrite in pending:
                    self._apply(builder, overwrite)
            finally:
                self._builder_thread = None
                # Cleared last: readers that skip the lock (pending is None) must see the complete dict.
                self._pending = None

    def _apply(self, builder: Builder, overwrite: bool) -> None:
        built: Mapping[str, Any] = {}
        with handle_internal_errors("building deferred span attributes"):
            built = builder()
            if reraise_internal_errors():
                unknown = set(built) - self._deferred_keys
                if unknown:
                    raise AssertionError(f"deferred builder produced undeclared keys {sorted(unknown)}")
        if not built:
            return
        clean = _clean_attribute_value
        assert clean is not None  # install() checked
        cleaned = clean(built, self.max_value_len)
        with self._lock:
            if self.maxlen == 0:
                self.dropped += len(built)
                return
            self.dropped += len(built) - len(cleaned)
            for key, value in cleaned.items():
                # overwrite=False: written at span start, so a later set_attribute (user, processor) wins.
                if overwrite or key not in self._dict:
                    self._setitem_locked(key, value)

    def _ready(self) -> None:
        if self._pending is not None:
            self._build()

    def _ready_for(self, key: object) -> None:
        if self._pending is not None and key in self._deferred_keys:
            self._build()

    def __getitem__(self, key: str) -> Any:
        self._ready_for(key)
        return self._dict[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``Mapping.get``, building first only when ``key`` is one the builders may produce."""
        self._ready_for(key)
        return self._dict.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._ready_for(key)
        return key in self._dict

    def __bool__(self) -> bool:
        # ReadableSpan.attributes evaluates ``self._attributes or {}``: answer without building.
        return bool(self._dict) or self._pending is not None

    def __iter__(self) -> Iterator[str]:
        self._ready()
        return super().__iter__()  # type: ignore[no-any-return,no-untyped-call]

    def __len__(self) -> int:
        self._ready()
        return len(self._dict)

    def __repr__(self) -> str:
        self._ready()
        return super().__repr__()

    def __eq__(self, other: object) -> bool:
        self._ready()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Any:
        """A plain dict of every attribute."""
        self._ready()
        return self._dict.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        self._ready()
        return super().__deepcopy__(memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # copy.copy and pickle: a plain BoundedAttributes of the built values (no builders, no locks).
        self._ready()
        return _restore, (self.maxlen, self.max_value_len, self._immutable, dict(self._dict), self.dropped)


class _View(Mapping[str, Any]):
    """Read-only view of a ``DeferredAttributes``, as ``MappingProxyType`` is of a plain one.

    Processors commonly write ``attrs = span.attributes or {}`` and then read one key; a ``MappingProxyType``
    answers that truth test with ``len()``, which would build everything on the application thread. This view
    answers it without building.
    """

    __slots__ = ("_attributes",)

    def __init__(self, attributes: DeferredAttributes) -> None:
        self._attributes = attributes

    def __getitem__(self, key: str) -> Any:
        return self._attributes[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``Mapping.get`` without building for keys no builder produces."""
        return self._attributes.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._attributes

    def __iter__(self) -> Iterator[str]:
        return iter(self._attributes)

    def __len__(self) -> int:
        return len(self._attributes)

    def __bool__(self) -> bool:
        return bool(self._attributes)

    def __eq__(self, other: object) -> bool:
        return self._attributes == other

    __hash__ = None  # type: ignore[assignment]

    # The rest of MappingProxyType's interface, so code written against it keeps working.
    def __or__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.copy(), **other}

    def __ror__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return {**other, **self.copy()}

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._attributes))

    def __repr__(self) -> str:
        return repr(self._attributes)

    def copy(self) -> Any:
        """A plain dict of every attribute, as ``MappingProxyType.copy`` gives."""
        return self._attributes.copy()


def _attributes_property(span: ReadableSpan) -> Any:
    """``ReadableSpan.attributes``: a non-building view for deferred attributes, else the SDK's own answer."""
    attributes = span._attributes
    if type(attributes) is DeferredAttributes:
        return _View(attributes)
    window: _Window | None = getattr(_starting, "window", None)
    if window is not None and window[4] is None:
        _claim(window, span)
    return _SDK_ATTRIBUTES_GETTER(span)


_SDK_ATTRIBUTES = ReadableSpan.__dict__.get("attributes")
_SDK_ATTRIBUTES_GETTER: Callable[[ReadableSpan], Any] = getattr(_SDK_ATTRIBUTES, "fget", None) or (lambda span: None)
_view_installed = False


def _install_view() -> None:
    # Once, on the first deferred span: ReadableSpan (which the SDK's Span inherits ``attributes`` from) answers
    # with a view that does not build on truth tests. One class-level property instead of per-span work: every
    # per-span alternative measured ~1.3 µs per call (a bound method on the span, or a span subclass). Whatever
    # property is there now (the SDK's, or another library's patch of it) answers for every other span.
    global _view_installed, _SDK_ATTRIBUTES_GETTER
    current = ReadableSpan.__dict__.get("attributes")
    getter = getattr(current, "fget", None)
    if getter is not None and getter is not _attributes_property:
        _SDK_ATTRIBUTES_GETTER = getter
        ReadableSpan.attributes = property(_attributes_property, doc=getattr(current, "__doc__", None))  # type: ignore[method-assign,assignment]
    _view_installed = True


def _restore(
    maxlen: int | None, max_value_len: int | None, immutable: bool, values: dict[str, Any], dropped: int
) -> Any:
    restored = BoundedAttributes(maxlen, immutable=immutable, max_value_len=max_value_len)
    restored._dict = values  # already cleaned
    restored.dropped = dropped
    return restored


def install(span: Any, keys: frozenset[str], builder: Builder, then: Builder | None = None) -> bool:
    """Defer ``builder`` (whose values act as if set at span start) and ``then`` (as if set at end) on ``span``.

    ``keys`` are every key these and any builder later passed to :func:`defer` may produce: reads of other keys
    never build. Returns False, registering nothing, when this SDK does not keep attributes the way we expect
    (the caller then sets the attributes eagerly).
    """
    attributes = getattr(span, "_attributes", None)
    if not _SDK_SHAPE_OK or type(attributes) is not BoundedAttributes:
        return False
    if not _view_installed:
        _install_view()
    state = attributes.__dict__  # straight into the dict: setattr would search ABC-heavy MROs first
    state["_pending"] = [(builder, False)] if then is None else [(builder, False), (then, True)]
    state["_deferred_keys"] = keys
    attributes.__class__ = DeferredAttributes
    return True


def defer(span: Any, builder: Builder, *, overwrite: bool) -> bool:
    """Register ``builder`` to run on the first read of ``span``'s attributes; False if not deferrable.

    ``overwrite`` False keeps values already present (set after the span started, by the user or a processor),
    which is how attributes written at span start behave; True replaces them, like attributes written at end.
    When False is returned the caller must set the attributes eagerly.
    """
    attributes = getattr(span, "_attributes", None)
    if type(attributes) is not DeferredAttributes:
        return False
    with attributes._build_lock():
        pending = attributes._pending
        if pending is None:
            # Already read once: later builders run now, so later reads see them.
            attributes._pending = [(builder, overwrite)]
            attributes._build()
        else:
            pending.append((builder, overwrite))
    return True


# --- Starting a span with preset attributes ---------------------------------------------------------------
#
# Why: the attributes a span must carry from its creation (the GenAI spec's sampling-relevant ones) are the same
# for every call of one (operation, model, server), yet ``start_span(attributes=...)`` re-validates them key by
# key on every call: ~3 µs for six attributes, a fifth of an instrumented call. When the tracer is the SDK's own,
# its sampler one of the SDK's samplers that never look at attributes, and its limits too loose to truncate or
# evict anything, :func:`start_span` starts the span without them and puts the validated set in at once, before
# anyone can read it: on the span's return, or on the first read of the new span's ``span.attributes`` by an
# ``on_start`` processor (a per-thread "window" is open while ``start_span`` runs). Otherwise the tracer gets the
# attributes as usual.


class Preset:
    """Start attributes shared by many spans, validated once (keys non-empty strings, values scalars)."""

    __slots__ = ("attributes", "first", "longest", "values")

    def __init__(self, attributes: Mapping[str, str | bool | int | float]) -> None:
        for key, value in attributes.items():
            if not (isinstance(key, str) and key) or not isinstance(value, str | bool | int | float):
                raise ValueError(f"preset span attribute {key!r}={value!r}: keys must be strings, values scalars")
        self.values: dict[str, Any] = dict(attributes)  # never mutated: merged into spans (a dict merges fastest)
        self.first = next(iter(self.values), "")  # present in a span once the preset is in
        self.attributes: Mapping[str, Any] = MappingProxyType(self.values)  # what samplers are handed
        # The longest string value: a span attribute length limit below it makes the SDK truncate.
        self.longest = max((len(v) for v in attributes.values() if isinstance(v, str)), default=0)


# The span ``start_span`` is creating on this thread, for ``on_start`` readers of ``span.attributes``:
# [name, kind, preset, parent context, the span once claimed]. A list, not a class: it is built on every call.
_Window = list[Any]


def _claim(window: _Window, span: Any) -> None:
    name, kind, preset, context, _ = window
    # Only the span being started: of our name and kind, open, without the preset yet, and a child of the parent
    # we start it under (a processor may read the parent's attributes, and a framework's span may share our name).
    if span.name != name or span.kind is not kind or span.end_time is not None:
        return
    attributes = getattr(span, "_attributes", None)
    if type(attributes) is not BoundedAttributes or preset.first in attributes._dict:
        return
    parent = get_current_span(context).get_span_context()
    if span.parent != (parent if parent.is_valid else None):
        return
    window[4] = span
    _put(span, preset)


_starting = threading.local()


def start_span(tracer: Tracer, name: str, kind: SpanKind, preset: Preset, context: Context | None) -> Span:
    """``tracer.start_span(name, context, kind, preset.attributes)``, without re-validating the preset per span."""
    if tracer is not _fast_tracer and not _preset_start_ok(tracer):
        return tracer.start_span(name, context, kind, preset.attributes)
    if preset.longest > _fast_value_limit:  # the SDK would truncate a value: its own path
        return tracer.start_span(name, context, kind, preset.attributes)
    window = [name, kind, preset, context, None]
    outer = getattr(_starting, "window", None)  # an LLM call made by an on_start processor: restored after
    _starting.window = window
    try:
        span = tracer.start_span(name, context, kind)
    finally:
        _starting.window = outer
    if window[4] is not span:
        _put(span, preset)
    return span


# The last tracer found fit for preset starts, and its span attribute value length limit (inf: none).
_fast_tracer: object = None
_fast_value_limit: float = 0
# A span count limit below this takes the SDK's path: on_start processors writing more than the margin before
# the preset goes in could otherwise evict other keys than the SDK would (the SDK's default limit is 128).
_MIN_COUNT_LIMIT = 64


def _preset_start_ok(tracer: Tracer) -> bool:
    """Checked once per tracer in a row: the SDK's own tracer, an attribute-blind sampler, loose count limits."""
    global _fast_tracer, _fast_value_limit
    if not _SDK_SHAPE_OK or type(tracer) is not SdkTracer:  # a wrapping tracer may read the attributes
        return False
    limits = getattr(tracer, "_span_limits", None)
    count = getattr(limits, "max_span_attributes", 0)
    length = getattr(limits, "max_span_attribute_length", 0)
    if limits is None or (count is not None and count < _MIN_COUNT_LIMIT):
        return False
    if not _ignores_attributes(getattr(tracer, "sampler", None), 0):
        return False
    if not _view_installed:
        _install_view()
    _fast_tracer, _fast_value_limit = tracer, math.inf if length is None else length
    return True


# The SDK's samplers whose decision never depends on attributes, and which pass them through unchanged to the
# span they sample in. Exact types: a subclass may override should_sample. AlwaysRecordSampler is not here:
# it drops the attributes of the spans it turns from DROP into RECORD_ONLY.
_BLIND_SAMPLERS = frozenset(
    t
    for t in (
        getattr(otel_sampling, n, None) for n in ("StaticSampler", "TraceIdRatioBased", "_AlwaysOn", "_AlwaysOff")
    )
    if isinstance(t, type)
)
_PARENT_BASED = frozenset(
    t
    for t in (
        getattr(otel_sampling, n, None)
        for n in ("ParentBased", "ParentBasedTraceIdRatio", "_ParentBasedAlwaysOn", "_ParentBasedAlwaysOff")
    )
    if isinstance(t, type)
)
_PARENT_BASED_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def _ignores_attributes(sampler: object, depth: int) -> bool:
    kind = type(sampler)
    if kind in _BLIND_SAMPLERS:
        return True
    if kind in _PARENT_BASED and depth < 4:
        delegates = [getattr(sampler, name, None) for name in _PARENT_BASED_DELEGATES]
        return all(d is not None and _ignores_attributes(d, depth + 1) for d in delegates)
    return False


def _put(span: Any, preset: Preset) -> None:
    """Give a just-started span the preset attributes, as if they had been passed to ``start_span``."""
    attributes = getattr(span, "_attributes", None)
    if type(attributes) is not BoundedAttributes:
        if span.is_recording():  # not the SDK's span class: its own setter
            span.set_attributes(preset.attributes)
        return
    values = preset.values
    lock = attributes._lock  # an on_start processor may hold the span already
    lock.acquire()  # not ``with``: its special-method calls cost more than the lock itself, on every call
    try:
        current = attributes._dict
        maxlen, max_value_len = attributes.maxlen, attributes.max_value_len
        fits = (maxlen is None or len(current) + len(values) <= maxlen) and (
            max_value_len is None or max_value_len >= preset.longest
        )
        if fits and not current:
            attributes._dict = values.copy()  # cheaper than growing the empty dict
        elif fits:
            # Set by on_start processors, so after the start attributes: theirs win, and a key they set again
            # moves to the end, as the SDK's setter does.
            merged = {key: value for key, value in values.items() if key not in current}
            merged.update(current)
            attributes._dict = merged
    finally:
        lock.release()
    if not fits:  # a limit bites: the SDK's own setter truncates and evicts
        span.set_attributes({k: v for k, v in values.items() if k not in current})
