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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context, get_current
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from evaltrace._internal import deferred_attributes, forks, semconv
from evaltrace._internal.episodes import LossEpisode
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace._internal.evaluator_registry import registered
from evaltrace._internal.export_counts import observe_export_counts
from evaltrace._internal.export_queue import ExportQueue
from evaltrace._internal.forwarding import starting
from evaltrace._internal.tracing import SUPPRESSION_KEYS
from evaltrace.evaluation import _admission, _lifecycle, _processor_setup, _trace_end
from evaltrace.evaluation._admission import is_root
from evaltrace.evaluation._engine import Engine
from evaltrace.evaluation._jobs import Job, JobContext, JobRunner
from evaltrace.evaluation._process import ProcessEngine
from evaltrace.evaluation._session_jobs import SessionJob
from evaltrace.evaluation._shipping import evaluator_reference
from evaltrace.evaluation.buffer import TraceBuffer
from evaltrace.evaluation.evaluator import Evaluator, EvaluatorSpec, as_specs
from evaltrace.evaluation.monitor import ProductionMonitor
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.evaluation.sinks.worker import SinkWorker
from evaltrace.evaluation.spend import SpendMetrics
from evaltrace.evaluation.stats import PipelineStats
from evaltrace.evaluation.telemetry import LogEventEmitter, PipelineMetrics
from evaltrace.mapping._spans import plain_attrs

_MAX_SUPPRESSED = 65_536
# The SDK's ReadableSpan.attributes property (on_start reads the field it wraps on a class that keeps it), as
# deferred_attributes found it before installing its view: read here at import, this module imported after the
# first preset span start would take the view for it (and read a starting span without its preset).
_ATTRIBUTES_PROPERTY = deferred_attributes.SDK_ATTRIBUTES_PROPERTY
# is_suppressed()'s keys (OTel's, then ours), read by on_start straight from the current context.
_SUPPRESS_OTEL, _SUPPRESS_OURS = SUPPRESSION_KEYS
logger = logging.getLogger("evaltrace.evaluation")


