"""``evaltrace worker`` facing hostile clients over real sockets: body size, bombs, malformed and deep payloads,
slow clients, too many connections, too many bytes in flight.

Every case is followed by a normal export, so a limit that hurt the worker itself (a dead thread, a leaked
slot, a budget never given back) fails here too.
"""

from __future__ import annotations

import gzip
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_receivers import poll
from test_worker import make_spans

from evaltrace.exceptions import ConfigError
from evaltrace.worker import EvaluationWorker
from evaltrace.worker.limits import ByteBudget, ReceiverLimits

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
KIB = 1024
# Generous bound for "the worker closed the connection": the timeouts under test are a second or two.
CLOSED_WITHIN_S = 20.0


def small_worker(grpc_port: int | None = None, **limits: Any) -> EvaluationWorker:
    """A worker with no evaluators on a free port; ``limits`` override :class:`ReceiverLimits`."""
    settings = {"max_body_bytes": 64 * KIB, "max_inflight_bytes": 256 * KIB, **limits}
    return EvaluationWorker([], port=0, grpc_port=grpc_port, batch=False, limits=ReceiverLimits(**settings))


@pytest.fixture
def worker() -> Iterator[EvaluationWorker]:
    with small_worker() as running:
        yield running


def export_works(worker: EvaluationWorker) -> bool:
    """A real exporter's export succeeds (the worker is still fully serving)."""
    sender = OTLPSpanExporter(endpoint=worker.url + "/v1/traces", timeout=10)
    try:
        return sender.export(make_spans()) is SpanExportResult.SUCCESS
    finally:
        sender.shutdown()


def nested_any_value(depth: int) -> bytes:
    """An export whose one attribute nests ``depth`` arrays, serialized by hand (beyond the parser's limit)."""
    inner = AnyValue(string_value="bottom").SerializeToString()
    for _ in range(depth):
        # AnyValue.array_value (field 5) -> ArrayValue.values (field 1) -> AnyValue
        array = _field(1, inner)
        inner = _field(5, array)
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="deep")
    span_bytes = span.SerializeToString() + _field(9, _field(1, b"deep") + _field(2, inner))  # Span.attributes
    scope = _field(2, span_bytes)  # ScopeSpans.spans
    resource = _field(2, scope)  # ResourceSpans.scope_spans
    return _field(1, resource)  # ExportTraceServiceRequest.resource_spans


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def deep_json(depth: int) -> bytes:
    """An OTLP/JSON body whose ``resourceSpans`` nests ``depth`` arrays."""
    return b'{"resourceSpans": ' + b"[" * depth + b"]" * depth + b"}"


def chunks(body: bytes, size: int = 4 * KIB) -> Iterator[bytes]:
    """A body httpx sends with ``Transfer-Encoding: chunked`` (no Content-Length)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


BAD_REQUESTS: list[tuple[str, dict[str, str], Any, int, str]] = [
    ("over-size body", PROTOBUF, b"\x00" * (65 * KIB), 413, "exceeds the limit"),
    ("over-size chunked body", PROTOBUF, lambda: chunks(b"\x00" * (80 * KIB)), 413, "chunked body exceeds"),
    (
        "gzip bomb",
        {**PROTOBUF, "Content-Encoding": "gzip"},
        gzip.compress(b"\x00" * (50 * 1024 * KIB)),
        413,
        "decompressed body exceeds",
    ),  # fmt: skip
    ("truncated gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, gzip.compress(b"abc" * 100)[:-12], 400, "gzip"),
    ("unknown encoding", {**PROTOBUF, "Content-Encoding": "br"}, b"x", 415, "Content-Encoding"),
    ("garbage protobuf", PROTOBUF, b"\xff\xff\xff\xff\x0f", 400, "not a protobuf"),
    ("protobuf nested past the parser's limit", PROTOBUF, nested_any_value(200), 400, "not a protobuf"),
    ("not JSON", JSON, b"{resourceSpans", 400, "not JSON"),
    ("JSON in a wrong encoding", JSON, b'{"resourceSpans": ["\xff"]}', 400, "not JSON"),
    ("JSON of the wrong shape", JSON, b'{"resourceSpans": 5}', 400, "not an ExportTraceServiceRequest"),
    ("JSON a little too deep", JSON, deep_json(100), 400, "nested deeper than 64"),
    ("JSON deeper than the interpreter", JSON, deep_json(30_000), 400, "nested deeper than 64"),
]


@pytest.mark.parametrize(
    ("headers", "content", "status", "reason"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_hostile_bodies_get_a_4xx_with_the_reason_never_a_500(
    worker: EvaluationWorker, headers: dict[str, str], content: Any, status: int, reason: str
) -> None:
    body = content() if callable(content) else content
    response = httpx.post(worker.url + "/v1/traces", content=body, headers=headers, timeout=30)
    assert (response.status_code, reason in response.text) == (status, True), response.text
    assert export_works(worker)
    assert worker.http._server.budget.used == 0  # every byte counted in was given back


def test_chunked_body_within_the_limit_is_accepted(worker: EvaluationWorker) -> None:
    body = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[Span(trace_id=b"\x01" * 16,
                                                                           span_id=b"\x02" * 8, name="c")])])]
    ).SerializeToString()  # fmt: skip
    response = httpx.post(worker.url + "/v1/traces", content=chunks(body, 7), headers=PROTOBUF, timeout=10)
    assert response.status_code == 200
    assert poll(lambda: worker.stats()["accepted_spans"] == 1)
    with _connect(worker) as sock:  # a transfer coding we do not read (httpx will not even send it)
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")
        assert _closed(sock).startswith(b"HTTP/1.1 400")


def _connect(worker: EvaluationWorker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", worker.http.port), timeout=CLOSED_WITHIN_S)


def _closed(sock: socket.socket) -> bytes:
    """Everything the worker sends until it closes the connection (fails if it keeps it past the bound)."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_a_client_that_stops_sending_is_cut_after_the_idle_timeout() -> None:
    with small_worker(idle_timeout_s=0.5) as worker, _connect(worker) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # ...and never the rest
        assert b"200" not in _closed(sock)
        with _connect(worker) as idle:  # never sends a byte
            assert _closed(idle) == b""
        assert export_works(worker)


