"""Flush, shutdown and monitoring of ``EvaluationSpanProcessor``: waiting for the queue, stopping the engines, stats.

Each function is a method of :class:`~evaltrace.evaluation.processor.EvaluationSpanProcessor` (assigned in
its class body).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.export_queue import shutdown_downstream

if TYPE_CHECKING:
    from evaltrace.evaluation.processor import EvaluationSpanProcessor


def wait_idle(self: EvaluationSpanProcessor, deadline: float) -> bool:
    with self._cond:
        while self._pending > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(remaining)
    return True


def force_flush(self: EvaluationSpanProcessor, timeout_millis: int = 30_000) -> bool:
    """Finish queued evaluations, deliver queued scores, then flush downstream, all within the timeout.

    With export sampling, traces whose root has not ended stay parked (their fate is not decided yet);
    :meth:`shutdown` releases them, and so does any flush once they are older than ``max_age_s``. Traces whose root has ended are evaluated now, without the rest of
    their quiet period (a serverless function flushes at the end of each invocation, then may freeze);
    traces whose root has not ended keep waiting.

    Returns:
        False when something was still pending at the deadline (see :meth:`stats` for what).
    """
    deadline = time.monotonic() + timeout_millis / 1000
    if self._completion is not None:
        self._completion.ready_now()
        self._tick()
    if self._sessions is not None:
        # The traces just completed reach their sessions once mapped: then every session with new traces is
        # judged now (a serverless invocation may freeze after the flush), re-judged if more turns come.
        self._wait_idle(deadline)
        self._judge_sessions(self._sessions, drain=True)
    ok = self._wait_idle(deadline)
    if self._gate is not None:
        self._gate.expire()  # older than max_age_s: forwarded in full (and what a released trace left waiting)
    for worker in self._sinks:
        ok = worker.force_flush(max(0.0, deadline - time.monotonic())) and ok
    for processor in self._downstream:
        ok = processor.force_flush(max(0, int((deadline - time.monotonic()) * 1000))) and ok
    return ok


def stop_engines(self: EvaluationSpanProcessor, reserve: float) -> None:
    """Stop the evaluation loop and process, and let go of Redis: nothing admits or charges any more."""
    self._engine.stop(min(0.25, reserve / 8))
    if self._remote is not None:
        self._remote.stop(min(1.0, reserve / 4))
    if self._limits.shared is not None:
        self._limits.shared.close()


def shutdown(self: EvaluationSpanProcessor, timeout_millis: int = 30_000) -> None:
    """Drain and stop: evaluations, then parked spans, then sinks, then downstream processors.

    Evaluations still running at the deadline are cancelled and their spans forwarded unenriched; scores
    a sink could not deliver in time go to its dead-letter file. ``stats()["unflushed_jobs"]`` counts the
    cancelled evaluations. Later spans are forwarded without evaluation. Traces waiting for completion are
    evaluated at once when their root has ended; the others are counted as ``trace_incomplete``.
    """
    if self._shutdown:
        return
    self._shutdown = True
    total = timeout_millis / 1000
    deadline = time.monotonic() + total
    # Evaluations may use most of the budget, not all of it: what they produce still has to be delivered
    # (scores to sinks, spans to exporters) before the same deadline.
    reserve = min(2.0, total * 0.3)
    if self._completion is not None and self._timer is not None:
        self._timer.stop(min(0.25, reserve / 8))
        try:  # a bug here must not skip what follows: parked spans, sinks and exporters
            self._settle(*self._completion.collect(drain=True))
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("evaluating the traces waiting for completion at shutdown")
        if self._sessions is not None:  # the sessions of the traces just handed out are judged too
            self._wait_idle(time.monotonic() + max(0.0, deadline - reserve - time.monotonic()) / 2)
            self._judge_sessions(self._sessions, drain=True)
    if not self._wait_idle(deadline - reserve):
        self._stats.incr("unflushed_jobs", self._pending)
        self._engine.cancel_all()
        self._wait_idle(time.monotonic() + min(0.5, reserve / 4))  # cancelled jobs still forward their spans
    self._stop_engines(reserve)
    if self._gate is not None:
        self._gate.release_all()
    # Sinks share what is left, keeping a slice for the span exporters that follow.
    for index, worker in enumerate(self._sinks):
        left = deadline - time.monotonic()
        worker.shutdown(max(0.05, left * 0.75 / (len(self._sinks) - index)))
    shutdown_downstream(self._downstream, deadline)


def stats(self: EvaluationSpanProcessor) -> dict[str, Any]:
    """Return the pipeline's counters.

    Keys: ``queued`` (admitted, not finished), ``enqueued``, ``dropped`` (queue full: forwarded
    unevaluated), ``enriched``, ``held_timeout``, ``evaluation_spans``, ``evaluated``, ``passed`` and
    ``failed`` (judged verdicts only), ``errors`` (the evaluation itself failed: never a verdict),
    ``timed_out``, ``skipped`` (the evaluators' own "not evaluated" results), ``skipped_by_reason`` (them by the
    reason on their span, summing to ``skipped``), ``not_evaluated_by_reason`` (evaluations never started),
    ``retries``, ``sampled_out``, ``score_rejects``,
    ``log_events``, ``internal_errors``, ``cancelled`` / ``unflushed_jobs`` (shutdown deadline),
    ``evaluators`` (per evaluator: counts, ``pass_rate`` over judged results, ``error_rate``,
    ``latency_ms_p50``/``p95``), ``buffer`` (trace buffer), ``completion`` (with trace-level evaluators:
    ``open_traces``, ``tombstones``, ``completed``, ``reopened``, ``incomplete``, ``evicted_tombstones``,
    ``late_after_window``, ``after_incomplete``, ``duplicate_spans``), ``sessions`` (with session-scope evaluators:
    see :class:`~evaltrace.evaluation.sessions.SessionStats`), ``session_results``, ``reevaluations`` (trace-level
    re-runs after late spans, session re-judgements after later traces), ``superseded`` (results of a revision a newer one replaced: not published), ``sinks`` (per sink: delivery counters, see
    :class:`~evaltrace.evaluation.sinks.worker.SinkStats`), ``exporters`` (per exporter: ``exported``,
    ``export_failed``, ``dropped_queue_full``, ``dropped_shutdown``, ``queued``, ``received``, ``lost``),
    ``export_sampling``, ``monitor`` and ``isolation`` (per evaluator caught hanging a shared thread or blocking
    the shared event loop, now run apart: ``reason``, ``blocked_s``, ``stalls``, ``others_moved``,
    ``calls_moved``; see :class:`~evaltrace.evaluation._isolation.OffenderCost`), and with ``redis_url``,
    ``shared_limits`` (``redis``: the server, ``down``: limits are per process now, ``fallbacks``: outages seen).
    """
    data = self._stats.snapshot()
    data["internal_errors"] += self._engine.user_loop.internal_errors  # its watchdog's (a thread of its own)
    data["internal_errors"] += self._engine.pool.internal_errors  # evaluator threads that could not start
    data["queued"] = self._pending
    data["buffer"] = asdict(self._buffer.stats)
    if self._completion is not None:
        data["completion"] = asdict(self._completion.stats)
    if self._sessions is not None:
        data["sessions"] = asdict(self._sessions.stats)
    data["sinks"] = {key: asdict(worker.stats) for key, worker in zip(self._sink_keys, self._sinks, strict=True)}
    data["exporters"] = {queue.name: queue.stats() for queue in self._export_queues}
    if self._gate is not None:
        data["export_sampling"] = {**asdict(self._gate.stats), "parked_spans": self._gate.parked_spans()}
    if self._remote is not None:
        data["process"] = {
            **asdict(self._remote.stats),
            "alive": self._remote.alive(),
            "in_flight": self._remote.in_flight(),
        }
    data["monitor"] = {name: asdict(health) for name, health in self.monitor.health().items()}
    data["isolation"] = self._engine.offenders.snapshot()
    if self._limits.shared is not None:
        data["shared_limits"] = self._limits.shared.stats()
    return data


def pass_rates(self: EvaluationSpanProcessor) -> dict[str, float]:
    return {name: health.pass_rate for name, health in self.monitor.health().items() if health.pass_rate is not None}


def sink_counts(self: EvaluationSpanProcessor) -> dict[str, dict[str, int]]:
    return {
        key: {
            "delivered": worker.stats.successes,
            "retried": worker.stats.retries,
            "dead_lettered": worker.stats.dead_lettered,
            "abandoned": worker.stats.abandoned,
            "dropped": worker.stats.dropped,
        }
        for key, worker in zip(self._sink_keys, self._sinks, strict=True)
    }
