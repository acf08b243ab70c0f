"""A finished span with some of its parts replaced: what exporters and the evaluation pipeline send instead.

The SDK's ``ReadableSpan`` is immutable once ended, so a changed span (enriched with results, redacted, trimmed for
one backend) is a new ``ReadableSpan`` carrying everything else of the original: ids, parent, resource, kind,
times and instrumentation scope. A plain ``ReadableSpan`` is copied field by field where the SDK's layout allows
(``span_fields.copy_span``, one of the two modules that write SDK private state), else by the constructor.

What the SDK's span limits dropped (``SpanLimits``: attributes, events, links over their caps) stays on the copy:
the parts are handed over in the SDK's bounded containers with the original's ``dropped`` counts, which its
``dropped_*`` properties and OTLP's ``dropped_*_count`` read. Only a span with a count above zero pays for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Status

from evaltrace._internal.deferred_attributes import copy_span


def replaced(
    span: ReadableSpan,
    *,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[Event] | None = None,
    links: Sequence[Link] | None = None,
    status: Status | None = None,
) -> ReadableSpan:
    """Return a copy of ``span`` with the given parts replaced (None keeps the original's), its dropped counts kept."""
    copy = copy_span(span, attributes, events, links, status)  # the fast path, when this SDK's layout allows
    if copy is not None:  # it never takes a span whose parts are bounded containers: nothing was dropped
        return copy
    dropped = _dropped(span)
    if dropped is not None:
        attributes, events, links = _bounded(span, dropped, attributes, events, links)
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes if attributes is None else attributes,
        events=span.events if events is None else events,
        links=span.links if links is None else links,
        kind=span.kind,
        status=span.status if status is None else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


_DROPPED = ("dropped_attributes", "dropped_events", "dropped_links")
# Span class -> its dropped_* properties are ReadableSpan's own (they read the state's containers: read directly).
_STATE_READ: dict[type, bool] = {}


def _dropped(span: ReadableSpan) -> tuple[int, int, int] | None:
    """``span``'s dropped attribute, event and link counts; None when all are zero (the usual span)."""
    cls = type(span)
    direct = _STATE_READ.get(cls)
    if direct is None:
        direct = _STATE_READ[cls] = all(getattr(cls, name, None) is getattr(ReadableSpan, name) for name in _DROPPED)
    if direct:
        # What the properties return, without their frames (this runs once per evaluated span). The SDK makes these
        # exact classes; a type test, not isinstance: against these ABCs that is a Python frame more each.
        state = span.__dict__
        held = state.get("_attributes")
        attributes = held.dropped if type(held) is BoundedAttributes else 0
        held = state.get("_events")
        events = held.dropped if type(held) is BoundedList else 0
        held = state.get("_links")
        links = held.dropped if type(held) is BoundedList else 0
    else:  # a subclass that overrides them: its own answers
        attributes, events, links = span.dropped_attributes, span.dropped_events, span.dropped_links
    if attributes or events or links:
        return attributes, events, links
    return None


def _bounded(
    span: ReadableSpan,
    dropped: tuple[int, int, int],
    attributes: Mapping[str, Any] | None,
    events: Sequence[Event] | None,
    links: Sequence[Link] | None,
) -> tuple[Mapping[str, Any] | None, Sequence[Event] | None, Sequence[Link] | None]:
    """The parts of the copy, those with a dropped count in the SDK's bounded containers carrying it (no cap)."""
    if dropped[0]:
        held = BoundedAttributes(attributes=span.attributes if attributes is None else attributes, immutable=True)
        held.dropped = dropped[0]
        attributes = held
    if dropped[1]:
        events = _counted(span.events if events is None else events, dropped[1])
    if dropped[2]:
        links = _counted(span.links if links is None else links, dropped[2])
    return attributes, events, links


def _counted(items: Sequence[Any], dropped: int) -> BoundedList[Any]:
    bounded = BoundedList.from_seq(None, items)
    bounded.dropped = dropped
    return bounded
