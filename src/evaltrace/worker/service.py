"""``EvaluationWorker``: the receivers and the evaluation pipeline of ``evaltrace worker``, started and stopped together."""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace.worker.grpc_receiver import OTLPGrpcReceiver
from evaltrace.worker.http_receiver import DEFAULT_MAX_BODY_BYTES, OTLPHttpReceiver
from evaltrace.worker.pipeline import DEFAULT_MAX_INFLIGHT, WorkerPipeline

__all__ = ["EvaluationWorker"]


class EvaluationWorker:
    """Receive OTLP spans, evaluate them, forward enriched spans to exporters and scores to sinks.

    Example::

        with EvaluationWorker(evaluators=[NoPII()], sinks=[JsonlScoreSink("scores.jsonl")],
                              exporters=[OTLPSpanExporter("http://jaeger:4318/v1/traces")], port=4318) as worker:
            worker.wait()

    Args:
        evaluators: Evaluators or ``EvaluatorSpec`` objects.
        sinks: Score sinks.
        exporters: Exporters for the enriched spans.
        host: Interface for both receivers.
        port: OTLP/HTTP port (0: any free port).
        grpc_port: OTLP/gRPC port; None serves HTTP only.
        max_inflight_spans: Spans admitted and not yet forwarded before senders get 503 / UNAVAILABLE.
        retry_after_s: ``Retry-After`` sent with 503.
        max_body_bytes: Largest OTLP/HTTP body accepted.
        batch: Batch exports (default) or export each span synchronously.
        evaluation_options: Further ``EvaluationSpanProcessor`` options.
    """

    def __init__(
        self,
        evaluators: Sequence[Any],
        sinks: Sequence[Any] = (),
        exporters: Sequence[SpanExporter] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 4318,
        grpc_port: int | None = None,
        max_inflight_spans: int = DEFAULT_MAX_INFLIGHT,
        retry_after_s: int = 1,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        batch: bool = True,
        evaluation_options: dict[str, Any] | None = None,
    ) -> None:
        self.pipeline = WorkerPipeline(
            evaluators,
            sinks,
            exporters,
            max_inflight_spans=max_inflight_spans,
            batch=batch,
            evaluation_options=evaluation_options,
        )
        try:
            self.http = OTLPHttpReceiver(
                self.pipeline, host, port, max_body_bytes=max_body_bytes, retry_after_s=retry_after_s
            )
            self.grpc = OTLPGrpcReceiver(self.pipeline, host, grpc_port) if grpc_port is not None else None
        except BaseException:
            self.pipeline.shutdown(1000)
            raise
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """OTLP/HTTP base URL (exporters append ``/v1/traces``)."""
        return self.http.url

    def start(self) -> EvaluationWorker:
        """Start both receivers."""
        self.http.start()
        if self.grpc is not None:
            self.grpc.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Refuse new requests, then drain evaluations, sinks and exporters within ``timeout_s``."""
        if self._stopped.is_set():
            return
        self.http.stop()
        if self.grpc is not None:
            self.grpc.stop(grace_s=min(5.0, timeout_s / 2))
        self.pipeline.shutdown(int(timeout_s * 1000))
        self._stopped.set()

    def wait(self) -> None:
        """Block until SIGINT or SIGTERM (main thread only), then stop."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            threading.Thread(target=self.stop, name="evaltrace-worker-stop", daemon=True).start()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self._stopped.wait()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Finish evaluations, deliver scores and flush exporters."""
        return self.pipeline.force_flush(timeout_millis)

    def stats(self) -> dict[str, Any]:
        """Admission and evaluation counters (also served at ``GET /healthz``)."""
        return self.pipeline.stats()

    def __enter__(self) -> EvaluationWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
