"""ReadableSpan <-> a plain JSON object, the line format of the local trace store.

Ids are lower-case hex (32 for traces, 16 for spans) as every backend prints them; times are Unix nanoseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util.types import AttributeValue


def attrs_dict(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attributes as a JSON-able dict (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """Serialise an ended span to a JSON-able dict."""
    ctx = span.get_span_context()
    assert ctx is not None  # an SDK span always has a context
    parent = span.parent
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": span.kind.name,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": attrs_dict(span.attributes),
        "events": [
            {"name": e.name, "timestamp": e.timestamp, "attributes": attrs_dict(e.attributes)} for e in span.events
        ],
        "links": [
            {
                "trace_id": format(link.context.trace_id, "032x"),
                "span_id": format(link.context.span_id, "016x"),
                "attributes": attrs_dict(link.attributes),
            }
            for link in span.links
        ],
        "resource": attrs_dict(span.resource.attributes),
        "scope": {
            "name": span.instrumentation_scope.name if span.instrumentation_scope else "",
            "version": span.instrumentation_scope.version if span.instrumentation_scope else None,
        },
    }


def _tupleattrs_dict(attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attributes.items()}


def _status(data: Mapping[str, Any]) -> Status:
    code = StatusCode[data.get("code", "UNSET")]
    # OTel accepts a description only with ERROR (it warns otherwise).
    return Status(code, data.get("description") if code is StatusCode.ERROR else None)


def _trace_state(header: Any) -> TraceState | None:
    return TraceState.from_header([header]) if isinstance(header, str) and header else None


def span_from_dict(data: Mapping[str, Any]) -> ReadableSpan:
    """Rebuild a ReadableSpan from ``span_to_dict`` output (for mapping and the CLI).

    Also reads what the local store keeps when present: ``trace_state`` (of the span and of each link),
    ``parent_remote``, and the scope's ``schema_url`` and ``attributes``.
    """
    trace_id = int(data["trace_id"], 16)
    context = SpanContext(
        trace_id,
        int(data["span_id"], 16),
        is_remote=False,
        trace_flags=TraceFlags(1),
        trace_state=_trace_state(data.get("trace_state")),
    )
    parent_id = data.get("parent_span_id")
    remote = bool(data.get("parent_remote"))
    parent = SpanContext(trace_id, int(parent_id, 16), is_remote=remote) if parent_id else None
    status = data.get("status") or {}
    scope = data.get("scope") or {}
    return ReadableSpan(
        name=data["name"],
        context=context,
        parent=parent,
        resource=Resource(_tupleattrs_dict(data.get("resource") or {})),
        attributes=_tupleattrs_dict(data.get("attributes") or {}),
        events=[
            Event(e["name"], _tupleattrs_dict(e.get("attributes") or {}), timestamp=e.get("timestamp"))
            for e in data.get("events") or []
        ],
        links=[
            Link(
                SpanContext(
                    int(link["trace_id"], 16),
                    int(link["span_id"], 16),
                    is_remote=False,
                    trace_state=_trace_state(link.get("trace_state")),
                ),
                _tupleattrs_dict(link.get("attributes") or {}),
            )
            for link in data.get("links") or []
        ],
        kind=SpanKind[data.get("kind", "INTERNAL")],
        status=_status(status),
        start_time=data.get("start_time"),
        end_time=data.get("end_time"),
        instrumentation_scope=InstrumentationScope(
            scope.get("name", ""),
            scope.get("version"),
            scope.get("schema_url"),
            _tupleattrs_dict(scope["attributes"]) if scope.get("attributes") else None,
        ),
    )
