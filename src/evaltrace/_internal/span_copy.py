"""A finished span with some of its parts replaced: what exporters and the evaluation pipeline send instead.

The SDK's ``ReadableSpan`` is immutable once ended, so a changed span (enriched with results, redacted, trimmed for
one backend) is a new ``ReadableSpan`` carrying everything else of the original: ids, parent, resource, kind,
times and instrumentation scope. A plain ``ReadableSpan`` is copied field by field where the SDK's layout allows
(``deferred_attributes.copy_span``, the one module that writes SDK private state), else by the constructor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
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
    """Return a copy of ``span`` with the given parts replaced (None keeps the original's)."""
    copy = copy_span(span, attributes, events, links, status)  # the fast path, when this SDK's layout allows
    if copy is not None:
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
