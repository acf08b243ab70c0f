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

import dataclasses
import importlib
import json
import logging
import socket
import ssl
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
from evaltrace.worker.limits import BudgetExceeded, ByteBudget, ReceiverLimits, Reservation
from evaltrace.worker.pipeline import WorkerPipeline
from evaltrace.worker.security import TlsFiles, TokenAuth

__all__ = ["OTLPHttpReceiver"]

logger = logging.getLogger("evaltrace.worker")

TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/healthz"
# googleapis-common-protos (an OTLP exporter dependency) ships no type information; the class is used untyped.
_Status: Any = importlib.import_module("google.rpc.status_pb2").Status
# google.rpc.Code values for the Status body.
_RPC_CODES = {400: 3, 401: 16, 404: 5, 411: 3, 413: 8, 415: 3, 500: 13, 503: 14}
# How often the serving loop looks at the stop flag; also the longest a stop waits for the loop to notice.
_POLL_S = 0.05
# The answer to a connection over the cap, written by the serving loop itself (no thread is started for it).
_FULL_BODY = b"evaltrace worker: too many connections\n"
_FULL_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: {retry}\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_FULL_BODY), _FULL_BODY)
)
# How long the serving loop may spend writing that answer: the socket buffer of a fresh connection takes it.
_REFUSE_TIMEOUT_S = 0.5
# Over TLS the answer needs a handshake first, which takes round trips (and a slow client's time): it is done on
# threads of its own, at most this many at once (beyond them, a connection over the cap is closed bare), each
# socket operation bounded by this timeout.
_TLS_REFUSERS = 4
_TLS_REFUSE_TIMEOUT_S = 2.0
_MAX_CHUNK_LINE = 1024  # a chunk-size line (hex size and extensions) or a trailer line
_MAX_TRAILERS = 32


