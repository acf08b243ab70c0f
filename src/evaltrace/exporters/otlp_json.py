"""Stored traces as OTLP: JSON lines for files, or sent to an OTLP endpoint with the SDK's own exporters.

The file format is the one the OpenTelemetry Collector's ``otlpjsonfile`` receiver and file exporter use: one
``ExportTraceServiceRequest`` per line, in the OTLP/JSON encoding (lowerCamelCase fields, trace and span ids
as hexadecimal strings, enums as integers, 64-bit integers as strings). Each line holds one trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["SendResult", "otlp_json_line", "send_traces", "write_otlp_json"]

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any) -> None:
    """Protobuf's JSON mapping writes bytes as base64; OTLP/JSON wants trace and span ids as hex."""
    import base64

    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


def _link_trace_states(spans: Sequence[ReadableSpan], request: Any) -> None:
    """Fill ``Span.Link.trace_state``, which the SDK's encoder leaves empty, from each span's links."""
    states: dict[tuple[bytes, bytes], list[str]] = {}
    for span in spans:
        ctx, links = span.get_span_context(), span.links  # each access to links copies the SDK's tuple: once
        if ctx is None or not links:
            continue
        headers = [link.context.trace_state.to_header() if link.context.trace_state else "" for link in links]
        if any(headers):
            states[(ctx.trace_id.to_bytes(16, "big"), ctx.span_id.to_bytes(8, "big"))] = headers
    if not states:
        return
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for encoded in scope_spans.spans:
                written = states.get((encoded.trace_id, encoded.span_id)) or []
                # Zipped in order: the encoder writes a span's links in the order the span keeps them.
                for link, header in zip(encoded.links, written, strict=False):
                    if header:
                        link.trace_state = header


def otlp_json_line(spans: Sequence[ReadableSpan]) -> str:
    """One ``ExportTraceServiceRequest`` holding ``spans``, as one line of OTLP/JSON."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = encode_spans(spans)
    _link_trace_states(spans, request)
    document = MessageToDict(request, use_integers_for_enums=True)
    _hex_ids(document)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def write_otlp_json(traces: Iterable[Sequence[ReadableSpan]], out: IO[str]) -> tuple[int, int]:
    """Write each trace as one OTLP/JSON line to ``out``; returns (traces, spans) written."""
    count = spans = 0
    for trace in traces:
        if not trace:
            continue
        out.write(otlp_json_line(trace) + "\n")
        count += 1
        spans += len(trace)
    return count, spans


@dataclass(frozen=True)
class SendResult:
    """What :func:`send_traces` delivered, and what the endpoint refused (after the exporter's own retries)."""

    sent_spans: int = 0
    failed_spans: int = 0


def _batches(traces: Iterable[Sequence[ReadableSpan]], size: int) -> Iterator[list[ReadableSpan]]:
    batch: list[ReadableSpan] = []
    for trace in traces:
        batch.extend(trace)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def send_traces(traces: Iterable[Sequence[ReadableSpan]], exporter: SpanExporter, batch_size: int = 512) -> SendResult:
    """Export ``traces`` through ``exporter`` (an OTLP exporter of the SDK) in batches of whole traces."""
    sent = failed = 0
    try:
        for batch in _batches(traces, batch_size):
            if exporter.export(batch) is SpanExportResult.SUCCESS:
                sent += len(batch)
            else:
                failed += len(batch)
    finally:
        exporter.shutdown()
    return SendResult(sent, failed)
