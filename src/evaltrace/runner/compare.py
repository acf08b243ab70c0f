"""Comparing two runs, or a run with its eval's promoted baseline (both are kind ``drift``).

When either side used part of the dataset (``--case``, ``--tag``, ...), the other is narrowed to the same cases
(:func:`evaltrace.runner.summary.restrict_to_cases`). Each moved case carries what changed
(:func:`evaltrace.runner.findings.describe_changes`).
"""

from __future__ import annotations

from pathlib import Path

from evaltrace.runner.baselines import load_baseline, run_eval_name
from evaltrace.runner.findings import baseline_run_results, describe_changes, trace_locations
from evaltrace.runner.rundir import TRACES_FILE, RunDirectory, RunNotFoundError
from evaltrace.runner.summary import CaseOutcomes, case_outcomes, restrict_to_cases, run_comparison
from evaltrace.schema import ComparisonReport, EvaluationResult, RunSummary

__all__ = ["compare_runs", "compare_with_baseline"]

Side = tuple[RunSummary, CaseOutcomes]


def _same_cases(before: Side, now: Side) -> tuple[Side, Side]:
    """When either run used part of the dataset, narrow the other to its cases."""
    if now[0].selection is not None:
        before = restrict_to_cases(*before, now[0].selection.selected)
    if before[0].selection is not None:
        now = restrict_to_cases(*now, before[0].selection.selected)
    return before, now


def _compare(before: Side, current: RunDirectory, base_results: list[EvaluationResult] | None) -> ComparisonReport:
    traces, results = current.read_traces(), current.read_results()
    before, now = _same_cases(before, (current.read_summary(), case_outcomes(traces, results)))
    return describe_changes(
        run_comparison(*before, *now, kind="drift"),
        traces=traces,
        results=results,
        outcomes=now[1],
        base_outcomes=before[1],
        base_results=base_results,
        locations=trace_locations(current.path / TRACES_FILE),
    )


def compare_runs(base: RunDirectory, current: RunDirectory) -> ComparisonReport:
    """Compare each variant of ``current`` with the same variant of ``base``; regressions are per case.

    Args:
        base: The earlier (reference) run.
        current: The run being judged.

    Returns:
        The report (``baseline`` and ``baseline_run_id`` are the base run's id).
    """
    base_results = base.read_results()
    before = (base.read_summary(), case_outcomes(base.read_traces(), base_results))
    return _compare(before, current, base_results)


def compare_with_baseline(run: RunDirectory, runs_dir: Path) -> ComparisonReport:
    """Compare ``run`` with the promoted baseline of its eval.

    Raises:
        RunNotFoundError: No baseline was promoted for the run's eval.
    """
    eval_name = run_eval_name(run)
    baseline = load_baseline(runs_dir, eval_name)
    if baseline is None:
        raise RunNotFoundError(f"no promoted baseline for {eval_name!r} in {runs_dir}; run `evaltrace promote` first")
    base_results = baseline_run_results(runs_dir, baseline.summary.run_id, run.run_id)
    return _compare((baseline.summary, baseline.outcomes), run, base_results)
