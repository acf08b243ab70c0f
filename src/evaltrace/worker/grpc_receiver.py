"""OTLP/gRPC trace receiver for the worker (the collector's ``loadbalancing`` exporter speaks only gRPC).

Status codes follow the OTLP/gRPC specification: ``INVALID_ARGUMENT`` for a request whose spans cannot be
rebuilt (not retryable) and ``UNAVAILABLE`` when the worker is full (retryable, so the sender backs off).
"""

from __future__ import annotations

import logging
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evaltrace.worker.decode import PayloadError, spans_from_request
from evaltrace.worker.pipeline import WorkerPipeline

__all__ = ["OTLPGrpcReceiver"]

logger = logging.getLogger("evaltrace.worker")
_MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the collector's default max_recv_msg_size_mib


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, pipeline: WorkerPipeline) -> None:
        self._pipeline = pipeline

    def Export(self, request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        try:
            spans = spans_from_request(request)
        except PayloadError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.reason)
        if not self._pipeline.submit(spans):
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
    """

    def __init__(self, pipeline: WorkerPipeline, host: str = "127.0.0.1", port: int = 4317, max_workers: int = 4):
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="evaltrace-worker-grpc")
        self._server = grpc.server(self._executor, options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(pipeline), self._server
        )
        self.port = self._server.add_insecure_port(f"{host}:{port}")
        self.host = host

    @property
    def endpoint(self) -> str:
        """``http://host:port`` as the OTLP gRPC exporter expects it."""
        return f"http://{self.host}:{self.port}"

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
