"""Span attributes set at lower cost than the SDK's generic path. Knows SDK internals (as does ``span_fields``).

Two things, both for LLM spans, both written straight into the SDK's ``BoundedAttributes`` under its lock:

* :func:`start_span` starts a span with a preset of start attributes (operation, provider, model, server, our
  kind) validated once per distinct preset, not per span;
* :func:`set_built` stores the attributes our builders made (known-valid values) without re-running the SDK's
  value cleaning on each.

Both fall back to the SDK's own setters whenever a limit could bite, the span is not the SDK's, or the SDK's
shape is not the expected one. Two more fast paths write SDK private state for the same reason, in the sibling
module :mod:`evaltrace._internal.span_fields` (re-exported here): :func:`copy_span` (a finished span with some
parts replaced, field by field) and :func:`new_event`, each used only when the running SDK's instances hold exactly
the fields they write, else the public constructor. Attributes are built on the calling thread, when the call returns: building them
later, on the first read of the span (an earlier design), cost more in total (a subclass switched in per span,
the SDK's cleaning re-run on read, locks) than building them at once (benchmarks/README.md, issue 17).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import opentelemetry.sdk.trace.sampling as otel_sampling
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Span, SpanKind, Tracer, get_current_span

# Moved to ``span_fields`` (the ended-span fast paths), re-exported for the modules that import them from here.
from evaltrace._internal.span_fields import DIRECT_CONTEXT_TYPES as DIRECT_CONTEXT_TYPES
from evaltrace._internal.span_fields import copy_span as copy_span
from evaltrace._internal.span_fields import new_event as new_event

# What this module relies on finding in a BoundedAttributes instance.
_EXPECTED_STATE = ("_dict", "_lock", "_immutable", "maxlen", "max_value_len", "dropped")


def _sdk_shape_ok() -> bool:
    """Checked once: does this SDK's BoundedAttributes keep the state we write into?"""
    if not isinstance(ReadableSpan.__dict__.get("attributes"), property):
        return False
    try:
        probe = BoundedAttributes(8, {"k": "v"}, immutable=False)
    except Exception:
        return False
    return all(name in probe.__dict__ for name in _EXPECTED_STATE) and probe._dict == {"k": "v"}


_SDK_SHAPE_OK = _sdk_shape_ok()

# Makes a span's attributes (a fresh dict the caller may keep or give away).
Builder = Callable[[], dict[str, Any]]


def _attributes_property(span: ReadableSpan) -> Any:
    """``ReadableSpan.attributes``: the SDK's own answer, after giving a span being started its preset."""
    window = _starting.window  # the class default on threads that never started a span: no AttributeError
    if window is not None and window[4] is None:
        _claim(window, span)
    return _SDK_ATTRIBUTES_GETTER(span)


_SDK_ATTRIBUTES = ReadableSpan.__dict__.get("attributes")
_SDK_ATTRIBUTES_GETTER: Callable[[ReadableSpan], Any] = getattr(_SDK_ATTRIBUTES, "fget", None) or (lambda span: None)
_view_installed = False

SDK_ATTRIBUTES_PROPERTY: Any = (
    _SDK_ATTRIBUTES
    if isinstance(_SDK_ATTRIBUTES, property)
    and getattr(_SDK_ATTRIBUTES.fget, "__module__", None) == ReadableSpan.__module__
    else object()
)
"""The SDK's own ``ReadableSpan.attributes``, as this module found it at import (before it installs its view).

Code that reads a span's ``_attributes`` in place of ``span.attributes`` must compare the span class's property
against this object, never against ``ReadableSpan.attributes`` read at its own import: imported after the view is
installed, it would take the view for the SDK's property and skip the preset of a span being started. When another
library had already replaced the property (its getter is not the SDK module's), this is an object no class holds:
every read then goes through that library's property."""

view_property: Any = object()
"""The property :func:`_install_view` put on ``ReadableSpan`` (until the first preset start, an object no class
holds: never None, which ``getattr(type(span), "attributes", None)`` answers for a class without the property)."""


def preset_pending() -> bool:
    """Whether a preset span start on this thread has not yet put its preset in.

    While it has not, only ``span.attributes`` (the view) puts it in: a span being started must not be read from
    its ``_attributes`` then.
    """
    window = _starting.window
    return window is not None and window[4] is None


