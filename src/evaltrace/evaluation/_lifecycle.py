"""Flush, shutdown and monitoring of ``EvaluationSpanProcessor``: waiting for the queue, stopping the engines, stats.

Each function is a method of :class:`~evaltrace.evaluation.processor.EvaluationSpanProcessor` (assigned in
its class body).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.export_counts import shutdown_downstream
from evaltrace._internal.flush_results import flush_call
from evaltrace.evaluation._job_cuts import Bulk, Sent, forward_or_count, take_over, write_not_evaluated
from evaltrace.evaluation.stats import DROP_AFTER_SHUTDOWN, DROP_LOOP_STALLED

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.evaluation._jobs import Job
    from evaltrace.evaluation.processor import EvaluationSpanProcessor

logger = logging.getLogger("evaltrace.evaluation")
# Jobs a take-over always marks one by one, its deadline passed or not: the loop's stop alone can take it past a short
# timeout's deadline (see stop_engines); the jobs after them are marked in bulk (see abandon_unfinished).
MARKED_AT_LEAST = 16
_TAKE_OVER_FORWARD = "forwarding the span of an evaluation job shutdown took over"


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
    if self._engine.on_loop_thread():
        # Called by an evaluator or callback on the evaluation loop: the jobs it would wait for need this very
        # thread, so waiting would only block the loop until the timeout. Sinks and exporters are flushed.
        deadline = time.monotonic()
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
        # None (the SDK's base force_flush before 1.31) is success; 0, "" or an exception a failure (flush_results)
        timeout = max(0, int((deadline - time.monotonic()) * 1000))
        ok = flush_call(processor.force_flush, timeout, "flushing a downstream processor") and ok
    return ok


def stop_engines(self: EvaluationSpanProcessor, reserve: float, deadline: float) -> None:
    """Stop the evaluation loop and process, and let go of Redis: nothing admits or charges any more.

    The loop's stop gets ``min(0.5 s, reserve / 4)`` in all (the engine takes about twice its argument), the
    process's ``min(1 s, reserve / 4)``, each cut to what is left until ``deadline - reserve / 4`` so that the
    sinks and exporters keep at least a quarter of the reserve; but never less than 0.1 s for the loop and 10 ms
    for the process (plus its kill, see ``_process``): with a very short timeout those minimums run past the
    deadline. Jobs the loop still holds afterwards are taken over (:func:`abandon_unfinished`).
    """
    until = deadline - reserve / 4

    def left(most: float, least: float) -> float:
        return max(least, min(most, until - time.monotonic()))

    self._engine.stop(left(min(0.25, reserve / 8) * 2, 0.1) / 2)  # the engine takes about twice its argument
    if self._remote is not None:
        self._remote.stop(left(min(1.0, reserve / 4), 0.01))
    if self._limits.shared is not None:
        self._limits.shared.close()


def abandon_unfinished(self: EvaluationSpanProcessor, until: float = math.inf) -> None:
    """Take over every job the stopped engines did not finish: its spans go downstream from here, now.

    A job still in the loop's (or the fast lane's) hands once the engines were given their time (a loop short of
    CPU, or blocked by an evaluator that runs on it) is popped from the live set here, so it forwards, publishes
    and marks nothing when it resumes (see ``JobRunner._claim`` and ``_job_publish.claim``). Its span (the
    application's own) goes downstream now, while the downstream processors are still up, enriched with the
    results it published and every other evaluation marked "not evaluated" (reason ``shutdown``), as for a job
    cut short (``_job_cuts.take_over``); a span that went already gets them as child ``evaluation {name}``
    spans. So exported + counted = produced when ``shutdown()`` returns, and nothing reaches the downstream
    processors after they shut down.

    Marking costs more than forwarding (a result per mark, a span copy, sink records per job), so past ``until``
    (``time.monotonic()``; shutdown passes ``deadline - reserve / 8``) the jobs left are marked in bulk: each
    span still carries its marks (and the results its job published), exactly as above, but the marks are one
    result per evaluator shared by all of them (a child span's times are those of that one mark), their counts
    are added once and their sink records written in one write per sink (see ``_job_cuts.Bulk``). The first
    ``MARKED_AT_LEAST`` jobs get marks of their own whatever the time.
    """
    taken: list[tuple[Job, bool]] = []
    with self._slot_lock:  # held spans' early forwards take it too: job.forwarded is read consistently
        for key in list(self._live):
            # Read before the pop: the loop's last forward (lock-free) pops first, then sets ``forwarded``; read
            # after our pop, a span that was never forwarded could read as forwarded (and never go out).
            forwarded = (job := self._live.get(key)) is not None and job.forwarded
            job = self._live.pop(key, None)
            if job is None:  # the job took its last emission meanwhile: it forwards
                continue
            job.abandoned = True  # before take_over reads what the job published (see _job_publish.claim)
            taken.append((job, forwarded))
    if not taken:
        return
    marked = late = 0
    bulk = Bulk()  # past ``until``: one mark per evaluator for all the jobs left, counts and sink records at once
    for index, job_forwarded in enumerate(taken):
        job, forwarded = job_forwarded
        if not late and index >= MARKED_AT_LEAST and time.monotonic() >= until:
            late = len(taken) - index
        sent = Sent()
        try:
            marked += take_over(self._runner, job, forwarded, sent, bulk if late else None)
        except Exception:
            _take_over_failed(self, job, forwarded, sent)
    try:  # a bug here must not skip what shutdown does next: sinks and exporters
        for name, count in bulk.counted.items():
            self._stats.not_evaluated(semconv.SKIP_SHUTDOWN, name, count)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("counting the evaluations of the evaluation jobs shutdown took over")
    if bulk.records:  # one write per sink, each on its own (a raising one counted, the others still written)
        write_not_evaluated(self._runner.ctx.sinks, self._stats, bulk.records)
    logger.warning(
        "evaltrace: shutdown stopped waiting for %d evaluation job(s) the evaluation loop had not finished; "
        "their spans were exported with %d evaluation(s) marked not evaluated (counted in "
        "stats()['not_evaluated_by_reason']['%s']); the last %d job(s), left at the take-over's deadline, "
        "were marked in bulk",
        len(taken),
        marked,
        semconv.SKIP_SHUTDOWN,
        late,
    )


def _take_over_failed(self: EvaluationSpanProcessor, job: Job, forwarded: bool, sent: Sent) -> None:
    """A take-over that raised (a bug of ours): the span goes as it is if it did not go; what did not go is counted.

    Decided from what take_over sent (not job.forwarded, which it sets before sending): a span that went out is
    never also counted, one that did not is never lost.
    """
    self._stats.incr("internal_errors")
    log_internal_error(_TAKE_OVER_FORWARD)
    if not forwarded:
        if not sent.forwarded:  # never lost: as is, as when a job fails (JobRunner.run's finally)
            job.forwarded = True
            forward_or_count(self._forward, self._stats, job.span, _TAKE_OVER_FORWARD)
    else:  # its child evaluation spans not sent (or not built): counted, one per evaluator if unbuilt
        planned = sent.planned if sent.planned >= 0 else len(job.specs) + len(job.trace_specs)
        if planned > sent.forwarded:
            self._stats.dropped_at_shutdown(DROP_LOOP_STALLED, planned - sent.forwarded)


def shutdown(self: EvaluationSpanProcessor, timeout_millis: int = 30_000) -> None:
    """Drain and stop: evaluations, then parked spans, then sinks, then downstream processors.

    Evaluations still running at the deadline are cancelled and their spans forwarded unenriched; scores
    a sink could not deliver in time go to its dead-letter file. Jobs the evaluation loop still holds when
    shutdown stops waiting for it (a loop short of CPU, or blocked by an evaluator running on it) are taken over:
    their spans are forwarded from here, with the evaluations that never came marked "not evaluated" (reason
    ``shutdown``), and the jobs forward, count and publish nothing new when the loop resumes (a result the job
    claimed before shutdown took it over finishes publishing then: its score goes to the dead-letter file); past
    ``deadline - reserve/8`` (once 16 were marked), the rest are marked in bulk: the same marks on their spans
    and records in the sinks, one mark per evaluator shared, counts and sink records written once.
    Called from an evaluator or callback on the evaluation loop itself, it waits for no job (they need that
    thread) and still shuts the sinks and exporters down. ``stats()["unflushed_jobs"]`` counts the cancelled
    evaluations. Later spans are forwarded without evaluation. Traces waiting for completion are
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
    on_loop = self._engine.on_loop_thread()
    if on_loop:
        # Called from an evaluator or callback on the evaluation loop: no job can progress while this runs, so
        # nothing is waited for; the loop's jobs are counted (abandon_unfinished), sinks and exporters shut down.
        deadline = time.monotonic() + reserve
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
        # Cancelled jobs still forward their spans and marks from the loop: up to half the reserve for that (a
        # loop short of CPU needs it), the other half stays for the sinks and exporters.
        if not on_loop:
            self._wait_idle(deadline - reserve / 2)
    self._stop_engines(reserve, deadline)
    # What the loop still holds goes out from here (marked), never from the loop; marking stops at
    # deadline - reserve/8 (the rest in bulk, see abandon_unfinished): the sinks and exporters keep their share.
    try:  # spans forwarded or counted per job (see _job_cuts.forward_or_count); sinks and exporters still follow
        self._abandon_unfinished(deadline - reserve / 8)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("taking over the evaluation jobs the stalled loop holds")
    if self._gate is not None:
        self._gate.release_all()
    # Sinks share what is left, keeping a slice for the span exporters that follow.
    for index, worker in enumerate(self._sinks):
        left = deadline - time.monotonic()
        worker.shutdown(max(0.05, left * 0.75 / (len(self._sinks) - index)))
    self._sealed = True  # a span forwarded from here on is counted, not handed to a processor shutting down
    shutdown_downstream(self._downstream, deadline)


def after_shutdown(self: EvaluationSpanProcessor, span: ReadableSpan) -> None:
    """A span forwarded once the downstream processors shut down: counted here, never silently lost.

    Our export queues still get it (each counts it ``dropped_shutdown``); for any other processor (an SDK
    ``BatchSpanProcessor`` in a hand-built pipeline) it counts in ``dropped_at_shutdown``.
    """
    for queue in self._export_queues:
        try:
            queue.on_end(span)
        except Exception:
            log_internal_error("forwarding a span to a downstream processor")
    if len(self._export_queues) < len(self._downstream):
        self._stats.dropped_at_shutdown(DROP_AFTER_SHUTDOWN)


def stats(self: EvaluationSpanProcessor) -> dict[str, Any]:
    """Return the pipeline's counters.

    Keys: ``queued`` (admitted, not finished), ``enqueued``, ``dropped`` (queue full: forwarded
    unevaluated), ``enriched``, ``held_timeout``, ``evaluation_spans``, ``evaluated``, ``passed`` and
    ``failed`` (judged verdicts only), ``errors`` (the evaluation itself failed: never a verdict),
    ``timed_out``, ``skipped`` (the evaluators' own "not evaluated" results), ``skipped_by_reason`` (them by the
    reason on their span, summing to ``skipped``), ``not_evaluated_by_reason`` (evaluations never started),
    ``retries``, ``sampled_out``, ``score_rejects``,
    ``log_events``, ``internal_errors``, ``cancelled`` / ``unflushed_jobs`` (shutdown deadline),
    ``dropped_at_shutdown`` with ``dropped_at_shutdown_by_reason`` (spans not forwarded at shutdown:
    ``evaluation_loop_stalled``, spans of a job shutdown took over or cut short that it failed to build or send
    (a bug of ours); ``after_downstream_shutdown``, spans forwarded
    once the downstream processors had shut down, for processors other than our export queues),
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
    data["internal_errors"] += sum(worker.stats.internal_errors for worker in self._sinks)  # sinks that raised
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
