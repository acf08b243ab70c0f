"""OTel-native outputs besides spans: the ``gen_ai.evaluation.result`` log event and pipeline metrics.

The log event goes through the Logs API (the spec's direction, conventions.md 1.4), parented to the evaluated
span through a context holding a ``NonRecordingSpan`` of its span context. Both use the provider given to the
processor or, when none, the global one (a no-op until the application installs one), looked up lazily.

Every metric attribute naming an evaluator goes through one :class:`NameGuard`: custom evaluator names are kept
as they are (never dropped, never hashed) up to ``MAX_METRIC_EVALUATOR_NAMES`` distinct names per process; names
first seen beyond that are recorded as ``_other``, so a bug minting a name per request cannot grow the metric
storage without bound.
"""

from __future__ import annotations

import datetime as dt
import inspect
import threading
from collections.abc import Callable, Iterable
from typing import Any

import opentelemetry.metrics._internal as _metrics_state
from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry._logs import Logger, LoggerProvider, get_logger_provider
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import INVALID_SPAN, NonRecordingSpan, SpanContext, set_span_in_context

from evaltrace._internal import semconv
from evaltrace._internal.tracing import INSTRUMENTATION_NAME
from evaltrace._version import __version__
from evaltrace.evaluation.convert import (
    JUDGED,
    error_type,
    evaluation_event_attributes,
    response_id_of,
    result_outcome,
)
from evaltrace.exporters.redaction import redact_attributes
from evaltrace.schema import EvaluationResult

# opentelemetry-api >= 1.35 emits log records from keyword arguments (``event_name=``, ``context=``); the supported
# floor (1.30) takes one LogRecord and knows events only through the Events API. Decided once, from the API.
_EMIT_TAKES_KEYWORDS = "event_name" in inspect.signature(Logger.emit).parameters

MAX_METRIC_EVALUATOR_NAMES = 200
"""Distinct evaluator names a process records on metrics before further new names become ``_other``."""

_ONE_MS = dt.timedelta(milliseconds=1)

SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 100.0)
"""``gen_ai.evaluation.score`` bucket boundaries: deciles for the usual 0-1 scores, then 1-5 / 1-10 / 0-100 scales.

The SDK's default boundaries (0, 5, 10, 25, ...) would put every 0-1 score in one bucket.
"""


class NameGuard:
    """Bound the distinct evaluator names recorded on metrics; names beyond the bound become ``_other``.

    Args:
        limit: Distinct names kept; the first ``limit`` names seen are kept for the life of the process.
    """

    def __init__(self, limit: int = MAX_METRIC_EVALUATOR_NAMES) -> None:
        self._limit = limit
        self.kept: set[str] = set()
        """The names kept so far (``name in kept``: the guard returns it as is; read it lock-free, never write)."""
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        """Return ``name`` when it is (or can still become) one of the kept names, else ``_other``."""
        if name in self.kept:  # the common case, lock-free: set membership is atomic in CPython
            return name
        with self._lock:
            if name in self.kept or len(self.kept) < self._limit:
                self.kept.add(name)
                return name
        return semconv.METRIC_NAME_OVERFLOW


