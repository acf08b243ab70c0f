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
import datetime as dt
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace._internal.errors import FieldMappingFailed, log_internal_error
from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.evaluation._fast_lane import Demoted, DemotedCall, Worker
from evaltrace.evaluation._isolation import Offenders
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.evaluation._preview import PendingQuery, deferred_query, query_of
from evaltrace.evaluation._process import EngineUnavailable, EvaluatorRef, ProcessEngine, RemoteOutcome
from evaltrace.evaluation._session_jobs import SessionJob, SessionJudge
from evaltrace.evaluation._shipping import Reference, shipping_reference
from evaltrace.evaluation.buffer import subtree
from evaltrace.evaluation.convert import result_outcome, result_to_score
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluation.monitor import ProductionMonitor
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.runner import (
    AsyncRunner,
    RunOptions,
    TimedAsyncRunner,
    arun_evaluator,
    contained,
    is_async_evaluator,
    now,
    settle,
    skipped_result,
    stamp,
    timed_out_result,
)
from evaltrace.evaluation.sessions import SessionBuffer
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated
from evaltrace.evaluation.sinks.worker import SinkWorker
from evaltrace.evaluation.spans import enriched_copy, evaluation_span
from evaltrace.evaluation.spend import SpendMetrics, charge_judge
from evaltrace.evaluation.stats import PipelineStats
from evaltrace.evaluation.telemetry import LogEventEmitter, PipelineMetrics
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.redaction import redact_score
from evaltrace.schema import EvaluationResult, Score, Trace

logger = logging.getLogger("evaltrace.evaluation")


def _give_up(inflight: Any) -> None:
    """The loop stops waiting for a call the fast lane demoted: it counts against the stuck-thread cap."""
    if isinstance(inflight, DemotedCall):
        inflight.give_up()


def _failed_future(exc: Exception) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_exception(exc)
    return future


# A job evaluated in the child: per evaluator a result or a skip reason, then the query and answer the monitor shows.
_Answers = tuple[list[EvaluationResult | str], str, str | None]
# Skip reasons recorded only as a count: the evaluator never ran, or a Trace field it read failed to map.
_NOT_PUBLISHED = frozenset((semconv.SKIP_OVERLOADED, semconv.SKIP_MAPPING_FAILED))


@dataclass(slots=True)  # one per evaluated span, made on the application's thread: no instance dict
class Job:
    """A span admitted for evaluation, with what to run on it.

    Attributes:
        span: The ended span.
        specs: Span-level evaluators (global matches and decorator-attached), run on the span's subtree.
        trace_specs: Trace-level evaluators (root spans only), run on the whole buffered trace.
        spans: The trace's buffered span list (shared, append-only) and its length at ``on_end``.
        admitted_at: ``time.monotonic()`` at ``on_end``; the hold deadline counts from here.
        skipped: Evaluators that applied to the span and were not run, with the skip reason (``sampled_out``,
            ``rate_limited``, ``over_budget``); they ride on the enriched copy as "not evaluated" results.
        deferred: A trace-level evaluation of a completed trace whose root was forwarded already.
        revision: The trace's evaluation revision (deferred jobs: 1, then +1 per re-evaluation).
        gate: The job counts for eval-aware export sampling's decision on its trace.
        gate_held: Sampling counts the job already: the trace-level wait the completion buffer announced goes to
            this root's job, which evaluates the trace (not noted again at submit; ended when the job is done).
        session_specs: Session-scope evaluators of a completed trace: the job maps the trace and hands it to the
            session buffer under ``session_id`` (the session is judged later, see ``sessions``).
        session_end: The trace carries the session end marker (``evaltrace.end_session()``).
        user_id: The trace's ``user.id``, when it has one.
    """

    span: ReadableSpan
    specs: list[EvaluatorSpec]
    trace_specs: list[EvaluatorSpec]
    # Empty defaults are shared immutable tuples, never appended to (each is replaced when set): four fewer lists
    # built per evaluated span.
    spans: list[ReadableSpan] = field(default_factory=list)  # always given (the buffer's list)
    span_count: int = 0
    admitted_at: float = 0.0
    skipped: Sequence[tuple[EvaluatorSpec, str]] = ()
    deferred: bool = False
    revision: int = 1
    gate: bool = True
    gate_held: bool = False
    forwarded: bool = False
    session_specs: Sequence[EvaluatorSpec] = ()
    session_id: str | None = None
    session_end: bool = False
    user_id: str | None = None
    running: Sequence[tuple[EvaluatorSpec, asyncio.Future[EvaluationResult]]] = ()
    finished: Sequence[EvaluationResult] = ()  # results of evaluators run in place (a list once one ran)


