"""Judge spend and skipped evaluations as metrics, apart from the application's own LLM metrics.

Judge calls are suppressed from tracing (they would otherwise read as the application's LLM calls), so their
duration, tokens and cost are measured here, from each result's ``detail["judge"]`` record (every uncached call
of ``detail["judge_calls"]`` when a judge made several), under ``gen_ai.evaluation.client.*`` names. Attributes stay low-cardinality: the evaluator name and the judge model,
plus the token type; skipped evaluations carry the evaluator name and one of a handful of skip reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from evaltrace._internal import semconv
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace._internal.tracing import INSTRUMENTATION_NAME
from evaltrace._version import __version__
from evaltrace.evaluation.telemetry import NameGuard
from evaltrace.schema import EvaluationResult

if TYPE_CHECKING:
    from evaltrace.evaluation.limits import LimitGate
    from evaltrace.evaluation.stats import PipelineStats


@dataclass(frozen=True)
class JudgeUsage:
    """What one evaluation's judge calls cost (a cached judgement costs nothing)."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    duration_s: float | None


def judge_usage(result: EvaluationResult) -> JudgeUsage | None:
    """Return the judge usage recorded on ``result``, or None when no uncached judge call was made.

    A result of several judge calls (a session judge, e.g. ``conversation_relevancy`` with one call per reply)
    lists them all under ``detail["judge_calls"]``: their uncached tokens, cost and duration are summed, so a
    budget is charged for every call, not only the first. Otherwise the one call is ``detail["judge"]``.
    """
    detail: Any = result.detail if isinstance(result.detail, dict) else {}
    calls: Any = detail.get("judge_calls")
    if not isinstance(calls, list) or not calls:
        calls = [detail.get("judge")]
    records = [c for c in calls if isinstance(c, dict) and not c.get("cached")]
    if not records:
        return None
    costs = [float(c["cost_usd"]) for c in records if _is_number(c.get("cost_usd"))]
    durations = [float(c["duration_s"]) for c in records if _is_number(c.get("duration_s"))]
    return JudgeUsage(
        model=str(records[0].get("model") or ""),
        input_tokens=sum(int(c.get("input_tokens") or 0) for c in records),
        output_tokens=sum(int(c.get("output_tokens") or 0) for c in records),
        cost_usd=sum(costs) if costs else None,
        duration_s=sum(durations) if durations else None,
    )


def charge_judge(
    limits: LimitGate | None, spend: SpendMetrics | None, stats: PipelineStats, name: str, result: EvaluationResult
) -> None:
    """Charge ``result``'s judge spend to evaluator ``name``'s budgets and the global ones; record its metrics.

    The metrics (``gen_ai.evaluation.client.*``) are recorded under the result's evaluator name.

    Bookkeeping after the verdict: a failure here (a ``limits_clock`` that raises, a bug of ours) is counted as an
    internal error and logged (a failing charge once per evaluator per episode), and never takes the verdict with it
    (nor the other verdicts of its span). The metrics and the budgets are recorded apart: a charge that fails (the
    clock) never drops the metrics.
    """
    try:
        usage = judge_usage(result)
    except Exception:
        stats.incr("internal_errors")
        log_internal_error(f"reading the judge spend of evaluator {name!r}")
        return
    if usage is None:
        return
    if spend is not None:
        try:
            spend.record_usage(result.evaluator, usage)
        except Exception:
            stats.incr("internal_errors")
            log_internal_error(f"recording the judge spend metrics of evaluator {name!r}")
    if limits is not None:
        try:
            limits.charge(name, usage.input_tokens + usage.output_tokens, usage.cost_usd)
        except Exception:
            stats.incr("internal_errors")
            # A persistent fault (its clock) would log a traceback per judged span or session: once per episode.
            episode = limits.charge_failing.get(name)
            if episode is None:
                what = f"charging the judge spend of evaluator {name!r}"
                episode = limits.charge_failing.setdefault(name, ErrorEpisode(what))
            episode.failed()
            return
        if limits.charge_failing:  # only after a failure: the usual charge pays one truth test
            episode = limits.charge_failing.get(name)
            if episode is not None:
                episode.ok()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class SpendMetrics:
    """Instruments for judge spend and for evaluations not run.

    Args:
        meter_provider: The provider; None uses the global one (a no-op unless the application set one).
        observe_not_evaluated: Returns ``{reason: {evaluator: cumulative count}}`` of the evaluations not run.
            An observable counter read at collection time, so a sampled-out span costs the application thread
            no metric call.
    """

    def __init__(
        self, meter_provider: MeterProvider | None, observe_not_evaluated: Callable[[], dict[str, dict[str, int]]]
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(INSTRUMENTATION_NAME, __version__)
        self._name = NameGuard()  # the same bound on distinct evaluator names as the other evaluation metrics
        self._duration = meter.create_histogram(
            semconv.METRIC_EVAL_CLIENT_DURATION, unit="s", description="Judge call duration per evaluation"
        )
        self._tokens = meter.create_histogram(
            semconv.METRIC_EVAL_CLIENT_TOKEN_USAGE, unit="{token}", description="Judge tokens per evaluation"
        )
        self._cost = meter.create_counter(semconv.METRIC_EVAL_CLIENT_COST, unit="USD", description="Judge cost")
        self._observe_not_evaluated = observe_not_evaluated
        meter.create_observable_counter(
            semconv.METRIC_EVAL_NOT_EVALUATED,
            [self._not_evaluated_callback],
            unit="{evaluation}",
            description="Evaluations not run, by reason",
        )

    def record_usage(self, evaluator: str, usage: JudgeUsage) -> None:
        """Record one evaluation's judge duration, tokens and cost."""
        attributes = {
            semconv.EVALTRACE_EVALUATOR_NAME: self._name(evaluator),
            semconv.GEN_AI_REQUEST_MODEL: usage.model,
        }
        if usage.duration_s is not None:
            self._duration.record(usage.duration_s, attributes)
        self._tokens.record(usage.input_tokens, {**attributes, semconv.GEN_AI_TOKEN_TYPE: "input"})
        self._tokens.record(usage.output_tokens, {**attributes, semconv.GEN_AI_TOKEN_TYPE: "output"})
        if usage.cost_usd is not None:
            self._cost.add(usage.cost_usd, attributes)

    def _not_evaluated_callback(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[str, str], int] = {}  # names past the bound add up under _other
        for reason, per in self._observe_not_evaluated().items():
            for name, count in per.items():
                key = (self._name(name), reason)
                totals[key] = totals.get(key, 0) + count
        return [
            Observation(count, {semconv.EVALTRACE_EVALUATOR_NAME: name, semconv.EVALTRACE_SKIP_REASON: reason})
            for (name, reason), count in totals.items()
        ]