class LogEventEmitter:
    """Emit one ``gen_ai.evaluation.result`` log record per result.

    Args:
        logger_provider: The provider; None uses the global one at each emit (so one set later is honoured).
        redactor: Applied to the string attributes of each record (the explanation, the label), when given.
        provenance: Add the evaluator's version and type to each record (opt-in, see ``ProcessorOptions``).
    """

    def __init__(
        self,
        logger_provider: LoggerProvider | None = None,
        redactor: Callable[[str], str] | None = None,
        *,
        provenance: bool = False,
    ) -> None:
        self._provider = logger_provider
        self._redactor = redactor
        self._provenance = provenance
        self._logger: tuple[LoggerProvider, Logger] | None = None

    def _get_logger(self) -> Logger:
        provider = self._provider or get_logger_provider()
        cached = self._logger
        if cached is None or cached[0] is not provider:  # the global provider may be replaced later
            cached = (provider, provider.get_logger(INSTRUMENTATION_NAME, __version__))
            self._logger = cached
        return cached[1]

    def emit(self, span: ReadableSpan, result: EvaluationResult) -> None:
        """Emit the event for ``result`` parented to ``span``."""
        if span.context is None:
            return
        attributes = evaluation_event_attributes(result, response_id_of(span.attributes), provenance=self._provenance)
        if self._redactor is not None:
            attributes = redact_attributes(attributes, self._redactor)
        timestamp = int(result.finished_at.timestamp() * 1e9)
        if not _EMIT_TAKES_KEYWORDS:
            self._emit_as_event(span.context, attributes, timestamp)
            return
        self._get_logger().emit(
            event_name=semconv.GEN_AI_EVALUATION_RESULT_EVENT,
            attributes=attributes,
            context=set_span_in_context(NonRecordingSpan(span.context)),
            timestamp=timestamp,
        )

    def emit_session(self, session_id: str, result: EvaluationResult, revision: int) -> None:
        """Emit the event for a session-scope ``result``: no span parent (a session is no span), ``session.id`` set.

        The record carries ``session.id`` and ``evaltrace.evaluation.revision`` so a log backend can group it
        with the session's traces and tell a re-judgement from the first verdict.
        """
        attributes = evaluation_event_attributes(result, provenance=self._provenance)
        attributes[semconv.SESSION_ID] = session_id
        attributes[semconv.EVALTRACE_EVAL_REVISION] = revision
        if self._redactor is not None:
            attributes = redact_attributes(attributes, self._redactor)
        timestamp = int(result.finished_at.timestamp() * 1e9)
        # Never parented to whatever span the emitting thread has: a context holding the invalid span (ids 0). Not
        # an empty Context, which the SDK takes as "none given" and replaces with the current one.
        unparented = set_span_in_context(INVALID_SPAN)
        if not _EMIT_TAKES_KEYWORDS:
            # The Events API of older SDKs takes a record's trace and span from the current span when the event
            # names none: made current here, the invalid span gives the record no parent.
            token = otel_context.attach(unparented)
            try:
                self._emit_as_event(None, attributes, timestamp)
            finally:
                otel_context.detach(token)
            return
        self._get_logger().emit(
            event_name=semconv.GEN_AI_EVALUATION_RESULT_EVENT,
            attributes=attributes,
            context=unparented,
            timestamp=timestamp,
        )

    def _emit_as_event(self, context: SpanContext | None, attributes: dict[str, Any], timestamp: int) -> None:
        """The same record through the Events API of an older SDK (the record then carries ``event.name``).

        ``context``: the evaluated span's; None for a session's record (the caller runs it under an empty context).
        """
        # Both removed from later releases, which take the keyword form instead.
        from opentelemetry._events import Event  # type: ignore[import-not-found,unused-ignore]
        from opentelemetry.sdk._events import EventLoggerProvider  # type: ignore[import-not-found,unused-ignore]
        from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider

        provider = self._provider or get_logger_provider()
        if not isinstance(provider, SdkLoggerProvider):
            return  # no SDK logger provider installed: the records would go nowhere
        events = EventLoggerProvider(provider).get_event_logger(INSTRUMENTATION_NAME, __version__)
        events.emit(
            Event(
                semconv.GEN_AI_EVALUATION_RESULT_EVENT,
                timestamp=timestamp,
                trace_id=context.trace_id if context is not None else None,
                span_id=context.span_id if context is not None else None,
                trace_flags=context.trace_flags if context is not None else None,
                attributes=attributes,
            )
        )


