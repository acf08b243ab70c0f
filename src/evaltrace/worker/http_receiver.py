"""OTLP/HTTP trace receiver for the worker: ``POST /v1/traces`` (protobuf or JSON), ``GET /healthz``.

Answers follow the OTLP/HTTP specification: 200 with an ``ExportTraceServiceResponse`` in the request's
encoding; 400 (undecodable body) and 415 (unknown content type or encoding) with a ``google.rpc.Status``
whose message says why (not retryable); 413 for a body over the limit; 503 with ``Retry-After`` when the
worker is full or stopping (retryable). Every error is answered, none escapes the handler thread.

Stopping never loses an acknowledged export: once :meth:`OTLPHttpReceiver.stop` begins, no request is admitted
any more (it gets a 503, so the sender retries, elsewhere or later), and the stop waits, up to its timeout, for
the requests already admitted to hand their spans to the pipeline, which then drains them.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToJson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from evaltrace.worker.decode import (
    CONTENT_JSON,
    CONTENT_PROTOBUF,
    PayloadError,
    decode_body,
    parse_request,
    spans_from_request,
)
from evaltrace.worker.pipeline import WorkerPipeline

__all__ = ["OTLPHttpReceiver"]

logger = logging.getLogger("evaltrace.worker")

TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/healthz"
DEFAULT_MAX_BODY_BYTES = 20 * 1024 * 1024  # the collector's OTLP/HTTP default
# googleapis-common-protos (an OTLP exporter dependency) ships no type information; the class is used untyped.
_Status: Any = importlib.import_module("google.rpc.status_pb2").Status
# google.rpc.Code values for the Status body.
_RPC_CODES = {400: 3, 404: 5, 411: 3, 413: 8, 415: 3, 500: 13, 503: 14}
# How often the serving loop looks at the stop flag; also the longest a stop waits for the loop to notice.
_POLL_S = 0.05


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    timeout = _POLL_S  # handle_request() returns after this when idle, so the serving loop sees a stop quickly
    pipeline: WorkerPipeline
    max_body_bytes: int
    retry_after_s: int

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.closing = False  # set once, under _admission; read unlocked by the serving loop (a bool read)
        self._admitted = 0
        self._admission = threading.Condition()

    def admit(self) -> bool:
        """Count a request in (it will hand spans to the pipeline); False once stopping has begun."""
        with self._admission:
            if self.closing:
                return False
            self._admitted += 1
            return True

    def release(self) -> None:
        """The admitted request has handed its spans over."""
        with self._admission:
            self._admitted -= 1
            if self._admitted == 0:
                self._admission.notify_all()

    def close_admission(self) -> None:
        """Admit nothing from now on."""
        with self._admission:
            self.closing = True

    def wait_admitted(self, deadline: float) -> bool:
        """Wait until no admitted request is left; False at the deadline (monotonic)."""
        with self._admission:
            while self._admitted:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._admission.wait(remaining)
        return True


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive: the OTLP exporter reuses its connection

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json_request(self) -> bool:
        return self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower() == CONTENT_JSON

    def _error(self, status: int, reason: str, extra: dict[str, str] | None = None) -> None:
        message = _Status(code=_RPC_CODES.get(status, 2), message=reason)
        if self._json_request():
            self._send(status, MessageToJson(message).encode(), CONTENT_JSON, extra)
        else:
            self._send(status, message.SerializeToString(), CONTENT_PROTOBUF, extra)

    def do_POST(self) -> None:
        try:
            self._post()
        except Exception:
            logger.exception("evaltrace worker: unexpected error handling an export")
            self.close_connection = True
            try:
                self._error(500, "internal error in the evaluation worker")
            except OSError:
                pass

    def _post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length_header = self.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            self.close_connection = True
            self._error(411, "Content-Length is required")
            return
        length = int(length_header)
        if length > self.server.max_body_bytes:
            self.close_connection = True  # the unread body would corrupt the next request on this connection
            self._error(413, f"body of {length} bytes exceeds the limit of {self.server.max_body_bytes}")
            return
        raw = self.rfile.read(length)
        if path != TRACES_PATH:
            self._error(404, f"unknown path {path!r}; OTLP traces go to {TRACES_PATH}")
            return
        try:
            body = decode_body(raw, self.headers.get("Content-Encoding"), self.server.max_body_bytes)
            spans = spans_from_request(parse_request(body, self.headers.get("Content-Type")))
        except PayloadError as exc:
            self._error(exc.status, exc.reason)
            return
        server = self.server
        retry = str(server.retry_after_s)
        if not server.admit():
            self.close_connection = True
            self._error(503, f"evaluation worker shutting down; retry after {retry}s", {"Retry-After": retry})
            return
        try:
            accepted = server.pipeline.submit(spans)
        finally:
            server.release()
        if not accepted:
            limit = server.pipeline.max_inflight_spans
            reason = f"evaluation queue full ({limit} spans in flight); retry after {retry}s"
            self._error(503, reason, {"Retry-After": retry})
            return
        response = ExportTraceServiceResponse()
        if self._json_request():
            self._send(200, MessageToJson(response).encode(), CONTENT_JSON)
        else:
            self._send(200, response.SerializeToString(), CONTENT_PROTOBUF)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != HEALTH_PATH:
            self._send(404, b"not found\n", "text/plain")
            return
        if self.server.closing:  # a load balancer or readiness probe stops sending here
            self.close_connection = True
            self._send(503, json.dumps({"status": "stopping"}).encode(), CONTENT_JSON)
            return
        stats = self.server.pipeline.stats()
        body = json.dumps({"status": "ok", **stats}, default=str).encode()
        self._send(200, body, CONTENT_JSON)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)


class OTLPHttpReceiver:
    """Serve OTLP/HTTP on ``host:port`` (port 0 picks a free one) from a daemon thread.

    Args:
        pipeline: Where admitted spans go.
        host: Interface to bind (default loopback; ``0.0.0.0`` in a container).
        port: TCP port.
        max_body_bytes: Largest accepted body, before and after decompression.
        retry_after_s: ``Retry-After`` seconds sent with 503.
    """

    def __init__(
        self,
        pipeline: WorkerPipeline,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        retry_after_s: int = 1,
    ) -> None:
        self._server = _Server((host, port))
        self._server.pipeline = pipeline
        self._server.max_body_bytes = max_body_bytes
        self._server.retry_after_s = retry_after_s
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:4318`` (exporters append ``/v1/traces``)."""
        host = str(self._server.server_address[0])
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Start serving in a daemon thread."""
        self._thread = threading.Thread(target=self._serve, name="evaltrace-worker-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        # Not serve_forever(): its shutdown() waits for the loop without a timeout. This loop checks a flag
        # every _POLL_S, so stop() can wait for it with a deadline.
        server = self._server
        while not server.closing:
            try:
                server.handle_request()
            except Exception:  # handle_request reports a failing request itself; this is the loop's own error
                logger.exception("evaltrace worker: error in the OTLP/HTTP serving loop")

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Refuse new requests (503), close the socket, let admitted requests hand over their spans.

        Every wait is bounded by ``timeout_s``.

        Returns:
            False when an admitted request was still handing spans over at the deadline.
        """
        deadline = time.monotonic() + timeout_s
        self._server.close_admission()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            self._thread = None
        self._server.server_close()
        return self._server.wait_admitted(deadline)
