"""EvaluationSpanProcessor: evaluates spans as they end, off the application thread, then forwards them.

It sits in front of the downstream span processors (``configure()`` builds it with the exporters'
processors). ``on_start`` forwards at once. ``on_end`` is O(1): when no evaluator applies the span goes
downstream immediately; otherwise it is admitted to a bounded queue (a full queue forwards the span
unevaluated and counts a drop) and a worker evaluates it, then forwards an enriched copy (see ``_jobs``).
Spans started while evaluators run (``suppress_instrumentation``) are never evaluated, and neither are the spans
of a judge call's own trace (``evaltrace.judge``), so judge calls cannot recurse. An evaluator that applies but
does not run (sampled out, rate limited, over budget, queue full) is counted by reason in ``stats()``; the reason
rides on the span only when another evaluator ran on it (see ``limits``).

Session-scope evaluators (``EvaluatorSpec(scope="session")``) ride on the same completion: a completed trace's job
maps it and hands it to the session buffer (see ``sessions``); the timer judges the sessions that are due.

Trace-level evaluators wait for the trace to complete (see ``completion``): its root ended and no span of it
arrived for ``trace_quiet_period_s``, or ``evaltrace.end_trace()`` marked a span. The root is forwarded without
waiting; the results follow as child ``evaluation {name}`` spans. A timer thread finds the due traces, so
``on_end`` only appends the span to its trace. With a quiet period of 0 (or the marker seen before the root
ended) the trace is complete when the root ends and the results ride on the enriched root, as span-level
ones do. In ``evaltrace worker`` (spans fed without ``on_start``) the trace's root is the span without a
parent; a span whose parent is remote is a service's entry, not the root.

In a child forked from the process (gunicorn ``--preload``, ``multiprocessing`` with ``fork``) the processor and
everything it runs on start afresh: no pending job of the parent's (the parent evaluates them, and the child's
``shutdown`` does not wait for them), ``stats()`` and the monitor at zero, threads started on first use (see
``_internal/forks.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from evaltrace._internal import forks, semconv
from evaltrace._internal.episodes import LossEpisode
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace._internal.evaluator_registry import registered, resolve_evaluators
from evaltrace._internal.export_queue import ExportQueue, observe_export_counts, shutdown_downstream
from evaltrace._internal.tracing import is_suppressed
from evaltrace.evaluation._engine import Engine
from evaltrace.evaluation._jobs import Job, JobContext, JobRunner
from evaltrace.evaluation._process import ProcessEngine
from evaltrace.evaluation._session_jobs import SessionJob
from evaltrace.evaluation._shipping import evaluator_reference
from evaltrace.evaluation.buffer import TraceBuffer
from evaltrace.evaluation.completion import CompletionBuffer, CompletionTimer, OpenTrace
from evaltrace.evaluation.evaluator import Evaluator, EvaluatorSpec, as_spec, as_specs
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluation.monitor import ProductionMonitor
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.sampling import ExportGate
from evaltrace.evaluation.sessions import DueSession, SessionBuffer
from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.evaluation.sinks.worker import SinkWorker
from evaltrace.evaluation.spend import SpendMetrics
from evaltrace.evaluation.stats import PipelineStats
from evaltrace.evaluation.telemetry import LogEventEmitter, PipelineMetrics
from evaltrace.evaluation.trace_sampling import session_fraction, trace_fraction
from evaltrace.mapping.conventions import span_kind

_MAX_SUPPRESSED = 65_536
logger = logging.getLogger("evaltrace.evaluation")


def _unique_names(names: Sequence[str]) -> list[str]:
    """``["jsonl", "langfuse", "jsonl"]`` -> ``["jsonl", "langfuse", "jsonl-2"]``."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return unique


def _is_root(span: ReadableSpan) -> bool:
    return span.parent is None or span.parent.is_remote


def _sampled(spec: EvaluatorSpec, attributes: Any, trace_id: int) -> bool:
    if spec.sampler is not None:
        try:
            return bool(spec.sampler(attributes))
        except Exception:
            return False
    if spec.sample_rate >= 1.0:
        return True
    if spec.scope == "session":  # a whole session is in or out, never some of its turns
        session_id = session_of(attributes)
        if session_id is not None:
            return session_fraction(session_id, spec.sample_group) < spec.sample_rate
    return trace_fraction(trace_id, spec.sample_group) < spec.sample_rate


