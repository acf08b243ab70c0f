"""Real OTLP receivers on 127.0.0.1 for wire tests: OTLP/HTTP (protobuf, JSON, gzip) and OTLP/gRPC.

They decode what the exporters send with ``opentelemetry-proto`` exactly as Jaeger or a collector would, and
record the path, the headers and every span (flattened to plain Python values) for assertions.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(value: AnyValue) -> Any:
    """Turn an OTLP AnyValue into the Python value it carries (arrays as lists, maps as dicts)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


@dataclass
class ReceivedSpan:
    """One decoded span, with its resource and scope."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    scope: str
    status_code: int


@dataclass
class Request:
    """One export request as it arrived."""

    path: str
    headers: dict[str, str]
    spans: list[ReceivedSpan] = field(default_factory=list)


def decode(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """Flatten an export request into spans."""
    out: list[ReceivedSpan] = []
    for rs in request.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for sp in ss.spans:
                out.append(
                    ReceivedSpan(
                        name=sp.name,
                        trace_id=sp.trace_id.hex(),
                        span_id=sp.span_id.hex(),
                        parent_span_id=sp.parent_span_id.hex(),
                        kind=sp.kind,
                        attributes={kv.key: any_value(kv.value) for kv in sp.attributes},
                        events=[(e.name, {kv.key: any_value(kv.value) for kv in e.attributes}) for e in sp.events],
                        resource=resource,
                        scope=ss.scope.name,
                        status_code=sp.status.code,
                    )
                )
    return out


class _Recorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._cond = threading.Condition()

    def record(self, request: Request) -> None:
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._cond:
            return [s for r in self.requests for s in r.spans]

    def wait_for_spans(self, count: int, timeout: float = 15.0) -> list[ReceivedSpan]:
        """Block until at least ``count`` spans arrived (or fail after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(len(r.spans) for r in self.requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    got = sum(len(r.spans) for r in self.requests)
                    raise AssertionError(f"expected {count} spans within {timeout}s, received {got}")
                self._cond.wait(remaining)
            return [s for r in self.requests for s in r.spans]


class OTLPHttpReceiver(_Recorder):
    """OTLP/HTTP receiver accepting protobuf and JSON bodies (gzip or not) on any path.

    Args:
        status: The status every export gets.
        gate: When given, each request waits for it to be set before its body is read (a stalled backend);
            nothing is recorded meanwhile.
    """

    def __init__(self, status: int = 200, gate: threading.Event | None = None) -> None:
        super().__init__()
        self.status = status
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if gate is not None:
                    gate.wait()
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    Parse(body.decode(), request)
                else:
                    request.ParseFromString(body)
                headers = {k.lower(): v for k, v in self.headers.items()}
                recorder.record(Request(self.path, headers, decode(request)))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(recorder.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OTLPHttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> set[str]:
        """Span ids received so far."""
        return {s.span_id for s in self.spans}


class OTLPGrpcReceiver(_Recorder):
    """OTLP/gRPC receiver: a TraceService servicer on 127.0.0.1 recording metadata and spans."""

    def __init__(self) -> None:
        super().__init__()
        recorder = self

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(
                self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
            ) -> ExportTraceServiceResponse:
                headers = {k.lower(): str(v) for k, v in context.invocation_metadata()}
                recorder.record(Request("/opentelemetry.proto.collector.trace.v1.TraceService/Export", headers,
                                        decode(request)))  # fmt: skip
                return ExportTraceServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OTLPGrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)


def by_name(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    """Index spans by name (names are unique in these tests)."""
    return {s.name: s for s in spans}


def poll(check: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def iter_attrs(spans: list[ReceivedSpan], key: str) -> Iterator[Any]:
    """Values of attribute ``key`` over ``spans`` (None where missing)."""
    return (s.attributes.get(key) for s in spans)
