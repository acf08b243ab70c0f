"""Analytics over a run's evaluation results (the evaluation data models' metrics and comparison patterns).

- :func:`evaluation_performance`: how the evaluations themselves went: counts, success rate, duration (mean and
  p95) and what the judges cost.
- :func:`evaluation_quality`: whether the evaluators agree with each other (same verdict on a cell), how their
  scores correlate, and how confident they were.
- :func:`ab_preference`: which of two variants is preferred case by case, with a Wilson confidence interval and
  an exact sign test.
- :func:`human_ai_agreement`: how close the evaluators' scores are to human scores of the same cells.
- :func:`temporal_trend`: one variant's pass rate (or one evaluator's average score) over successive runs.

All are pure functions of stored records; ``evaltrace runs analytics|preference|agreement|trend`` print them.
Only judged (``completed``) results carry a verdict or a score; errors and skips are counted, never scored.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any, Literal

from pydantic import Field, ValidationError

from evaltrace.runner.stat_tests import pearson, percentile, sign_test, slope, wilson_interval
from evaltrace.schema import EvaluationResult, RunSummary
from evaltrace.schema._base import SchemaModel

__all__ = [
    "ABPreference",
    "AgreementReport",
    "EvaluationPerformance",
    "EvaluationQuality",
    "HumanScore",
    "TrendReport",
    "ab_preference",
    "evaluation_performance",
    "evaluation_quality",
    "human_ai_agreement",
    "load_human_scores",
    "temporal_trend",
]

HIGH_CONFIDENCE = 0.8
"""A confidence at or above this is ``high``."""
MEDIUM_CONFIDENCE = 0.5
"""A confidence at or above this (and below :data:`HIGH_CONFIDENCE`) is ``medium``; below it, ``low``."""
TREND_TOLERANCE = 0.01
"""A trend moves less than this per run: ``stable``."""
DISCREPANCY = 0.3
"""A human and an AI score further apart than this are listed as a discrepancy."""


class EvaluationPerformance(SchemaModel):
    """How the evaluations of a run went (``evaluation_performance``)."""

    total_evaluations: int
    successful_evaluations: int
    """Completed: the evaluator gave a verdict."""
    failed_evaluations: int
    """The evaluator errored (crashed, timed out, misbehaved)."""
    not_evaluated: int
    """Skipped or pending."""
    success_rate: float | None
    """successful / (successful + failed); None when no evaluation ran."""
    average_duration_ms: float | None
    p95_duration_ms: float | None
    total_cost_usd: float | None
    """Sum of the judges' costs; None when no result reported one."""
    by_evaluator: dict[str, EvaluationPerformance] = Field(default_factory=dict)


class EvaluationQuality(SchemaModel):
    """Whether the evaluators agree and how sure they are (``evaluation_quality``)."""

    evaluator_agreement: float | None
    """Share of the cells judged by two or more evaluators on which every verdict is the same."""
    cells_compared: int
    inter_evaluator_correlation: dict[str, float] = Field(default_factory=dict)
    """``"a_vs_b"``: Pearson correlation of the two evaluators' scores over the cells both scored."""
    confidence_distribution: dict[str, float] = Field(default_factory=dict)
    """Share of the judged results that reported a confidence, per ``high`` / ``medium`` / ``low``."""
    results_with_confidence: int = 0


class ABPreference(SchemaModel):
    """Variant A against variant B, case by case (``comparison_data`` of an A/B evaluation)."""

    variant_a: str
    variant_b: str
    evaluator: str | None
    """The evaluator whose score decides; None: each case's share of passed evaluators."""
    wins: int
    """Cases on which A scored higher than B."""
    losses: int
    ties: int
    sample_size: int
    preference_score: float | None
    """wins / (wins + losses): how often A is preferred when the two differ; None when they never differ."""
    confidence_interval: tuple[float, float] | None
    confidence: float
    p_value: float
    """Exact two-sided sign test of wins against losses."""
    statistical_significance: bool
    """p_value < 1 - confidence."""


class HumanScore(SchemaModel):
    """One human judgement of a cell, as read from a ``--human`` file (JSON list, JSON Lines or YAML list)."""

    case_id: str
    variant: str | None = None
    """None: the run's only variant (an error when the run has several)."""
    evaluator: str | None = None
    """The evaluator it is compared with; None: the ``--evaluator`` given on the command line."""
    score: float = Field(ge=0.0, le=1.0)
    passed: bool | None = None
    annotator_id: str | None = None


