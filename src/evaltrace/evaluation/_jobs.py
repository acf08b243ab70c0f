"""One evaluation job: build the Trace, run the evaluators, forward the span once, emit results.

A span-level job of sync evaluators runs on the fast lane's thread (``run_now``, see ``_fast_lane``); a job
the lane demotes continues on the loop from where it was (``Progress``); every other job runs on the loop.

Hold rule: the evaluated span is forwarded exactly once, either as an enriched copy when every result is ready
by ``hold deadline = span end (on_end time) + hold_timeout_s``, or as is at the deadline, in which case every
result then follows as its own child ``evaluation {name}`` span. A ``finally`` forwards the span unenriched if
anything else went wrong (including cancellation at shutdown), so a span is never lost.

With the process engine (``ProcessEngine``) the mapping and the evaluators run in the child; everything
after the results (hold rule, enrichment, scores, metrics) still runs here. A job the child cannot take or
finish is "not evaluated" (skip reason ``engine_unavailable``), never a verdict.

A *deferred* job is a trace-level evaluation run once the trace completed (see ``completion``): its root span
went downstream already, so every result goes out as a child ``evaluation {name}`` span carrying the revision.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation import _job_cuts, _job_hold, _job_publish, _job_remote, _job_resume
from evaltrace.evaluation._fast_lane import Demoted, Worker
from evaltrace.evaluation._job_types import Job as Job  # re-exported: defined there, imported from here by others
from evaltrace.evaluation._job_types import JobContext as JobContext
from evaltrace.evaluation._job_types import Progress as Progress
from evaltrace.evaluation._job_types import new_progress
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.evaluation._session_jobs import SessionJob, SessionJudge
from evaltrace.evaluation._shipping import Reference
from evaltrace.evaluation.buffer import subtree
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.runner import (
    RunOptions,
    arun_evaluator,
    is_async_evaluator,
    now,
    settle,
    skipped_result,
    stamp,
    timed_out_result,
)
from evaltrace.schema import EvaluationResult, Trace

logger = logging.getLogger("evaltrace.evaluation")


def _failed_future(exc: Exception) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_exception(exc)
    return future


class JobRunner:
    """Run :class:`Job` objects (the engine calls :meth:`run` on its loop)."""

    def __init__(self, ctx: JobContext, on_done: Callable[[Job], None]) -> None:
        self.ctx = ctx
        self._on_done = on_done
        self._refs: dict[int, Reference | None] = {}  # id(evaluator) -> its reference (None: cannot be shipped)
        self._sync: dict[int, bool] = {}  # id(evaluator) -> it is a sync evaluator
        self._options: dict[int, tuple[EvaluatorSpec, ProcessorOptions, RunOptions]] = {}  # see _run_options
        self._judge = SessionJudge(lambda: self.ctx, on_done)

    async def run(self, job: Job | SessionJob, progress: Progress | None = None) -> None:
        """Evaluate ``job`` (from ``progress`` when the fast lane began it) and forward its span exactly once."""
        if isinstance(job, SessionJob):
            await self._judge.run(job)
            return
        try:
            if progress is None:
                await self._evaluate_job(job)
            else:
                await self._resume(job, progress)
        except asyncio.CancelledError:
            if not job.abandoned:  # taken over at shutdown: nothing more is counted for it
                self.ctx.stats.incr("cancelled")
            self._cut_unfinished(job)
        except Exception:
            self.ctx.stats.incr("internal_errors")
            log_internal_error("evaluating a span")
        finally:
            self._session_settled(job)
            if not job.forwarded:
                self._forward_once(job, job.span)
            self._on_done(job)

    def _session_settled(self, job: Job) -> None:
        """A trace announced to the session buffer that never reached it (cut short, our failure): not awaited."""
        if job.session_specs and job.session_id is not None and self.ctx.sessions is not None:
            job.session_specs = []
            self.ctx.sessions.settle(job.session_id)

    def _offer_session(self, job: Job, members: list[ReadableSpan]) -> Trace | None:
        """Map the completed trace and hand it to the session buffer; the Trace (None when mapping failed)."""
        sessions, session_id = self.ctx.sessions, job.session_id
        if sessions is None or session_id is None:
            return None
        try:
            trace = build_trace(members, job.span)
        except MappingFailed:
            for spec in job.session_specs:
                self.ctx.stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
            self._session_settled(job)
            return None
        specs, job.session_specs = job.session_specs, []
        # The end marker is looked for here, on the loop, not at submit (on_end may run on the application thread).
        ended = job.session_end or any(
            (span.attributes or {}).get(semconv.EVALTRACE_SESSION_END) == session_id for span in members
        )
        sessions.add(session_id, trace, specs, user_id=job.user_id, ended=ended)
        if self.ctx.on_session is not None:
            self.ctx.on_session()
        return trace

    async def _evaluate_job(self, job: Job) -> None:
        spans = job.spans[: job.span_count]
        if len(spans) == 1 and spans[0] is job.span:  # no descendant: no subtree to walk (as on the fast lane)
            members = spans
        else:
            members = subtree(job.span, spans) if spans else [job.span]
        specs = [*job.specs, *job.trace_specs] if job.trace_specs else job.specs
        mapped = self._offer_session(job, members) if job.session_specs else None
        if not specs:  # only session-scope evaluators: the trace is in its session, the span goes out as is
            return
        if self.ctx.remote is not None:
            shared = asyncio.ensure_future(self._remote(self.ctx.remote, members, job.span, specs))
            tasks = [
                asyncio.ensure_future(self._evaluate_remote(job.span, spec, shared, i, job.revision, job))
                for i, spec in enumerate(specs)
            ]
        else:
            # Mapping runs on the loop: it is pure CPU (tens of microseconds for a typical subtree), and a hop to
            # the pool would cost more than the work itself.
            try:
                trace = mapped if mapped is not None else build_trace(members, job.span)
            except MappingFailed:  # our failure: each evaluator is "not evaluated", never judged on a stand-in
                tasks = [asyncio.ensure_future(self._not_mapped(spec, job)) for spec in specs]
            else:
                if not job.deferred and all(self._runs_in_place(spec) for spec in specs):
                    await self._evaluate_in_place(job, trace, specs)
                    return
                tasks = [
                    asyncio.ensure_future(self._evaluate(job.span, trace, spec, job.revision, job)) for spec in specs
                ]
        job.running = list(zip(specs, tasks, strict=True))
        try:
            if job.deferred:
                await self._emit_deferred(job, tasks)
            else:
                await self._hold_and_forward(job, tasks)
        finally:
            for task in tasks:  # only when the job itself was cancelled (shutdown past its deadline)
                if not task.done():
                    task.cancel()

    async def _not_mapped(self, spec: EvaluatorSpec, job: Job) -> EvaluationResult:
        return self._not_mapped_now(spec, job)

    def _not_mapped_now(self, spec: EvaluatorSpec, job: Job) -> EvaluationResult:
        """``mapping_failed`` for ``spec``, counted only when claimed as any result (shutdown may take the job over)."""
        result = skipped_result(spec.evaluator, semconv.SKIP_MAPPING_FAILED)
        if _job_publish.claim(job, spec, result, self.ctx.live_lock):  # else shutdown took the job over, marks it
            self.ctx.stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
        return result

    def eager(self, job: Job | SessionJob) -> bool:
        """Whether the engine may run ``job``'s first step outside a task: a job that takes the in-place path.

        Such a job usually ends in that step (see ``_engine.Engine._begin``); never raises (our failure: a task).
        """
        try:
            if type(job) is not Job or job.deferred or self.ctx.remote is not None:
                return False
            runs_in_place = self._runs_in_place
            return all(runs_in_place(spec) for spec in job.specs) and all(
                runs_in_place(spec) for spec in job.trace_specs
            )
        except Exception:
            return False

    def _runs_in_place(self, spec: EvaluatorSpec) -> bool:
        """Whether ``spec`` runs to its result on the loop with nothing to wait for (inline, sync, no slot)."""
        # With limits set, a max_concurrent slot may have to be waited for: the general path then.
        return spec.inline and self.ctx.limits is None and self._is_sync(spec.evaluator)

    def _is_sync(self, evaluator: Any) -> bool:
        """``not is_async_evaluator(evaluator)``, asked once per evaluator (its ``inspect`` checks, per job, add up)."""
        known = self._sync.get(id(evaluator))
        if known is None:
            known = self._sync[id(evaluator)] = not is_async_evaluator(evaluator)
        return known

    async def _evaluate_in_place(self, job: Job, trace: Trace, specs: list[EvaluatorSpec]) -> None:
        """Run inline sync evaluators one after the other in this job's task, then apply the hold rule.

        They would block the loop inside their own tasks just the same; what this saves is a task per
        evaluator and the ``asyncio.wait`` (with its timeout handle) that waited for work already done. The
        only await left is a retryable failure's backoff: results that come after the hold deadline that way
        go out as child spans after the span, as on the general path.
        """
        results: list[EvaluationResult] = []
        job.finished = results  # what shutdown finds done if it cuts the job short at a retry's back-off
        for spec in specs:
            result = await arun_evaluator(
                spec.evaluator, trace, None, options=self._run_options(spec), on_retry=self._count_retry
            )
            self._record(job.span, trace, spec, result, job.revision, job)
            results.append(result)
        self._deliver(job, results)

    # --- the fast lane -----------------------------------------------------------------------------------

    def slow_after_s(self) -> float:
        """A fast-lane call running longer than this is demoted: 0.2 s, less with a short hold deadline.

        Long enough that a cheap check kept from the GIL by busy application threads is not mistaken for a
        slow one; short enough that the hold rule still forwards spans near their deadline.
        """
        return min(0.2, max(0.005, self.ctx.options.hold_timeout_s / 4))

    def lane_failed(self) -> None:
        """Count a failure of the fast lane's machinery (the engine turns the lane off and logs it)."""
        self.ctx.stats.incr("internal_errors")

    def hold_deadline(self, job: Job) -> float:
        """``time.monotonic()`` by which ``job``'s span must be forwarded (the hold rule)."""
        return job.admitted_at + self.ctx.options.hold_timeout_s

    def fast_eligible(self, job: Job, is_slow: Callable[[Any], bool]) -> bool:
        """Whether ``job`` may run on the fast lane: span-level, in process, sync evaluators none ``is_slow``."""
        if isinstance(job, SessionJob) or job.deferred or job.trace_specs or job.session_specs:
            return False
        if self.ctx.remote is not None or self.ctx.limits is not None:
            return False
        for spec in job.specs:
            evaluator = spec.evaluator
            if not self._is_sync(evaluator) or is_slow(evaluator):
                return False
        offenders = self.ctx.offenders
        if offenders is not None:
            isolated = offenders.isolated
            for spec in job.specs:  # a plain loop: any() over a generator cost a frame and its resumes per job
                if isolated(id(spec.evaluator)):
                    return False  # it hung before: the loop runs it on threads of its own, never on the lane's
        return True

    def run_now(self, job: Job, worker: Worker) -> None:
        """On the fast lane: evaluate ``job`` here and forward its span once, or hand it to the loop.

        Raises:
            Demoted: The supervisor took the job to the loop while an evaluator ran (the worker ends).
        """
        settled = False  # finished here (forwarded, on_done called) or handed to the loop
        try:
            settled = self._run_now(job, worker)
        except Demoted:
            raise
        except BaseException:  # the thread carries on: the job is finished below either way
            self.ctx.stats.incr("internal_errors")
            log_internal_error("evaluating a span")
        if not settled:
            if not job.forwarded:  # _forward_once() (it was, unless something went wrong)
                self._forward_once(job, job.span)
            self._on_done(job)

    def _run_now(self, job: Job, worker: Worker) -> bool:
        """Evaluate ``job``; True when it was handed to the loop or cut short, False when the caller finishes it."""
        spans = job.spans[: job.span_count]
        if len(spans) == 1 and spans[0] is job.span:  # no descendant: no subtree to walk
            members = spans
        else:
            members = subtree(job.span, spans) if spans else [job.span]
        try:
            trace = build_trace(members, job.span)
        except MappingFailed:  # our failure: each evaluator is "not evaluated", never judged on a stand-in
            self._deliver(job, [self._not_mapped_now(spec, job) for spec in job.specs])
            return False
        progress = new_progress(trace)  # Progress(trace), without the class call
        lane = worker.lane
        may_retry = self.ctx.options.max_retries > 0
        timeout_default = self.ctx.options.evaluator_timeout_s
        for spec in job.specs:
            evaluator = spec.evaluator
            if lane.cancelled:
                self.cancel_now(job, progress)
                return True
            if lane.is_slow(evaluator):  # the loop runs it (pool, timeout, parallelism): with what is done
                worker.lane.hand_off([(job, progress)])
                return True
            progress.started_at = started_at = now()
            timeout_s = spec.timeout_s if spec.timeout_s is not None else timeout_default
            produced, exc = worker.call(evaluator, trace, job, progress, timeout_s, started_at)
            if timeout_s is not None and worker.took_s > timeout_s:  # returned, but after its deadline
                close = getattr(produced, "close", None)  # an awaitable never awaited: no RuntimeWarning
                if inspect.isawaitable(produced) and close is not None:
                    with contextlib.suppress(Exception):
                        close()
                result = timed_out_result(evaluator, timeout_s)
            elif exc is None and type(produced) is EvaluationResult:  # the usual answer: settle()'s, without its call
                result = produced
            elif exc is None and inspect.isawaitable(produced):  # a sync evaluate that returned an awaitable
                result = None
            else:
                result = settle(evaluator, produced, exc, may_retry=may_retry)
            if result is None:  # a retry (after a backoff) or an awaitable: the loop takes it from here
                progress.inflight = produced if exc is None else _failed_future(exc)
                # An awaitable runs under what is left of the call's timeout; a retry's attempts have their own.
                progress.started = time.monotonic() - (worker.took_s if exc is None else 0.0)
                worker.lane.hand_off([(job, progress)])
                return True
            # A verdict whose call was fused with its stamp (worker.stamped) is stamped already.
            result = result if worker.stamped and result is produced else stamp(result, evaluator, trace, started_at)
            self._record(job.span, trace, spec, result, job.revision, job)
            progress.results.append(result)
        self._deliver(job, progress.results)  # it adds the skipped evaluators' results itself
        return False

    def _recorded(
        self, job: Job, spec: EvaluatorSpec, trace: Trace, result: EvaluationResult, progress: Progress
    ) -> EvaluationResult:
        result = stamp(result, spec.evaluator, trace, progress.started_at or now())
        self._record(job.span, trace, spec, result, job.revision, job)
        return result

    def _forward_once(self, job: Job, span: ReadableSpan, final: bool = True) -> bool:
        """Forward ``job``'s span once; ``final``: nothing of the job follows it (no child evaluation spans).

        A job shutdown took over (see ``_claim``) forwards nothing and leaves ``forwarded`` alone: shutdown emitted
        its spans. Returns True when this call forwarded the span.
        """
        if job.forwarded:
            return False
        if final:
            if self.ctx.live.pop(id(job), None) is None:  # first: shutdown reads job.forwarded before its pop
                return False  # taken over at shutdown: emitted there
            job.forwarded = True
        else:  # the held span goes now, its results as child spans later: shutdown must see which it emits
            with self.ctx.live_lock:
                if id(job) not in self.ctx.live:
                    return False
                job.forwarded = True
        self.ctx.forward(span)
        return True

    def _claim(self, job: Job) -> bool:
        """Take ``job``'s last emission (its child evaluation spans); False when shutdown took it over already."""
        return self.ctx.live.pop(id(job), None) is not None

    def _run_options(self, spec: EvaluatorSpec) -> RunOptions:
        """``spec``'s timeout and retries, built once per spec and options (a frozen dataclass: three setattrs)."""
        options = self.ctx.options
        kept = self._options.get(id(spec))
        if kept is not None and kept[0] is spec and kept[1] is options:
            return kept[2]
        timeout = spec.timeout_s if spec.timeout_s is not None else options.evaluator_timeout_s
        run = RunOptions(timeout_s=timeout, max_retries=options.max_retries, initial_backoff_s=options.retry_backoff_s)
        self._options[id(spec)] = (spec, options, run)  # the spec is kept: its id cannot be reused meanwhile
        return run

    def _count_retry(self) -> None:
        self.ctx.stats.incr("retries")

    async def _evaluate(
        self, span: ReadableSpan, trace: Trace, spec: EvaluatorSpec, revision: int = 1, job: Job | None = None
    ) -> EvaluationResult:
        run = arun_evaluator(
            spec.evaluator,
            trace,
            None,
            options=self._run_options(spec),
            executor=None if spec.inline else self.ctx.pool,
            on_retry=self._count_retry,
            async_runner=None if spec.inline else self.ctx.async_runner,
        )
        async with contextlib.AsyncExitStack() as stack:
            if self.ctx.limits is not None:  # max_concurrent: wait for a slot (bounded by the evaluation queue)
                await stack.enter_async_context(self.ctx.limits.slot(spec.evaluator.name))
            if is_async_evaluator(spec.evaluator):
                await stack.enter_async_context(self.ctx.async_slots)
            result = await run
        self._record(span, trace, spec, result, revision, job)
        return result

    # --- moved to modules of their own, one per stage (each assigned here under its old name) ----------------

    # The hold rule: the span forwarded once, enriched or before its results (in _job_hold).
    _deliver = _job_hold.deliver
    _hold_and_forward = _job_hold.hold_and_forward
    _emit_deferred = _job_hold.emit_deferred

    # A demoted fast-lane job continued on the loop (in _job_resume).
    _resume = _job_resume.resume
    _finish_inflight = _job_resume.finish_inflight

    # Jobs shutdown cut short (in _job_cuts).
    cancel_now = _job_cuts.cancel_now
    _cut_unfinished = _job_cuts.cut_unfinished
    mark_cut = _job_cuts.mark_cut
    _sink_not_evaluated = _job_cuts.sink_not_evaluated

    # Publishing a result: stats, metrics, monitor, log event, scores (in _job_publish).
    _record = _job_publish.record
    _charge = _job_publish.charge
    _publish = _job_publish.publish
    _score = _job_publish.score

    # Jobs evaluated in the process engine's child (in _job_remote).
    _reference = _job_remote.reference
    _remote = _job_remote.remote
    _evaluate_remote = _job_remote.evaluate_remote