def _unique_names(names: Sequence[str]) -> list[str]:
    """``["jsonl", "langfuse", "jsonl"]`` -> ``["jsonl", "langfuse", "jsonl-2"]``."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return unique


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
        # The downstream processors that do something at span start (those overriding ``on_start``): on_start
        # forwards to these only, as the pipeline in front of it does (``starting``). The export queues inherit the
        # base class's ``on_start``, which does nothing: calling it was a Python call per span start for nothing.
        self._starting = starting(self._downstream)
        specs = as_specs(evaluators)
        self._span_specs = tuple(s for s in specs if s.scope == "span")
        # Trace- and session-scope evaluators both wait for traces to complete: the completion machinery treats
        # them alike; a completed trace's session-scope ones take it to its session (see ``sessions``).
        self._trace_specs = tuple(s for s in specs if s.scope != "span")
        self._has_sessions = any(s.scope == "session" for s in specs)
        # A session-scope evaluator sampled by session id: its admission at a root's end needs the trace's session,
        # which may be on a descendant (a LangGraph thread under the user's own span), not on the root.
        self._session_sampling = any(
            s.scope == "session" and s.sampler is None and s.sample_rate < 1.0 for s in self._trace_specs
        )
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
        # A ref whose attached specs all run whenever they apply (no sampler, sample_rate 1): their admission
        # without limits is the specs themselves (see _plan).
        self._unconditional: dict[str, tuple[EvaluatorSpec, ...]] = {}
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
        self._live: dict[int, Job] = {}  # admitted jobs whose last span is still to go (JobContext.live)
        # Set when the downstream processors shut down: a span forwarded later is counted, not handed to them.
        self._sealed = False
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

    # --- building the parts, and rebuilding them in a forked child (in _processor_setup) ------------------

    _reinit_after_fork = _processor_setup.reinit_after_fork
    _new_completion = _processor_setup.new_completion
    _new_sessions = _processor_setup.new_sessions
    _new_gate = _processor_setup.new_gate
    _discarder = staticmethod(_processor_setup.discarder)
    _sampling_wait = _processor_setup.sampling_wait
    _new_limits = _processor_setup.new_limits

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
            live=self._live,
            live_lock=self._slot_lock,
        )

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

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:  # noqa: C901  (one frame per span, on purpose)
        """Forward to downstream; remember spans started under suppression and decorated spans' traces."""
        self._saw_start = True
        if not self._global and not registered:  # nothing can evaluate any span: a pass-through
            for processor in self._starting:
                try:
                    processor.on_start(span, parent_context=parent_context)
                except Exception:
                    log_internal_error("forwarding a span start to a downstream processor")
            return
        context = span.context
        try:
            if context is not None:
                # The attributes read once, as a plain dict: a live span's are a view over the SDK's
                # BoundedAttributes, where each read runs two Python frames (and a miss raises a KeyError inside).
                # An SDK span's: the plain dict its BoundedAttributes wraps, read in place (what plain_attrs copies,
                # without the copy and its two frames). Only read here, never kept or handed to user code, and the
                # span is still starting: no other code holds it yet.
                attributes: Any = None
                prop = getattr(type(span), "attributes", None)
                if prop is _ATTRIBUTES_PROPERTY or (
                    # After the first preset start (any instrumented LLM call) the property is deferred_attributes'
                    # view: the field is the same, unless this thread's preset start has not put its preset in.
                    prop is deferred_attributes.view_property and not deferred_attributes.preset_pending()
                ):
                    raw = getattr(span, "_attributes", None)
                    if type(raw) is BoundedAttributes:
                        attributes = getattr(raw, "_dict", None)
                        if type(attributes) is not dict:  # an older SDK's OrderedDict: copied, as before
                            attributes = None
                if attributes is None:
                    attributes = plain_attrs(span)
                # is_suppressed(), inline (one frame fewer on every span start): the current context's two keys.
                # A judge call's own trace (evaltrace.judge) is never evaluated, even when traced unsuppressed.
                current = get_current()
                if (
                    current.get(_SUPPRESS_OTEL)
                    or current.get(_SUPPRESS_OURS)
                    or attributes.get(semconv.EVALTRACE_JUDGE)
                ):
                    if len(self._suppressed) < _MAX_SUPPRESSED:
                        self._suppressed.add(context.span_id)
                else:
                    # A decorated span (its evaluators' ref) is _may_evaluate's first answer, without its frame.
                    if attributes.get(semconv.EVALTRACE_EVALUATORS_REF) or self._may_evaluate(span, attributes):
                        # Descendants start after this span, so tracking its trace now buffers every one of them.
                        self._buffer.track(context.trace_id)
                    if self._completion is not None and is_root(span):
                        # Every local root, not only those whose name matches now: HTTP server instrumentations
                        # rename the root (update_name("POST /chat")) before it ends. Non-matching roots are
                        # discarded when they end; until then their spans are buffered (within the bounds).
                        self._completion.track(context.trace_id, span)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("noting a span start")
        for processor in self._starting:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception:
                log_internal_error("forwarding a span start to a downstream processor")

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
        watch = bool(self._ending) and is_root(span)
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

    # --- admission and planning, on the application thread (in _admission) -----------------------------

    _may_evaluate = _admission.may_evaluate
    _in_sample = _admission.in_sample
    _passes_by = _admission.passes_by
    _pass_by = _admission.pass_by
    _is_trace_root = _admission.is_trace_root
    _submit = _admission.submit
    _never_runs = _admission.never_runs
    _release_slot = _admission.release_slot
    _plan = _admission.plan
    _job_spans = _admission.job_spans
    _matching = _admission.matching
    _admitted = _admission.admitted
    _admit = _admission.admit
    _admitted_attached = _admission.admitted_attached
    _attached = _admission.attached
    _resolve = _admission.resolve
    _limit_attached = _admission.limit_attached

    # --- trace completion and sessions (in _trace_end) ------------------------------------------------

    end_session = _trace_end.end_session
    _session_superseded = _trace_end.session_superseded
    _superseded = _trace_end.superseded
    _split_sessions = _trace_end.split_sessions
    _drawn_by_session = _trace_end.drawn_by_session
    _submit_session = _trace_end.submit_session
    _offer_completion = _trace_end.offer_completion
    _at_trace_root = _trace_end.at_trace_root
    _root_ended = _trace_end.root_ended
    _watch = _trace_end.watch
    _tick = _trace_end.tick
    _end_sessions = _trace_end.end_sessions
    _apply_ending = _trace_end.apply_ending
    _judge_sessions = _trace_end.judge_sessions
    _settle = _trace_end.settle
    _settle_one = _trace_end.settle_one
    _count_incomplete = _trace_end.count_incomplete
    _gate_done = _trace_end.gate_done
    _submit_trace = _trace_end.submit_trace

    # --- forwarding ---------------------------------------------------------------------------------------

    def _forward(self, span: ReadableSpan) -> None:
        if self._gate is not None:
            self._gate.offer(span)
        else:
            self._deliver(span)

    def _deliver(self, span: ReadableSpan) -> None:
        if self._sealed:  # downstream is shut down (an SDK processor would drop it without a word)
            self._after_shutdown(span)
            return
        for processor in self._downstream:
            try:
                processor.on_end(span)
            except Exception:
                log_internal_error("forwarding a span to a downstream processor")

    def _job_done(self, job: Job | SessionJob) -> None:
        self._live.pop(id(job), None)  # ended without its last emission (an error of ours): nothing more comes
        if self._gate is not None and isinstance(job, Job) and job.gate and job.span.context is not None:
            self._gate.job_finished(job.span.context.trace_id)
        self._release_slot()

    # --- flush, shutdown, monitoring (in _lifecycle) -------------------------------------------------

    _wait_idle = _lifecycle.wait_idle
    force_flush = _lifecycle.force_flush
    _stop_engines = _lifecycle.stop_engines
    _abandon_unfinished = _lifecycle.abandon_unfinished
    _after_shutdown = _lifecycle.after_shutdown
    shutdown = _lifecycle.shutdown
    stats = _lifecycle.stats
    _pass_rates = _lifecycle.pass_rates
    _sink_counts = _lifecycle.sink_counts

    @property
    def sink_workers(self) -> list[SinkWorker]:
        """The workers delivering scores to this processor's sinks (a backfill hands its scores to them too)."""
        return list(self._sinks)