class AgreementPair(SchemaModel):
    """A human score and the evaluator's score of the same cell."""

    case_id: str
    variant: str
    evaluator: str
    human_score: float
    ai_score: float
    annotator_id: str | None = None


class AgreementReport(SchemaModel):
    """Human against AI evaluation (``human_ai_comparison``)."""

    pairs: int
    agreement_score: float | None
    """1 - mean absolute difference of the paired scores (both on [0, 1])."""
    mean_absolute_difference: float | None
    correlation: float | None
    verdict_agreement: float | None
    """Share of the pairs with a human ``passed`` on which the evaluator's verdict is the same."""
    unmatched: int
    """Human scores with no judged evaluation of the same cell."""
    discrepancies: list[AgreementPair] = Field(default_factory=list)
    """Pairs further apart than :data:`DISCREPANCY`, largest first."""


class TrendReport(SchemaModel):
    """One figure over successive runs, oldest first (``temporal_quality``)."""

    metric: str
    variant: str
    run_ids: list[str]
    historical_scores: list[float]
    current_score: float | None
    trend: Literal["improving", "declining", "stable", "insufficient_data"]
    change_rate: float | None
    """Least-squares change per run."""
    stability_score: float | None
    """1 - population standard deviation of the scores (1.0: the same every run)."""


def _performance(results: Sequence[EvaluationResult]) -> EvaluationPerformance:
    ran = [r for r in results if r.status in ("completed", "failed")]
    ok = sum(r.status == "completed" for r in results)
    failed = len(ran) - ok
    durations = [float(r.latency_ms) for r in ran]
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    return EvaluationPerformance(
        total_evaluations=len(results),
        successful_evaluations=ok,
        failed_evaluations=failed,
        not_evaluated=len(results) - len(ran),
        success_rate=ok / len(ran) if ran else None,
        average_duration_ms=fmean(durations) if durations else None,
        p95_duration_ms=percentile(durations, 95),
        total_cost_usd=sum(costs) if costs else None,
    )


def evaluation_performance(results: Sequence[EvaluationResult]) -> EvaluationPerformance:
    """Counts, success rate, mean and p95 duration and cost of a run's evaluations, overall and per evaluator."""
    grouped: dict[str, list[EvaluationResult]] = defaultdict(list)
    for result in results:
        grouped[result.evaluator].append(result)
    overall = _performance(results)
    return overall.model_copy(update={"by_evaluator": {n: _performance(rs) for n, rs in grouped.items()}})


def _judged_cells(results: Iterable[EvaluationResult]) -> dict[tuple[str, str], dict[str, EvaluationResult]]:
    cells: dict[tuple[str, str], dict[str, EvaluationResult]] = defaultdict(dict)
    for result in results:
        if result.status == "completed":
            cells[result.variant_name, result.case_id].setdefault(result.evaluator, result)
    return cells


def evaluation_quality(results: Sequence[EvaluationResult]) -> EvaluationQuality:
    """Agreement between evaluators on each cell, correlation of their scores, and their confidence."""
    cells = _judged_cells(results)
    compared = [c for c in cells.values() if len(c) >= 2]
    agreeing = sum(len({r.passed for r in c.values()}) == 1 for c in compared)
    evaluators = sorted({name for c in cells.values() for name in c})
    correlation: dict[str, float] = {}
    for a, b in combinations(evaluators, 2):
        pairs = [
            (x, y)
            for c in cells.values()
            if a in c and b in c and (x := c[a].score) is not None and (y := c[b].score) is not None
        ]
        r = pearson([x for x, _ in pairs], [y for _, y in pairs])
        if r is not None:
            correlation[f"{a}_vs_{b}"] = r
    confidences = [r.confidence for c in cells.values() for r in c.values() if r.confidence is not None]
    distribution: dict[str, float] = {}
    if confidences:
        n = len(confidences)
        high = sum(c >= HIGH_CONFIDENCE for c in confidences)
        medium = sum(MEDIUM_CONFIDENCE <= c < HIGH_CONFIDENCE for c in confidences)
        distribution = {"high_confidence": high / n, "medium_confidence": medium / n}
        distribution["low_confidence"] = (n - high - medium) / n
    return EvaluationQuality(
        evaluator_agreement=agreeing / len(compared) if compared else None,
        cells_compared=len(compared),
        inter_evaluator_correlation=correlation,
        confidence_distribution=distribution,
        results_with_confidence=len(confidences),
    )


