"""A finished span with some of its parts replaced: what exporters and the evaluation pipeline send instead.

The SDK's ``ReadableSpan`` is immutable once ended, so a changed span (enriched with results, redacted, trimmed for
one backend) is a new ``ReadableSpan`` carrying everything else of the original: ids, parent, resource, kind,
times and instrumentation scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, Status

# The instance state a ReadableSpan's constructor sets, read off one built here: a span of exactly that class and
# state is copied slot by slot (each public property of ReadableSpan only returns one of them). An SDK version that
# stores anything else, or a subclass (which may override the properties), takes the constructor as before.
_STATE = frozenset(vars(ReadableSpan(name="", resource=Resource({}))))


def replaced(
    span: ReadableSpan,
    *,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[Event] | None = None,
    links: Sequence[Link] | None = None,
    status: Status | None = None,
) -> ReadableSpan:
    """Return a copy of ``span`` with the given parts replaced (None keeps the original's)."""
    state: dict[str, Any] = span.__dict__ if type(span) is ReadableSpan else {}
    if state.keys() == _STATE and state["_resource"] is not None:
        # The same values the constructor call below stores, without its twelve property reads and frame: this
        # runs once per evaluated span.
        copy = ReadableSpan.__new__(ReadableSpan)
        copy.__dict__.update(
            _name=state["_name"],
            _context=state["_context"],
            _kind=state["_kind"],
            _instrumentation_info=None,
            _instrumentation_scope=state["_instrumentation_scope"],
            _parent=state["_parent"],
            _start_time=state["_start_time"],
            _end_time=state["_end_time"],
            _attributes=MappingProxyType(state["_attributes"] or {}) if attributes is None else attributes,
            _events=tuple(state["_events"]) if events is None else events,
            _links=tuple(state["_links"]) if links is None else links,
            _resource=state["_resource"],
            _status=state["_status"] if status is None else status,
        )
        return copy
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