def _install_view() -> None:
    # Once, on the first preset start: an on_start processor reading ``span.attributes`` of the span being started
    # must see the preset (see start_span). One class-level property instead of per-span work. Whatever property
    # is there now (the SDK's, or another library's patch of it) answers after that.
    global _view_installed, _SDK_ATTRIBUTES_GETTER, view_property
    current = ReadableSpan.__dict__.get("attributes")
    getter = getattr(current, "fget", None)
    if getter is not None and getter is not _attributes_property:
        _SDK_ATTRIBUTES_GETTER = getter
        view = property(_attributes_property, doc=getattr(current, "__doc__", None))
        ReadableSpan.attributes = view  # type: ignore[method-assign,assignment]
        if current is SDK_ATTRIBUTES_PROPERTY:
            # Only a view over the SDK's own getter is the same field when no preset is pending: over another
            # library's patch (installed after this module's import), readers must go through the property.
            view_property = view
    _view_installed = True


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
        values: dict[str, Any] = {}
        for key, value in attributes.items():
            if not (isinstance(key, str) and key) or not isinstance(value, str | bool | int | float):
                raise ValueError(f"preset span attribute {key!r}={value!r}: keys must be strings, values scalars")
            values[key] = value if type(value) in _EXACT_SCALARS else _plain(value)
        self.values = values  # never mutated: merged into spans (a dict merges fastest)
        self.first = next(iter(self.values), "")  # present in a span once the preset is in
        self.attributes: Mapping[str, Any] = MappingProxyType(self.values)  # what samplers are handed
        # The longest string value: a span attribute length limit below it makes the SDK truncate.
        self.longest = max((len(v) for v in attributes.values() if isinstance(v, str)), default=0)


_EXACT_SCALARS = frozenset((str, bool, int, float))


def _plain(value: str | bool | int | float) -> str | bool | int | float:
    """A subclass's value (a ``StrEnum`` model name, an ``IntEnum``) as the plain type every span of a preset shares.

    The SDK stores such a value as given, or as a plain ``str`` once a length limit slices it (OTel SDK 1.30):
    a preset is shared by many spans, so it holds the plain value, which every exporter writes the same way.
    """
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__index__(value)
    return float.__float__(value)


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


class _Starting(threading.local):
    """Per thread: the window of the span ``start_span`` is creating, else None.

    None is a class default, so reading it on a thread that never started a span (an exporter's) raises and
    catches no AttributeError (~4k instructions per span read).
    """

    window: _Window | None = None


_starting = _Starting()


def start_span(tracer: Tracer, name: str, kind: SpanKind, preset: Preset, context: Context | None) -> Span:
    """``tracer.start_span(name, context, kind, preset.attributes)``, without re-validating the preset per span."""
    if (
        (tracer is not _fast_tracer and not _preset_start_ok(tracer))
        or preset.longest > _fast_value_limit  # the SDK would truncate a value
        or len(preset.values) + _MIN_COUNT_LIMIT > _fast_count_limit  # on_start stamps could be evicted instead
    ):
        # The SDK's own path, with a dict of its own: a sampler may (against its contract) write into it.
        return tracer.start_span(name, context, kind, dict(preset.values))
    window = [name, kind, preset, context, None]
    outer = _starting.window  # an LLM call made by an on_start processor: restored after
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
_fast_count_limit: float = 0
# Slots a span count limit must leave beyond the preset, else the SDK's path: on_start processors (session and
# user stamps) writing more than this margin before the preset goes in could otherwise have their keys evicted
# where the SDK would evict the preset's oldest ones (the SDK's default limit is 128).
_MIN_COUNT_LIMIT = 64


def _preset_start_ok(tracer: Tracer) -> bool:
    """Checked once per tracer in a row: the SDK's own tracer, an attribute-blind sampler, loose count limits."""
    global _fast_tracer, _fast_value_limit, _fast_count_limit
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
    _fast_count_limit = math.inf if count is None else count
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


# --- Setting attributes we built --------------------------------------------------------------------------
#
# Why: ``span.set_attributes`` re-cleans every value (``_clean_attribute_value``: type checks, sequence copies,
# truncation) and takes the lock per key; for an LLM span's ~25 attributes that is a large share of the call.
# Values the builders make are already valid: strings (JSON capped to our own length), ints, floats, bools, and
# sequences of one such type. :func:`set_built` writes those straight into the SDK's dict under its lock, as the
# SDK's setter would store them (a re-set key moves to the end; sequences stored as tuples), and hands anything
# else, or a span whose limits could bite, to the SDK's own setter. Each Python step costs ~100 instructions, so
# the common case (no value length limit, only scalars and tuples) is checked by one C-level pass over the types
# instead of a loop per value (~4k instead of ~14k instructions for a chat call's ~15 values).

_SCALARS = (str, bool, int, float)
# Stored by the SDK unchanged when no value length limit is set (tuples: see set_built's contract).
_AS_IS = frozenset((str, bool, int, float, tuple))


