"""Run-level insights over many EvaluationResults: averages, pass rates, best variant, hardest case, problems."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from evaltrace.schema import EvalCase, EvaluationResult, Trace


@dataclass(frozen=True)
class EvaluatorInsight:
    """What one evaluator says about a run."""

    evaluator: str
    average_by_variant: dict[str, float | None]
    pass_rate_by_variant: dict[str, float]
    best_variant: str | None
    hardest_case: str | None
    hardest_case_failures: int
    threshold: float | None
    direction: str


@dataclass(frozen=True)
class RunInsights:
    """Insights over a whole run."""

    evaluators: dict[str, EvaluatorInsight]
    problems: list[str]
    cheapest_variant: str | None = None
    most_expensive_variant: str | None = None
    fastest_variant: str | None = None
    averages: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per variant: ``avg_cost_usd`` and ``avg_latency_ms`` (from the traces, when given)."""


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _best(averages: Mapping[str, float | None], rates: Mapping[str, float], direction: str) -> str | None:
    # Rank by average score in the evaluator's direction; pass rate breaks ties (and decides without scores).
    sign = -1.0 if direction == "lower" else 1.0
    ranked = sorted(rates, key=lambda v: (sign * (averages.get(v) or 0.0), rates[v], v), reverse=True)
    return ranked[0] if ranked else None


def _insight(name: str, results: list[EvaluationResult]) -> EvaluatorInsight:
    by_variant: dict[str, list[EvaluationResult]] = defaultdict(list)
    failures: dict[str, set[str]] = defaultdict(set)
    for r in results:
        by_variant[r.variant_name].append(r)
        if not r.passed:
            failures[r.case_id].add(r.variant_name)
    averages = {v: _mean([r.score for r in rs if r.score is not None]) for v, rs in by_variant.items()}
    rates = {v: sum(r.passed for r in rs) / len(rs) for v, rs in by_variant.items()}
    direction = str(results[0].detail.get("direction", "higher"))
    threshold = results[0].detail.get("threshold")
    hardest = max(sorted(failures), key=lambda c: len(failures[c]), default=None)
    return EvaluatorInsight(
        evaluator=name,
        average_by_variant=averages,
        pass_rate_by_variant=rates,
        best_variant=_best(averages, rates, direction),
        hardest_case=hardest,
        hardest_case_failures=len(failures[hardest]) if hardest else 0,
        threshold=float(threshold) if isinstance(threshold, int | float) else None,
        direction=direction,
    )


def _problems(insight: EvaluatorInsight) -> list[str]:
    if insight.threshold is None:
        return []
    problems = []
    for variant, average in sorted(insight.average_by_variant.items()):
        if average is None:
            continue
        below = average < insight.threshold if insight.direction == "higher" else average > insight.threshold
        if below:
            word = "below" if insight.direction == "higher" else "above"
            problems.append(
                f"{insight.evaluator}: average {average:.2f} for variant {variant!r} is {word} the threshold "
                f"{insight.threshold:g}"
            )
    return problems


def _trace_averages(traces: Iterable[Trace]) -> dict[str, dict[str, float]]:
    costs: dict[str, list[float]] = defaultdict(list)
    latencies: dict[str, list[float]] = defaultdict(list)
    for t in traces:
        latencies[t.variant_name].append(float(t.latency_ms))
        if t.metrics.cost_usd is not None:
            costs[t.variant_name].append(t.metrics.cost_usd)
    out: dict[str, dict[str, float]] = {}
    for variant, values in latencies.items():
        out[variant] = {"avg_latency_ms": sum(values) / len(values)}
        if costs.get(variant):
            out[variant]["avg_cost_usd"] = sum(costs[variant]) / len(costs[variant])
    return out


PERTURBATION_KEY = "perturbation_of"
"""``EvalCase.metadata`` key naming the case a perturbed case was derived from."""


def _flips(results: Sequence[EvaluationResult], cases: Iterable[EvalCase]) -> list[str]:
    origin = {c.id: str(c.metadata[PERTURBATION_KEY]) for c in cases if c.metadata.get(PERTURBATION_KEY)}
    verdicts = {(r.evaluator, r.variant_name, r.case_id): r.passed for r in results}
    problems = []
    for (evaluator, variant, case_id), passed in sorted(verdicts.items()):
        original = verdicts.get((evaluator, variant, origin.get(case_id, "")))
        if case_id in origin and original is not None and original != passed:
            direction = "passes" if passed else "fails"
            problems.append(
                f"{evaluator}: variant {variant!r} {direction} perturbed case {case_id!r} but "
                f"{'fails' if passed else 'passes'} its original {origin[case_id]!r}"
            )
    return problems


def run_insights(
    results: Iterable[EvaluationResult], traces: Iterable[Trace] = (), cases: Iterable[EvalCase] = ()
) -> RunInsights:
    """Summarise a run per evaluator and per variant.

    Per evaluator: the average and pass rate per variant, the best variant, the hardest case (failed by most
    variants) and problems (an average on the wrong side of the evaluator's threshold). With the traces, also the
    cheapest, most expensive and fastest variants; with the cases, verdicts that flip after a perturbation. Only
    ``completed`` results count.

    Args:
        results: The run's results (any evaluators, variants and cases).
        traces: The run's traces, for cost and latency.
        cases: The run's cases; a case whose ``metadata["perturbation_of"]`` names another case is a perturbation
            of it, and a verdict that flips between the two is reported as a problem.

    Returns:
        The insights.
    """
    completed = [r for r in results if r.status == "completed"]
    grouped: dict[str, list[EvaluationResult]] = defaultdict(list)
    for r in completed:
        grouped[r.evaluator].append(r)
    insights = {name: _insight(name, rs) for name, rs in sorted(grouped.items())}
    problems = [p for i in insights.values() for p in _problems(i)] + _flips(completed, cases)
    averages = _trace_averages(traces)
    with_cost = {v: a["avg_cost_usd"] for v, a in averages.items() if "avg_cost_usd" in a}
    latency = {v: a["avg_latency_ms"] for v, a in averages.items()}
    return RunInsights(
        evaluators=insights,
        problems=problems,
        cheapest_variant=min(with_cost, key=lambda v: with_cost[v]) if with_cost else None,
        most_expensive_variant=max(with_cost, key=lambda v: with_cost[v]) if with_cost else None,
        fastest_variant=min(latency, key=lambda v: latency[v]) if latency else None,
        averages=averages,
    )