def _cut(sock: socket.socket) -> bool:
    """Whether the worker has closed ``sock`` (without waiting)."""
    try:
        return sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def test_a_client_trickling_bytes_is_cut_at_the_request_deadline() -> None:
    # Each byte arrives well within the idle timeout; only the whole-request deadline can end this.
    with small_worker(idle_timeout_s=5.0, request_timeout_s=1.0) as worker, _connect(worker) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")
        deadline = time.monotonic() + CLOSED_WITHIN_S
        while not _cut(sock) and time.monotonic() < deadline:
            try:
                sock.sendall(b"X")
            except OSError:
                break
            time.sleep(0.1)
        assert _cut(sock)
        assert export_works(worker)


def test_a_connection_over_the_cap_gets_503_and_a_freed_slot_is_reused() -> None:
    with small_worker(max_connections=2, idle_timeout_s=30.0) as worker:
        holders = [_connect(worker) for _ in range(2)]
        for sock in holders:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")  # each holds a connection thread
        try:
            with _connect(worker) as extra:
                refused = _closed(extra)
            assert refused.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in refused
        finally:
            for sock in holders:
                sock.close()
        assert poll(lambda: export_works(worker))  # the slots come back once the holders are gone


def test_bytes_in_flight_over_the_budget_get_503_with_retry_after_until_they_are_released() -> None:
    limits = {"max_inflight_bytes": 64 * KIB, "max_body_bytes": 60 * KIB}
    with small_worker(grpc_port=0, **limits) as worker, _connect(worker) as slow:
        # A request announcing 60 KiB holds them in the budget while its body trickles in.
        slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 61440\r\n\r\n" + b"\x00" * 10)
        health = worker.url + "/healthz"
        assert poll(lambda: httpx.get(health).json()["inflight_bytes"] == 61440)
        body = b"\x0a\x00" * (5 * KIB)  # 10 KiB of empty ResourceSpans: valid, over what is left
        busy = httpx.post(worker.url + "/v1/traces", content=body, headers=PROTOBUF, timeout=10)
        assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
        assert "memory budget" in busy.text
        assert worker.grpc is not None  # the budget is shared: gRPC calls wait for it too (retryable UNAVAILABLE)
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans()] * 8 * KIB)
        with grpc.insecure_channel(f"127.0.0.1:{worker.grpc.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(request, timeout=10)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        slow.sendall(b"\x00" * (61440 - 10))  # the slow body completes (and is garbage: 400)
        assert b" 400 " in slow.recv(4096)
        assert poll(lambda: httpx.get(health).json()["inflight_bytes"] == 0)
        ok = httpx.post(worker.url + "/v1/traces", content=body, headers=PROTOBUF, timeout=10)
        assert ok.status_code == 200


def test_a_request_alone_may_use_more_than_the_budget() -> None:
    budget = ByteBudget(10)
    with budget.reservation() as alone:
        alone.grow(100)  # nobody else holds anything: refusing would make the sender retry for ever
        with pytest.raises(Exception, match="in flight"), budget.reservation() as other:
            other.grow(1)
    assert budget.used == 0


@pytest.mark.parametrize(
    ("limit", "value"),
    [("max_body_bytes", 0), ("max_connections", -1), ("idle_timeout_s", 0), ("max_inflight_bytes", "1MiB")],
)
def test_bad_limits_name_the_setting(limit: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=limit):
        ReceiverLimits(**{limit: value})


def test_grpc_message_over_the_limit_is_resource_exhausted() -> None:
    limits = ReceiverLimits(max_body_bytes=4 * KIB)
    with EvaluationWorker([], port=0, grpc_port=0, batch=False, limits=limits) as worker:
        assert worker.grpc is not None
        span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="x" * (8 * KIB))
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
        with grpc.insecure_channel(f"127.0.0.1:{worker.grpc.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(request, timeout=10)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            small = ExportTraceServiceRequest(
                resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[Span(trace_id=b"\x01" * 16,
                                                                                   span_id=b"\x02" * 8)])])]
            )  # fmt: skip
            stub.Export(small, timeout=10)


def test_json_within_the_depth_limit_with_nested_attribute_values_is_accepted(worker: EvaluationWorker) -> None:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(5):
        value = {"arrayValue": {"values": [value]}}
    span = {"traceId": "01" * 16, "spanId": "02" * 8, "name": "j", "attributes": [{"key": "k", "value": value}]}
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    assert httpx.post(worker.url + "/v1/traces", content=body, headers=JSON, timeout=10).status_code == 200