@dataclass
class Progress:
    """A fast-lane job handed to the loop part-way (see ``_fast_lane``).

    Attributes:
        trace: The job's Trace (mapped once, on the lane).
        results: Results of the job's first specs, published already.
        inflight: The outcome of the next spec's call, still running (a future of its output) or needing the
            loop (a future holding a retryable exception, or an awaitable the sync call returned); None: none.
        started: ``time.monotonic()`` when that call began (its timeout counts from there).
        started_at: The same as a result's start time.
    """

    trace: Trace
    results: list[EvaluationResult] = field(default_factory=list)
    inflight: Any = None
    started: float = 0.0
    started_at: dt.datetime | None = None


@dataclass
class JobContext:
    """What jobs share: settings, outputs and bookkeeping (owned by the processor)."""

    options: ProcessorOptions
    stats: PipelineStats
    monitor: ProductionMonitor
    sinks: list[SinkWorker]
    log_events: LogEventEmitter | None
    metrics: PipelineMetrics
    forward: Callable[[ReadableSpan], None]
    pool: concurrent.futures.Executor
    async_slots: asyncio.Semaphore
    async_runner: AsyncRunner | TimedAsyncRunner | None = None
    offenders: Offenders | None = None
    limits: LimitGate | None = None
    spend: SpendMetrics | None = None
    remote: ProcessEngine | None = None
    # (root span, revision) -> a newer revision of that trace was handed out: this verdict is not published.
    superseded: Callable[[ReadableSpan, int], bool] | None = None
    sessions: SessionBuffer | None = None
    # A trace reached the session buffer: the timer must watch the session.
    on_session: Callable[[], None] | None = None
    # (session id, revision) -> a newer judgement of that session was handed out: this verdict is not published.
    session_superseded: Callable[[str, int], bool] | None = None


