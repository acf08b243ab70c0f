"""OTLP trace payloads (protobuf or OTLP/JSON, optionally gzipped) -> SDK ``ReadableSpan`` objects.

The spans are rebuilt faithfully so the evaluation pipeline and the exporters see what the sender's SDK saw:
resource and its schema URL, instrumentation scope (name, version, schema URL, attributes), trace and span ids,
parent (with its is-remote flag from ``Span.flags``), trace state, kind, status, events, links, and attributes
of every ``AnyValue`` kind (string, bool, int, double, bytes, arrays, key-value lists, empty).

OTLP/JSON differs from the protobuf JSON mapping in one way that matters here: trace and span ids are hex,
not base64 (OTLP specification, "JSON Protobuf Encoding"). They are converted before parsing.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf.json_format import ParseDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope as SdkScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from evaltrace.worker.limits import Reservation

__all__ = ["PayloadError", "decode_body", "parse_request", "spans_from_request"]

CONTENT_PROTOBUF = "application/x-protobuf"
CONTENT_JSON = "application/json"
_HAS_IS_REMOTE = 0x100  # SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = 0x200  # SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
# proto SpanKind (0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer) -> SDK SpanKind.
_KINDS = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_INFLATE_CHUNK = 1024 * 1024  # bytes inflated (and counted in the memory budget) per step
DEFAULT_MAX_JSON_DEPTH = 64


class PayloadError(ValueError):
    """The request is not a valid OTLP trace export; ``reason`` says why, ``status`` is the HTTP answer.

    ``status`` is 400 for a body that does not decode and 415 for a content type or encoding we do not speak.
    """

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def decode_body(
    body: bytes, content_encoding: str | None, max_bytes: int, reservation: Reservation | None = None
) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate or identity), refusing bodies that inflate beyond ``max_bytes``.

    Inflates a chunk at a time, so a bomb (a few KiB inflating to GiB) costs at most ``max_bytes`` before it
    is refused, and each chunk is counted in ``reservation`` before it is made.

    Raises:
        PayloadError: 415 for an unknown encoding, 400 for a corrupt stream, 413 beyond ``max_bytes``.
        BudgetExceeded: ``reservation`` could not grow (other requests hold the memory).
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise PayloadError(f"unsupported Content-Encoding {encoding!r} (use gzip, deflate or identity)", 415)
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    out = bytearray()
    pending = body
    try:
        while pending and not inflater.eof:
            step = min(_INFLATE_CHUNK, max_bytes + 1 - len(out))
            if reservation is not None:
                reservation.grow(step)
            out += inflater.decompress(pending, step)
            pending = inflater.unconsumed_tail
            if len(out) > max_bytes:
                raise PayloadError(f"decompressed body exceeds the limit of {max_bytes} bytes", 413)
        out += inflater.flush()
    except zlib.error as exc:
        raise PayloadError(f"body is not valid {encoding}: {exc}") from exc
    if len(out) > max_bytes:
        raise PayloadError(f"decompressed body exceeds the limit of {max_bytes} bytes", 413)
    if not inflater.eof:
        raise PayloadError(f"body is not valid {encoding}: the stream is truncated")
    return bytes(out)


def _hex_to_b64(value: Any, field: str) -> Any:
    if not isinstance(value, str) or value == "":
        return value
    try:
        raw = bytes.fromhex(value)
    except ValueError as exc:
        raise PayloadError(f"{field} {value!r} is not hex (OTLP/JSON ids are hex-encoded)") from exc
    return base64.b64encode(raw).decode()


def _fix_ids(data: Any, max_depth: int) -> None:
    """Rewrite hex ids to base64 in place, wherever spans and links keep them; refuse nesting past ``max_depth``.

    Walks with an explicit stack, not recursion: the depth check must not be the thing a deep body breaks.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise PayloadError(f"JSON body is nested deeper than {max_depth} levels")
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _ID_FIELDS:
                    node[key] = _hex_to_b64(value, key)
                elif isinstance(value, (dict, list)):
                    stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node if isinstance(item, (dict, list)))


