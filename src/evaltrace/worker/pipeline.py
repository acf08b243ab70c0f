"""The worker's evaluation pipeline: admission control in front of an ``EvaluationSpanProcessor``.

A received span is *in flight* from its admission until every exporter has finished with it (exported it, or
failed to). Work in flight is bounded by bytes, not by spans: the request's bytes, counted in the receivers'
:class:`~evaltrace.worker.limits.ByteBudget` while it is read and decoded, are handed to the pipeline with its
spans (each span holds an equal share of the decoded payload) and given back as each span leaves. A request
that finds the budget in use is refused (the receiver answers 503 / UNAVAILABLE and the sender retries later);
a request alone is always admitted, whatever its size, so a collector's 8,192-span batch never retries for ever.
Holding spans until they are exported, not merely forwarded, makes a slow downstream push back on senders
instead of piling spans up in export queues that a shutdown deadline cannot drain.

Every acknowledged span is accounted for: :meth:`WorkerPipeline.undelivered` counts those that no exporter
confirmed (an export that failed, a span still queued or being exported when the worker stopped), and
:attr:`WorkerPipeline.sampled_out` those export sampling discarded (done with at once: they free their bytes).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.export_queue import ExportQueue
from evaltrace.config import LOCAL_STORE_MAX_BATCH
from evaltrace.evaluation import EvaluationSpanProcessor
from evaltrace.evaluation.sinks.local_store import with_session_store
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.worker.decode import span_keys
from evaltrace.worker.limits import DEFAULT_MAX_INFLIGHT_BYTES, ByteBudget, Reservation

__all__ = ["WorkerPipeline"]

DEFAULT_HOLD_TIMEOUT_S = 10.0
# Queues behind admission (evaluation, export) are bounded by the byte budget in front of them; a count of
# their own could only drop spans the worker has already acknowledged. The largest a multiprocessing queue takes.
_UNBOUNDED = 2**31 - 1

_Key = tuple[int, int]


class _Held:
    """One admitted span: when, how many bytes of the budget, how many steps (forward, each export) still to go."""

    __slots__ = ("admitted", "failed", "pending", "size")

    def __init__(self, admitted: float, size: int, pending: int) -> None:
        self.admitted = admitted
        self.size = size
        self.pending = pending
        self.failed = False


class _Tap(SpanProcessor):
    """First downstream processor: the span has been forwarded (with no exporter, it is done)."""

    def __init__(self, pipeline: WorkerPipeline) -> None:
        self._pipeline = pipeline

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Received spans are never started here."""

    def on_end(self, span: ReadableSpan) -> None:
        """Count the forwarding step of the span."""
        self._pipeline._settle(span_keys([span]), ok=True)

    def on_sampled_out(self, span: ReadableSpan) -> None:
        """Export sampling discarded the span: no step of it is to come."""
        self._pipeline._sampled_out(span_keys([span]))

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing buffered."""
        return True


class _Settling(SpanExporter):
    """Wrap an exporter: after each export, the spans' step for this exporter is done (confirmed or failed)."""

    def __init__(self, exporter: SpanExporter, pipeline: WorkerPipeline) -> None:
        self.exporter = exporter
        self._pipeline = pipeline
        if getattr(exporter, "on_lost", False) is None:  # heard even without an ExportQueue (batch=False)
            self.on_lost = None

    # The local store reports spans it lost after a SUCCESS (its writer process died, or was stopped at the
    # deadline with batches it had not written) through ``on_lost``, which ExportQueue sets: the pipeline
    # counts them too, or a stop would report them delivered.
    @property
    def on_lost(self) -> Any:
        """The wrapped exporter's ``on_lost`` hook (AttributeError when it has none)."""
        return self.exporter.on_lost  # type: ignore[attr-defined]

    @on_lost.setter
    def on_lost(self, hook: Callable[[int, str], None] | None) -> None:
        pipeline = self._pipeline

        def lost(spans: int, cause: str) -> None:
            pipeline._lost_after_export(spans)
            if hook is not None:
                hook(spans, cause)

        self.exporter.on_lost = lost  # type: ignore[attr-defined]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export, then settle the spans' step for this exporter."""
        ok = False
        try:
            result = self.exporter.export(spans)
            ok = result is SpanExportResult.SUCCESS
            return result
        finally:
            self._pipeline._settle(span_keys(spans), ok=ok)

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Shut the wrapped exporter down (within ``timeout_millis`` when it takes one)."""
        if timeout_millis is not None and "timeout_millis" in inspect.signature(self.exporter.shutdown).parameters:
            self.exporter.shutdown(timeout_millis=timeout_millis)  # type: ignore[call-arg]
        else:
            self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return self.exporter.force_flush(timeout_millis)


def _export_queue(exporter: SpanExporter, taken: set[str], pipeline: WorkerPipeline) -> ExportQueue:
    """Put ``exporter`` behind an :class:`ExportQueue` named uniquely among ``taken``.

    Not the SDK's ``BatchSpanProcessor``: ours keeps to the worker's stop deadline (the SDK's joins its thread
    for up to 30 s whatever the deadline) and counts every span it loses in ``stats()`` (served at ``/healthz``).
    """
    # No count or byte limit of its own: what it holds is admitted, and admission is bounded by bytes until
    # exported (a byte cap here would drop spans the worker already acknowledged; 0 turns it off).
    options: dict[str, Any] = {"max_queue_size": _UNBOUNDED, "max_queue_bytes": 0}
    if isinstance(exporter, LocalStoreExporter):
        # As configure() sets up the local store: 0.5 s batches bound what a SIGKILL loses.
        name = "local_store"
        options.update(max_batch_size=LOCAL_STORE_MAX_BATCH, schedule_delay_s=0.5)
    else:
        name = "otlp" if "otlp" in type(exporter).__module__ else type(exporter).__name__
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}-{n}"
    taken.add(unique)
    return ExportQueue(_Settling(exporter, pipeline), unique, **options)


class WorkerPipeline:
    """Evaluate received spans and forward the enriched copies to exporters.

    Args:
        evaluators: Evaluators or ``EvaluatorSpec`` objects.
        sinks: Score sinks.
        exporters: Span exporters for the (enriched) spans.
        max_inflight_bytes: Bytes of requests being read and of spans admitted and not yet exported, beyond
            which requests are refused; a request alone is always admitted. The receivers count in the same
            :attr:`budget`.
        max_inflight_spans: Optionally, spans admitted and not yet exported beyond which requests are refused
            (a request alone is always admitted); None (default): bytes alone bound the work in flight.
        batch: Export in batches from a counted queue (default) or synchronously.
        stale_after_s: A span still in flight after this long is given up on (it no longer holds the budget,
            and counts as undelivered).
        evaluation_options: Further ``EvaluationSpanProcessor`` options; ``hold_timeout_s`` defaults to 10 s
            because a worker exists to enrich spans.
    """

    def __init__(
        self,
        evaluators: Sequence[Any],
        sinks: Sequence[Any] = (),
        exporters: Sequence[SpanExporter] = (),
        *,
        max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES,
        max_inflight_spans: int | None = None,
        batch: bool = True,
        stale_after_s: float | None = None,
        evaluation_options: dict[str, Any] | None = None,
    ) -> None:
        for name, value in (("max_inflight_bytes", max_inflight_bytes), ("max_inflight_spans", max_inflight_spans)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        # The evaluation queue must never turn away (forward unevaluated) what admission accepted, a request
        # over max_inflight_spans taken alone included.
        options = {"hold_timeout_s": DEFAULT_HOLD_TIMEOUT_S, "max_queue_size": _UNBOUNDED}
        options.update(evaluation_options or {})
        self.budget = ByteBudget(max_inflight_bytes, reclaim=self._reclaim)
        self.max_inflight_spans = max_inflight_spans
        self._stale_after_s = stale_after_s or float(options["hold_timeout_s"]) + 60.0
        self._inflight: dict[_Key, _Held] = {}
        self._steps = 1 + len(exporters)  # forwarded, then exported by each exporter
        self._lock = threading.Condition()
        self._closed = False
        self._submitting = 0
        self.accepted = 0
        self.refused = 0
        self.export_failed = 0  # acknowledged spans an exporter failed to export
        self.given_up = 0  # acknowledged spans still in flight after stale_after_s
        self.lost_after_export = 0  # acknowledged spans an exporter lost after reporting them exported
        self.sampled_out = 0  # acknowledged spans export sampling discarded: never to be exported, not undelivered
        downstream: list[SpanProcessor] = [_Tap(self)]
        names: set[str] = set()
        for exporter in exporters:
            downstream.append(
                _export_queue(exporter, names, self) if batch else SimpleSpanProcessor(_Settling(exporter, self))
            )
        # Session scores belong to no span: a local store among the exporters gets them through its own sink.
        store = next((e.directory for e in exporters if isinstance(e, LocalStoreExporter)), None)
        sinks = with_session_store(sinks, store, evaluators)
        self.processor = EvaluationSpanProcessor(
            downstream=downstream, evaluators=list(evaluators), sinks=list(sinks), **options
        )

    @property
    def inflight(self) -> int:
        """Spans admitted and not yet exported."""
        with self._lock:
            return len(self._inflight)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has begun: nothing is admitted any more."""
        return self._closed

    def _settle(self, keys: Sequence[_Key], *, ok: bool) -> None:
        """One step (forwarding, or one exporter's export) of these spans is done; the last one frees them."""
        with self._lock:
            freed = 0
            for key in keys:
                held = self._inflight.get(key)
                if held is None:  # a re-sent duplicate, an evaluation's own span, or given up on already
                    continue
                held.failed = held.failed or not ok
                held.pending -= 1
                if held.pending <= 0:
                    del self._inflight[key]
                    freed += held.size
                    self.export_failed += held.failed
            if freed:
                self.budget.give_back(freed)
            if not self._inflight:
                self._lock.notify_all()

    def _sampled_out(self, keys: Sequence[_Key]) -> None:
        """Export sampling discarded these spans: every step left is done, none of them failed."""
        with self._lock:
            freed = 0
            for key in keys:
                held = self._inflight.pop(key, None)
                if held is not None:  # not an evaluation's own span, nor one given up on already
                    freed += held.size
                    self.sampled_out += 1
            if freed:
                self.budget.give_back(freed)
            if not self._inflight:
                self._lock.notify_all()

    def _lost_after_export(self, spans: int) -> None:
        with self._lock:
            self.lost_after_export += spans

    def _evict_stale(self, now: float) -> None:
        # Admission order is insertion order: the stale spans are the first ones.
        stale: list[_Key] = []
        for key, held in self._inflight.items():
            if now - held.admitted <= self._stale_after_s:
                break
            stale.append(key)
        freed = sum(self._inflight.pop(key).size for key in stale)
        if freed:
            self.budget.give_back(freed)
        self.given_up += len(stale)

    def _reclaim(self) -> None:
        """The budget is about to refuse a request: first give up on spans in flight for too long."""
        with self._lock:
            self._evict_stale(time.monotonic())

    def submit(
        self, spans: Sequence[ReadableSpan], reservation: Reservation | None = None, payload_bytes: int = 0
    ) -> bool:
        """Admit and evaluate ``spans`` (all or none); False when over the span limit or closed.

        Args:
            spans: The spans of one request.
            reservation: The request's bytes in :attr:`budget`; on admission they are handed to the spans,
                ``payload_bytes`` of them kept (the rest given back), so the budget holds them until export.
            payload_bytes: The decoded request's size, shared equally among its spans.
        """
        keys = span_keys(spans)
        now = time.monotonic()
        with self._lock:
            if self._closed:
                self.refused += len(keys)
                return False
            cap = self.max_inflight_spans
            if cap is not None and self._inflight and len(self._inflight) + len(keys) > cap:
                self._evict_stale(now)
            if cap is not None and self._inflight and len(self._inflight) + len(keys) > cap:
                self.refused += len(keys)
                return False
            kept = reservation.hand_over(payload_bytes) if reservation is not None else 0
            share, extra = divmod(kept, max(1, len(keys)))
            for index, key in enumerate(keys):
                size = share + (index < extra)
                held = self._inflight.get(key)
                if held is None:
                    self._inflight[key] = _Held(now, size, self._steps)
                else:  # the same span twice at once (a re-sent request): tracked once, its bytes and steps added
                    held.size += size
                    held.pending += self._steps  # each copy is forwarded and exported: free it after the last
            self.accepted += len(keys)
            self._submitting += 1
        try:
            for span in spans:
                try:
                    self.processor.on_end(span)  # O(1): forwards or enqueues, never blocks
                except Exception:
                    log_internal_error("handing a received span to the evaluation processor")
        finally:
            with self._lock:
                self._submitting -= 1
                self._lock.notify_all()
        return True

    def close(self, timeout_s: float) -> bool:
        """Admit nothing more; wait (up to ``timeout_s``) for admitted requests to hand over their spans."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._closed = True
            while self._submitting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every admitted span has been exported; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def undelivered(self) -> int:
        """Acknowledged spans not confirmed delivered by every exporter.

        Failed exports, spans an exporter lost after accepting them, spans given up on, and spans still in
        flight now: read after :meth:`shutdown`, what the stop left queued, being exported or evaluated.
        """
        with self._lock:
            return self.export_failed + self.lost_after_export + self.given_up + len(self._inflight)

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
            "inflight_bytes": self.budget.used,
            "max_inflight_bytes": self.budget.limit,
            "max_inflight_spans": self.max_inflight_spans,
            "accepted_spans": self.accepted,
            "refused_spans": self.refused,
            "undelivered_spans": self.undelivered(),
            "sampled_out_spans": self.sampled_out,
            "evaluation": self.processor.stats(),
        }