class _Reply(Exception):
    """Answer the request now with ``status`` and ``reason``, and close the connection when ``close``."""

    def __init__(self, status: int, reason: str, extra: dict[str, str] | None = None, close: bool = True) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = extra
        self.close = close


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    timeout = _POLL_S  # handle_request() returns after this when idle, so the serving loop sees a stop quickly
    retry_after_s: int

    def __init__(
        self,
        address: tuple[str, int],
        pipeline: WorkerPipeline,
        limits: ReceiverLimits,
        auth: TokenAuth | None,
        tls: ssl.SSLContext | None,
    ) -> None:
        super().__init__(address, _Handler)
        self.limits = limits
        self.max_body_bytes = limits.max_body_bytes
        self.auth = auth
        self.tls = tls
        if tls is not None:
            # The handshake is left to the connection's own thread: done on accept, one client that never
            # finishes it would stall the serving loop and so every other client.
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.pipeline = pipeline
        self.budget: ByteBudget = pipeline.budget  # bytes held from reading a request to exporting its spans
        self.closing = False  # set once, under _admission; read unlocked by the serving loop (a bool read)
        self._admitted = 0
        self._admission = threading.Condition()
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._tls_refusers = threading.BoundedSemaphore(_TLS_REFUSERS)
        self._deadlines: dict[socket.socket, float] = {}
        self._deadlines_lock = threading.Lock()

    # Connection cap: ThreadingHTTPServer starts a thread per connection without limit.
    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refusal(self) -> bytes:
        return _FULL_RESPONSE.replace(b"{retry}", str(self.retry_after_s).encode())

    def _refuse(self, request: socket.socket) -> None:
        """Over the connection cap: a quick 503 + ``Retry-After``, then close.

        Plain HTTP: written by the serving loop itself (no thread). TLS: after the handshake, on one of a few
        short-lived threads, so a client that stalls its handshake cannot hold up the serving loop.
        """
        if self.tls is not None:
            if self._tls_refusers.acquire(blocking=False):
                try:
                    threading.Thread(
                        target=self._refuse_tls, args=(request,), name="evaltrace-worker-refuse", daemon=True
                    ).start()
                    return
                except RuntimeError:  # no thread to be had: close bare, as below
                    self._tls_refusers.release()
            self.shutdown_request(request)
            return
        try:
            request.settimeout(_REFUSE_TIMEOUT_S)
            request.sendall(self._refusal())
            # Read what the client already sent: closing with unread bytes sends a reset, which can make
            # the client lose the 503 it was just sent.
            request.setblocking(False)
            request.recv(65536)
        except OSError:
            pass
        self.shutdown_request(request)

    def _refuse_tls(self, request: ssl.SSLSocket) -> None:
        try:
            request.settimeout(_TLS_REFUSE_TIMEOUT_S)
            request.do_handshake()
            try:
                # The request head comes right after the handshake: read it before answering, as above.
                request.recv(65536)
            except OSError:
                pass  # nothing sent yet (or a timeout): the answer goes anyway
            request.sendall(self._refusal())
            request.setblocking(False)
            request.recv(65536)
        except (OSError, ValueError):  # ssl.SSLError and timeouts are OSErrors; a closed socket a ValueError
            pass
        finally:
            self.shutdown_request(request)
            self._tls_refusers.release()

    # Request deadline: the idle timeout bounds each wait for bytes; this bounds a whole request's reading, so
    # a client trickling one byte per idle period cannot hold a connection (and its thread) for ever.
    def watch(self, connection: socket.socket) -> None:
        """Start the request-reading deadline of ``connection``."""
        with self._deadlines_lock:
            self._deadlines[connection] = time.monotonic() + self.limits.request_timeout_s

    def unwatch(self, connection: socket.socket) -> None:
        """The request was read in time."""
        with self._deadlines_lock:
            self._deadlines.pop(connection, None)

    def cut_overdue(self) -> None:
        """Shut the connections whose request is overdue; their blocked reads return at once."""
        now = time.monotonic()
        with self._deadlines_lock:
            overdue = [c for c, deadline in self._deadlines.items() if deadline <= now]
            for connection in overdue:
                del self._deadlines[connection]
        for connection in overdue:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler

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

    def setup(self) -> None:
        super().setup()
        # StreamRequestHandler.setup applies only the class-wide ``timeout``; the limit is per server.
        self.connection.settimeout(self.server.limits.idle_timeout_s)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            self.server.watch(self.connection)
            try:
                self.connection.do_handshake()
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; a timeout too
                logger.debug("evaltrace worker: TLS handshake with %s failed: %s", self.address_string(), exc)
                return
            finally:
                self.server.unwatch(self.connection)
        super().handle()

    def handle_one_request(self) -> None:
        self.server.watch(self.connection)
        try:
            super().handle_one_request()
        finally:
            self.server.unwatch(self.connection)

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
        except _Reply as reply:
            self.close_connection = self.close_connection or reply.close
            self._error(reply.status, reply.reason, reply.extra)
        except OSError as exc:  # the client went away, stalled past a timeout, or its deadline cut it
            logger.debug("evaltrace worker: connection from %s dropped: %s", self.address_string(), exc)
            self.close_connection = True
        except Exception:
            logger.exception("evaltrace worker: unexpected error handling an export")
            self.close_connection = True
            try:
                self._error(500, "internal error in the evaluation worker")
            except OSError:
                pass

    def _busy(self, reason: str, close: bool = True) -> _Reply:
        retry = str(self.server.retry_after_s)
        return _Reply(503, f"{reason}; retry after {retry}s", {"Retry-After": retry}, close)

    def _check_auth(self) -> None:
        auth = self.server.auth
        if auth is not None and not auth.allows(self.headers.get(auth.header)):
            challenge = {"WWW-Authenticate": "Bearer"} if auth.metadata_key == "authorization" else None
            raise _Reply(401, f"missing or wrong token in the {auth.header} header", challenge)

    def _read_body(self, reservation: Reservation) -> bytes:
        """The request body, counted in ``reservation`` before it is read; over the limits, a ``_Reply``."""
        limit = self.server.max_body_bytes
        transfer = self.headers.get("Transfer-Encoding")
        if transfer is not None:
            if transfer.strip().lower() != "chunked":
                raise _Reply(400, f"unsupported Transfer-Encoding {transfer!r} (use chunked or Content-Length)")
            return self._read_chunked(reservation, limit)
        length_header = self.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            raise _Reply(411, "Content-Length is required")
        length = int(length_header)
        if length > limit:
            # Refused before reading: the unread body is why the connection closes (it would be taken for the
            # next request otherwise).
            raise _Reply(413, f"body of {length} bytes exceeds the limit of {limit}")
        self._reserve(reservation, length)
        raw = self.rfile.read(length)
        if len(raw) < length:
            raise ConnectionError(f"body ended after {len(raw)} of {length} bytes")
        return raw

    def _read_chunked(self, reservation: Reservation, limit: int) -> bytes:
        body = bytearray()
        while True:
            line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
            if not line.endswith(b"\n"):
                raise ConnectionError("chunked body ended or has an over-long chunk-size line")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Reply(400, f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise _Reply(400, f"bad chunk size line {line[:40]!r}")
            if size == 0:
                break
            if len(body) + size > limit:
                raise _Reply(413, f"chunked body exceeds the limit of {limit} bytes")
            self._reserve(reservation, size)
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(_MAX_CHUNK_LINE + 1).strip():
                raise ConnectionError("chunked body ended early or a chunk is not followed by CRLF")
            body += chunk
        for _ in range(_MAX_TRAILERS):  # trailers, up to the blank line that ends the body
            if not self.rfile.readline(_MAX_CHUNK_LINE + 1).strip():
                return bytes(body)
        raise _Reply(400, "too many trailer lines after the chunked body")

    def _reserve(self, reservation: Reservation, amount: int) -> None:
        try:
            reservation.grow(amount)
        except BudgetExceeded as exc:
            raise self._busy(f"evaluation worker memory budget in use ({exc})") from None

    def _post(self) -> None:
        self._check_auth()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path != TRACES_PATH:
            raise _Reply(404, f"unknown path {path!r}; OTLP traces go to {TRACES_PATH}")
        server = self.server
        with server.budget.reservation() as reservation:
            raw = self._read_body(reservation)
            server.unwatch(self.connection)  # read in time; what follows is the worker's own work
            try:
                body = decode_body(raw, self.headers.get("Content-Encoding"), server.max_body_bytes, reservation)
                del raw  # the compressed copy is not needed any more
                request = parse_request(body, self.headers.get("Content-Type"), server.limits.max_json_depth)
                payload_bytes = len(body)
                del body
                spans = spans_from_request(request)
            except PayloadError as exc:
                # Whole body read: the connection stays usable, except after a refused bomb (nothing unread
                # either, but a sender of one deserves no further reads).
                raise _Reply(exc.status, exc.reason, close=exc.status == 413) from None
            except BudgetExceeded as exc:
                raise self._busy(f"evaluation worker memory budget in use ({exc})") from None
            if not server.admit():
                raise self._busy("evaluation worker shutting down")
            try:
                # The request's bytes go on being held by its spans until they are exported.
                accepted = server.pipeline.submit(spans, reservation, payload_bytes)
            finally:
                server.release()
        if not accepted:
            if server.pipeline.closed:
                raise self._busy("evaluation worker shutting down")
            limit = server.pipeline.max_inflight_spans
            raise self._busy(f"evaluation queue full ({limit} spans in flight)", close=False)
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
        body = json.dumps({"status": "ok", **self.server.pipeline.stats()}, default=str).encode()
        self._send(200, body, CONTENT_JSON)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)


