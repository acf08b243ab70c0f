"""Comparing two runs, or a run with its eval's promoted baseline (both are kind ``drift``)."""

from __future__ import annotations

from pathlib import Path

from evaltrace.runner.baselines import load_baseline, run_eval_name
from evaltrace.runner.rundir import RunDirectory, RunNotFoundError
from evaltrace.runner.summary import case_outcomes, run_comparison
from evaltrace.schema import ComparisonReport

__all__ = ["compare_runs", "compare_with_baseline"]


def compare_runs(base: RunDirectory, current: RunDirectory) -> ComparisonReport:
    """Compare each variant of ``current`` with the same variant of ``base``; regressions are per case.

    Args:
        base: The earlier (reference) run.
        current: The run being judged.

    Returns:
        The report (``baseline`` and ``baseline_run_id`` are the base run's id).
    """
    return run_comparison(
        base.read_summary(),
        case_outcomes(base.read_traces(), base.read_results()),
        current.read_summary(),
        case_outcomes(current.read_traces(), current.read_results()),
        kind="drift",
    )


def compare_with_baseline(run: RunDirectory, runs_dir: Path) -> ComparisonReport:
    """Compare ``run`` with the promoted baseline of its eval.

    Raises:
        RunNotFoundError: No baseline was promoted for the run's eval.
    """
    eval_name = run_eval_name(run)
    baseline = load_baseline(runs_dir, eval_name)
    if baseline is None:
        raise RunNotFoundError(f"no promoted baseline for {eval_name!r} in {runs_dir}; run `evaltrace promote` first")
    current = run.read_summary()
    outcomes = case_outcomes(run.read_traces(), run.read_results())
    return run_comparison(baseline.summary, baseline.outcomes, current, outcomes, kind="drift")
