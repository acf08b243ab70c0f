"""A trace-id router on 127.0.0.1: a stand-in for the collector's ``loadbalancing`` exporter in scale-out tests.

It receives OTLP/HTTP protobuf exports, splits every request by trace id, sends each trace's spans to the
worker its trace id hashes to (one request per worker, resource and scope kept), and answers the sender only
once every span was accepted by some worker. What it models of the real exporter (``routing_key: traceID``
with ``retry_on_failure`` and ``sending_queue`` at its top level and a resolver that drops dead backends):

- routing depends on the trace id alone, so every span of a trace goes to one worker whatever request it
  arrived in;
- a worker that refuses (connection error, 429 or 5xx: stopping, full, gone) leaves the ring, and the spans
  it refused are routed again: to the next healthy worker on the ring, the way a top-level retry re-routes
  once the resolver has dropped the backend. Only the refused worker's traces move; the others stay put.

Nothing is retried on the same worker and nothing is kept: a refused export either lands elsewhere or the
sender gets 503 (then the sender's own retry applies).
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

FORWARD_TIMEOUT_S = 10.0


def split_by_trace(request: ExportTraceServiceRequest) -> dict[bytes, ExportTraceServiceRequest]:
    """One request per trace id, each span under a copy of its own resource and scope."""
    out: dict[bytes, ExportTraceServiceRequest] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            groups: dict[bytes, ScopeSpans] = {}
            for span in ss.spans:
                if span.trace_id not in groups:
                    piece = out.setdefault(span.trace_id, ExportTraceServiceRequest())
                    target = piece.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
                    groups[span.trace_id] = target.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url)
                groups[span.trace_id].spans.append(span)
    return out


def join(pieces: Sequence[ExportTraceServiceRequest]) -> ExportTraceServiceRequest:
    """One request carrying the resource spans of ``pieces``."""
    joined = ExportTraceServiceRequest()
    for piece in pieces:
        resource_spans: Sequence[ResourceSpans] = piece.resource_spans
        joined.resource_spans.extend(resource_spans)
    return joined


@dataclass
class Delivery:
    """Spans of one trace accepted by one worker."""

    trace_id: str
    worker: int
    spans: int


@dataclass
class TraceRouter:
    """Route OTLP/HTTP exports by trace id to ``workers`` (their base URLs); a context manager serving on port 0.

    Attributes:
        deliveries: Every (trace, worker) hand-over that a worker accepted.
        refusals: (worker, reason) each time a worker refused and left the ring.
        rejections: (worker, reason) for permanent errors (4xx other than 429): dropped, as the collector does.
    """

    workers: Sequence[str]
    deliveries: list[Delivery] = field(default_factory=list)
    refusals: list[tuple[int, str]] = field(default_factory=list)
    rejections: list[tuple[int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._healthy = set(range(len(self.workers)))
        self._client = httpx.Client(timeout=FORWARD_TIMEOUT_S)
        router = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                status = 200 if router.route(request) else 503
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def owner(self, trace_id: bytes) -> int | None:
        """The healthy worker ``trace_id`` routes to: its hash's slot, or the next healthy one on the ring."""
        slot = int.from_bytes(hashlib.blake2b(trace_id, digest_size=8).digest(), "big") % len(self.workers)
        with self._lock:
            for step in range(len(self.workers)):
                candidate = (slot + step) % len(self.workers)
                if candidate in self._healthy:
                    return candidate
        return None

    def route(self, request: ExportTraceServiceRequest) -> bool:
        """Deliver every span of ``request``; False when some could not be delivered to any worker."""
        pending = split_by_trace(request)
        while pending:
            by_worker: dict[int, list[bytes]] = defaultdict(list)
            for trace_id in pending:
                worker = self.owner(trace_id)
                if worker is None:
                    return False
                by_worker[worker].append(trace_id)
            for worker, trace_ids in by_worker.items():
                if self._forward(worker, join([pending[t] for t in trace_ids])):
                    with self._lock:
                        for t in trace_ids:
                            spans = sum(len(ss.spans) for rs in pending[t].resource_spans for ss in rs.scope_spans)
                            self.deliveries.append(Delivery(t.hex(), worker, spans))
                    for t in trace_ids:
                        del pending[t]
        return True

    def _forward(self, worker: int, request: ExportTraceServiceRequest) -> bool:
        """Send to ``worker``; on a refusal take it out of the ring and return False (its traces re-route)."""
        try:
            response = self._client.post(
                self.workers[worker] + "/v1/traces",
                content=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
        except httpx.TransportError as exc:
            reason = type(exc).__name__
        else:
            if response.status_code < 300:
                return True
            if response.status_code != 429 and response.status_code < 500:
                # A permanent error (bad data, bad token): the collector drops such data, counted, never re-routes.
                with self._lock:
                    self.rejections.append((worker, f"HTTP {response.status_code}: {response.text[:200]}"))
                return True
            reason = f"HTTP {response.status_code}"
        with self._lock:
            self._healthy.discard(worker)
            self.refusals.append((worker, reason))
        return False

    def __enter__(self) -> TraceRouter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
