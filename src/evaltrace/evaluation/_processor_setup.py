"""Building ``EvaluationSpanProcessor``'s parts, and rebuilding them in a forked child.

The completion buffer and its timer, the session buffer, eval-aware export sampling's gate and the evaluators'
limits. Each function is a method of :class:`~evaltrace.evaluation.processor.EvaluationSpanProcessor` (assigned in
its class body under its old name; moved here as it was).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal.episodes import LossEpisode
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace.evaluation.buffer import TraceBuffer
from evaltrace.evaluation.completion import CompletionBuffer, CompletionTimer
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluation.sampling import ExportGate
from evaltrace.evaluation.sessions import SessionBuffer
from evaltrace.evaluation.stats import PipelineStats

if TYPE_CHECKING:
    from evaltrace.evaluation.processor import EvaluationSpanProcessor

logger = logging.getLogger("evaltrace.evaluation")


def reinit_after_fork(self: EvaluationSpanProcessor) -> None:
    """In a forked child: no pending job (the parent's are the parent's), counters and monitor at zero.

    New locks throughout; the engine, the sink workers and the export queues have re-initialised
    themselves already (they were created first). A processor shut down before the fork stays shut down.
    """
    opts = self.options
    self._slot_lock = threading.RLock()
    self._cond = threading.Condition(self._slot_lock)
    self._pending = 0
    self._live = {}
    self._stats = PipelineStats()
    self._sampled_out_ticks = self._new_ticks()
    self._overflow = LossEpisode(logger, "the evaluation queue", "evaluation")
    self._handoff_failing = ErrorEpisode("handing spans' evaluations to the evaluation engine")
    self._handoff_failed = False
    self._limits_failing = {}
    # asyncio slots of the old loop; the decorator-attached specs resolved already keep their limits too.
    attached = [spec for specs in self._ref_specs.values() for spec in specs]
    self._limits = self._new_limits((*self._span_specs, *self._trace_specs, *attached))
    if self._shutdown:
        return
    self._buffer = TraceBuffer(opts.trace_buffer_max_traces, opts.trace_buffer_max_spans, opts.trace_buffer_max_age_s)
    self._suppressed = set()
    self._completion, self._timer = self._new_completion()  # the parent's timer thread is gone
    self._ending = {}
    self._roots_ending = 0
    self._session_loss = LossEpisode(logger, "session evaluation", "session judgement")
    self._sessions = self._new_sessions()  # the parent's sessions are the parent's to judge
    self.monitor = self._new_monitor()
    self._gate = self._new_gate()
    self._runner.ctx = self._job_context(self._metrics)  # the engine's new semaphore, the new stats


def new_completion(self: EvaluationSpanProcessor) -> tuple[CompletionBuffer | None, CompletionTimer | None]:
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


def new_sessions(self: EvaluationSpanProcessor) -> SessionBuffer | None:
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


def new_gate(self: EvaluationSpanProcessor) -> ExportGate | None:
    sampling = self.options.export_sampling
    if not sampling:
        return None
    # A downstream processor that counts spans until they are exported (the worker's admission) hears of
    # those sampling discards, which it would otherwise wait for until it gives up on them.
    hooks = [hook for p in self._downstream if (hook := getattr(p, "on_sampled_out", None)) is not None]
    discard = self._discarder(hooks) if hooks else None
    # The decision waits for the root trace completion waits for: in the worker, not a service's entry span.
    return ExportGate(sampling, self._deliver, self._is_trace_root, discard=discard)


def discarder(hooks: Sequence[Callable[[ReadableSpan], None]]) -> Callable[[ReadableSpan], None]:
    def discard(span: ReadableSpan) -> None:
        for hook in hooks:
            try:
                hook(span)
            except Exception:
                log_internal_error("telling a downstream processor of a span sampled out")

    return discard


def sampling_wait(self: EvaluationSpanProcessor, trace_id: int, delta: int) -> None:
    """Completion buffer, under its lock: a trace-level verdict of ``trace_id`` to wait for (1), or not (-1)."""
    if self._gate is not None:
        self._gate.expect(trace_id, delta)


def new_limits(self: EvaluationSpanProcessor, specs: Sequence[EvaluatorSpec]) -> LimitGate:
    limits = LimitGate(self.options.limits, self.options.limits_clock)
    for spec in specs:
        limits.register(spec.evaluator.name, spec.limits)
    if self.options.redis_url is not None and limits.active:  # no limit set: nothing to share
        from evaltrace.evaluation.shared_limits import SharedLimits  # imports redis: only when configured

        limits.shared = SharedLimits(self.options.redis_url)
    return limits
