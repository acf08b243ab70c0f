"""The worker's evaluation pipeline: admission control in front of an ``EvaluationSpanProcessor``.

A received span is *in flight* from its admission until the processor forwards it downstream (enriched, or
unenriched when evaluation outlasts the hold deadline). A tap processor placed first downstream sees it leave.
When admitting a request would exceed ``max_inflight_spans``, the whole request is refused (the receiver answers
503 / UNAVAILABLE and the sender retries later) instead of being evaluated partially or dropped silently.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.export_queue import ExportQueue
from evaltrace.config import LOCAL_STORE_MAX_BATCH, LOCAL_STORE_MAX_QUEUE
from evaltrace.evaluation import EvaluationSpanProcessor
from evaltrace.evaluation.sinks.local_store import with_session_store
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.worker.decode import span_keys

__all__ = ["WorkerPipeline"]

DEFAULT_MAX_INFLIGHT = 4096
DEFAULT_HOLD_TIMEOUT_S = 10.0


class _Tap(SpanProcessor):
    """First downstream processor: marks spans as no longer in flight."""

    def __init__(self, pipeline: WorkerPipeline) -> None:
        self._pipeline = pipeline

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Received spans are never started here."""

    def on_end(self, span: ReadableSpan) -> None:
        """Release the span's slot."""
        if span.context is not None:
            self._pipeline._release((span.context.trace_id, span.context.span_id))

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing buffered."""
        return True


def _export_queue(exporter: SpanExporter, taken: set[str]) -> ExportQueue:
    """Put ``exporter`` behind an :class:`ExportQueue` named uniquely among ``taken``.

    Not the SDK's ``BatchSpanProcessor``: ours keeps to the worker's stop deadline (the SDK's joins its thread
    for up to 30 s whatever the deadline) and counts every span it loses in ``stats()`` (served at ``/healthz``).
    """
    if isinstance(exporter, LocalStoreExporter):
        # As configure() sets up the local store: a burst the disk absorbs on average loses nothing, and
        # 0.5 s batches bound what a SIGKILL loses.
        name = "local_store"
        options: dict[str, Any] = {"max_queue_size": LOCAL_STORE_MAX_QUEUE, "max_batch_size": LOCAL_STORE_MAX_BATCH}
        options["schedule_delay_s"] = 0.5
    else:
        name = "otlp" if "otlp" in type(exporter).__module__ else type(exporter).__name__
        options = {}
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}-{n}"
    taken.add(unique)
    return ExportQueue(exporter, unique, **options)


class WorkerPipeline:
    """Evaluate received spans and forward the enriched copies to exporters.

    Args:
        evaluators: Evaluators or ``EvaluatorSpec`` objects.
        sinks: Score sinks.
        exporters: Span exporters for the (enriched) spans.
        max_inflight_spans: Spans admitted and not yet forwarded before requests are refused.
        batch: Export in batches from a bounded, counted queue (default) or synchronously.
        stale_after_s: A span still in flight after this long is forgotten (it can no longer block admission).
        evaluation_options: Further ``EvaluationSpanProcessor`` options; ``hold_timeout_s`` defaults to 10 s
            because a worker exists to enrich spans, and ``max_queue_size`` to ``max_inflight_spans``.
    """

    def __init__(
        self,
        evaluators: Sequence[Any],
        sinks: Sequence[Any] = (),
        exporters: Sequence[SpanExporter] = (),
        *,
        max_inflight_spans: int = DEFAULT_MAX_INFLIGHT,
        batch: bool = True,
        stale_after_s: float | None = None,
        evaluation_options: dict[str, Any] | None = None,
    ) -> None:
        options = {"hold_timeout_s": DEFAULT_HOLD_TIMEOUT_S, "max_queue_size": max_inflight_spans}
        options.update(evaluation_options or {})
        self.max_inflight_spans = max_inflight_spans
        self._stale_after_s = stale_after_s or float(options["hold_timeout_s"]) + 60.0
        self._inflight: dict[tuple[int, int], float] = {}
        self._lock = threading.Condition()
        self.accepted = 0
        self.refused = 0
        downstream: list[SpanProcessor] = [_Tap(self)]
        names: set[str] = set()
        downstream += [_export_queue(e, names) if batch else SimpleSpanProcessor(e) for e in exporters]
        # Session scores belong to no span: a local store among the exporters gets them through its own sink.
        store = next((e.directory for e in exporters if isinstance(e, LocalStoreExporter)), None)
        sinks = with_session_store(sinks, store, evaluators)
        self.processor = EvaluationSpanProcessor(
            downstream=downstream, evaluators=list(evaluators), sinks=list(sinks), **options
        )

    @property
    def inflight(self) -> int:
        """Spans admitted and not yet forwarded downstream."""
        with self._lock:
            return len(self._inflight)

    def _release(self, key: tuple[int, int]) -> None:
        with self._lock:
            if self._inflight.pop(key, None) is not None and not self._inflight:
                self._lock.notify_all()

    def _evict_stale(self, now: float) -> None:
        stale = [key for key, admitted in self._inflight.items() if now - admitted > self._stale_after_s]
        for key in stale:
            del self._inflight[key]

    def submit(self, spans: Sequence[ReadableSpan]) -> bool:
        """Admit and evaluate ``spans`` (all or none); False when they would exceed the in-flight limit."""
        keys = span_keys(spans)
        now = time.monotonic()
        with self._lock:
            if len(self._inflight) + len(keys) > self.max_inflight_spans:
                self._evict_stale(now)
            if len(self._inflight) + len(keys) > self.max_inflight_spans:
                self.refused += len(keys)
                return False
            self._inflight.update(dict.fromkeys(keys, now))
            self.accepted += len(keys)
        for span in spans:
            try:
                self.processor.on_end(span)  # O(1): forwards or enqueues, never blocks
            except Exception:
                log_internal_error("handing a received span to the evaluation processor")
        return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every admitted span has been forwarded; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Finish evaluations, deliver scores, flush exporters."""
        return self.processor.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Drain evaluations, sinks and exporters within the deadline."""
        self.processor.shutdown(timeout_millis)

    def stats(self) -> dict[str, Any]:
        """Admission counters plus the evaluation processor's stats."""
        return {
            "inflight": self.inflight,
            "max_inflight_spans": self.max_inflight_spans,
            "accepted_spans": self.accepted,
            "refused_spans": self.refused,
            "evaluation": self.processor.stats(),
        }