class OTLPHttpReceiver:
    """Serve OTLP/HTTP on ``host:port`` (port 0 picks a free one) from a daemon thread.

    Args:
        pipeline: Where admitted spans go.
        host: Interface to bind (default loopback; ``0.0.0.0`` in a container).
        port: TCP port.
        max_body_bytes: Largest accepted body, before and after decompression (overrides ``limits``).
        retry_after_s: ``Retry-After`` seconds sent with 503.
        limits: Connection, time and body bounds (defaults: :class:`ReceiverLimits`); the bytes in flight are
            bounded by ``pipeline.budget``, shared with the pipeline and the gRPC receiver.
        auth: A token every export must carry (``/healthz`` needs none); None accepts any sender.
        tls: Certificate and key to serve HTTPS; None serves plain HTTP.
    """

    def __init__(
        self,
        pipeline: WorkerPipeline,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        max_body_bytes: int | None = None,
        retry_after_s: int = 1,
        limits: ReceiverLimits | None = None,
        auth: TokenAuth | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        limits = limits or ReceiverLimits()
        if max_body_bytes is not None:
            limits = dataclasses.replace(limits, max_body_bytes=max_body_bytes)
        context = tls.server_context() if tls is not None else None
        self._server = _Server((host, port), pipeline, limits, auth, context)
        self._server.retry_after_s = retry_after_s
        self._thread: threading.Thread | None = None

    @property
    def budget(self) -> ByteBudget:
        """Bytes in flight: requests being read, spans not yet exported (the pipeline's, shared with gRPC)."""
        return self._server.budget

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:4318`` (exporters append ``/v1/traces``)."""
        host = str(self._server.server_address[0])
        scheme = "https" if self._server.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}"

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
                server.cut_overdue()
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