def _case_values(
    cells: Mapping[tuple[str, str], Mapping[str, EvaluationResult]], variant: str, evaluator: str | None
) -> dict[str, float]:
    """Per case of ``variant``: the evaluator's score (its direction made "higher is better"), or the pass share."""
    values: dict[str, float] = {}
    for (name, case_id), by_evaluator in cells.items():
        if name != variant:
            continue
        if evaluator is None:
            values[case_id] = fmean(float(r.passed) for r in by_evaluator.values())
            continue
        result = by_evaluator.get(evaluator)
        if result is not None:
            score = result.score if result.score is not None else float(result.passed)
            values[case_id] = -score if result.detail.get("direction") == "lower" else score
    return values


def ab_preference(
    results: Sequence[EvaluationResult],
    variant_a: str,
    variant_b: str,
    *,
    evaluator: str | None = None,
    confidence: float = 0.95,
) -> ABPreference:
    """Compare two variants of a run on the cases both were judged on.

    Args:
        results: The run's results.
        variant_a: The variant whose preference is measured.
        variant_b: The variant it is compared with.
        evaluator: Decide each case by this evaluator's score (its ``direction`` respected; a result with no
            score counts its verdict as 1 or 0); None: by each case's share of passed evaluators.
        confidence: The coverage of the interval; significance is ``p_value < 1 - confidence``.

    Returns:
        Wins, losses and ties of A, the preference with its Wilson interval, and the sign test.

    Raises:
        ValueError: A variant (or the evaluator) judged nothing in ``results``, or the two variants are the same.
    """
    if variant_a == variant_b:
        raise ValueError(f"compare two different variants, got {variant_a!r} twice")
    cells = _judged_cells(results)
    judged_variants = {v for v, _ in cells}
    for name in (variant_a, variant_b):
        if name not in judged_variants:
            known = ", ".join(sorted(judged_variants)) or "none"
            raise ValueError(f"variant {name!r} has no judged evaluation in this run (judged variants: {known})")
    if evaluator is not None and not any(evaluator in c for c in cells.values()):
        known = ", ".join(sorted({n for c in cells.values() for n in c}))
        raise ValueError(f"evaluator {evaluator!r} judged nothing in this run (evaluators: {known})")
    a, b = _case_values(cells, variant_a, evaluator), _case_values(cells, variant_b, evaluator)
    shared = [case for case in a if case in b]
    wins = sum(a[c] > b[c] for c in shared)
    losses = sum(a[c] < b[c] for c in shared)
    p_value = sign_test(wins, losses)
    return ABPreference(
        variant_a=variant_a,
        variant_b=variant_b,
        evaluator=evaluator,
        wins=wins,
        losses=losses,
        ties=len(shared) - wins - losses,
        sample_size=len(shared),
        preference_score=wins / (wins + losses) if wins + losses else None,
        confidence_interval=wilson_interval(wins, wins + losses, confidence),
        confidence=confidence,
        p_value=p_value,
        statistical_significance=p_value < 1 - confidence,
    )


def load_human_scores(path: Path) -> list[HumanScore]:
    """Read human scores from a JSON list, a JSON Lines file or a YAML list of :class:`HumanScore` mappings.

    Raises:
        ValueError: The file cannot be read or parsed, or an entry is not a valid human score (named by index).
    """
    from evaltrace._internal.safe_yaml import load as load_yaml  # YAML only when a file needs it

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read human scores {path}: {exc.strerror or exc}") from None
    entries: Any
    try:
        entries = json.loads(text)
    except ValueError:
        try:
            entries = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            try:
                entries = load_yaml(text)
            except Exception as exc:  # the YAML parser's own errors: one message naming the file
                raise ValueError(f"human scores {path}: neither JSON, JSON Lines nor YAML ({exc})") from None
    if not isinstance(entries, list):
        raise ValueError(f"human scores {path}: expected a list of {{case_id, score, ...}} entries")
    scores = []
    for index, entry in enumerate(entries):
        try:
            scores.append(HumanScore.model_validate(entry))
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"human scores {path}, entry {index}: {problem}") from None
    return scores


