"""Compact span records for the evaluation process: plain tuples out, SDK ``ReadableSpan`` objects back in.

SDK span objects are not sent across the process boundary: they carry locks, processors and lazily built
attributes. A record holds what the span→Trace mapping reads (name, ids, parent, kind, times, status,
attributes, events, resource) as built-in types, so pickling it is cheap and the child needs no evaltrace
state to rebuild the span. Links and instrumentation scopes are left out: the mapping reads neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

SpanRecord = tuple[Any, ...]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def to_records(spans: Sequence[ReadableSpan]) -> tuple[list[SpanRecord], list[dict[str, Any]]]:
    """Return one record per span and the distinct resources' attributes they point into (by index)."""
    resources: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    records = []
    for span in spans:
        context = span.context
        parent = span.parent
        resource = span.resource
        index = seen.get(id(resource))
        if index is None:
            index = seen[id(resource)] = len(resources)
            resources.append(dict(resource.attributes) if resource is not None else {})
        records.append(
            (
                span.name,
                context.trace_id if context is not None else 0,
                context.span_id if context is not None else 0,
                parent.span_id if parent is not None else None,
                parent.is_remote if parent is not None else False,
                span.kind.value,
                span.start_time,
                span.end_time,
                span.status.status_code.value,
                span.status.description,
                dict(span.attributes or {}),
                tuple((event.name, event.timestamp, dict(event.attributes or {})) for event in span.events),
                index,
            )
        )
    return records, resources


def from_records(records: Sequence[SpanRecord], resources: Sequence[dict[str, Any]]) -> list[ReadableSpan]:
    """Rebuild the spans of :func:`to_records` (what the mapping needs of them)."""
    built = [Resource(attrs) for attrs in resources]
    spans = []
    for name, trace_id, span_id, parent_id, parent_remote, kind, start, end, code, text, attrs, events, res in records:
        parent = (
            SpanContext(trace_id, parent_id, is_remote=parent_remote, trace_flags=_SAMPLED)
            if parent_id is not None
            else None
        )
        spans.append(
            ReadableSpan(
                name=name,
                context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
                parent=parent,
                resource=built[res],
                attributes=attrs,
                events=tuple(Event(n, attributes=a, timestamp=t) for n, t, a in events),
                kind=SpanKind(kind),
                status=Status(StatusCode(code), text),
                start_time=start,
                end_time=end,
            )
        )
    return spans
