"""Compact span records for the evaluation process: plain tuples out, SDK ``ReadableSpan`` objects back in.

SDK span objects are not sent across the process boundary: they carry locks, processors and lazily built
attributes. A record holds what the span→Trace mapping reads (name, ids, parent, kind, times, status,
attributes, events, resource) as built-in types, so pickling it is cheap and the child needs no evaltrace
state to rebuild the span. Links and instrumentation scopes are left out: the mapping reads neither. A judge
call's spans, sent back the other way to be exported (``_judge_spans``), add their links with :func:`links_of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

SpanRecord = tuple[Any, ...]
LinkRecord = tuple[tuple[int, int, dict[str, Any]], ...]

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


def links_of(spans: Sequence[ReadableSpan]) -> list[LinkRecord]:
    """Each span's links as ``(trace_id, span_id, attributes)`` tuples, in the order of ``spans``."""
    return [
        tuple(
            (link.context.trace_id, link.context.span_id, dict(link.attributes or {}))
            for link in span.links
            if link.context is not None
        )
        for span in spans
    ]


def from_records(
    records: Sequence[SpanRecord],
    resources: Sequence[dict[str, Any]],
    links: Sequence[LinkRecord] | None = None,
    scope: InstrumentationScope | None = None,
) -> list[ReadableSpan]:
    """Rebuild the spans of :func:`to_records` (what the mapping needs of them).

    Args:
        records: The span records.
        resources: The resources' attributes the records point into.
        links: Per record, its links (:func:`links_of`); None: no links.
        scope: The instrumentation scope to give every span (None: none, as the mapping needs none).
    """
    built = [Resource(attrs) for attrs in resources]
    spans = []
    for index, record in enumerate(records):
        name, trace_id, span_id, parent_id, parent_remote, kind, start, end, code, text, attrs, events, res = record
        span_links = (
            tuple(
                Link(SpanContext(tid, sid, is_remote=True, trace_flags=_SAMPLED), attributes)
                for tid, sid, attributes in links[index]
            )
            if links is not None
            else ()
        )
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
                links=span_links,
                instrumentation_scope=scope,
            )
        )
    return spans