def _skipped_results(job: Job) -> list[EvaluationResult]:
    """The "not evaluated" results of the evaluators ``job`` did not run; the reason is the skip reason code."""
    return [skipped_result(spec.evaluator, reason) for spec, reason in job.skipped]


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
                asyncio.ensure_future(self._evaluate_remote(job.span, spec, shared, i, job.revision))
                for i, spec in enumerate(specs)
            ]
        else:
            # Mapping runs on the loop: it is pure CPU (tens of microseconds for a typical subtree), and a hop to
            # the pool would cost more than the work itself.
            try:
                trace = mapped if mapped is not None else build_trace(members, job.span)
            except MappingFailed:  # our failure: each evaluator is "not evaluated", never judged on a stand-in
                tasks = [asyncio.ensure_future(self._not_mapped(spec)) for spec in specs]
            else:
                if not job.deferred and all(self._runs_in_place(spec) for spec in specs):
                    await self._evaluate_in_place(job, trace, specs)
                    return
                tasks = [asyncio.ensure_future(self._evaluate(job.span, trace, spec, job.revision)) for spec in specs]
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

    async def _not_mapped(self, spec: EvaluatorSpec) -> EvaluationResult:
        self.ctx.stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
        return skipped_result(spec.evaluator, semconv.SKIP_MAPPING_FAILED)

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
            self._record(job.span, trace, spec, result, job.revision)
            results.append(result)
        self._deliver(job, results)

    def _deliver(self, job: Job, results: list[EvaluationResult]) -> None:
        """Apply the hold rule to results that are all in: the enriched copy, else the span then child spans."""
        provenance = self.ctx.options.evaluation_provenance
        if time.monotonic() <= job.admitted_at + self.ctx.options.hold_timeout_s:
            every = results + _skipped_results(job) if job.skipped else results
            self._forward_once(job, enriched_copy(job.span, every, provenance=provenance))
            self.ctx.stats.incr("enriched")
            return
        self._forward_once(job, job.span)
        self.ctx.stats.incr("held_timeout")
        for index, result in enumerate(results):  # job.specs' results, then job.trace_specs'
            child = evaluation_span(job.span, result, provenance=provenance, trace_scope=index >= len(job.specs))
            if child is not None:
                self.ctx.forward(child)
                self.ctx.stats.incr("evaluation_spans")

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
        if offenders is not None and any(offenders.isolated(id(spec.evaluator)) for spec in job.specs):
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
            for spec in job.specs:
                self.ctx.stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
            self._deliver(job, [skipped_result(spec.evaluator, semconv.SKIP_MAPPING_FAILED) for spec in job.specs])
            return False
        progress = Progress(trace)
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
            self._record(job.span, trace, spec, result, job.revision)
            progress.results.append(result)
        self._deliver(job, progress.results)  # it adds the skipped evaluators' results itself
        return False

    def cancel_now(self, job: Job | SessionJob, progress: Progress | None) -> None:
        """Shutdown cut ``job`` short (fast lane, or before its task began): counted, forwarded with what finished."""
        if isinstance(job, SessionJob):
            self._judge.cancel_now(job)
            return
        self._session_settled(job)
        try:
            self.ctx.stats.incr("cancelled")
            if progress is not None:  # a demoted call still running is walked away from
                _give_up(progress.inflight)
            done = progress.results if progress is not None else []
            self.mark_cut(job, done, [*job.specs, *job.trace_specs][len(done) :])
        except Exception:
            log_internal_error("forwarding a span whose evaluation was cut short")
        finally:
            self._forward_once(job, job.span)
            self._on_done(job)

    async def _resume(self, job: Job, progress: Progress) -> None:
        """A fast-lane job on the loop: what finished, the call in flight, then the rest as on the general path."""
        done = len(progress.results)
        tasks: list[asyncio.Future[EvaluationResult]] = []
        for result in progress.results:
            finished: asyncio.Future[EvaluationResult] = asyncio.get_running_loop().create_future()
            finished.set_result(result)
            tasks.append(finished)
        rest = job.specs[done:]
        if progress.inflight is not None and rest:
            tasks.append(asyncio.ensure_future(self._finish_inflight(job, rest[0], progress)))
            rest = rest[1:]
        tasks += [asyncio.ensure_future(self._evaluate(job.span, progress.trace, spec, job.revision)) for spec in rest]
        job.running = list(zip(job.specs, tasks, strict=True))
        try:
            await self._hold_and_forward(job, tasks)  # type: ignore[arg-type]
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()

    async def _finish_inflight(self, job: Job, spec: EvaluatorSpec, progress: Progress) -> EvaluationResult:
        """The outcome of the call the fast lane began, under the evaluator's timeout; retries as usual."""
        evaluator, trace = spec.evaluator, progress.trace
        options = self._run_options(spec)
        inflight = progress.inflight
        left = None if options.timeout_s is None else max(0.0, progress.started + options.timeout_s - time.monotonic())
        produced: Any = None
        exc: Exception | None = None
        deadline = asyncio.timeout(left)
        try:
            async with deadline:
                if isinstance(inflight, concurrent.futures.Future):
                    produced = await asyncio.wrap_future(inflight)
                else:
                    produced = inflight
                if inspect.isawaitable(produced):  # a sync evaluate's awaitable: the same deadline holds
                    with suppress_instrumentation():
                        produced = await contained(produced)
        except TimeoutError as error:
            if not deadline.expired():
                exc = error
            else:
                _give_up(inflight)  # its timeout passed: a lane thread still in the call is stuck from now
                if self.ctx.offenders is not None and isinstance(inflight, DemotedCall):  # it hangs: run it apart
                    self.ctx.offenders.isolate(id(evaluator), spec.evaluator.name, "hung", options.timeout_s or 0.0)
                return self._recorded(job, spec, trace, timed_out_result(evaluator, options.timeout_s), progress)
        except asyncio.CancelledError:  # shutdown cut the job short: nobody awaits the call any more
            _give_up(inflight)
            raise
        except Exception as error:
            exc = error
        result = settle(evaluator, produced, exc, may_retry=options.max_retries > 0)
        if result is None:  # retryable: the remaining attempts as on the general path
            self._count_retry()
            await asyncio.sleep(options.initial_backoff_s)
            again = RunOptions(options.timeout_s, options.max_retries - 1, options.initial_backoff_s * 2)
            result = await arun_evaluator(
                evaluator, trace, None, options=again, executor=self.ctx.pool, on_retry=self._count_retry
            )
            self._record(job.span, trace, spec, result, job.revision)
            return result
        return self._recorded(job, spec, trace, result, progress)

    def _recorded(
        self, job: Job, spec: EvaluatorSpec, trace: Trace, result: EvaluationResult, progress: Progress
    ) -> EvaluationResult:
        result = stamp(result, spec.evaluator, trace, progress.started_at or now())
        self._record(job.span, trace, spec, result, job.revision)
        return result

    async def _hold_and_forward(self, job: Job, tasks: list[asyncio.Task[EvaluationResult]]) -> None:
        remaining = job.admitted_at + self.ctx.options.hold_timeout_s - time.monotonic()
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, remaining))
        if not pending:
            provenance = self.ctx.options.evaluation_provenance
            results = [task.result() for task in tasks] + _skipped_results(job)
            self._forward_once(job, enriched_copy(job.span, results, provenance=provenance))
            self.ctx.stats.incr("enriched")
            return
        self._forward_once(job, job.span)
        self.ctx.stats.incr("held_timeout")
        for index, result in enumerate(await asyncio.gather(*tasks)):  # job.specs' results, then job.trace_specs'
            child = evaluation_span(
                job.span,
                result,
                provenance=self.ctx.options.evaluation_provenance,
                trace_scope=index >= len(job.specs),
            )
            if child is not None:
                self.ctx.forward(child)
                self.ctx.stats.incr("evaluation_spans")

    async def _emit_deferred(self, job: Job, tasks: list[asyncio.Task[EvaluationResult]]) -> None:
        """The root is downstream already: each result goes out as a child span carrying the revision."""
        for result in await asyncio.gather(*tasks):
            child = evaluation_span(
                job.span, result, provenance=self.ctx.options.evaluation_provenance, revision=job.revision
            )
            if child is not None:
                self.ctx.forward(child)
                self.ctx.stats.incr("evaluation_spans")

    def _cut_unfinished(self, job: Job) -> None:
        """Shutdown cancelled ``job``'s task: what finished is kept, every other evaluator is marked cut short."""
        try:
            done: list[EvaluationResult] = []
            cut: list[EvaluatorSpec] = []
            if job.running:
                for spec, task in job.running:
                    if task.done() and not task.cancelled() and task.exception() is None:
                        done.append(task.result())
                    else:
                        cut.append(spec)
            else:  # cancelled before its evaluators had tasks (in place: at a retry's back-off)
                done = list(job.finished)
                cut = [*job.specs, *job.trace_specs][len(done) :]
            self.mark_cut(job, done, cut)
        except Exception:
            log_internal_error("forwarding a span whose evaluation was cut short")

    def mark_cut(self, job: Job, done: list[EvaluationResult], cut: list[EvaluatorSpec]) -> None:
        """Mark each evaluation in ``cut`` "not evaluated" (reason ``shutdown``) wherever its result would have gone.

        That is on the span, in ``stats()``, and in the score sinks (see ``SinkWorker.not_evaluated``). The span goes downstream enriched with ``done`` and the marks; one that went already (held past its
        deadline, or the root of a trace-level job) gets them as child ``evaluation {name}`` spans instead.
        """
        marks = [skipped_result(spec.evaluator, semconv.SKIP_SHUTDOWN) for spec in cut]
        for spec in cut:
            self.ctx.stats.not_evaluated(semconv.SKIP_SHUTDOWN, spec.evaluator.name)
        if cut:
            self._sink_not_evaluated(job, cut)
        provenance = self.ctx.options.evaluation_provenance
        if not job.forwarded:
            self._forward_once(
                job, enriched_copy(job.span, done + marks + _skipped_results(job), provenance=provenance)
            )
            return
        revision = job.revision if job.deferred else None
        for result in done + marks:  # none of them went out yet: results follow the held span all at once
            child = evaluation_span(job.span, result, provenance=provenance, revision=revision)
            if child is not None:
                self.ctx.forward(child)
                self.ctx.stats.incr("evaluation_spans")

    def _sink_not_evaluated(self, job: Job, cut: list[EvaluatorSpec]) -> None:
        """Record each cut-short evaluation in every score sink (its file, or its dead-letter file)."""
        context = job.span.context
        if not self.ctx.sinks or context is None:
            return
        trace_hex = format(context.trace_id, "032x")
        span_hex = format(context.span_id, "016x")
        records = [
            NotEvaluated(
                trace_id=trace_hex,
                observation_id=None if spec.trace_level else span_hex,
                span_id=span_hex,
                evaluator=spec.evaluator.name,
                evaluator_version=getattr(spec.evaluator, "version", None),
                reason=semconv.SKIP_SHUTDOWN,
            )
            for spec in cut
        ]
        for worker in self.ctx.sinks:
            worker.not_evaluated(records)

    def _forward_once(self, job: Job, span: ReadableSpan) -> None:
        if job.forwarded:
            return
        job.forwarded = True
        self.ctx.forward(span)

    def _reference(self, spec: EvaluatorSpec) -> EvaluatorRef | None:
        """What the child needs to run ``spec``; None (warned once per evaluator) when it cannot be shipped."""
        key = id(spec.evaluator)
        if key not in self._refs:
            try:
                self._refs[key] = shipping_reference(spec.evaluator)
            except ConfigError as exc:
                self._refs[key] = None
                logger.warning("evaltrace: %s; it is not evaluated (skip reason not_shippable)", exc.problem)
        reference = self._refs[key]
        if reference is None:
            return None
        timeout = spec.timeout_s if spec.timeout_s is not None else self.ctx.options.evaluator_timeout_s
        opts = self.ctx.options
        return (reference, timeout, opts.max_retries, opts.retry_backoff_s, spec.inline)

    async def _remote(
        self, engine: ProcessEngine, members: list[ReadableSpan], span: ReadableSpan, specs: list[EvaluatorSpec]
    ) -> _Answers | str:
        """Evaluate ``specs`` in the child: a result (or a skip reason) per spec, or one skip reason for all."""
        refs = [self._reference(spec) for spec in specs]
        shipped = [ref for ref in refs if ref is not None]
        outcome: RemoteOutcome | None = None
        if shipped:
            try:
                outcome = await engine.evaluate(members, span, shipped)
            except EngineUnavailable:
                return semconv.SKIP_ENGINE_UNAVAILABLE
            if outcome.retries:
                self.ctx.stats.incr("retries", outcome.retries)
        answers = iter(outcome.results if outcome is not None else ())
        per_spec = [next(answers) if ref is not None else semconv.SKIP_NOT_SHIPPABLE for ref in refs]
        if outcome is None:
            return per_spec, "", None
        return per_spec, outcome.query, outcome.final_answer

    async def _evaluate_remote(
        self,
        span: ReadableSpan,
        spec: EvaluatorSpec,
        shared: asyncio.Future[_Answers | str],
        index: int,
        revision: int = 1,
    ) -> EvaluationResult:
        """One evaluator's share of a job evaluated in the child: recorded and published as in process."""
        outcome = await asyncio.shield(shared)  # the job's other evaluators wait on it too
        answer = outcome if isinstance(outcome, str) else outcome[0][index]
        if isinstance(answer, str):  # never started or lost with the child: not evaluated, never a verdict
            self.ctx.stats.not_evaluated(answer, spec.evaluator.name)
            return skipped_result(spec.evaluator, answer)
        assert not isinstance(outcome, str)
        if answer.status == "skipped" and answer.reason in _NOT_PUBLISHED:  # as in process (_record)
            self.ctx.stats.not_evaluated(str(answer.reason), spec.evaluator.name)
            return answer
        _, query, final_answer = outcome
        self._charge(spec, answer)
        self._publish(span, query, final_answer, spec, answer, revision)
        return answer

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
        self, span: ReadableSpan, trace: Trace, spec: EvaluatorSpec, revision: int = 1
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
        self._record(span, trace, spec, result, revision)
        return result

    def _record(
        self, span: ReadableSpan, trace: Trace, spec: EvaluatorSpec, result: EvaluationResult, revision: int = 1
    ) -> None:
        """Charge and publish one in-process result (a call the stuck-thread cap refused: counted, not published)."""
        if result.status == "skipped" and result.reason in _NOT_PUBLISHED:
            # Never run (overloaded, as with queue_full), or a Trace field it read failed to map (as when the
            # whole mapping fails): counted by reason, neither evaluated nor scored (sinks, monitor, log).
            self.ctx.stats.not_evaluated(str(result.reason), spec.evaluator.name)
            return
        if result.detail:  # else no judge record (a deterministic check): nothing to charge, no call
            self._charge(spec, result)
        query: str | PendingQuery | None
        try:
            # The monitor's query preview: rendered when its samples are read, when the input is a short text no
            # one mapped yet (see _preview); else made now from trace.input, as before.
            query = deferred_query(span, trace)
            if query is None:
                query = query_of(trace.input)
            final_answer = trace.output.final_answer
        except FieldMappingFailed:  # logged where it failed; the verdict stands, published without them
            query, final_answer = "", None
        self._publish(span, query, final_answer, spec, result, revision)

    def _charge(self, spec: EvaluatorSpec, result: EvaluationResult) -> None:
        """Charge the judge's spend to the budgets and record it as ``gen_ai.evaluation.client.*`` metrics."""
        if not result.detail:  # no judge record (a deterministic check): nothing to charge
            return
        charge_judge(self.ctx.limits, self.ctx.spend, self.ctx.stats, spec.evaluator.name, result)

    def _publish(
        self,
        span: ReadableSpan,
        query: str | PendingQuery,
        output: str | None,
        spec: EvaluatorSpec,
        result: EvaluationResult,
        revision: int = 1,
    ) -> None:
        """Record one result everywhere except on spans: stats, metrics, monitor, log event, score sinks.

        A trace-level result of a revision that a newer one superseded while it ran is not published (counted
        ``superseded``): its score has the same id as the newer one's and would overwrite it if it came later.
        """
        ctx = self.ctx
        if spec.trace_level and ctx.superseded is not None and ctx.superseded(span, revision):
            ctx.stats.incr("superseded")
            return
        outcome = result_outcome(result)  # once for the three of them
        ctx.stats.record(result, outcome)
        ctx.metrics.record_result(result, outcome)
        ctx.monitor.record(result, query, output, outcome)
        if ctx.log_events is not None:
            try:
                ctx.log_events.emit(span, result)
                ctx.stats.incr("log_events")
            except Exception:
                log_internal_error("emitting the gen_ai.evaluation.result log event")
        if not ctx.sinks and spec.config is None and result.evaluator not in ctx.options.score_configs:
            return  # no sink to deliver to and no ScoreConfig to check: building the Score would be wasted
        score = self._score(span, spec, result)
        if score is not None:
            if ctx.options.redactor is not None:  # the one copy every sink, and its dead-letter file, gets
                try:
                    score = redact_score(score, ctx.options.redactor)
                except Exception:  # fail closed: a score that could not be redacted must not leave unredacted
                    log_internal_error("redacting a score (it was not delivered)")
                    return
            for worker in ctx.sinks:
                worker.submit([score])

    def _score(self, span: ReadableSpan, spec: EvaluatorSpec, result: EvaluationResult) -> Score | None:
        if span.context is None:
            return None
        trace_hex = format(span.context.trace_id, "032x")
        span_hex = format(span.context.span_id, "016x")
        config = spec.config if spec.config is not None else self.ctx.options.score_configs.get(result.evaluator)
        # Trace-level verdicts are trace scores (Langfuse's usual target); the root span id rides in metadata.
        observation = None if spec.trace_level else span_hex
        try:
            score = result_to_score(result, trace_hex, observation, config, span_id=span_hex)
        except ValueError as exc:  # ScoreValidationError, or a value the Score model refuses
            self.ctx.stats.incr("score_rejects")
            self.ctx.metrics.record_reject(result.evaluator)
            logger.warning("evaltrace: score rejected, not stored: %s", exc)
            return None
        return score
