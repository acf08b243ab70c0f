"""Ended spans' SDK private fields: the sampled flag read off ``_context``, a span copied and an event built field by field.

Split from :mod:`evaltrace._internal.deferred_attributes` (the start and set stages of the same SDK-internal fast
paths stay there, and re-export these names): each fast path here is checked once against the running SDK's own
constructors and properties, and falls back to the public API whenever the shape differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, SpanContext, Status

# --- Reading an ended span's sampled flag ----------------------------------------------------------------------
#
# The export queue asks every span it is handed whether it is sampled: ``span.context.trace_flags.sampled`` is three
# Python-level properties (~2.6k instructions on Python 3.11). For the SDK's own span classes, whose ``context`` is the
# SDK's property over the ``_context`` field, a SpanContext tuple whose item 3 is its trace flags, the queue reads
# ``span._context[3] & 1`` instead: the same answer, checked here once against the running SDK.


def _direct_context_types() -> frozenset[type]:
    """The SDK span classes whose sampled flag is ``span._context[3] & 1`` (empty when this SDK's shape differs)."""
    try:
        import opentelemetry.sdk.trace as sdk_trace
        from opentelemetry.trace import SpanContext, TraceFlags

        prop = ReadableSpan.__dict__["context"]
        for flags in (TraceFlags.SAMPLED, TraceFlags.DEFAULT):
            context = SpanContext(1, 1, False, TraceFlags(flags))
            probe = ReadableSpan(name="probe", context=context)
            if probe.__dict__.get("_context") is not context or probe.context is not context:
                return frozenset()
            if not isinstance(context, tuple) or context[3] is not context.trace_flags:
                return frozenset()
            if bool(context[3] & 1) is not context.trace_flags.sampled:
                return frozenset()
    except Exception:
        return frozenset()
    kinds = (ReadableSpan, sdk_trace.Span, getattr(sdk_trace, "_Span", None))  # ``_Span``: what the tracer makes
    return frozenset(kind for kind in kinds if kind is not None and getattr(kind, "context", None) is prop)


DIRECT_CONTEXT_TYPES = _direct_context_types()
"""Span classes whose sampled flag the export queue reads as ``span._context[3] & 1`` (see above)."""


def _tuple_trace_id() -> object:
    """SpanContext's ``trace_id`` property when it reads ``self[0]`` of the tuple (probed), else a sentinel.

    The lone span's Trace (``mapping/_lone_span._lazy_single``) reads an exact SpanContext's trace id as ``ctx[0]`` while
    the class still holds this very property (a patch after import is then seen and read through).
    """
    try:
        probe = SpanContext(trace_id=0x1234, span_id=0x56, is_remote=False)
        if isinstance(probe, tuple) and probe[0] == probe.trace_id == 0x1234 and probe[1] == 0x56:
            return SpanContext.__dict__["trace_id"]
    except Exception:  # another layout in some SDK version: read through the property
        pass
    return object()


TUPLE_TRACE_ID = _tuple_trace_id()

# --- Reading an ended span's attributes and events for the export queue's size estimate -------------------------
#
# ``ReadableSpan.attributes`` is ``MappingProxyType(self._attributes or {})`` and ``ReadableSpan.events`` is
# ``tuple(self._events)``: a Python frame and a new container each, per span queued, over the very values of the two
# fields. ``Event.attributes`` is ``self._attributes``, a frame per event. The estimate reads the fields themselves
# for the classes whose properties are exactly these, checked here once against the running SDK.


def _direct_parts_types() -> frozenset[type]:
    """The SDK span classes whose ``attributes``/``events`` are ReadableSpan's properties over ``_attributes``/``_events``."""
    try:
        import opentelemetry.sdk.trace as sdk_trace
        from opentelemetry.sdk.resources import Resource as _Resource

        attributes_prop = ReadableSpan.__dict__["attributes"]
        events_prop = ReadableSpan.__dict__["events"]
        held = {"probe": "value"}
        event = Event("probe", {"a": "b"}, timestamp=1)
        probe = ReadableSpan(name="probe", attributes=held, events=[event], resource=_Resource({}))
        fields = probe.__dict__
        if fields.get("_attributes") is not held or fields.get("_events") != [event]:
            return frozenset()
        seen = probe.attributes
        if type(seen) is not MappingProxyType or dict(seen) != held or probe.events != (event,):
            return frozenset()
        empty = ReadableSpan(name="probe", resource=_Resource({}))
        if empty.attributes or empty.events:
            return frozenset()
    except Exception:
        return frozenset()
    kinds = (ReadableSpan, sdk_trace.Span, getattr(sdk_trace, "_Span", None))
    return frozenset(
        kind
        for kind in kinds
        if kind is not None
        and getattr(kind, "attributes", None) is attributes_prop
        and getattr(kind, "events", None) is events_prop
    )


def _direct_event_type() -> type | None:
    """``Event`` when its ``attributes`` property returns its ``_attributes`` field as it is (None otherwise)."""
    try:
        held = {"a": "b"}
        probe = Event("probe", held, timestamp=1)
        if probe.__dict__.get("_attributes") is not held or probe.attributes is not held:
            return None
        if type(Event.__dict__.get("attributes")) is not property:
            return None
    except Exception:
        return None
    return Event


DIRECT_PARTS_TYPES = _direct_parts_types()
"""Span classes whose attributes and events the export queue's estimate reads as ``_attributes``/``_events``."""
DIRECT_EVENT_TYPE = _direct_event_type()
"""``Event`` when the estimate may read an event's attributes as ``_attributes`` (None: through the property)."""

# --- Copying a finished span, building an event -----------------------------------------------------------

# Exactly the fields copy_span writes, and new_event: each fast path is used only when the running SDK's
# constructor sets this very set (an SDK that adds, drops or renames one takes the constructor).
_SPAN_FIELDS = frozenset(
    (
        "_name",
        "_context",
        "_kind",
        "_instrumentation_info",
        "_instrumentation_scope",
        "_parent",
        "_start_time",
        "_end_time",
        "_attributes",
        "_events",
        "_links",
        "_resource",
        "_status",
    )
)
_EVENT_FIELDS = frozenset(("_name", "_timestamp", "_attributes"))


def _span_field_order() -> tuple[str, ...]:
    """The instance fields the running SDK's ``ReadableSpan`` constructor sets, in its order (empty if unprobed)."""
    try:
        return tuple(vars(ReadableSpan(name="", resource=Resource({}))))
    except Exception:
        return ()


def _span_fields() -> frozenset[str]:
    """The instance fields the running SDK's ``ReadableSpan`` constructor sets (empty if it cannot be probed)."""
    return frozenset(_span_field_order())


def _event_fields() -> frozenset[str]:
    """The instance fields the running SDK's ``Event`` constructor sets (empty if it cannot be probed)."""
    try:
        return frozenset(vars(Event("", {}, timestamp=0)))
    except Exception:
        return frozenset()


_SPAN_FIELD_ORDER = _span_field_order()
_new = object.__new__
_setattr = (
    object.__setattr__
)  # _setattr(obj, "__dict__", fields): the object's instance dict is ``fields`` from then on
# The three layout flags below start from the field names alone (the paths the probes at the end of this module run
# read them); the probes, run once at import, then set each one to whether the running SDK's classes behave as the
# fast paths assume.
_SPAN_COPY_OK = _span_fields() == _SPAN_FIELDS
_EVENT_DIRECT_OK = _event_fields() == _EVENT_FIELDS
_PLAIN_SETATTR = ReadableSpan.__setattr__ is object.__setattr__ and Event.__setattr__ is object.__setattr__
SPAN_FIELDS = _SPAN_FIELDS
"""The instance fields :func:`plain_state` requires (exactly these)."""
SPAN_FIELD_ORDER = _SPAN_FIELD_ORDER
"""The order the running SDK's constructor sets :data:`SPAN_FIELDS` in (empty if unprobed)."""


def plain_state(span: ReadableSpan) -> dict[str, Any] | None:
    """``span``'s instance dict when :func:`copy_span` copies it field by field; None when it takes the constructor.

    Only for a span of exactly ``ReadableSpan`` (a subclass may override the properties) holding exactly
    :data:`_SPAN_FIELDS`, on an SDK whose constructor sets exactly those, with a resource and none of its parts in
    the SDK's bounded containers (which carry the dropped counts). The enriched copy reads its parts from it.
    """
    if not _SPAN_COPY_OK or type(span) is not ReadableSpan:
        return None
    state = span.__dict__
    # ``state.keys() == _SPAN_FIELDS``, first as the constructor's own order (a tuple of the keys compared item by
    # item, identical strings: ~600 instructions), else as sets (the keys view's comparison makes a generic
    # containment call per key: ~1.7k; any other order, e.g. fields set again by hand, still takes this path).
    if tuple(state) != _SPAN_FIELD_ORDER and state.keys() != _SPAN_FIELDS:
        return None
    if state["_resource"] is None:
        return None
    if (
        type(state["_attributes"]) is BoundedAttributes
        or type(state["_events"]) is BoundedList
        or type(state["_links"]) is BoundedList
    ):
        return None  # it may carry dropped counts: the constructor's path keeps them (span_copy.replaced)
    return state


def copy_span(
    span: ReadableSpan,
    attributes: Mapping[str, Any] | None,
    events: Sequence[Event] | None,
    links: Sequence[Link] | None,
    status: Status | None,
) -> ReadableSpan | None:
    """A copy of ``span`` with the given parts replaced, written field by field; None: use the constructor.

    The same values ``ReadableSpan(...)`` stores, without its twelve property reads and its frame (this runs once
    per evaluated span), for a span :func:`plain_state` takes.
    """
    state = plain_state(span)
    if state is None:
        return None
    # The original's fields (the same objects, in its order: a C copy of its dict), then the parts that differ; the
    # instance dict set in one step (a keyword update of thirteen fields built and merged a second dict).
    fields = state.copy()
    fields["_instrumentation_info"] = None
    fields["_attributes"] = MappingProxyType(state["_attributes"] or {}) if attributes is None else attributes
    fields["_events"] = tuple(state["_events"]) if events is None else events
    fields["_links"] = tuple(state["_links"]) if links is None else links
    if status is not None:
        fields["_status"] = status
    return _with_fields(fields)


def copy_state(state: dict[str, Any], attributes: dict[str, Any], events: list[Event]) -> ReadableSpan:
    """``copy_span(span, attributes, events, None, None)`` of a span whose :func:`plain_state` is ``state``.

    Its links are the original's (``tuple()`` of them, which is the same object when they are a tuple already).
    """
    fields = state.copy()
    fields["_instrumentation_info"] = None
    fields["_attributes"] = attributes
    fields["_events"] = events
    links = state["_links"]
    if type(links) is not tuple:
        fields["_links"] = tuple(links)
    return _with_fields(fields)


def _with_fields(fields: dict[str, Any]) -> ReadableSpan:
    """A ``ReadableSpan`` whose instance dict is ``fields``."""
    copy = _new(ReadableSpan)
    if _PLAIN_SETATTR:  # a store to ``__dict__``, without object.__setattr__'s call (~900 instructions each)
        copy.__dict__ = fields
    else:
        _setattr(copy, "__dict__", fields)
    return copy


def new_event(name: str, attributes: dict[str, Any], timestamp: int | None) -> Event:
    """``Event(name, attributes, timestamp=timestamp)``; ``timestamp`` None means now, as there.

    Built by setting its fields when the SDK's ``Event`` holds exactly :data:`_EVENT_FIELDS`: the constructor's two
    Python frames, per result of every evaluated span, were a visible share of it.
    """
    if not _EVENT_DIRECT_OK or timestamp is None:
        return Event(name, attributes, timestamp=timestamp)
    event = _new(Event)
    if _PLAIN_SETATTR:
        event.__dict__ = {"_name": name, "_timestamp": timestamp, "_attributes": attributes}
    else:
        _setattr(event, "__dict__", {"_name": name, "_timestamp": timestamp, "_attributes": attributes})
    return event


# --- The layout probes: does the running SDK behave as the fast paths above assume? ----------------------------
#
# Matching field names is not enough: an SDK could keep every name and change what a field holds (a unit, a
# container type) or how a property reads it. Each probe below builds a span or an event through the fast path and
# through the SDK's constructor from the same parts, and compares what the public properties return; the paths that
# read a span's fields directly are checked against its properties the same way. Any difference, or any exception,
# turns the fast path off: the public API (``ReadableSpan(...)``, ``Event(...)``, the properties) is then used.

# Public ReadableSpan properties compared with ``==`` (status, attributes, events and links are compared apart).
_VIEW = (
    "name",
    "context",
    "parent",
    "kind",
    "start_time",
    "end_time",
    "resource",
    "instrumentation_scope",
    "dropped_attributes",
    "dropped_events",
    "dropped_links",
)


def _probe_parts() -> dict[str, Any]:
    """Constructor arguments for a probe span: every part given, none of them a default."""
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanKind, StatusCode, TraceFlags

    context = SpanContext(0xA1, 0xB2, False, TraceFlags(TraceFlags.SAMPLED))
    parent = SpanContext(0xA1, 0xC3, False, TraceFlags(TraceFlags.SAMPLED))
    return {
        "name": "probe",
        "context": context,
        "parent": parent,
        "resource": Resource({"probe": "resource"}),
        "attributes": {"probe": 1},
        "events": [Event("probe", {"event": 1}, timestamp=1_700_000_000_000_000_005)],
        "links": [Link(parent, {"link": 1})],
        "kind": SpanKind.CLIENT,
        "status": Status(StatusCode.ERROR, "probe"),
        "start_time": 1_700_000_000_000_000_001,
        "end_time": 1_700_000_000_000_000_009,
        "instrumentation_scope": InstrumentationScope("probe", "1"),
    }


def _same_event_view(event: Event, reference: Event) -> bool:
    """Whether two events read the same through ``Event``'s public properties (attributes: same type and items)."""
    attributes, expected = event.attributes, reference.attributes
    return (
        event.name == reference.name
        and event.timestamp == reference.timestamp
        and type(attributes) is type(expected)
        and dict(attributes or {}) == dict(expected or {})
        and event.dropped_attributes == reference.dropped_attributes
    )


def _same_view(span: ReadableSpan, reference: ReadableSpan) -> bool:
    """Whether two spans read the same through ``ReadableSpan``'s public properties, containers' types included."""
    if any(getattr(span, name) != getattr(reference, name) for name in _VIEW):
        return False
    status, expected = span.status, reference.status
    if (status.status_code, status.description) != (expected.status_code, expected.description):
        return False
    attributes, events, links = span.attributes, span.events, span.links
    if type(attributes) is not type(reference.attributes) or dict(attributes or {}) != dict(reference.attributes or {}):
        return False
    if type(events) is not type(reference.events) or len(events) != len(reference.events):
        return False
    if not all(_same_event_view(a, b) for a, b in zip(events, reference.events, strict=True)):
        return False
    return type(links) is type(reference.links) and [(k.context, dict(k.attributes or {})) for k in links] == [
        (k.context, dict(k.attributes or {})) for k in reference.links
    ]


def _plain_setattr_ok() -> bool:
    """Whether ``obj.__dict__ = fields`` makes ``fields`` the instance dict of a bare ``ReadableSpan`` and ``Event``."""
    if ReadableSpan.__setattr__ is not object.__setattr__ or Event.__setattr__ is not object.__setattr__:
        return False  # a class's own __setattr__ would run on the store: the fast paths call object's instead
    try:
        for cls in (ReadableSpan, Event):
            probe, fields = _new(cls), {"_name": "probe"}
            probe.__dict__ = fields
            if vars(probe) is not fields:
                return False
    except Exception:
        return False
    return True


def _span_read_ok() -> bool:
    """Whether a constructed span's fields hold what its properties return.

    The enriched copy and :func:`plain_state`'s readers take ``_attributes``, ``_events``, ``_links``, ``_end_time``
    and ``_resource`` directly, without the properties.
    """
    try:
        parts = _probe_parts()
        span = ReadableSpan(**parts)
        state = vars(span)
        return (
            dict(state["_attributes"] or {}) == dict(span.attributes or {}) == parts["attributes"]
            and list(state["_events"]) == list(span.events) == parts["events"]
            and tuple(state["_links"]) == tuple(span.links) == tuple(parts["links"])
            and state["_end_time"] == span.end_time == parts["end_time"]
            and state["_resource"] is span.resource
        )
    except Exception:
        return False


def _span_copy_ok() -> bool:
    """Whether :func:`copy_span` and :func:`copy_state` build what ``ReadableSpan(...)`` builds from the same parts.

    Read through the public properties, with the constructor's field order (the inline copy in
    ``evaluation/spans.py`` is :func:`copy_state` written out: its tests compare the two).
    """
    if _span_fields() != _SPAN_FIELDS or not _span_read_ok():
        return False
    from opentelemetry.trace import StatusCode

    try:
        parts = _probe_parts()
        original = ReadableSpan(**parts)
        state = plain_state(original)
        if state is None:
            return False
        attributes = {"probe": 2, "added": 3}
        events = [*state["_events"], Event("added", {"added": 1}, timestamp=parts["end_time"])]
        links = [*parts["links"], Link(parts["context"], {"added": 1})]
        status = Status(StatusCode.OK)
        # Each copy with the parts it replaced: the constructor is given the same.
        replacing: dict[str, Any] = {"attributes": attributes, "events": events, "links": links, "status": status}
        built: list[tuple[ReadableSpan | None, dict[str, Any]]] = [
            (copy_state(state, attributes, events), {"attributes": attributes, "events": events}),
            (copy_span(original, None, None, None, None), {}),
            (copy_span(original, attributes, events, links, status), replacing),
        ]
        for copy, replaced_parts in built:
            reference = ReadableSpan(**{**parts, **replaced_parts})
            if copy is None or list(vars(copy)) != list(vars(reference)) or not _same_view(copy, reference):
                return False
    except Exception:
        return False
    return True


def _event_direct_ok() -> bool:
    """Whether :func:`new_event` (and the inline event of ``evaluation/spans.py``) builds what ``Event(...)`` does."""
    if _event_fields() != _EVENT_FIELDS:
        return False
    try:
        attributes = {"probe": 1}
        built = new_event("probe", attributes, 1_700_000_000_000_000_007)
        reference = Event("probe", attributes, timestamp=1_700_000_000_000_000_007)
        return list(vars(built)) == list(vars(reference)) and _same_event_view(built, reference)
    except Exception:
        return False


# In this order: the event and span probes store through new_event() and _with_fields(), which read _PLAIN_SETATTR.
_PLAIN_SETATTR = _plain_setattr_ok()
_EVENT_DIRECT_OK = _event_direct_ok()
_SPAN_READ_OK = _span_read_ok()
_SPAN_COPY_OK = _span_copy_ok()
SPAN_READ_OK = _SPAN_READ_OK
"""Whether the enriched copy may read a plain span's ``_attributes``, ``_events`` and ``_end_time`` directly."""
DIRECT_COPY_OK = _SPAN_COPY_OK and _EVENT_DIRECT_OK and _PLAIN_SETATTR
"""Whether :func:`plain_state`, :func:`copy_state` and :func:`new_event` take their field-by-field paths with a store
to ``__dict__`` on this SDK (each probed above against the constructor): the enriched copy then does the same inline
(``evaluation/spans.py``). Computed once at import: changing a probe's flag later does not change it."""