def _valid_sequence(value: list[Any] | tuple[Any, ...]) -> bool:
    if not value:
        return True
    first = type(value[0])
    return first in _SCALARS and all(type(item) is first for item in value)


def set_built(span: Any, values: Mapping[str, Any]) -> None:
    """``span.set_attributes(values)`` for values built by us, without the SDK's cleaning when none is needed.

    Contract: a ``tuple`` value holds items of one of str, bool, int, float (the builders make tuples only from
    items they checked); a ``list`` value is checked here and stored as a tuple, as the SDK does. When any value
    would be changed by the SDK's cleaning (another type, a mixed list, a string over the length limit) or a
    count limit could evict, everything goes through the SDK's setter, so what is stored, its order and the
    dropped count are always the SDK's.
    """
    if not values:
        return
    attributes = getattr(span, "_attributes", None)
    if not _SDK_SHAPE_OK or type(attributes) is not BoundedAttributes or span.end_time is not None:
        span.set_attributes(values)  # the SDK's own path (it warns about an ended span)
        return
    max_value_len = attributes.max_value_len
    clean: Mapping[str, Any]
    if max_value_len is None and _AS_IS.issuperset(map(type, values.values())):
        clean = values  # every value is what the SDK would store
    else:
        checked = _checked(values, max_value_len)
        if checked is None:
            span.set_attributes(values)
            return
        clean = checked
    lock = attributes._lock
    lock.acquire()  # not ``with``: its special-method calls cost more than the lock itself
    try:
        current = attributes._dict
        maxlen = attributes.maxlen
        fits = not attributes._immutable and (maxlen is None or len(current) + len(clean) <= maxlen)
        if fits:
            if not current.keys().isdisjoint(clean):
                for key in clean.keys() & current.keys():
                    del current[key]  # a re-set key moves to the end, as with the SDK's setter
            current.update(clean)
    finally:
        lock.release()
    if not fits:
        span.set_attributes(values)


def _checked(values: Mapping[str, Any], max_value_len: int | None) -> dict[str, Any] | None:
    """``values`` as the SDK would store them (lists as tuples); None when its cleaning would change any."""
    clean: dict[str, Any] = {}
    for key, value in values.items():
        kind = type(value)
        if kind is str:
            if max_value_len is not None and len(value) > max_value_len:
                return None
        elif kind is list or kind is tuple:
            if max_value_len is not None or not _valid_sequence(value):
                return None
            value = tuple(value)
        elif kind is not int and kind is not float and kind is not bool:
            return None
        clean[key] = value
    return clean


# --- Ended spans read as plain containers -----------------------------------------------------------------
#
# Why: every exporter reads every attribute, event and link of every span (the OTLP encoder, Langfuse's, our
# store), and an ended SDK span hands them out through Python containers: attributes as a ``MappingProxyType``
# over ``BoundedAttributes`` (a ``MutableMapping``: each ``items()`` walk runs ``collections.abc``'s Python item
# view, the class's ``__iter__`` and one ``__getitem__`` call per key), events and links as ``tuple()`` of a
# ``BoundedList`` (a Python ``__iter__`` that locks and copies). Once the span has ended nothing can change them
# (the SDK's setters ignore an ended span; SDK 1.4x also marks the attributes immutable in ``end()``), so the span
# handed to ``on_end`` can carry the underlying dict and tuples: the same contents, read in C. Only for a container
# that dropped nothing (``dropped_attributes`` / ``dropped_events`` / ``dropped_links`` read the count off the
# SDK's container) and when the SDK's shape is the expected one; otherwise that container is left as the SDK made it.


def _sdk_list_shape_ok() -> bool:
    try:
        probe: BoundedList[int] = BoundedList(4)
        probe.append(1)
    except Exception:
        return False
    return isinstance(probe.__dict__.get("_dq"), deque) and probe.__dict__.get("dropped") == 0


_LIST_SHAPE_OK = _sdk_list_shape_ok()


def freeze_ended(span: ReadableSpan) -> None:
    """Let the readers of an ended span (exporters, evaluators) read its attributes, events and links in C.

    Called once per span, by ``configure()``'s pipeline, before any other processor's ``on_end`` sees it.
    """
    if span.end_time is None:
        return
    state = span.__dict__
    attributes = state.get("_attributes")
    if type(attributes) is BoundedAttributes and _SDK_SHAPE_OK and not attributes.dropped:
        state["_attributes"] = attributes._dict
    if _LIST_SHAPE_OK:
        for name in ("_events", "_links"):
            items = state.get(name)
            if type(items) is BoundedList and not items.dropped:
                state[name] = tuple(items.__dict__["_dq"])
