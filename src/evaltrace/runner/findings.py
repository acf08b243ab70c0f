"""What a reader of a run needs beyond its figures: the cases that did not pass, what changed, and insights.

- :func:`case_reports`: every (case, variant) that failed, errored or was not evaluated, with the evaluators and
  reasons behind it and where its trace is (line of ``traces.jsonl``, OTel trace id).
- :func:`describe_changes`: for each regressed, improved or unverified case of a comparison, the evaluators whose
  verdict moved, old against new (reason, score). A drift baseline's per-evaluator results come from the
  baseline run's own directory when it is still there; otherwise the old side is unknown (None).
- :func:`insights_summary`: :func:`evaltrace.evaluators.run_insights` (best variant and hardest case per
  evaluator, cheapest / fastest variant, threshold problems, flips after a perturbation) plus the run's best
  variant and hardest case by case outcome, and :mod:`evaltrace.runner.run_explanations` (least accurate and
  slowest variant, best and worst retrieval, the failure split, rubric roll-ups, one explanation per insight).

Outcomes come from :mod:`evaltrace.runner.summary` only, so a listing never disagrees with the counts.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from evaltrace.evaluators.insights import run_insights
from evaltrace.runner import run_explanations as explain
from evaltrace.runner.summary import CaseOutcomes, Outcome, result_verdict
from evaltrace.schema import ComparisonReport, EvalCase, EvaluationResult, RunSummary, Trace, VariantDelta
from evaltrace.schema.runs import (
    CaseChange,
    CaseReport,
    EvaluatorChange,
    EvaluatorInsightSummary,
    EvaluatorVerdict,
    RunInsightsSummary,
)

__all__ = [
    "CellKey",
    "baseline_run_results",
    "case_reports",
    "describe_changes",
    "insights_summary",
    "trace_locations",
    "verdict_of",
    "with_findings",
]

CellKey = tuple[str, str]
"""(variant name, case id)."""
ChangeKind = Literal["regression", "improvement", "unverified"]


def verdict_of(result: EvaluationResult) -> EvaluatorVerdict:
    """One result as an :class:`EvaluatorVerdict` (an errored one keeps its error type and message)."""
    outcome = result_verdict(result)
    reason = result.reason
    if outcome == "error" and result.error is not None and not reason:
        reason = result.error.message
    return EvaluatorVerdict(
        evaluator=result.evaluator,
        outcome=outcome,
        score=result.score if outcome in ("pass", "fail") else None,
        reason=reason or ("skipped" if outcome == "not_evaluated" else ""),
        error_type=result.error.type if outcome == "error" and result.error is not None else None,
    )


def trace_locations(path: Path) -> dict[CellKey, int]:
    """Map each (variant, case) to the 1-based line of its Trace in ``traces.jsonl`` (first line wins).

    Only the two ids are read from each line; a torn or foreign line is skipped, never an error: the locations
    are a convenience for the reader.
    """
    locations: dict[CellKey, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return locations
    for number, line in enumerate(lines, start=1):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("case_id"), str):
            locations.setdefault((str(data.get("variant_name", "")), data["case_id"]), number)
    return locations


def _system_error(trace: Trace | None) -> str | None:
    if trace is None or trace.error is None:
        return None
    return f"{trace.error.type}: {trace.error.message}"


def _trace_id(trace: Trace) -> str | None:
    value = trace.extra.get("trace_id")
    return value if isinstance(value, str) and value.strip("0") else None


def _by_cell(results: Iterable[EvaluationResult]) -> dict[CellKey, list[EvaluationResult]]:
    cells: dict[CellKey, list[EvaluationResult]] = defaultdict(list)
    for result in results:
        cells[result.variant_name, result.case_id].append(result)
    return cells


def case_reports(
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    outcomes: CaseOutcomes,
    locations: Mapping[CellKey, int] | None = None,
) -> dict[Outcome, list[CaseReport]]:
    """Every traced (case, variant) that did not pass, grouped by outcome (``fail``, ``error``, ``not_evaluated``).

    Args:
        traces: The run's traces, in the order the listing should follow.
        results: The run's evaluation results.
        outcomes: :func:`evaltrace.runner.summary.case_outcomes` of the same traces and results.
        locations: :func:`trace_locations` of the run's traces.jsonl.

    Returns:
        Reports per outcome; ``pass`` is never a key.
    """
    cells = _by_cell(results)
    grouped: dict[Outcome, list[CaseReport]] = {"fail": [], "error": [], "not_evaluated": []}
    for trace in traces:
        key = (trace.variant_name, trace.case_id)
        outcome = outcomes.get(trace.variant_name, {}).get(trace.case_id, "not_evaluated")
        if outcome == "pass":
            continue
        verdicts = [verdict_of(r) for r in cells.get(key, [])]
        grouped[outcome].append(
            CaseReport(
                case_id=trace.case_id,
                variant=trace.variant_name,
                outcome=outcome,
                system_error=_system_error(trace),
                evaluators=[v for v in verdicts if v.outcome == outcome],
                trace_id=_trace_id(trace),
                trace_line=(locations or {}).get(key),
            )
        )
    return grouped


def _kind(before: Outcome, now: Outcome) -> ChangeKind | None:
    if before == "pass" and now == "fail":
        return "regression"
    if before == "fail" and now == "pass":
        return "improvement"
    if before == "pass" and now not in ("pass", "fail"):
        return "unverified"
    return None


def _moved(
    before: Sequence[EvaluationResult] | None, now: Sequence[EvaluationResult], kind: ChangeKind
) -> list[EvaluatorChange]:
    """Evaluators whose verdict differs; with the old side unknown, those that explain the new outcome."""
    now_by = {r.evaluator: verdict_of(r) for r in now}
    if before is None:
        wanted = {"regression": {"fail"}, "improvement": {"pass"}, "unverified": {"error", "not_evaluated"}}[kind]
        return [EvaluatorChange(evaluator=n, now=v) for n, v in now_by.items() if v.outcome in wanted]
    before_by = {r.evaluator: verdict_of(r) for r in before}
    names = [*before_by, *(n for n in now_by if n not in before_by)]
    changes = []
    for name in names:
        old, new = before_by.get(name), now_by.get(name)
        if old is None or new is None or old.outcome != new.outcome:
            changes.append(EvaluatorChange(evaluator=name, before=old, now=new))
    return changes


def _delta_changes(
    delta: VariantDelta,
    base_variant: str,
    outcomes: tuple[Mapping[str, Outcome], Mapping[str, Outcome]],
    results: tuple[Mapping[CellKey, list[EvaluationResult]] | None, Mapping[CellKey, list[EvaluationResult]]],
    traces: Mapping[CellKey, Trace],
    locations: Mapping[CellKey, int],
) -> list[CaseChange]:
    before_outcomes, now_outcomes = outcomes
    before_results, now_results = results
    changes = []
    for case_id in [*delta.regressions, *delta.improvements, *delta.unverified]:
        before, now = before_outcomes.get(case_id, "not_evaluated"), now_outcomes.get(case_id, "not_evaluated")
        kind = _kind(before, now)
        if kind is None:
            continue
        key = (delta.variant, case_id)
        old = None if before_results is None else before_results.get((base_variant, case_id), [])
        changes.append(
            CaseChange(
                case_id=case_id,
                kind=kind,
                before=before,
                now=now,
                system_error=_system_error(traces.get(key)),
                evaluators=_moved(old, now_results.get(key, []), kind),
                trace_line=locations.get(key),
            )
        )
    return changes


def describe_changes(
    report: ComparisonReport,
    *,
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    outcomes: CaseOutcomes,
    base_outcomes: CaseOutcomes,
    base_results: Sequence[EvaluationResult] | None,
    locations: Mapping[CellKey, int] | None = None,
) -> ComparisonReport:
    """Fill each delta's ``changes``: per moved case, the evaluators whose verdict moved, old against new.

    Args:
        report: The comparison (ad hoc: the baseline is a variant of this run; drift: a baseline run).
        traces: This run's traces.
        results: This run's results.
        outcomes: This run's case outcomes.
        base_outcomes: The baseline's case outcomes (for ad hoc, this run's own).
        base_results: The baseline's results (for ad hoc, this run's own), or None when they are not at hand.
        locations: Where this run's traces are in traces.jsonl.

    Returns:
        A copy of ``report`` with ``changes`` filled.
    """
    now_cells = _by_cell(results)
    base_cells = None if base_results is None else _by_cell(base_results)
    by_key = {(t.variant_name, t.case_id): t for t in traces}
    deltas = []
    for delta in report.deltas:
        base_variant = report.baseline if report.kind == "ad_hoc" else delta.variant
        changes = _delta_changes(
            delta,
            base_variant,
            (base_outcomes.get(base_variant, {}), outcomes.get(delta.variant, {})),
            (base_cells, now_cells),
            by_key,
            locations or {},
        )
        deltas.append(delta.model_copy(update={"changes": changes}))
    return report.model_copy(update={"deltas": deltas})


def baseline_run_results(runs_dir: Path, run_id: str, current_run_id: str) -> list[EvaluationResult] | None:
    """The results of a promoted baseline's own run, if its directory is still in ``runs_dir``; else None.

    None too when the baseline is the current run (a re-evaluation of the promoted run, or a new run that took
    the id of a deleted baseline run): its results are being replaced, so they cannot be the "before" side.
    """
    from evaltrace.runner.rundir import RESULTS_FILE, RunDirectory  # rundir imports the schema only: no cycle

    if run_id == current_run_id:
        return None
    run = RunDirectory(runs_dir / run_id)
    if not (run.path / RESULTS_FILE).is_file():
        return None
    try:
        return run.read_results()
    except Exception:  # a damaged old run only costs the "before" side of the listing
        return None


def insights_summary(
    summary: RunSummary,
    outcomes: CaseOutcomes,
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    cases: Sequence[EvalCase] = (),
) -> RunInsightsSummary:
    """The run's insights: :func:`~evaltrace.evaluators.run_insights` plus best variant and hardest case overall."""
    insights = run_insights(results, traces, cases)
    # Never a variant nothing was judged on: not by case (pass rate None) nor by any evaluator (all errored or
    # skipped, whatever its system failures).
    judged = [(v, v.pass_rate) for v in explain.judged_variants(summary) if v.pass_rate is not None]
    best_pair = min(judged, key=lambda pair: (-pair[1], pair[0].avg_latency_ms, pair[0].name), default=None)
    best = best_pair[0] if best_pair is not None else None
    failures = Counter(case for by_case in outcomes.values() for case, o in by_case.items() if o == "fail")
    order = {case: i for i, case in enumerate(dict.fromkeys(t.case_id for t in traces))}
    hardest = min(failures, key=lambda c: (-failures[c], order.get(c, len(order)), c), default=None)
    least_accurate, slowest = explain.least_accurate_variant(summary), explain.slowest_variant(summary)
    retrieval = explain.retrieval_ranking(results)
    split = explain.failure_split(outcomes, traces, results)
    return RunInsightsSummary(
        least_accurate_variant=least_accurate,
        slowest_variant=slowest,
        best_retrieval_variant=retrieval[0],
        worst_retrieval_variant=retrieval[1],
        retrieval_average_by_variant=retrieval[2],
        failure_split=split,
        dimension_averages=explain.dimension_averages(results),
        complexity_distribution=explain.complexity_distribution(cases),
        explanations=explain.explanations(
            summary,
            least_accurate=least_accurate,
            slowest=slowest,
            retrieval=retrieval,
            split=split,
            best_variant=best.name if best is not None else None,
        ),
        best_variant=best.name if best is not None else None,
        hardest_case=hardest,
        hardest_case_failures=failures[hardest] if hardest is not None else 0,
        cheapest_variant=insights.cheapest_variant,
        most_expensive_variant=insights.most_expensive_variant,
        fastest_variant=insights.fastest_variant,
        evaluators=[
            EvaluatorInsightSummary(
                evaluator=i.evaluator,
                best_variant=i.best_variant,
                hardest_case=i.hardest_case,
                hardest_case_failures=i.hardest_case_failures,
                average_by_variant=dict(i.average_by_variant),
            )
            for i in insights.evaluators.values()
        ],
        problems=list(insights.problems),
    )


def with_findings(
    summary: RunSummary,
    outcomes: CaseOutcomes,
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    *,
    cases: Sequence[EvalCase] = (),
    locations: Mapping[CellKey, int] | None = None,
) -> RunSummary:
    """A copy of ``summary`` with the failing / errored / not-evaluated case listings and the insights."""
    grouped = case_reports(traces, results, outcomes, locations)
    return summary.model_copy(
        update={
            "failed_cases": grouped["fail"],
            "eval_error_cases": grouped["error"],
            "not_evaluated_cases": grouped["not_evaluated"],
            "insights": insights_summary(summary, outcomes, traces, results, cases),
        }
    )