def human_ai_agreement(
    results: Sequence[EvaluationResult], human: Sequence[HumanScore], *, evaluator: str | None = None
) -> AgreementReport:
    """Pair each human score with the evaluator's score of the same cell and measure how close they are.

    Args:
        results: The run's results.
        human: Human scores (each on [0, 1]).
        evaluator: The evaluator a human score without its own ``evaluator`` is compared with.

    Raises:
        ValueError: A human score names no evaluator and none is given, or names no variant in a run of several.
    """
    cells = _judged_cells(results)
    variants = sorted({v for v, _ in cells} | {r.variant_name for r in results})
    pairs: list[AgreementPair] = []
    verdicts: list[bool] = []
    unmatched = 0
    for index, entry in enumerate(human):
        name = entry.evaluator or evaluator
        if name is None:
            raise ValueError(f"human score {index} (case {entry.case_id!r}) names no evaluator: pass --evaluator")
        variant = entry.variant
        if variant is None:
            if len(variants) != 1:
                raise ValueError(
                    f"human score {index} (case {entry.case_id!r}) names no variant and the run has "
                    f"{len(variants)}: {', '.join(variants)}"
                )
            variant = variants[0]
        result = cells.get((variant, entry.case_id), {}).get(name)
        if result is None:
            unmatched += 1
            continue
        ai = result.score if result.score is not None else float(result.passed)
        pairs.append(
            AgreementPair(
                case_id=entry.case_id,
                variant=variant,
                evaluator=name,
                human_score=entry.score,
                ai_score=ai,
                annotator_id=entry.annotator_id,
            )
        )
        if entry.passed is not None:
            verdicts.append(entry.passed == result.passed)
    differences = [abs(p.human_score - p.ai_score) for p in pairs]
    mad = fmean(differences) if differences else None
    apart = sorted((p for p in pairs if abs(p.human_score - p.ai_score) > DISCREPANCY),
                   key=lambda p: -abs(p.human_score - p.ai_score))  # fmt: skip
    return AgreementReport(
        pairs=len(pairs),
        agreement_score=None if mad is None else max(0.0, 1.0 - mad),
        mean_absolute_difference=mad,
        correlation=pearson([p.human_score for p in pairs], [p.ai_score for p in pairs]),
        verdict_agreement=sum(verdicts) / len(verdicts) if verdicts else None,
        unmatched=unmatched,
        discrepancies=apart,
    )


def _figure(summary: RunSummary, variant: str, evaluator: str | None) -> float | None:
    if evaluator is None:
        found = next((v for v in summary.variants if v.name == variant), None)
        return found.pass_rate if found is not None else None
    rollup = next((r for r in summary.by_evaluator if r.evaluator == evaluator), None)
    cell = rollup.by_variant.get(variant) if rollup is not None else None
    return cell.avg_score if cell is not None else None


def temporal_trend(summaries: Iterable[RunSummary], variant: str, *, evaluator: str | None = None) -> TrendReport:
    """One variant's pass rate (or one evaluator's average score on it) over runs, oldest first.

    Runs where the variant (or the evaluator) has no figure are left out. The trend is ``improving`` or
    ``declining`` when the least-squares slope moves at least :data:`TREND_TOLERANCE` per run, else ``stable``;
    with fewer than two runs it is ``insufficient_data``.
    """
    ordered = sorted(summaries, key=lambda s: (s.started_at, s.run_id))
    points = [(s.run_id, f) for s in ordered if (f := _figure(s, variant, evaluator)) is not None]
    scores = [f for _, f in points]
    rate = slope(scores)
    trend: Literal["improving", "declining", "stable", "insufficient_data"] = "insufficient_data"
    if rate is not None:
        trend = "improving" if rate >= TREND_TOLERANCE else "declining" if rate <= -TREND_TOLERANCE else "stable"
    return TrendReport(
        metric=f"avg score of {evaluator}" if evaluator else "pass rate",
        variant=variant,
        run_ids=[r for r, _ in points],
        historical_scores=scores,
        current_score=scores[-1] if scores else None,
        trend=trend,
        change_rate=rate,
        stability_score=max(0.0, 1.0 - pstdev(scores)) if len(scores) >= 2 else None,
    )