def parse_request(
    body: bytes, content_type: str | None, max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ExportTraceServiceRequest:
    """Parse an OTLP/HTTP trace export body (already decompressed).

    Nesting is bounded: protobuf by its parser's recursion limit (100 messages deep), OTLP/JSON by
    ``max_json_depth`` objects and arrays.

    Raises:
        PayloadError: Unknown content type, or a body that does not parse as the content type says.
    """
    media = (content_type or CONTENT_PROTOBUF).split(";", 1)[0].strip().lower()
    request = ExportTraceServiceRequest()
    if media == CONTENT_PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError) as exc:
            raise PayloadError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from exc
        return request
    if media == CONTENT_JSON:
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PayloadError(f"body is not JSON: {exc}") from exc
        except RecursionError as exc:  # nesting past the interpreter's limit, long before max_json_depth matters
            raise PayloadError(f"JSON body is nested deeper than {max_json_depth} levels") from exc
        if not isinstance(data, dict):
            raise PayloadError("OTLP/JSON body must be an object with resourceSpans")
        _fix_ids(data, max_json_depth)
        try:
            ParseDict(data, request)
        except Exception as exc:  # json_format raises ParseError, TypeError, ValueError...
            raise PayloadError(f"JSON is not an ExportTraceServiceRequest: {exc}") from exc
        return request
    raise PayloadError(f"unsupported Content-Type {media!r} (use {CONTENT_PROTOBUF} or {CONTENT_JSON})", 415)


def any_value(value: AnyValue) -> Any:
    """The Python value of an OTLP ``AnyValue``: arrays become tuples, key-value lists dicts, empty None."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def _id(raw: bytes, size: int, what: str, where: str) -> int:
    if len(raw) != size:
        raise PayloadError(f"{where}: {what} must be {size} bytes, got {len(raw)}")
    value = int.from_bytes(raw, "big")
    if value == 0:
        raise PayloadError(f"{where}: {what} is all zeros")
    return value


def _trace_state(header: str) -> TraceState:
    return TraceState.from_header([header]) if header else TraceState()


def _scope(scope: InstrumentationScope, schema_url: str) -> SdkScope:
    return SdkScope(scope.name, scope.version or None, schema_url or None, _attributes(scope.attributes) or None)


def _span(span: ProtoSpan, resource: Resource, scope: SdkScope, where: str) -> ReadableSpan:
    trace_id = _id(span.trace_id, 16, "trace_id", where)
    flags = TraceFlags((span.flags & 0xFF) | TraceFlags.SAMPLED)  # exported spans are sampled by definition
    context = SpanContext(
        trace_id, _id(span.span_id, 8, "span_id", where), False, flags, _trace_state(span.trace_state)
    )
    parent = None
    if span.parent_span_id:
        remote = bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE)
        parent = SpanContext(trace_id, _id(span.parent_span_id, 8, "parent_span_id", where), remote, flags)
    links = [
        Link(
            SpanContext(
                _id(link.trace_id, 16, "link trace_id", where),
                _id(link.span_id, 8, "link span_id", where),
                bool(link.flags & _HAS_IS_REMOTE and link.flags & _IS_REMOTE),
                TraceFlags(link.flags & 0xFF),
                _trace_state(link.trace_state),
            ),
            _attributes(link.attributes),
        )
        for link in span.links
    ]
    code = _STATUS.get(span.status.code, StatusCode.UNSET)
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=_attributes(span.attributes),
        events=[Event(e.name, _attributes(e.attributes), timestamp=e.time_unix_nano) for e in span.events],
        links=links,
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=Status(code, span.status.message or None) if code is StatusCode.ERROR else Status(code),
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def spans_from_request(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """Rebuild every span of ``request``.

    Raises:
        PayloadError: A span has a missing, wrongly sized or all-zero id (the whole request is refused, as
            Langfuse and the collector do, so a sender never half-delivers a batch without knowing).
    """
    out: list[ReadableSpan] = []
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = Resource(_attributes(resource_spans.resource.attributes), resource_spans.schema_url or None)
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            scope = _scope(scope_spans.scope, scope_spans.schema_url)
            for index, span in enumerate(scope_spans.spans):
                where = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{index}]"
                out.append(_span(span, resource, scope, where))
    return out


def span_keys(spans: Sequence[ReadableSpan]) -> list[tuple[int, int]]:
    """``(trace_id, span_id)`` of each span (every rebuilt span has a context)."""
    return [(s.context.trace_id, s.context.span_id) for s in spans if s.context is not None]
