"""``EvaluationWorker``: the receivers and the evaluation pipeline of ``evaltrace worker``, started and stopped together."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace.worker import judges
from evaltrace.worker.http_receiver import OTLPHttpReceiver
from evaltrace.worker.limits import ReceiverLimits
from evaltrace.worker.pipeline import WorkerPipeline
from evaltrace.worker.security import TlsFiles, TokenAuth

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from evaltrace.worker.grpc_receiver import OTLPGrpcReceiver

__all__ = ["EvaluationWorker"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The longest the main thread sleeps between two looks at the stop flag. Python runs a signal handler only on
# the main thread, between two bytecodes: when the kernel hands the signal to another thread (it may pick any
# thread that does not block it), nothing wakes a main thread blocked without a timeout.
_SIGNAL_POLL_S = 0.05
# Receivers get this long (at most half the stop timeout) to finish requests already admitted.
_RECEIVER_GRACE_S = 2.0


class EvaluationWorker:
    """Receive OTLP spans, evaluate them, forward enriched spans to exporters and scores to sinks.

    Example::

        with EvaluationWorker(evaluators=[NoPII()], sinks=[JsonlScoreSink("scores.jsonl")],
                              exporters=[OTLPSpanExporter("http://jaeger:4318/v1/traces")], port=4318) as worker:
            worker.wait()  # until SIGTERM or SIGINT, then drains within 30 s

    Args:
        evaluators: Evaluators or ``EvaluatorSpec`` objects.
        sinks: Score sinks.
        exporters: Exporters for the enriched spans.
        host: Interface for both receivers.
        port: OTLP/HTTP port (0: any free port).
        grpc_port: OTLP/gRPC port; None serves HTTP only.
        max_inflight_spans: Optionally, spans admitted and not yet exported before senders get 503 /
            UNAVAILABLE (a request alone is always admitted); None (default): ``limits.max_inflight_bytes``
            alone bounds the work in flight.
        retry_after_s: ``Retry-After`` sent with 503.
        max_body_bytes: Largest body or gRPC message accepted (overrides ``limits``).
        batch: Batch exports (default) or export each span synchronously.
        evaluation_options: Further ``EvaluationSpanProcessor`` options.
        limits: Connections, timeouts, body size of both receivers, and the bytes in flight (requests being
            read, spans not yet exported).
        auth: A token every export must carry; None accepts any sender.
        tls: Certificate and key to serve both receivers over TLS.
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
        max_inflight_spans: int | None = None,
        retry_after_s: int = 1,
        max_body_bytes: int | None = None,
        batch: bool = True,
        evaluation_options: dict[str, Any] | None = None,
        limits: ReceiverLimits | None = None,
        auth: TokenAuth | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        limits = limits or ReceiverLimits()
        if max_body_bytes is not None:
            limits = dataclasses.replace(limits, max_body_bytes=max_body_bytes)
        self.pipeline = WorkerPipeline(
            evaluators,
            sinks,
            exporters,
            max_inflight_bytes=limits.max_inflight_bytes,
            max_inflight_spans=max_inflight_spans,
            batch=batch,
            evaluation_options=evaluation_options,
        )
        try:
            self.http = OTLPHttpReceiver(
                self.pipeline, host, port, retry_after_s=retry_after_s, limits=limits, auth=auth, tls=tls
            )
            self.grpc: OTLPGrpcReceiver | None = None
            if grpc_port is not None:
                # Imported here: grpc is the largest import of the worker, and HTTP-only workers never need it.
                from evaltrace.worker.grpc_receiver import OTLPGrpcReceiver

                self.grpc = OTLPGrpcReceiver(self.pipeline, host, grpc_port, limits=limits, auth=auth, tls=tls)
        except BaseException:
            self.pipeline.shutdown(1000)
            raise
        self.signal_received: int | None = None
        self._judges: TracerProvider | None = None  # the provider of the worker's own judge traces, while it runs
        self._stop_lock = threading.Lock()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """OTLP/HTTP base URL (exporters append ``/v1/traces``)."""
        return self.http.url

    def start(self) -> EvaluationWorker:
        """Start both receivers (and trace the worker's judge calls to its exporters, see ``worker/judges.py``)."""
        self._judges = judges.install(self.pipeline.processor)
        self.http.start()
        if self.grpc is not None:
            self.grpc.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Refuse new requests, then drain evaluations, sinks and exporters; every wait bounded by ``timeout_s``.

        Requests already admitted hand their spans over, evaluations finish (those still running at the
        deadline are cancelled and their spans forwarded unenriched), scores reach the sinks (or their
        dead-letter files) and exporters flush. The evaluation processor's fixed clean-up steps may add about
        three seconds past a deadline that running evaluations used up; nothing waits without a bound.
        Acknowledged spans that were not delivered by then are counted in ``stats()["undelivered_spans"]``.
        """
        deadline = time.monotonic() + timeout_s
        if not self._stop_lock.acquire(timeout=max(0.0, timeout_s)):
            return  # another thread is stopping the worker, within its own deadline
        try:
            if self._stopped.is_set():
                return
            grace = min(_RECEIVER_GRACE_S, timeout_s / 2)
            self.http.stop(grace)
            if self.grpc is not None:
                self.grpc.stop(grace_s=max(0.0, min(grace, deadline - time.monotonic())))
            # A gRPC call cancelled at the grace may still be handing spans over: nothing is admitted from now
            # on, and the drain starts once what was admitted is in.
            self.pipeline.close(max(0.0, min(grace, deadline - time.monotonic())))
            self.pipeline.shutdown(max(0, int((deadline - time.monotonic()) * 1000)))
            judges.uninstall(self._judges)
            self._judges = None
            self._stopped.set()
        finally:
            self._stop_lock.release()

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT request a stop; main thread only.

        Call it before :meth:`start`: once the port answers, a supervisor may signal at any moment, and under
        the default disposition SIGTERM would kill the worker with everything it holds in memory.
        """
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Records the signal and nothing else. A handler runs between two bytecodes of the main thread, which
        # may hold a lock at that moment (inside Event.wait, a logging handler...): taking any lock here could
        # deadlock, and blocking work would stall whatever the main thread was doing. A repeated signal (a
        # wrapper such as `uv run` forwards Ctrl-C on top of the terminal's own) changes nothing: the drain is
        # bounded anyway; SIGKILL is there for not waiting.
        self.signal_received = signum

    def wait_for_signal(self) -> int | None:
        """Block until SIGTERM or SIGINT arrives (or :meth:`stop` runs elsewhere); main thread only.

        Installs the handlers when :meth:`install_signal_handlers` was not called.

        Returns:
            The signal received, or None when another thread stopped the worker.
        """
        if signal.getsignal(signal.SIGTERM) != self._on_signal:
            self.install_signal_handlers()
        while self.signal_received is None and not self._stopped.is_set():
            # A sleep, not Event.wait: no lock, no untimed wait (see _SIGNAL_POLL_S); a signal, or a stop by
            # another thread, is noticed within one poll.
            time.sleep(_SIGNAL_POLL_S)
        return self.signal_received

    def wait(self, timeout_s: float = 30.0) -> int | None:
        """Block until SIGINT or SIGTERM (main thread only), then :meth:`stop` within ``timeout_s``.

        Returns:
            The signal received, or None when another thread stopped the worker.
        """
        signum = self.wait_for_signal()
        self.stop(timeout_s)
        return signum

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
