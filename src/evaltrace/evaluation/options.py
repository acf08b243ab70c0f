"""Keyword options of :class:`~evaltrace.evaluation.EvaluationSpanProcessor` (``configure(evaluation_options=)``)."""

from __future__ import annotations

import functools
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from evaltrace._internal.value_types import first_mismatch, format_path
from evaltrace.evaluation.limits import Limits
from evaltrace.evaluation.sampling import ExportSampling
from evaltrace.evaluation.sessions import (
    DEFAULT_SESSION_MAX_BYTES,
    DEFAULT_SESSION_MAX_SESSIONS,
    DEFAULT_SESSION_MAX_TRACES,
    DEFAULT_SESSION_QUIET_PERIOD_S,
)
from evaltrace.evaluation.shared_limits import check_redis_url
from evaltrace.evaluation.sinks.worker import RetryPolicy
from evaltrace.exceptions import ConfigError
from evaltrace.schema import ScoreConfig

DEFAULT_DEAD_LETTER_DIR = Path(".evaltrace") / "dead-letter"


@dataclass(frozen=True)
class ProcessorOptions:
    """Every tunable of the evaluation processor, with its default.

    Attributes:
        max_queue_size: Spans admitted for evaluation at once (queued or being evaluated); beyond it spans are
            forwarded unevaluated and counted as ``dropped``.
        hold_timeout_s: Longest time an evaluated span is held back from downstream (from its end). Results
            ready by then ride on an enriched copy of the span; otherwise the span goes out as is and the
            results follow as child ``evaluation {name}`` spans.
        evaluator_timeout_s: Default per-evaluation timeout (an ``EvaluatorSpec.timeout_s`` overrides it).
        max_retries: Retries of an evaluation that raised a retryable error.
        retry_backoff_s: Wait before the first retry (doubled each time).
        sync_workers: Threads running synchronous evaluators (and Trace mapping).
        max_async_concurrency: Async evaluations running at once on the event loop.
        trace_buffer_max_traces: Traces whose spans are buffered for subtree / trace-level evaluation.
        trace_buffer_max_spans: Spans buffered per trace.
        trace_buffer_max_age_s: Age after which a buffered trace whose root never ended is evicted.
        trace_quiet_period_s: Trace-level evaluation waits for the root span to end and then this long without a
            new span of the trace (0: evaluate when the root ends, results on the enriched root).
        trace_late_window_s: After a trace-level evaluation, a span of the trace arriving within this window
            re-opens it and the trace-level evaluators run again (0: late spans are not re-evaluated).
        trace_max_wait_s: Longest wait from a trace's first span to its completion; a trace whose root has
            not ended by then is not evaluated (skip reason ``trace_incomplete``).
        trace_completion_max_traces: Traces waiting for completion at once (and, apart, evaluated traces kept
            for late spans); the oldest open trace is evicted as ``trace_incomplete``.
        trace_completion_max_spans: Spans kept per trace for trace-level evaluation; a trace with more is
            not evaluated (``trace_incomplete``).
        session_quiet_period_s: Session-scope evaluators judge a session once no trace of it completed for this
            long (or at once after ``evaltrace.end_session()``); a later trace re-judges it (a new revision).
            Default 120 s: a user who pauses longer than that usually starts a new topic, and coming back only
            costs a re-judgement, while a longer wait delays every session's verdict.
        session_max_sessions: Sessions held at once (judged ones are kept for re-judgement); the least recently
            active is evicted first, and never judged again from its later traces.
        session_max_traces: Traces held per session; past it the oldest turn is dropped (counted).
        session_max_bytes: Estimated memory of the traces held over all sessions (their JSON length plus an
            overhead per value, see ``sessions.trace_size``).
        buffer_all_traces: Buffer every trace, not only those an evaluator may need as judged at span start.
            Automatic when spans arrive without ``on_start`` (e.g. fed from an OTLP receiver).
        score_configs: ScoreConfig per evaluator name; scores violating it are rejected and counted.
        emit_log_events: Emit ``gen_ai.evaluation.result`` log records through the Logs API.
        logger_provider: LoggerProvider for those records (None: the global one).
        evaluation_provenance: Add the evaluator's version and type (``evaltrace.evaluator.version`` / ``.type``)
            to every ``gen_ai.evaluation.result`` event, span event and log record. Off by default: the GenAI
            conventions have no provenance attribute yet. ``configure(evaluation_provenance=True)`` or
            ``EVALTRACE_EVALUATION_PROVENANCE=true`` sets it.
        meter_provider: MeterProvider for pipeline metrics (None: the global one).
        sink_batch_size: Scores per sink export call.
        sink_max_queue: Scores queued per sink before overflowing to the dead-letter file.
        sink_schedule_delay_s: Longest wait for a sink batch to fill.
        sink_retry: Retry schedule of sink exports.
        dead_letter_dir: Directory of the per-sink dead-letter JSONL files (None: count and drop).
        monitor_window_s: Window of the :class:`~evaltrace.evaluation.ProductionMonitor`.
        export_sampling: Eval-aware export sampling (None: every span goes downstream).
        limits: Rate limit and judge budgets over all evaluators together (a :class:`Limits` or a mapping of
            its fields); each ``EvaluatorSpec.limits`` applies as well. What exceeds is not evaluated, with the
            skip reason ``rate_limited`` / ``over_budget``.
        limits_clock: Monotonic seconds used by the rate limits and budget windows (injectable for tests).
        redis_url: Keep the rate limits and budgets in this Redis server (``redis://host:6379/0``), shared by
            every process (``evaltrace worker`` replica) given the same URL; while it does not answer, each
            process falls back to its own limits (see :mod:`evaltrace.evaluation.shared_limits`). None (default):
            limits are per process. Concurrency slots (``max_concurrent``) are always per process.
        engine: Where evaluators run: ``"thread"`` (default: threads of this process) or ``"process"`` (a child
            process fed span records; ``configure(evaluation="process")`` sets it). See docs/evaluation.md,
            "Evaluation in a separate process".
        redactor: Masks score comments, labels and metadata before they reach the sinks (and their dead-letter
            files) and the log records' attributes; ``configure(redact=...)`` sets it. Evaluators and the
            monitor see the real text.
    """

    max_queue_size: int = 2048
    hold_timeout_s: float = 2.0
    evaluator_timeout_s: float | None = 30.0
    max_retries: int = 2
    retry_backoff_s: float = 0.2
    sync_workers: int = 4
    max_async_concurrency: int = 64
    trace_buffer_max_traces: int = 4096
    trace_buffer_max_spans: int = 2048
    trace_buffer_max_age_s: float = 300.0
    trace_quiet_period_s: float = 2.0
    trace_late_window_s: float = 30.0
    trace_max_wait_s: float = 300.0
    trace_completion_max_traces: int = 16_384
    trace_completion_max_spans: int = 2048
    session_quiet_period_s: float = DEFAULT_SESSION_QUIET_PERIOD_S
    session_max_sessions: int = DEFAULT_SESSION_MAX_SESSIONS
    session_max_traces: int = DEFAULT_SESSION_MAX_TRACES
    session_max_bytes: int = DEFAULT_SESSION_MAX_BYTES
    buffer_all_traces: bool = False
    score_configs: Mapping[str, ScoreConfig] = field(default_factory=dict)
    emit_log_events: bool = True
    logger_provider: Any = None
    evaluation_provenance: bool = False
    meter_provider: Any = None
    sink_batch_size: int = 50
    sink_max_queue: int = 10_000
    sink_schedule_delay_s: float = 0.5
    sink_retry: RetryPolicy = field(default_factory=RetryPolicy)
    dead_letter_dir: Path | str | None = DEFAULT_DEAD_LETTER_DIR
    monitor_window_s: float = 3600.0
    export_sampling: ExportSampling | None = None
    limits: Limits | None = None
    limits_clock: Callable[[], float] = time.monotonic
    redis_url: str | None = None
    redactor: Callable[[str], str] | None = None
    engine: str = "thread"

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", Limits.coerce(self.limits, "limits"))
        if self.redis_url is not None:
            check_redis_url(self.redis_url)
        for name in (
            "max_queue_size",
            "sync_workers",
            "max_async_concurrency",
            "sink_batch_size",
            "trace_completion_max_traces",
            "trace_completion_max_spans",
            "session_max_sessions",
            "session_max_traces",
            "session_max_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be at least 1")
        for name in (
            "hold_timeout_s",
            "retry_backoff_s",
            "max_retries",
            "trace_quiet_period_s",
            "trace_late_window_s",
            "session_quiet_period_s",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(name, "must not be negative")
        if self.engine not in ("thread", "process"):
            raise ConfigError("engine", f'expected "thread" or "process", got {self.engine!r}')
        if not self.trace_max_wait_s > 0:
            raise ConfigError("trace_max_wait_s", "must be greater than 0")

    @classmethod
    def from_kwargs(cls, options: Mapping[str, Any]) -> ProcessorOptions:
        """Build options from keyword arguments, naming any unknown one and any value of the wrong type."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(unknown[0], f"unknown evaluation option; known: {', '.join(sorted(known))}")
        problem = option_value_problem(options)
        if problem is not None:
            raise ConfigError(*problem)
        return cls(**options)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _shown(value: Any) -> str:
    """A scalar or short text as written; anything else by its type only (it may be large or hold a secret)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str) and len(value) <= 60:
        return repr(value)
    return f"<{type(value).__name__}>"


def option_value_problem(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first evaluation option whose value its annotation does not accept: ``(where, problem)``, else None.

    Nested values are checked too: each item of a mapping given as ``limits`` against :class:`Limits`'s fields
    (``limits.max_usd_per_day``), list items and mapping values against their annotation. Unknown names are left to
    :meth:`ProcessorOptions.from_kwargs`.
    """
    hints = _hints(ProcessorOptions)
    for name, value in options.items():
        if name not in hints:
            continue
        if name == "limits" and isinstance(value, Mapping):
            limit_hints = _hints(Limits)
            checks = [(f"{name}.{key}", limit_hints[key], item) for key, item in value.items() if key in limit_hints]
        else:
            checks = [(str(name), hints[name], value)]
        for where, hint, item in checks:
            mismatch = first_mismatch(hint, item, as_json=False)
            if mismatch is not None:
                return format_path(where, mismatch.path), f"expected {mismatch.expected}, got {_shown(mismatch.value)}"
    return None
