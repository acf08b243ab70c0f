"""Pure summaries of a run: per-variant figures, per-evaluator rollups, and comparisons with a baseline.

A (case, variant) passes when the system did not fail (no ``Trace.error``) and every evaluator result that was
not skipped passed (a failed evaluation counts as not passed). Skipped results are left out of evaluator pass
rates; a variant on which an evaluator never applied is absent from that evaluator's ``by_variant``.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
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

__all__ = ["CaseOutcomes", "case_outcomes", "compare_variants", "run_comparison", "summarise_run"]

CaseOutcomes = dict[str, dict[str, bool]]
"""variant name -> case id -> passed."""


def case_outcomes(traces: Iterable[Trace], results: Iterable[EvaluationResult]) -> CaseOutcomes:
    """Decide, for every traced (variant, case), whether it passed."""
    failed_cells: set[tuple[str, str]] = set()
    for result in results:
        if result.status != "skipped" and not result.passed:
            failed_cells.add((result.variant_name, result.case_id))
    outcomes: CaseOutcomes = defaultdict(dict)
    for trace in traces:
        cell = (trace.variant_name, trace.case_id)
        outcomes[trace.variant_name][trace.case_id] = trace.error is None and cell not in failed_cells
    return dict(outcomes)


def _mean(values: Iterable[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return fmean(present) if present else None


def _variant_summary(name: str, traces: Sequence[Trace], passed: Mapping[str, bool]) -> VariantSummary:
    total = len(traces)
    cases_passed = sum(1 for t in traces if passed.get(t.case_id, False))
    return VariantSummary(
        name=name,
        cases_total=total,
        cases_passed=cases_passed,
        cases_errored=sum(1 for t in traces if t.error is not None),
        pass_rate=cases_passed / total if total else 0.0,
        avg_latency_ms=_mean(t.latency_ms for t in traces) or 0.0,
        avg_cost_usd=_mean(t.metrics.cost_usd for t in traces),
        avg_tokens_input=_mean(t.metrics.token_input for t in traces),
        avg_tokens_output=_mean(t.metrics.token_output for t in traces),
    )


def _rollups(results: Sequence[EvaluationResult]) -> list[EvaluatorRollup]:
    cells: dict[str, dict[str, list[EvaluationResult]]] = {}
    for result in results:
        if result.status == "skipped":
            cells.setdefault(result.evaluator, {})
            continue
        cells.setdefault(result.evaluator, {}).setdefault(result.variant_name, []).append(result)
    rollups = []
    for evaluator, by_variant in cells.items():
        figures = {
            variant: EvaluatorVariantRollup(
                pass_rate=sum(r.passed for r in items) / len(items), avg_score=_mean(r.score for r in items)
            )
            for variant, items in by_variant.items()
        }
        rollups.append(EvaluatorRollup(evaluator=evaluator, by_variant=figures))
    return rollups


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
        variants=[_variant_summary(n, by_variant.get(n, []), outcomes.get(n, {})) for n in names],
        by_evaluator=_rollups(results),
    )
    return summary, outcomes


def _delta(
    current: VariantSummary, base: VariantSummary, now: Mapping[str, bool], before: Mapping[str, bool]
) -> VariantDelta:
    shared = [case for case in now if case in before]
    return VariantDelta(
        variant=current.name,
        pass_rate_delta=current.pass_rate - base.pass_rate,
        avg_latency_delta_ms=current.avg_latency_ms - base.avg_latency_ms,
        regressions=sorted(c for c in shared if before[c] and not now[c]),
        improvements=sorted(c for c in shared if now[c] and not before[c]),
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
