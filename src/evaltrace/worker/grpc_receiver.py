"""OTLP/gRPC trace receiver for the worker (the collector's ``loadbalancing`` exporter speaks only gRPC).

Status codes follow the OTLP/gRPC specification: ``INVALID_ARGUMENT`` for a request whose spans cannot be
rebuilt (not retryable) and ``UNAVAILABLE`` when the worker is full (retryable, so the sender backs off).
Limits are gRPC's own: messages over ``max_body_bytes`` get ``RESOURCE_EXHAUSTED`` before they are decoded,
calls beyond ``max_connections`` at once get ``RESOURCE_EXHAUSTED``, idle connections are closed after
``idle_timeout_s``; without the token, calls get ``UNAUTHENTICATED``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evaltrace.worker.decode import PayloadError, spans_from_request
from evaltrace.worker.limits import BudgetExceeded, ReceiverLimits
from evaltrace.worker.pipeline import WorkerPipeline
from evaltrace.worker.security import TlsFiles, TokenAuth

__all__ = ["OTLPGrpcReceiver"]

logger = logging.getLogger("evaltrace.worker")


class _TokenInterceptor(grpc.ServerInterceptor):
    """Refuse, before the request is even decoded, every call without the token in its metadata."""

    def __init__(self, auth: TokenAuth) -> None:
        self._auth = auth
        key = auth.metadata_key

        def deny(request: Any, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"missing or wrong token in the {key} metadata")

        self._deny: grpc.RpcMethodHandler[Any, None] = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        metadata = handler_call_details.invocation_metadata or ()
        value = next((str(v) for k, v in metadata if k.lower() == self._auth.metadata_key), None)
        if self._auth.allows(value):
            return continuation(handler_call_details)
        return self._deny


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, pipeline: WorkerPipeline) -> None:
        self._pipeline = pipeline

    def Export(self, request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        # The message is decoded already; the budget bounds how many are turned into spans at once (the step
        # that multiplies their size), then holds the bytes until the spans are exported.
        with self._pipeline.budget.reservation() as reservation:
            size = request.ByteSize()
            try:
                reservation.grow(size)
            except BudgetExceeded as exc:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"evaluation worker memory budget in use ({exc})")
            try:
                spans = spans_from_request(request)
            except PayloadError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.reason)
            accepted = self._pipeline.submit(spans, reservation, size)
        if not accepted:
            if self._pipeline.closed:
                context.abort(grpc.StatusCode.UNAVAILABLE, "evaluation worker shutting down")
            limit = self._pipeline.max_inflight_spans
            context.abort(grpc.StatusCode.UNAVAILABLE, f"evaluation queue full ({limit} spans in flight)")
        return ExportTraceServiceResponse()


class OTLPGrpcReceiver:
    """Serve OTLP/gRPC on ``host:port`` (port 0 picks a free one).

    Args:
        pipeline: Where admitted spans go.
        host: Interface to bind.
        port: TCP port.
        max_workers: Threads handling requests.
        limits: Message size, concurrent calls and idle time (defaults: :class:`ReceiverLimits`); bytes in
            flight are bounded by ``pipeline.budget``, shared with the HTTP receiver.
        auth: A token every call must carry in its metadata; None accepts any sender.
        tls: Certificate and key to serve over TLS; None serves plaintext.
    """

    def __init__(
        self,
        pipeline: WorkerPipeline,
        host: str = "127.0.0.1",
        port: int = 4317,
        max_workers: int = 4,
        *,
        limits: ReceiverLimits | None = None,
        auth: TokenAuth | None = None,
        tls: TlsFiles | None = None,
    ):
        limits = limits or ReceiverLimits()
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="evaltrace-worker-grpc")
        options = [
            ("grpc.max_receive_message_length", limits.max_body_bytes),
            ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
        ]
        self._server = grpc.server(
            self._executor,
            interceptors=[_TokenInterceptor(auth)] if auth is not None else None,
            options=options,
            maximum_concurrent_rpcs=limits.max_connections,
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(pipeline), self._server
        )
        address = f"{host}:{port}"
        if tls is not None:
            credentials = grpc.ssl_server_credentials([tls.grpc_pair()])
            self.port = self._server.add_secure_port(address, credentials)
        else:
            self.port = self._server.add_insecure_port(address)
        self.host = host
        self.tls = tls is not None

    @property
    def endpoint(self) -> str:
        """``http://host:port`` (``https://`` with TLS) as the OTLP gRPC exporter expects it."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self, grace_s: float = 5.0) -> bool:
        """Refuse new calls at once, let running ones finish for up to ``grace_s``; returns False past it.

        The server does not shut the executor it was given, and ``ThreadPoolExecutor`` threads are joined at
        interpreter exit: shut it here, without waiting (a call still running past the grace was cancelled).
        """
        stopped = self._server.stop(grace_s).wait(grace_s + 0.5)
        self._executor.shutdown(wait=False, cancel_futures=True)
        return stopped