class PipelineMetrics:
    """OTel instruments mirroring ``stats()``.

    Args:
        meter_provider: The provider; None uses the global one (a no-op unless the application set one).
        observe_queue: Returns the current queue size, for an observable gauge.
        observe_pass_rates: Returns ``{evaluator: pass rate}`` over the monitor's window (judgements only), for
            a gauge.
        observe_sinks: Returns ``{sink: {outcome: cumulative count}}`` for an observable counter.
        max_evaluator_names: Distinct evaluator names recorded before new ones become ``_other``.
    """

    def __init__(
        self,
        meter_provider: MeterProvider | None,
        observe_queue: Callable[[], int],
        observe_pass_rates: Callable[[], dict[str, float]],
        observe_sinks: Callable[[], dict[str, dict[str, int]]],
        max_evaluator_names: int = MAX_METRIC_EVALUATOR_NAMES,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(INSTRUMENTATION_NAME, __version__)
        # On the global provider with none set yet, the API's proxy instruments drop every measurement: one check
        # per result instead of three calls building their attribute dicts (as engine.metrics.Instruments does).
        # Asked per result, so a provider the application sets later is recorded to from its next result on.
        self._follows_global = meter_provider is None and hasattr(_metrics_state, "_METER_PROVIDER")
        self._name = NameGuard(max_evaluator_names)
        self._scores = meter.create_histogram(
            semconv.METRIC_GEN_AI_EVALUATION_SCORE,
            unit="1",
            description="Evaluation score values (judgements with a numeric score)",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._passes = meter.create_counter(
            semconv.METRIC_EVAL_PASSES, unit="{evaluation}", description="Evaluations judged a pass"
        )
        self._errors = meter.create_counter(
            semconv.METRIC_EVAL_ERRORS, unit="{evaluation}", description="Evaluations that failed to run"
        )
        self._evaluations = meter.create_counter(
            semconv.METRIC_EVAL_EVALUATIONS, unit="{evaluation}", description="Evaluations run"
        )
        self._duration = meter.create_histogram(
            semconv.METRIC_EVAL_DURATION, unit="s", description="Evaluation duration"
        )
        self._dropped = meter.create_counter(
            semconv.METRIC_EVAL_SPANS_DROPPED, unit="{span}", description="Spans not evaluated: queue full"
        )
        self._rejects = meter.create_counter(
            semconv.METRIC_EVAL_SCORES_REJECTED, unit="{score}", description="Scores violating their ScoreConfig"
        )
        self._observe_queue = observe_queue
        self._observe_pass_rates = observe_pass_rates
        self._observe_sinks = observe_sinks
        meter.create_observable_counter(
            semconv.METRIC_EVAL_SINK_EXPORTS, [self._sink_callback], unit="{score}", description="Sink outcomes"
        )
        meter.create_observable_gauge(semconv.METRIC_EVAL_QUEUE_SIZE, [self._queue_callback], unit="{span}")
        meter.create_observable_gauge(semconv.METRIC_EVAL_PASS_RATE, [self._pass_rate_callback], unit="1")

    def record_result(self, result: EvaluationResult, outcome: str | None = None) -> None:
        """Count one evaluation, record its duration and, for a judgement with a score, the score.

        The count carries the evaluator, the status and the outcome (pass / fail / error / not_evaluated);
        ``evaltrace.evaluation.passed`` only for a judgement, so a dashboard summing ``passed=false`` counts
        fails, never errors or skips. ``gen_ai.evaluation.score`` gets the score of a judgement only (an error or
        a skip has no score worth averaging), with ``gen_ai.evaluation.name`` and the outcome (pass / fail);
        ``evaltrace.evaluation.passes`` counts passes and ``evaltrace.evaluation.errors`` errors by ``error.type``.
        ``outcome``: ``result_outcome(result)``, when the caller has it already.
        """
        if outcome is None:
            outcome = result_outcome(result)
        name = result.evaluator
        if name not in self._name.kept:  # a name already kept is returned as is: NameGuard's call only for new ones
            name = self._name(name)  # kept even with nothing recorded: the first names seen stay the kept ones
        if self._follows_global and _metrics_state._METER_PROVIDER is None:
            return
        judged = outcome in JUDGED
        if judged and result.score is not None:
            self._scores.record(
                float(result.score),
                {semconv.GEN_AI_EVALUATION_NAME: name, semconv.EVALTRACE_EVAL_OUTCOME_ATTR: outcome},
            )
        if outcome == semconv.OUTCOME_PASS:
            self._passes.add(1, {semconv.EVALTRACE_EVALUATOR_NAME: name})
        elif outcome == semconv.OUTCOME_ERROR:
            failure = error_type(result) or semconv.ERROR_TYPE_OTHER
            self._errors.add(1, {semconv.EVALTRACE_EVALUATOR_NAME: name, semconv.ERROR_TYPE: failure})
        attributes: dict[str, str | bool] = {
            semconv.EVALTRACE_EVALUATOR_NAME: name,
            semconv.EVALTRACE_EVAL_STATUS: result.status,
            semconv.EVALTRACE_EVAL_OUTCOME_ATTR: outcome,
        }
        if judged:
            attributes[semconv.EVALTRACE_EVAL_PASSED_ATTR] = outcome == semconv.OUTCOME_PASS
        self._evaluations.add(1, attributes)
        # result.latency_ms without the property for our own class; a user subclass may override the property.
        if type(result) is EvaluationResult:
            # whole_ms() in one C operation: floor division of timedeltas is their microseconds' floor division.
            latency_ms = (result.finished_at - result.started_at) // _ONE_MS
        else:
            latency_ms = result.latency_ms
        self._duration.record(latency_ms / 1000, {semconv.EVALTRACE_EVALUATOR_NAME: name})

    def record_dropped(self) -> None:
        """Count one span dropped from the evaluation queue."""
        self._dropped.add(1)

    def record_reject(self, evaluator: str) -> None:
        """Count one score rejected by its ScoreConfig."""
        self._rejects.add(1, {semconv.EVALTRACE_EVALUATOR_NAME: self._name(evaluator)})

    def _queue_callback(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._observe_queue())]

    def _pass_rate_callback(self, options: CallbackOptions) -> Iterable[Observation]:
        rates: dict[str, Any] = self._observe_pass_rates()
        # Names past the bound are left out here rather than folded: averaging rates of unrelated evaluators
        # into one "_other" gauge would be a number that means nothing.
        return [
            Observation(rate, {semconv.EVALTRACE_EVALUATOR_NAME: name})
            for name, rate in rates.items()
            if self._name(name) == name
        ]

    def _sink_callback(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(count, {semconv.EVALTRACE_SINK_NAME: sink, semconv.EVALTRACE_SINK_OUTCOME: outcome})
            for sink, outcomes in self._observe_sinks().items()
            for outcome, count in outcomes.items()
        ]
