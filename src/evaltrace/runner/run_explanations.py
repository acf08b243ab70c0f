"""Insights that explain a run beyond its best variant: who is worst, where failures come from, rubric roll-ups.

- :func:`least_accurate_variant` / :func:`slowest_variant`: the counterparts of the best and fastest variant.
- :func:`retrieval_ranking`: the best and worst context-retrieval variant ("model"), by the average score of the
  context-retrieval evaluators (:func:`is_retrieval_evaluator`: the catalogue's ``context_*`` evaluators).
- :func:`failure_split`: each failed (case, variant) put down to retrieval (only retrieval evaluators failed
  it), generation (only the others), both, or the system (it raised).
- :func:`dimension_averages`: the rubric's dimension averages per variant (the ``agent_rubric`` evaluator's
  ``detail.dimensions`` and the dimension evaluators run on their own), the reference's ``dimension_averages``.
- :func:`complexity_distribution`: how many cases per ``metadata.complexity``; a case without one is ``medium``.
- :func:`explanations`: one sentence per insight, with the figures behind it.

Only judged (``completed``) results count; outcomes come from :mod:`evaltrace.runner.summary`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from statistics import fmean

from evaltrace.runner.summary import CaseOutcomes, judged_results
from evaltrace.schema import EvalCase, EvaluationResult, RunSummary, Trace
from evaltrace.schema.rubric import DEFAULT_AGENT_RUBRIC
from evaltrace.schema.runs import FailureSplit, VariantSummary

__all__ = [
    "DEFAULT_COMPLEXITY",
    "complexity_distribution",
    "dimension_averages",
    "explanations",
    "failure_split",
    "is_retrieval_evaluator",
    "judged_variants",
    "least_accurate_variant",
    "retrieval_ranking",
    "slowest_variant",
]

DEFAULT_COMPLEXITY = "medium"
"""The complexity of a case whose ``metadata.complexity`` is missing (metrics reference, TestSet)."""
RUBRIC_EVALUATOR = "agent_rubric"


def is_retrieval_evaluator(name: str) -> bool:
    """True for an evaluator of the retrieved context (precision, recall, relevancy, MRR): ``context_*``."""
    return name.startswith("context_")


def judged_variants(summary: RunSummary) -> list[VariantSummary]:
    """The variants with a judged case on which some evaluator judged something (best / least accurate candidates)."""
    evaluated = judged_results(summary)
    return [
        v
        for v in summary.variants
        if v.pass_rate is not None and v.cases_passed + (v.cases_failed or 0) > 0 and evaluated.get(v.name) != 0
    ]


def least_accurate_variant(summary: RunSummary) -> str | None:
    """The judged variant with the lowest case pass rate (ties: the slower, then by name); None with fewer than 2."""
    judged = judged_variants(summary)
    if len(judged) < 2:
        return None  # with one variant "least accurate" would only repeat "best"
    return min(judged, key=lambda v: (v.pass_rate or 0.0, -v.avg_latency_ms, v.name)).name


def slowest_variant(summary: RunSummary) -> str | None:
    """The variant with the highest average latency per case; None with fewer than 2 variants that ran."""
    ran = [v for v in summary.variants if v.cases_total]
    if len(ran) < 2:
        return None
    return max(ran, key=lambda v: (v.avg_latency_ms, v.name)).name


def retrieval_ranking(results: Iterable[EvaluationResult]) -> tuple[str | None, str | None, dict[str, float]]:
    """(best, worst, average per variant) of the context-retrieval evaluators' scores.

    Best and worst are None when fewer than two variants have a retrieval score.
    """
    scores: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r.status == "completed" and r.score is not None and is_retrieval_evaluator(r.evaluator):
            scores[r.variant_name].append(r.score)
    averages = {v: fmean(s) for v, s in scores.items()}
    if len(averages) < 2:
        return None, None, averages
    ranked = sorted(averages, key=lambda v: (-averages[v], v))
    return ranked[0], ranked[-1], averages


def failure_split(outcomes: CaseOutcomes, traces: Iterable[Trace], results: Iterable[EvaluationResult]) -> FailureSplit:
    """Put each failed (case, variant) down to retrieval, generation, both, or the system."""
    failing: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for r in results:
        if r.status == "completed" and not r.passed:
            failing[r.variant_name, r.case_id].add(is_retrieval_evaluator(r.evaluator))
    counts: Counter[str] = Counter()
    for trace in traces:
        if outcomes.get(trace.variant_name, {}).get(trace.case_id) != "fail":
            continue
        if trace.error is not None:
            counts["system"] += 1
            continue
        kinds = failing.get((trace.variant_name, trace.case_id), set())
        counts["both" if len(kinds) == 2 else "retrieval" if True in kinds else "generation"] += 1
    return FailureSplit(
        retrieval=counts["retrieval"], generation=counts["generation"], both=counts["both"], system=counts["system"]
    )


def dimension_averages(results: Iterable[EvaluationResult]) -> dict[str, dict[str, float]]:
    """Per variant, the average score of each rubric dimension over the cases that scored it.

    A dimension's scores come from the ``agent_rubric`` evaluator's ``detail.dimensions`` and from an evaluator
    of the dimension's name run on its own (``factual_accuracy``, ``completeness``, ...), the rubric's names.
    """
    names = {d.name for d in DEFAULT_AGENT_RUBRIC.dimensions}
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.status != "completed":
            continue
        if r.evaluator == RUBRIC_EVALUATOR and isinstance(r.detail.get("dimensions"), Mapping):
            for name, part in r.detail["dimensions"].items():
                score = part.get("score") if isinstance(part, Mapping) else None
                if isinstance(score, int | float) and not isinstance(score, bool) and part.get("status") == "completed":
                    scores[r.variant_name][str(name)].append(float(score))
        elif r.evaluator in names and r.score is not None:
            scores[r.variant_name][r.evaluator].append(r.score)
    return {v: {d: fmean(s) for d, s in sorted(by_dim.items())} for v, by_dim in scores.items()}


def complexity_distribution(cases: Iterable[EvalCase]) -> dict[str, int]:
    """How many cases per ``metadata.complexity``; a case without one counts as :data:`DEFAULT_COMPLEXITY`."""
    counts: Counter[str] = Counter()
    for case in cases:
        value = case.metadata.get("complexity")
        counts[DEFAULT_COMPLEXITY if value is None or value == "" else str(value)] += 1
    return dict(sorted(counts.items()))


def _rate(v: VariantSummary) -> str:
    judged = v.cases_passed + (v.cases_failed or 0)
    return f"pass rate {(v.pass_rate or 0.0) * 100:.1f}% ({v.cases_passed}/{judged} judged cases)"


def explanations(
    summary: RunSummary,
    *,
    least_accurate: str | None,
    slowest: str | None,
    retrieval: tuple[str | None, str | None, Mapping[str, float]],
    split: FailureSplit,
    best_variant: str | None,
) -> list[str]:
    """One sentence per insight, naming the figures that decided it."""
    by_name: dict[str, VariantSummary] = {v.name: v for v in summary.variants}
    lines: list[str] = []
    if best_variant in by_name:
        lines.append(f"{best_variant} is the most accurate variant: {_rate(by_name[best_variant])}.")
    if least_accurate in by_name:
        lines.append(f"{least_accurate} is the least accurate variant: {_rate(by_name[least_accurate])}.")
    if slowest in by_name:
        fastest = min(by_name.values(), key=lambda v: v.avg_latency_ms)
        lines.append(
            f"{slowest} is the slowest variant: {by_name[slowest].avg_latency_ms:.0f} ms per case on average"
            f" (fastest: {fastest.name}, {fastest.avg_latency_ms:.0f} ms)."
        )
    best, worst, averages = retrieval
    if best is not None and worst is not None:
        lines.append(
            f"{best} retrieves context best (average context score {averages[best]:.2f}); {worst} worst"
            f" ({averages[worst]:.2f})."
        )
    total = split.retrieval + split.generation + split.both + split.system
    if total:
        lines.append(
            f"Of {total} failed case(s): {split.retrieval} retrieval only, {split.generation} generation only,"
            f" {split.both} both, {split.system} system error(s)."
        )
    return lines