def session_of(attributes: Any) -> str | None:
    """The session id a span carries (``session.id``, else ``langfuse.session.id``), or None."""
    for key in semconv.SESSION_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _first_attribute(spans: Sequence[ReadableSpan], root: ReadableSpan, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` set on the root, else on any span of the trace (a foreign convention may put it lower)."""
    for span in (root, *spans):
        attributes = span.attributes or {}
        for key in keys:
            value = attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


class EvaluationSpanProcessor(SpanProcessor):
    """Run evaluators on ended spans and forward the (enriched) spans to downstream processors.

    Args:
        downstream: Span processors that receive every span (enriched when evaluated), e.g. a
            ``BatchSpanProcessor`` per exporter. With ``export_sampling``, one with an ``on_sampled_out(span)``
            method hears each span sampling discards instead.
        evaluators: Global evaluators: :class:`Evaluator` objects (evaluated on every span) or
            :class:`EvaluatorSpec` (filters, sampling, ``trace_level``). Evaluators attached by decorators are
            found through the spans' ``evaltrace.evaluators.ref`` attribute and need not be listed.
        sinks: Score sinks; each gets its own worker thread.
        **options: :class:`~evaltrace.evaluation.options.ProcessorOptions` fields (``hold_timeout_s``,
            ``max_queue_size``, ``evaluator_timeout_s``, ``export_sampling``, ...).

    Raises:
        ConfigError: An unknown or invalid option.
    """

    def __init__(
        self,
        downstream: Sequence[SpanProcessor] = (),
        evaluators: Sequence[Evaluator | EvaluatorSpec] = (),
        sinks: Sequence[ScoreSink] = (),
        **options: Any,
    ) -> None:
        self.options = ProcessorOptions.from_kwargs(options)
        self._downstream = tuple(downstream)
        specs = as_specs(evaluators)
        self._span_specs = tuple(s for s in specs if s.scope == "span")
        # Trace- and session-scope evaluators both wait for traces to complete: the completion machinery treats
        # them alike; a completed trace's session-scope ones take it to its session (see ``sessions``).
        self._trace_specs = tuple(s for s in specs if s.scope != "span")
        self._has_sessions = any(s.scope == "session" for s in specs)
        # No global evaluator: only decorator-attached ones (a span's evaltrace.evaluators.ref) can apply, and
        # while none is registered every span is forwarded at once (the default pipeline's common case).
        self._global = bool(specs) or self.options.buffer_all_traces
        # Sampling decided at span start: every global evaluator samples by trace id, none by attributes.
        self._rate_only = bool(specs) and all(s.sampler is None for s in specs)
        self._sample_memo: tuple[int, bool] = (-1, False)
        self._sampled_out_ticks: tuple[Callable[[], int], ...] = ()
        # Union of span kinds the span-level specs accept; None when one of them accepts any kind.
        self._only_kinds: frozenset[Any] | None = frozenset()
        for spec in self._span_specs:
            if spec.span_kinds is None:
                self._only_kinds = None
                break
            self._only_kinds = self._only_kinds | frozenset(spec.span_kinds)
        opts = self.options
        # First: an evaluator that cannot be shipped is a ConfigError before any thread starts.
        # Session-scope evaluators run in this process whatever the engine: they need not be shippable.
        shipped = [spec for spec in specs if spec.scope != "session"]
        self._remote = self._new_remote(shipped) if opts.engine == "process" else None
        self._buffer = TraceBuffer(
            opts.trace_buffer_max_traces, opts.trace_buffer_max_spans, opts.trace_buffer_max_age_s
        )
        self._completion, self._timer = self._new_completion()
        self._session_loss = LossEpisode(logger, "session evaluation", "session judgement")
        self._sessions = self._new_sessions()
        self._ref_specs: dict[str, tuple[EvaluatorSpec, ...]] = {}
        self._suppressed: set[int] = set()
        self._saw_start = False
        self._stats = PipelineStats()
        self._sampled_out_ticks = self._new_ticks()
        self._monitored = tuple(spec.evaluator.name for spec in specs)
        self.monitor = self._new_monitor()
        # One key per sink for stats and the dead-letter file: two JSONL sinks (both named "jsonl") must not
        # share a file or overwrite each other's counters.
        self._sink_keys = _unique_names([sink.name for sink in sinks])
        self._sinks = [self._sink_worker(sink, key) for sink, key in zip(sinks, self._sink_keys, strict=True)]
        self._gate = self._new_gate()
        self._pending = 0
        # The condition's own lock, taken directly around the queue slot of each span (Condition's __enter__ and
        # __exit__ are two Python frames more per use, twice per evaluated span): the same lock either way.
        self._slot_lock = threading.RLock()
        self._cond = threading.Condition(self._slot_lock)
        # end_session() requests the timer applies (session id -> give-up time): once no turn of it still runs.
        self._ending: dict[str, float] = {}
        self._roots_ending = 0  # trace roots between their end and their session announcement (while _ending)
        self._shutdown = False
        metrics = PipelineMetrics(opts.meter_provider, lambda: self._pending, self._pass_rates, self._sink_counts)
        self._spend = SpendMetrics(opts.meter_provider, lambda: self._stats.not_evaluated_counts())
        self._limits = self._new_limits(specs)
        self._metrics = metrics
        self._export_queues = [p for p in self._downstream if isinstance(p, ExportQueue)]
        observe_export_counts(opts.meter_provider, self._export_queues)
        # Spans forwarded unevaluated because the queue was full: one WARNING per episode, exact counts in stats().
        self._overflow = LossEpisode(logger, "the evaluation queue", "evaluation")
        # A persistent fault of ours on span.end()'s path (threads that cannot start, a limits_clock that raises)
        # is logged once per episode, not once per span (or per evaluator): every occurrence is counted in stats().
        self._handoff_failing = ErrorEpisode("handing spans' evaluations to the evaluation engine")
        self._handoff_failed = False  # an episode of it is open
        self._limits_failing: dict[str, ErrorEpisode] = {}  # evaluator name -> its limiter's failures
        self._engine = Engine(opts.sync_workers, opts.max_async_concurrency)
        self._runner = JobRunner(self._job_context(metrics), self._job_done)
        self._engine.start(self._runner.run, fast=self._runner, eager=self._runner.eager)
        forks.reinit_after_fork(self)  # after the engine, the sinks and the export queues: they re-initialise first

    def _new_remote(self, specs: Sequence[EvaluatorSpec]) -> ProcessEngine:
        """The evaluation process (started with the first job); every global evaluator must be shippable.

        Decorator-attached evaluators are not checked here: they are shipped by their registration, resolved when
        a span first carries them; one that cannot be is not evaluated (skip reason ``not_shippable``, counted),
        so an unrelated module's decorated function never fails ``configure()``.

        Raises:
            ConfigError: A global evaluator cannot be imported by reference.
        """
        for spec in specs:
            evaluator_reference(spec.evaluator)
        return ProcessEngine(self.options.max_queue_size, self.options.sync_workers, on_spans=self._judge_spans)

    def _judge_spans(self, spans: Sequence[ReadableSpan]) -> None:
        """Judge calls traced in the evaluation process: exported as ended spans, never evaluated (their marker)."""
        for span in spans:
            self.on_end(span)

    def _new_ticks(self) -> tuple[Callable[[], int], ...]:
        stats = self._stats
        return tuple(stats.ticker(semconv.SKIP_SAMPLED_OUT, spec.evaluator.name) for spec in self._span_specs)

    def _new_monitor(self) -> ProductionMonitor:
        monitor = ProductionMonitor(self.options.monitor_window_s)
        for name in self._monitored:
            monitor.register(name)
        return monitor

    def _reinit_after_fork(self) -> None:
        """In a forked child: no pending job (the parent's are the parent's), counters and monitor at zero.

        New locks throughout; the engine, the sink workers and the export queues have re-initialised
        themselves already (they were created first). A processor shut down before the fork stays shut down.
        """
        opts = self.options
        self._slot_lock = threading.RLock()
        self._cond = threading.Condition(self._slot_lock)
        self._pending = 0
        self._stats = PipelineStats()
        self._sampled_out_ticks = self._new_ticks()
        self._overflow = LossEpisode(logger, "the evaluation queue", "evaluation")
        self._handoff_failing = ErrorEpisode("handing spans' evaluations to the evaluation engine")
        self._handoff_failed = False
        self._limits_failing = {}
        self._limits = self._new_limits((*self._span_specs, *self._trace_specs))  # asyncio slots of the old loop
        if self._shutdown:
            return
        self._buffer = TraceBuffer(
            opts.trace_buffer_max_traces, opts.trace_buffer_max_spans, opts.trace_buffer_max_age_s
        )
        self._suppressed = set()
        self._completion, self._timer = self._new_completion()  # the parent's timer thread is gone
        self._ending = {}
        self._roots_ending = 0
        self._session_loss = LossEpisode(logger, "session evaluation", "session judgement")
        self._sessions = self._new_sessions()  # the parent's sessions are the parent's to judge
        self.monitor = self._new_monitor()
        self._gate = self._new_gate()
        self._runner.ctx = self._job_context(self._metrics)  # the engine's new semaphore, the new stats

    def _new_completion(self) -> tuple[CompletionBuffer | None, CompletionTimer | None]:
        """The completion buffer and its timer; none without trace-level evaluators (no per-span cost then)."""
        if not self._trace_specs:
            return None, None
        opts = self.options
        completion = CompletionBuffer(
            opts.trace_quiet_period_s,
            opts.trace_late_window_s,
            opts.trace_max_wait_s,
            opts.trace_completion_max_traces,
            opts.trace_completion_max_spans,
            on_wait=self._sampling_wait,
        )
        return completion, CompletionTimer(self._tick)

    def _new_sessions(self) -> SessionBuffer | None:
        """The session buffer; none without session-scope evaluators."""
        if not self._has_sessions:
            return None
        opts = self.options
        return SessionBuffer(
            opts.session_quiet_period_s,
            opts.session_max_sessions,
            opts.session_max_traces,
            opts.session_max_bytes,
            on_loss=self._session_loss.loss,
        )

    def end_session(self, session_id: str) -> None:
        """Judge ``session_id`` once its traces are in (see :func:`evaltrace.end_session`).

        Only recorded here: the timer applies it once no trace of the session still runs (called inside the last
        turn, that turn's root has not ended yet) and the traces that ended are in, so the session is judged once,
        with every turn. A turn that never ends is waited for at most ``trace_max_wait_s``.
        """
        if self._sessions is None or self._shutdown:
            return
        with self._cond:
            self._ending.setdefault(session_id, time.monotonic() + self.options.trace_max_wait_s)
        self._watch()

    def _new_gate(self) -> ExportGate | None:
        sampling = self.options.export_sampling
        if not sampling:
            return None
        # A downstream processor that counts spans until they are exported (the worker's admission) hears of
        # those sampling discards, which it would otherwise wait for until it gives up on them.
        hooks = [hook for p in self._downstream if (hook := getattr(p, "on_sampled_out", None)) is not None]
        discard = self._discarder(hooks) if hooks else None
        # The decision waits for the root trace completion waits for: in the worker, not a service's entry span.
        return ExportGate(sampling, self._deliver, self._is_trace_root, discard=discard)

    @staticmethod
    def _discarder(hooks: Sequence[Callable[[ReadableSpan], None]]) -> Callable[[ReadableSpan], None]:
        def discard(span: ReadableSpan) -> None:
            for hook in hooks:
                try:
                    hook(span)
                except Exception:
                    log_internal_error("telling a downstream processor of a span sampled out")

        return discard

    def _sampling_wait(self, trace_id: int, delta: int) -> None:
        """Completion buffer, under its lock: a trace-level verdict of ``trace_id`` to wait for (1), or not (-1)."""
        if self._gate is not None:
            self._gate.expect(trace_id, delta)

    def _new_limits(self, specs: Sequence[EvaluatorSpec]) -> LimitGate:
        limits = LimitGate(self.options.limits, self.options.limits_clock)
        for spec in specs:
            limits.register(spec.evaluator.name, spec.limits)
        if self.options.redis_url is not None and limits.active:  # no limit set: nothing to share
            from evaltrace.evaluation.shared_limits import SharedLimits  # imports redis: only when configured

            limits.shared = SharedLimits(self.options.redis_url)
        return limits

    def _job_context(self, metrics: PipelineMetrics) -> JobContext:
        opts = self.options
        return JobContext(
            options=opts,
            stats=self._stats,
            monitor=self.monitor,
            sinks=self._sinks,
            log_events=(
                LogEventEmitter(opts.logger_provider, opts.redactor, provenance=opts.evaluation_provenance)
                if opts.emit_log_events
                else None
            ),
            metrics=metrics,
            forward=self._forward,
            pool=self._engine.pool,
            async_slots=self._engine.async_slots,
            async_runner=self._engine.user_loop,
            offenders=self._engine.offenders,
            limits=self._limits if self._limits.active else None,
            spend=self._spend,
            remote=self._remote,
            superseded=self._superseded,
            sessions=self._sessions,
            on_session=self._watch,
            session_superseded=self._session_superseded,
        )

    def _session_superseded(self, session_id: str, revision: int) -> bool:
        sessions = self._sessions
        return sessions is not None and not sessions.is_latest(session_id, revision)

    def _superseded(self, root: ReadableSpan, revision: int) -> bool:
        """Whether a newer evaluation revision of ``root``'s trace was handed out (the loop thread asks)."""
        completion = self._completion
        if completion is None or root.context is None:
            return False
        return not completion.is_latest(root.context.trace_id, revision)

    def _sink_worker(self, sink: ScoreSink, key: str) -> SinkWorker:
        opts = self.options
        # Absolute now: a later chdir in the application must not scatter dead letters.
        directory = Path(opts.dead_letter_dir).absolute() if opts.dead_letter_dir is not None else None
        dead_letter = directory / f"{key}.jsonl" if directory is not None else None
        return SinkWorker(
            sink,
            max_queue=opts.sink_max_queue,
            batch_size=opts.sink_batch_size,
            schedule_delay_s=opts.sink_schedule_delay_s,
            retry=opts.sink_retry,
            dead_letter_path=dead_letter,
        )

    # --- SpanProcessor ------------------------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Forward to downstream; remember spans started under suppression and decorated spans' traces."""
        self._saw_start = True
        if not self._global and not registered:  # nothing can evaluate any span: a pass-through
            for processor in self._downstream:
                try:
                    processor.on_start(span, parent_context=parent_context)
                except Exception:
                    log_internal_error("forwarding a span start to a downstream processor")
            return
        context = span.context
        try:
            if context is not None:
                # A judge call's own trace (evaltrace.judge) is never evaluated, even when traced unsuppressed.
                if is_suppressed() or (span.attributes or {}).get(semconv.EVALTRACE_JUDGE):
                    if len(self._suppressed) < _MAX_SUPPRESSED:
                        self._suppressed.add(context.span_id)
                else:
                    if self._may_evaluate(span):
                        # Descendants start after this span, so tracking its trace now buffers every one of them.
                        self._buffer.track(context.trace_id)
                    if self._completion is not None and _is_root(span):
                        # Every local root, not only those whose name matches now: HTTP server instrumentations
                        # rename the root (update_name("POST /chat")) before it ends. Non-matching roots are
                        # discarded when they end; until then their spans are buffered (within the bounds).
                        self._completion.track(context.trace_id, span)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("noting a span start")
        for processor in self._downstream:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception:
                log_internal_error("forwarding a span start to a downstream processor")

    def _may_evaluate(self, span: Span) -> bool:
        """At span start: could an evaluator need this span's subtree when it ends?"""
        attributes = span.attributes or {}
        if attributes.get(semconv.EVALTRACE_EVALUATORS_REF):
            return True
        if self._trace_specs and _is_root(span):
            return True
        if self._rate_only and span.context is not None and not self._in_sample(span.context.trace_id):
            return False  # no global evaluator will run in this trace: its spans need no buffering
        kind = span_kind(attributes)
        return any(spec.may_match(span.name, kind) for spec in self._span_specs)

    def _in_sample(self, trace_id: int) -> bool:
        """Whether any global span-level evaluator samples ``trace_id`` in (only with rate sampling).

        Deterministic by trace id, so on_start and on_end agree; the last answer is memoised, since a span's
        start and end (and its trace's other spans) ask about the same trace.
        """
        memo = self._sample_memo
        if memo[0] == trace_id:
            return memo[1]
        sampled = any(
            spec.sample_rate >= 1.0 or trace_fraction(trace_id, spec.sample_group) < spec.sample_rate
            for spec in self._span_specs
        )
        self._sample_memo = (trace_id, sampled)  # one tuple store: atomic under the GIL
        return sampled

    def _passes_by(self, span: ReadableSpan, attributes: Any, trace_id: int) -> bool:
        """Decide without matching or a job when no evaluator can run on ``span`` (then True, handled).

        That is: only decorator-attached evaluators exist and none is on this span, or every global one sampled
        this trace out (by trace id, as on_start did).
        """
        if not self._saw_start or self._completion is not None or attributes.get(semconv.EVALTRACE_EVALUATORS_REF):
            return False
        if self._global and not (self._rate_only and not self._in_sample(trace_id)):
            return False
        self._pass_by(span, attributes, trace_id, sampled_out=self._global)
        return True

    def _pass_by(self, span: ReadableSpan, attributes: Any, trace_id: int, sampled_out: bool) -> None:
        """Plan nothing for ``span`` (no evaluator runs on it); buffer it for a tracked ancestor, count skips."""
        if self._buffer.is_tracked(trace_id):
            self._buffer.add(span, create=False)
            if _is_root(span):
                self._buffer.pop(trace_id)
        if not sampled_out:
            return
        kind = span_kind(attributes)
        for spec, tick in zip(self._span_specs, self._sampled_out_ticks, strict=True):
            if spec.matches(span.name, attributes, kind):
                tick()  # stats()["sampled_out"] and not_evaluated_by_reason, without a lock
            elif spec.predicate is not None and spec.may_match(span.name, kind):
                self._stats.not_evaluated(semconv.SKIP_FILTERED, spec.evaluator.name)

    def _is_trace_root(self, span: ReadableSpan) -> bool:
        """The span trace-level evaluation waits for: the local root in process, the true root in the worker."""
        # Spans fed without on_start come from OTLP (evaltrace worker): a span with a remote parent is a
        # service's entry span there, and the trace is whole only with its parentless root.
        return _is_root(span) if self._saw_start else span.parent is None

    def on_end(self, span: ReadableSpan) -> None:
        """Forward ``span`` at once, or admit it for evaluation (O(1); never raises, never blocks)."""
        if not self._global and not registered and not self._suppressed and self._gate is None:
            for processor in self._downstream:  # nothing can evaluate any span: a pass-through
                try:
                    processor.on_end(span)
                except Exception:
                    log_internal_error("forwarding a span to a downstream processor")
            return
        # While an end_session() request waits, a root between its end and its session's announcement is counted:
        # the timer must not take the turn as over and not coming (it is neither running nor in its session yet).
        watch = bool(self._ending) and _is_root(span)
        if watch:
            with self._cond:
                self._roots_ending += 1
        try:
            try:
                job = self._plan(span)
            except Exception:
                self._stats.incr("internal_errors")
                log_internal_error("planning the evaluation of a span")
                job = None
            if job is None:
                self._forward(span)
                return
            try:
                submitted = self._submit(job)
            except BaseException:  # the user's Ctrl-C, passed on: the span still goes out (unevaluated, counted)
                self._forward(span)
                raise
            if not submitted:
                self._forward(span)
        finally:
            if watch:
                with self._cond:
                    self._roots_ending -= 1

    def _submit(self, job: Job) -> bool:
        """Admit ``job`` within ``max_queue_size`` and hand it to the engine; False (counted) when full."""
        if self._sessions is not None and job.trace_specs:
            try:  # may run on the application's thread (a root's end): our failure never reaches it
                self._split_sessions(self._sessions, job)
            except Exception:
                self._stats.incr("internal_errors")
                log_internal_error("finding the session of a completed trace")
                job.trace_specs = [spec for spec in job.trace_specs if spec.scope != "session"]
                job.session_specs, job.session_id = [], None
        with self._slot_lock:
            admitted = self._pending < self.options.max_queue_size
            if admitted:
                self._pending += 1
        if not admitted:
            self._stats.incr("dropped")
            self._metrics.record_dropped()
            self._overflow.loss(1, f"{self.options.max_queue_size} spans already queued; spans go out unevaluated")
            self._never_runs(job, semconv.SKIP_QUEUE_FULL)
            return False
        held = job.deferred or job.gate_held  # noted already: at its root's end, or by the completion buffer
        trace_id = job.span.context.trace_id if job.span.context is not None else None
        gate = self._gate if job.gate and not held else None
        noted = False
        # Everything between the admission above and the engine taking the job is in here: a failure must give the
        # slot back and count the job (else every later flush waits for it), and never reach the application.
        try:
            if gate is not None and trace_id is not None:
                gate.job_started(trace_id)
                noted = True
            self._engine.submit(job)
        except BaseException as exc:  # e.g. its threads cannot start: the job was never queued, no _job_done comes
            if noted and gate is not None and trace_id is not None:
                gate.job_finished(trace_id)  # the wait it just noted: the job will never finish it
            self._release_slot()
            self._never_runs(job, semconv.SKIP_ENGINE_UNAVAILABLE)
            if not isinstance(exc, Exception):  # the user's Ctrl-C (in a thread's start): theirs, passed on unchanged
                raise
            self._stats.incr("internal_errors")
            self._handoff_failing.failed()
            self._handoff_failed = True
            return False
        if self._handoff_failed:  # a plain flag: the usual span pays one attribute test, not a call
            self._handoff_failed = False
            self._handoff_failing.ok()
        self._stats.incr("enqueued")
        return True

    def _never_runs(self, job: Job, reason: str) -> None:
        """Count each of ``job``'s evaluators not evaluated (``reason``) and release the waits it held."""
        for spec in (*job.specs, *job.trace_specs, *job.session_specs):
            self._stats.not_evaluated(reason, spec.evaluator.name)
        if self._gate is not None and job.gate_held and job.span.context is not None:
            self._gate.job_finished(job.span.context.trace_id)  # the trace-level wait it held: will not run
        if self._sessions is not None and job.session_specs and job.session_id is not None:
            self._sessions.settle(job.session_id)

    def _release_slot(self) -> None:
        """Give back a job's queue slot: it finished, or the engine never took it."""
        with self._slot_lock:  # the condition's lock: notify_all below is called holding it
            self._pending -= 1
            if self._pending == 0:
                # An overflow episode ends when the queue has emptied, not at each freed slot; its line is logged
                # before flush() waiters wake, so a flush returns with the episode's end already logged.
                self._overflow.ok()
                self._cond.notify_all()

    def _split_sessions(self, sessions: SessionBuffer, job: Job) -> None:
        """Move a completed trace's session-scope evaluators to the job's session part, announced to the buffer.

        A trace carrying no session id has no session to join: counted (``sessions.without_session``).
        """
        session_specs = [spec for spec in job.trace_specs if spec.scope == "session"]
        if not session_specs:
            return
        job.trace_specs = [spec for spec in job.trace_specs if spec.scope != "session"]
        spans = job.spans[: job.span_count]
        session_id = _first_attribute(spans, job.span, semconv.SESSION_ID_KEYS)
        if session_id is None:
            sessions.stats.without_session += 1
            return
        job.session_specs, job.session_id = session_specs, session_id
        job.user_id = _first_attribute(spans, job.span, semconv.USER_ID_KEYS)
        sessions.expect(session_id)

    def _submit_session(self, due: DueSession) -> None:
        """Hand a due session to the engine (rate limits and budgets taken now, per judgement).

        A session whose conversation could not be built (a turn's field failed to map) is not evaluated by any of
        its evaluators (``mapping_failed``): counted as when a turn's whole mapping fails, never judged from a part.
        """
        if due.conversation is None:
            for spec in due.specs:
                self._stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
            return
        limits = self._limits if self._limits.active else None
        specs: list[EvaluatorSpec] = []
        skipped: list[tuple[EvaluatorSpec, str]] = []
        for spec in due.specs:
            reason = self._admit(limits, spec.evaluator.name) if limits is not None else None
            if reason is None:
                specs.append(spec)
            else:
                self._stats.not_evaluated(reason, spec.evaluator.name)
                skipped.append((spec, reason))
        if due.revision > 1:
            self._stats.incr("reevaluations")
        job = SessionJob(due.conversation, specs, due.revision, skipped)
        with self._cond:
            admitted = self._pending < self.options.max_queue_size
            if admitted:
                self._pending += 1
        if not admitted:
            for spec in specs:
                self._stats.not_evaluated(semconv.SKIP_QUEUE_FULL, spec.evaluator.name)
            self._session_loss.loss(1, f"{self.options.max_queue_size} evaluations already queued")
            return
        self._session_loss.ok()
        try:
            self._engine.submit(job)
        except Exception:
            # Never queued (e.g. its threads cannot start): the slot goes back, or every later flush would wait
            # for it, and its evaluators are counted, as a full evaluation process counts them. Re-raised: logged
            # once as an internal error by _judge_sessions, which goes on with the rest of the batch.
            self._release_slot()
            for spec in specs:
                self._stats.not_evaluated(semconv.SKIP_ENGINE_UNAVAILABLE, spec.evaluator.name)
            raise
        self._stats.incr("enqueued")

    def _plan(self, span: ReadableSpan) -> Job | None:
        context = span.context
        if context is None or self._shutdown:
            return None
        if self._suppressed and context.span_id in self._suppressed:
            self._suppressed.discard(context.span_id)
            return None
        attributes = span.attributes or {}
        trace_id = context.trace_id
        if self._passes_by(span, attributes, trace_id):
            return None
        kind = span_kind(attributes)  # evaltrace.span.kind, else derived from a foreign convention
        # Our own evaluation spans, and a judge call's trace (fed without on_start, in the worker): never evaluated.
        if kind == semconv.KIND_EVALUATION or attributes.get(semconv.EVALTRACE_JUDGE):
            return None
        # Spans that reach us without on_start (an OTLP receiver feeding on_end) were never tracked: buffer
        # every trace then, since which ancestor will need them is unknown until it ends.
        buffer_all = self.options.buffer_all_traces or not self._saw_start
        tracked = buffer_all or self._buffer.is_tracked(trace_id)
        if tracked:
            self._buffer.add(span, create=buffer_all)  # the span itself too: a root's job reads it from the list
        root = _is_root(span)
        # Only with trace-level evaluators: the root waits below, every other span joins its trace (O(1)).
        trace_root = self._completion is not None and self._is_trace_root(span)
        if self._completion is not None and not trace_root:
            self._offer_completion(self._completion, span, attributes, buffer_all)
        ref = attributes.get(semconv.EVALTRACE_EVALUATORS_REF)
        if not ref and not (root and tracked) and not trace_root and self._only_kinds is not None:
            if kind not in self._only_kinds:
                return None  # fast path: no global evaluator can match this kind and nothing else applies
        skipped: list[tuple[EvaluatorSpec, str]] = []
        specs = self._matching(self._span_specs, span, attributes, kind, skipped)
        if isinstance(ref, str) and ref:
            specs.extend(self._admitted(self._attached(ref, specs), attributes, trace_id, skipped))
        trace_specs: list[EvaluatorSpec] = []
        complete: OpenTrace | None = None
        if trace_root:
            trace_specs, complete = self._at_trace_root(span, attributes, kind, skipped)
        spans, count = self._job_spans(trace_id, root and tracked, tracked and bool(specs), complete)
        if not specs and not trace_specs:
            return None
        revision = complete.revision if complete is not None else 1
        held = complete is not None and complete.awaited  # the wait sampling was told of goes to this job
        return Job(
            span,
            specs,
            trace_specs,
            spans,
            count,
            admitted_at=time.monotonic(),
            skipped=skipped,
            revision=revision,
            gate_held=held,
        )

    def _job_spans(
        self, trace_id: int, release: bool, need: bool, complete: OpenTrace | None
    ) -> tuple[list[ReadableSpan], int]:
        """The span list a job reads (and its length now); ``release`` ends the trace's subtree buffering."""
        if complete is not None:  # complete as the root ends: evaluated on the root's job, results on the root
            if release:
                self._buffer.pop(trace_id)
            return complete.spans, len(complete.spans)
        if release:
            spans = self._buffer.pop(trace_id)
            return spans, len(spans)
        if need:
            return self._buffer.view(trace_id)
        return [], 0

    def _offer_completion(
        self, completion: CompletionBuffer, span: ReadableSpan, attributes: Any, buffer_all: bool
    ) -> None:
        marker = attributes.get(semconv.EVALTRACE_TRACE_END) is True
        if completion.add(span, create=buffer_all, marker=marker):
            self._watch()

    def _at_trace_root(
        self, span: ReadableSpan, attributes: Any, kind: Any, skipped: list[tuple[EvaluatorSpec, str]]
    ) -> tuple[list[EvaluatorSpec], OpenTrace | None]:
        """The trace's root ended: the trace-level evaluators to run on the root's job now, and the trace.

        Both empty when the trace is not complete yet (its evaluation is deferred to the completion timer).
        """
        assert self._completion is not None  # only called with trace-level evaluators
        closed = self._completion.closed(span)
        if closed is not None:
            # Given up (counted trace_incomplete then), evaluated already, or a re-sent root: judging it now would
            # judge a part of the trace as the whole, or count it twice.
            if closed == "done":  # another root of the trace (a service called again) past the late window
                for spec in self._trace_specs:
                    if spec.matches(span.name, attributes, kind):
                        self._stats.not_evaluated(semconv.SKIP_LATE_AFTER_WINDOW, spec.evaluator.name)
            return [], None
        trace_specs = self._matching(self._trace_specs, span, attributes, kind, skipped)
        marker = attributes.get(semconv.EVALTRACE_TRACE_END) is True
        complete = self._root_ended(self._completion, span, trace_specs, marker)
        return (trace_specs, complete) if complete is not None else ([], None)

    def _root_ended(
        self, completion: CompletionBuffer, root: ReadableSpan, specs: list[EvaluatorSpec], marker: bool
    ) -> OpenTrace | None:
        """Hand the trace's root to the completion buffer; the trace when it is complete now, else None."""
        if not specs:
            # Forgets the trace, or (another root's evaluation pending) adds this root to it like any span.
            if completion.discard(root, marker=marker):
                self._watch()
            return None
        outcome, complete = completion.root_ended(root, specs, marker=marker)
        if outcome == "waiting":  # export sampling was told by the buffer, before the root is forwarded
            self._watch()
        return complete

    def _watch(self) -> None:
        if self._timer is not None:
            self._timer.poke()

    def _tick(self) -> bool:
        """Timer thread: submit the traces that completed, count those that cannot; True while any is open."""
        completion = self._completion
        if completion is None:
            return False
        sessions = self._sessions
        try:
            ending = self._end_sessions(completion)
            self._settle(*completion.collect())
            if ending and sessions is not None:
                self._apply_ending(completion, sessions, ending)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("evaluating completed traces")
        if sessions is not None:
            self._judge_sessions(sessions)
        gate = self._gate
        if gate is not None:
            gate.expire()  # a trace parked past max_age_s goes out in full even when nothing else happens
        return (
            len(completion) > 0
            or completion.tombstone_count() > 0
            or (gate is not None and len(gate) > 0)
            or (sessions is not None and sessions.waiting())
            or bool(self._ending)
        )

    def _end_sessions(self, completion: CompletionBuffer) -> dict[str, float]:
        """end_session() waits: the session's traces whose root ended complete now, without their quiet period."""
        if not self._ending:
            return {}
        with self._cond:
            ending = dict(self._ending)
        completion.ready_where(lambda root: session_of(root.attributes or {}) in ending)
        return ending

    def _apply_ending(self, completion: CompletionBuffer, sessions: SessionBuffer, ending: dict[str, float]) -> None:
        """Hand each end_session() request to the session buffer once no trace of its session still runs.

        Called after the traces made due above were submitted (announced to their sessions): the session is then
        judged as soon as they are mapped. A turn still running keeps the request waiting (until its give-up time).
        """
        now = time.monotonic()
        with self._cond:
            if self._roots_ending > 0 and now < min(ending.values()):  # a root on its way to its session: next tick
                return
        running = {session_of(root.attributes or {}) for root in completion.running_roots()}
        for session_id, give_up in ending.items():
            if session_id in running and now < give_up:
                continue
            sessions.end(session_id)
            with self._cond:
                if self._ending.get(session_id) == give_up:
                    del self._ending[session_id]

    def _judge_sessions(self, sessions: SessionBuffer, *, drain: bool = False) -> None:
        try:
            batch = sessions.collect(drain=drain)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("judging sessions")
            return
        for due in batch:  # one session's failure never takes the rest of the batch (already handed out) with it
            try:
                self._submit_session(due)
            except Exception:
                self._stats.incr("internal_errors")
                log_internal_error("judging sessions")

    def _settle(self, complete: list[OpenTrace], incomplete: list[OpenTrace]) -> None:
        for entry in incomplete:
            self._settle_one(entry, complete=False)
        for entry in complete:
            self._settle_one(entry, complete=True)

    def _settle_one(self, entry: OpenTrace, *, complete: bool) -> None:
        """Submit or count one trace; an error is counted and ends this trace's sampling wait, no other trace's."""
        try:
            if complete:
                self._submit_trace(entry)
            else:
                self._count_incomplete(entry)
                self._gate_done(entry)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("evaluating a completed trace")
            self._gate_done(entry)

    def _count_incomplete(self, entry: OpenTrace) -> None:
        """Count ``trace_incomplete`` for the trace-level evaluators that would have run on the given-up trace.

        Its root ended: those admitted then. Else they are decided as at the root's end on what is known now: the
        live root in process (name and attributes as they are now) for the filters, the trace id for rate
        sampling (``sampled_out``, ``filtered`` as usual); in the worker, without the root, a filter cannot be
        decided and its evaluator is counted as possibly applying.
        """
        if entry.specs:
            for spec in entry.specs:
                self._stats.not_evaluated(semconv.SKIP_TRACE_INCOMPLETE, spec.evaluator.name)
            return
        root = entry.started
        attributes = dict(root.attributes or {}) if root is not None else {}  # a snapshot: the root still runs
        kind = span_kind(attributes) if root is not None else None
        for spec in self._trace_specs:
            reason = semconv.SKIP_TRACE_INCOMPLETE
            if root is not None and not spec.matches(root.name, attributes, kind):
                if spec.predicate is None or not spec.may_match(root.name, kind):
                    continue  # its name or kind filter rules the root out: not an evaluation that could have run
                reason = semconv.SKIP_FILTERED
            elif (root is not None or spec.sampler is None) and not _sampled(spec, attributes, entry.trace_id):
                self._stats.incr("sampled_out")
                reason = semconv.SKIP_SAMPLED_OUT
            self._stats.not_evaluated(reason, spec.evaluator.name)

    def _gate_done(self, entry: OpenTrace) -> None:
        """A deferred evaluation export sampling waits for will not run: it may decide without it (once)."""
        if self._gate is not None and entry.awaited:
            entry.awaited = False
            self._gate.job_finished(entry.trace_id)

    def _submit_trace(self, entry: OpenTrace) -> None:
        root = entry.root
        if root is None:
            return
        skipped: list[tuple[EvaluatorSpec, str]] = []
        if entry.revision == 1:
            specs = list(entry.specs)
        else:  # a re-evaluation is another judge call: it takes its rate-limit token and budget again
            self._stats.incr("reevaluations")
            specs = self._admitted(entry.specs, root.attributes or {}, entry.trace_id, skipped)
        if not specs:
            self._gate_done(entry)
            return
        job = Job(
            root,
            [],
            specs,
            entry.spans,
            len(entry.spans),
            admitted_at=time.monotonic(),
            deferred=True,
            revision=entry.revision,
            gate=entry.awaited,
            forwarded=True,  # the root went downstream when it ended
        )
        if self._shutdown and self._timer is not None and self._timer.is_current():
            # The timer's tick raced shutdown's drain: the engine may be stopping; never queued to it. Each
            # evaluation is counted and marked "not evaluated" (shutdown) like one the deadline cut short. A
            # session-scope evaluator judges no trace: counted only, never a mark on this trace's root.
            try:
                for spec in specs:
                    if spec.scope == "session":
                        self._stats.not_evaluated(semconv.SKIP_SHUTDOWN, spec.evaluator.name)
                self._runner.mark_cut(job, [], [spec for spec in specs if spec.scope != "session"])
            except Exception:
                log_internal_error("marking the evaluations of a trace not evaluated at shutdown")
            self._gate_done(entry)
            return
        try:
            submitted = self._submit(job)
        except BaseException:  # the user's Ctrl-C, passed on: the trace's wait is released as when refused
            self._gate_done(entry)
            raise
        if not submitted:
            self._gate_done(entry)

    def _matching(
        self,
        specs: Sequence[EvaluatorSpec],
        span: ReadableSpan,
        attributes: Any,
        kind: Any,
        skipped: list[tuple[EvaluatorSpec, str]],
    ) -> list[EvaluatorSpec]:
        if not specs:
            return []
        matching = []
        for spec in specs:
            if spec.matches(span.name, attributes, kind):
                matching.append(spec)
            elif spec.predicate is not None and spec.may_match(span.name, kind):
                # Name and kind said yes, the attribute predicate no: counted, so a predicate that rejects
                # everything shows up instead of looking like an idle evaluator.
                self._stats.not_evaluated(semconv.SKIP_FILTERED, spec.evaluator.name)
        trace_id = span.context.trace_id if span.context is not None else 0
        return self._admitted(matching, attributes, trace_id, skipped) if matching else matching

    def _admitted(
        self,
        specs: Sequence[EvaluatorSpec],
        attributes: Any,
        trace_id: int,
        skipped: list[tuple[EvaluatorSpec, str]],
    ) -> list[EvaluatorSpec]:
        """Return the ``specs`` that run now; the others are counted and appended to ``skipped`` with the reason.

        Sampling first (free and deterministic), then the rate limits and budgets (which take a token).
        """
        chosen = []
        limits = self._limits if self._limits.active else None
        for spec in specs:
            if not _sampled(spec, attributes, trace_id):
                self._stats.incr("sampled_out")
                reason: str | None = semconv.SKIP_SAMPLED_OUT
            elif spec.scope == "session":  # limits are taken per session judgement (_submit_session), not per turn
                reason = None
            else:
                reason = self._admit(limits, spec.evaluator.name) if limits is not None else None
            if reason is None:
                chosen.append(spec)
            else:
                self._stats.not_evaluated(reason, spec.evaluator.name)
                skipped.append((spec, reason))
        return chosen

    def _admit(self, limits: LimitGate, name: str) -> str | None:
        """``limits.admit(name)``; when the limiter itself fails, the skip reason ``limits_unavailable``.

        A limiter that raises (a ``limits_clock`` that fails, a bug of ours) refuses only the evaluation it was
        asked about, counted like any refusal: the span's or session's other evaluators are still admitted (and
        keep the tokens they took), and this one is neither run unchecked (a budget could be overspent) nor lost
        uncounted. Logged as an internal error.
        """
        try:
            reason = limits.admit(name)
        except Exception:
            self._stats.incr("internal_errors")
            episode = self._limits_failing.get(name)
            if episode is None:
                what = f"checking the rate limits and budgets of evaluator {name!r}"
                episode = self._limits_failing.setdefault(name, ErrorEpisode(what))
            episode.failed()
            return semconv.SKIP_LIMITS_UNAVAILABLE
        if self._limits_failing:  # only after a failure: the usual admission pays one truth test
            episode = self._limits_failing.get(name)
            if episode is not None:
                episode.ok()
        return reason

    def _attached(self, ref: str, specs: list[EvaluatorSpec]) -> Sequence[EvaluatorSpec]:
        """The decorator-attached specs of ``ref`` not already among the global ``specs`` chosen."""
        attached = self._resolve(ref)
        if not specs:  # the usual case: no global evaluator matched, nothing to leave out
            return attached
        chosen = {id(spec.evaluator) for spec in specs}  # one evaluator attached twice runs once
        return [s for s in attached if id(s.evaluator) not in chosen]

    def _resolve(self, ref: str) -> tuple[EvaluatorSpec, ...]:
        specs = self._ref_specs.get(ref)
        if specs is None:
            resolved = [as_spec(item) for item in resolve_evaluators(ref)]
            for spec in resolved:
                if spec.scope == "session":  # a decorated span is one turn: judging it as the session would be false
                    logger.warning(
                        "evaltrace: evaluator %r is attached by a decorator with scope='session'; session-scope "
                        "evaluators are given to configure(evaluators=...), it is not run here",
                        spec.evaluator.name,
                    )
            specs = tuple(spec for spec in resolved if spec.scope != "session")
            self._ref_specs[ref] = specs
        return specs

    # --- forwarding ---------------------------------------------------------------------------------------

    def _forward(self, span: ReadableSpan) -> None:
        if self._gate is not None:
            self._gate.offer(span)
        else:
            self._deliver(span)

    def _deliver(self, span: ReadableSpan) -> None:
        for processor in self._downstream:
            try:
                processor.on_end(span)
            except Exception:
                log_internal_error("forwarding a span to a downstream processor")

    def _job_done(self, job: Job | SessionJob) -> None:
        if self._gate is not None and isinstance(job, Job) and job.gate and job.span.context is not None:
            self._gate.job_finished(job.span.context.trace_id)
        self._release_slot()

    # --- flush, shutdown, monitoring --------------------------------------------------------------------

    def _wait_idle(self, deadline: float) -> bool:
        with self._cond:
            while self._pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
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

    def _stop_engines(self, reserve: float) -> None:
        """Stop the evaluation loop and process, and let go of Redis: nothing admits or charges any more."""
        self._engine.stop(min(0.25, reserve / 8))
        if self._remote is not None:
            self._remote.stop(min(1.0, reserve / 4))
        if self._limits.shared is not None:
            self._limits.shared.close()

    def shutdown(self, timeout_millis: int = 30_000) -> None:
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

    @property
    def sink_workers(self) -> list[SinkWorker]:
        """The workers delivering scores to this processor's sinks (a backfill hands its scores to them too)."""
        return list(self._sinks)

    def stats(self) -> dict[str, Any]:
        """Return the pipeline's counters.

        Keys: ``queued`` (admitted, not finished), ``enqueued``, ``dropped`` (queue full: forwarded
        unevaluated), ``enriched``, ``held_timeout``, ``evaluation_spans``, ``evaluated``, ``passed`` and
        ``failed`` (judged verdicts only), ``errors`` (the evaluation itself failed: never a verdict),
        ``timed_out``, ``skipped`` (not evaluated), ``retries``, ``sampled_out``, ``score_rejects``,
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

    def _pass_rates(self) -> dict[str, float]:
        return {
            name: health.pass_rate for name, health in self.monitor.health().items() if health.pass_rate is not None
        }

    def _sink_counts(self) -> dict[str, dict[str, int]]:
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
