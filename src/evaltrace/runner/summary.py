"""Pure summaries of a run: per-variant figures, per-evaluator rollups, and comparisons with a baseline.

Every evaluation result has a verdict: *pass* / *fail* (status completed, by ``passed``), *error* (status failed:
the evaluator crashed, timed out or misbehaved, so it said nothing about the system) or *not evaluated*
(skipped, pending). A (case, variant) is:

- ``fail`` when the system failed (``Trace.error``) or any result failed;
- else ``error`` when any evaluation errored (an errored evaluator might have failed it: no verdict);
- else ``pass`` when at least one result passed;
- else ``not_evaluated`` (every evaluator skipped, or none applies): never a pass.

Pass rates are over judged cells / results only (pass + fail); errors and not-evaluated ones are counted apart,
and a pass rate over nothing judged is None (``null`` in summary.yaml), never 0.0.

A variant whose evaluations all errored or were not evaluated has no evaluator verdict at all, even when some of its
cases failed by the system: :func:`judged_results` says so, and it then fails the gate and is never the best.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Literal

from evaltrace.schema import (
    ComparisonReport,
    EvaluationResult,
    EvaluatorRollup,
    EvaluatorVariantRollup,
    RunSummary,
    Trace,
    VariantDelta,
    VariantSummary,
)

__all__ = [
    "JUDGED",
    "CaseOutcomes",
    "Outcome",
    "case_outcomes",
    "compare_variants",
    "judged_results",
    "restrict_to_cases",
    "result_verdict",
    "run_comparison",
    "summarise_run",
]

Outcome = Literal["pass", "fail", "error", "not_evaluated"]
"""The verdict on one result or one (case, variant)."""
JUDGED: frozenset[str] = frozenset({"pass", "fail"})
"""Verdicts that count in pass rates."""
CaseOutcomes = dict[str, dict[str, Outcome]]
"""variant name -> case id -> outcome."""
_NO_EVALUATOR = "no evaluator applies"


def result_verdict(result: EvaluationResult) -> Outcome:
    """Return ``pass``/``fail`` for a judged result, ``error`` for a failed evaluation, else ``not_evaluated``."""
    if result.status == "completed":
        return "pass" if result.passed else "fail"
    if result.status == "failed":
        return "error"
    return "not_evaluated"


def _cell_outcome(trace: Trace, verdicts: Iterable[Outcome]) -> Outcome:
    if trace.error is not None:
        return "fail"  # the system failed: that is a verdict on the system, not on us
    seen = set(verdicts)
    if "fail" in seen:
        return "fail"
    if "error" in seen:
        return "error"  # an errored evaluator might have failed the case: no verdict either way
    return "pass" if "pass" in seen else "not_evaluated"


def _by_cell(results: Iterable[EvaluationResult]) -> dict[tuple[str, str], list[EvaluationResult]]:
    cells: dict[tuple[str, str], list[EvaluationResult]] = defaultdict(list)
    for result in results:
        cells[result.variant_name, result.case_id].append(result)
    return cells


def case_outcomes(traces: Iterable[Trace], results: Iterable[EvaluationResult]) -> CaseOutcomes:
    """Decide the outcome of every traced (variant, case)."""
    cells = _by_cell(results)
    outcomes: dict[str, dict[str, Outcome]] = defaultdict(dict)
    for trace in traces:
        verdicts = (result_verdict(r) for r in cells.get((trace.variant_name, trace.case_id), []))
        outcomes[trace.variant_name][trace.case_id] = _cell_outcome(trace, verdicts)
    return dict(outcomes)


def _mean(values: Iterable[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return fmean(present) if present else None


def _rate(passed: int, failed: int) -> float | None:
    return passed / (passed + failed) if passed + failed else None  # nothing judged: no rate, not 0%


def _skip_reason(result: EvaluationResult) -> str:
    return f"{result.evaluator}: {result.reason or 'skipped'}"


def _variant_summary(
    name: str,
    traces: Sequence[Trace],
    outcomes: Mapping[str, Outcome],
    cells: Mapping[tuple[str, str], list[EvaluationResult]],
) -> VariantSummary:
    counts = Counter(outcomes.get(t.case_id, "not_evaluated") for t in traces)
    reasons: Counter[str] = Counter()
    for trace in traces:
        if outcomes.get(trace.case_id) == "not_evaluated":
            found = {_skip_reason(r) for r in cells.get((name, trace.case_id), [])}
            reasons.update(found or {_NO_EVALUATOR})
    return VariantSummary(
        name=name,
        cases_total=len(traces),
        cases_passed=counts["pass"],
        cases_errored=sum(1 for t in traces if t.error is not None),
        pass_rate=_rate(counts["pass"], counts["fail"]),
        avg_latency_ms=_mean(t.latency_ms for t in traces) or 0.0,
        avg_cost_usd=_mean(t.metrics.cost_usd for t in traces),
        avg_tokens_input=_mean(t.metrics.token_input for t in traces),
        avg_tokens_output=_mean(t.metrics.token_output for t in traces),
        cases_failed=counts["fail"],
        cases_eval_errors=counts["error"],
        cases_not_evaluated=counts["not_evaluated"],
        not_evaluated_reasons=dict(sorted(reasons.items())),
    )


def _rollup(items: Sequence[EvaluationResult]) -> EvaluatorVariantRollup:
    verdicts = Counter(result_verdict(r) for r in items)
    judged = [r for r in items if r.status == "completed"]
    reasons = Counter(r.reason or "skipped" for r in items if result_verdict(r) == "not_evaluated")
    return EvaluatorVariantRollup(
        pass_rate=_rate(verdicts["pass"], verdicts["fail"]),
        avg_score=_mean(r.score for r in judged),
        passed=verdicts["pass"],
        failed=verdicts["fail"],
        errors=verdicts["error"],
        not_evaluated=verdicts["not_evaluated"],
        skip_reasons=dict(sorted(reasons.items())),
    )


def _rollups(results: Sequence[EvaluationResult]) -> list[EvaluatorRollup]:
    cells: dict[str, dict[str, list[EvaluationResult]]] = {}
    for result in results:
        cells.setdefault(result.evaluator, {}).setdefault(result.variant_name, []).append(result)
    return [
        EvaluatorRollup(evaluator=evaluator, by_variant={v: _rollup(items) for v, items in by_variant.items()})
        for evaluator, by_variant in cells.items()
    ]


def summarise_run(
    *,
    run_id: str,
    started_at: dt.datetime,
    finished_at: dt.datetime,
    config_path: str,
    config_hash: str,
    variant_names: Sequence[str],
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
) -> tuple[RunSummary, CaseOutcomes]:
    """Build the RunSummary (without comparison) and the per-case outcomes it was computed from.

    Args:
        run_id: The run.
        started_at: When the run started.
        finished_at: When evaluation finished.
        config_path: The eval.yaml the run used.
        config_hash: Hash of the masked config and the cases.
        variant_names: Variants in config order (the summary keeps this order).
        traces: Every trace of the run.
        results: Every evaluation result of the run.

    Returns:
        ``(summary, outcomes)``.
    """
    outcomes = case_outcomes(traces, results)
    cells = _by_cell(results)
    by_variant: dict[str, list[Trace]] = defaultdict(list)
    for trace in traces:
        by_variant[trace.variant_name].append(trace)
    names = [*variant_names, *(n for n in by_variant if n not in variant_names)]
    summary = RunSummary(
        run_id=run_id,
        started_at=started_at,
        finished_at=max(started_at, finished_at),
        config_path=config_path,
        config_hash=config_hash,
        cases_total=len({t.case_id for t in traces}),
        variants=[_variant_summary(n, by_variant.get(n, []), outcomes.get(n, {}), cells) for n in names],
        by_evaluator=_rollups(results),
    )
    return summary, outcomes


def _judged_nothing(summary: VariantSummary) -> bool:
    if summary.pass_rate is None:
        return True
    # Summaries from before the counts existed: their pass rate was over every case, so it stands.
    if summary.cases_failed is None:
        return False
    return summary.cases_passed + summary.cases_failed == 0


def judged_results(summary: RunSummary) -> dict[str, int | None]:
    """Per variant of the run: how many evaluation results an evaluator judged (passed or failed).

    0 means every evaluation of the variant errored or was not evaluated (system failures are no evaluator's
    verdict); None that the summary predates the per-evaluator counts.
    """
    judged: dict[str, int | None] = {v.name: 0 for v in summary.variants}
    for rollup in summary.by_evaluator:
        for name, cell in rollup.by_variant.items():
            if cell.passed is None or cell.failed is None:
                judged[name] = None
            elif judged.get(name) is not None:
                judged[name] = (judged.get(name) or 0) + cell.passed + cell.failed
    return judged


def _delta(
    current: VariantSummary, base: VariantSummary, now: Mapping[str, Outcome], before: Mapping[str, Outcome]
) -> VariantDelta:
    shared = [case for case in now if case in before]
    unjudged = _judged_nothing(current) or _judged_nothing(base)
    return VariantDelta(
        variant=current.name,
        pass_rate_delta=(
            0.0
            if unjudged or current.pass_rate is None or base.pass_rate is None
            else current.pass_rate - base.pass_rate
        ),
        avg_latency_delta_ms=current.avg_latency_ms - base.avg_latency_ms,
        regressions=sorted(c for c in shared if before[c] == "pass" and now[c] == "fail"),
        improvements=sorted(c for c in shared if before[c] == "fail" and now[c] == "pass"),
        unverified=sorted(c for c in shared if before[c] == "pass" and now[c] not in JUDGED),
        not_evaluated=unjudged,
    )


def _report(
    baseline: str, deltas: list[VariantDelta], kind: Literal["ad_hoc", "drift"], baseline_run_id: str | None
) -> ComparisonReport:
    return ComparisonReport(
        baseline=baseline,
        deltas=deltas,
        kind=kind,
        baseline_run_id=baseline_run_id,
        regressions_count=sum(len(d.regressions) for d in deltas),
        improvements_count=sum(len(d.improvements) for d in deltas),
        unverified_count=sum(len(d.unverified) for d in deltas),
    )


def compare_variants(summary: RunSummary, outcomes: CaseOutcomes, baseline: str) -> ComparisonReport:
    """Compare every other variant of one run with its ``baseline`` variant (kind ``ad_hoc``).

    Raises:
        KeyError: ``baseline`` is not a variant of the run.
    """
    variants = {v.name: v for v in summary.variants}
    base = variants[baseline]
    deltas = [
        _delta(v, base, outcomes.get(v.name, {}), outcomes.get(baseline, {}))
        for v in summary.variants
        if v.name != baseline
    ]
    return _report(baseline, deltas, "ad_hoc", None)


def run_comparison(
    base: RunSummary,
    base_outcomes: CaseOutcomes,
    current: RunSummary,
    current_outcomes: CaseOutcomes,
    kind: Literal["ad_hoc", "drift"] = "drift",
) -> ComparisonReport:
    """Compare each variant of ``current`` with the same-named variant of the ``base`` run.

    Variants that exist in only one of the runs are left out. ``baseline`` and ``baseline_run_id`` are the
    base run's id.
    """
    before = {v.name: v for v in base.variants}
    deltas = [
        _delta(v, before[v.name], current_outcomes.get(v.name, {}), base_outcomes.get(v.name, {}))
        for v in current.variants
        if v.name in before
    ]
    return _report(base.run_id, deltas, kind, base.run_id)


def restrict_to_cases(
    summary: RunSummary, outcomes: CaseOutcomes, case_ids: Iterable[str]
) -> tuple[RunSummary, CaseOutcomes]:
    """Narrow a run (typically a full baseline) to ``case_ids``, for comparing it with a run of part of the dataset.

    Outcomes are filtered, and each variant's cases, outcome counts and pass rate are recounted from them, so the
    pass-rate delta is over the same cases on both sides. Averages (latency, cost, tokens) and ``cases_errored``
    cannot be recounted from outcomes and stay those of the whole run.
    """
    wanted = set(case_ids)
    kept: CaseOutcomes = {v: {c: o for c, o in cases.items() if c in wanted} for v, cases in outcomes.items()}
    variants = []
    for variant in summary.variants:
        counts = Counter(kept.get(variant.name, {}).values())
        variants.append(
            variant.model_copy(
                update={
                    "cases_total": sum(counts.values()),
                    "cases_passed": counts["pass"],
                    "cases_failed": counts["fail"],
                    "cases_eval_errors": counts["error"],
                    "cases_not_evaluated": counts["not_evaluated"],
                    "pass_rate": _rate(counts["pass"], counts["fail"]),
                }
            )
        )
    total = len({c for cases in kept.values() for c in cases})
    return summary.model_copy(update={"variants": variants, "cases_total": total}), kept
