"""Summaries of runs made by older 1.x releases, regenerated from their (migrated) traces and results.

A 1.0 summary.yaml predates the outcome counts (``cases_failed``, ``cases_eval_errors``, ``cases_not_evaluated``)
and counted skipped evaluations as failures, so its pass rates are wrong, not merely incomplete. The jsonl files
are the durable record (data-model.md: summary.yaml is regenerable from them) and are migrated on read
(:mod:`evaltrace.schema.migrations`), so :func:`current_summary` rebuilds the summary from them, in memory: the
file is left as written.
"""

from __future__ import annotations

from evaltrace.runner.rundir import RESULTS_FILE, TRACES_FILE, RunDirectory
from evaltrace.runner.summary import compare_variants, summarise_run
from evaltrace.schema import RunSummary

__all__ = ["current_summary", "summary_predates_outcomes"]


def summary_predates_outcomes(summary: RunSummary) -> bool:
    """True for a summary written before the per-variant outcome counts existed."""
    return any(v.cases_failed is None for v in summary.variants)


def current_summary(run: RunDirectory) -> RunSummary:
    """Return the run's summary; an old one (see the module docstring) is regenerated from traces and results.

    The regenerated summary keeps the old one's id, times, config path and hash. An ad-hoc comparison is
    recomputed against the same baseline variant; a drift comparison is kept as written (the baseline it was
    computed against may be gone).

    Raises:
        SchemaError: A file of the run is not valid.
    """
    summary = run.read_summary()
    if not summary_predates_outcomes(summary):
        return summary
    if not ((run.path / TRACES_FILE).is_file() and (run.path / RESULTS_FILE).is_file()):
        return summary
    regenerated, outcomes = summarise_run(
        run_id=summary.run_id,
        started_at=summary.started_at,
        finished_at=summary.finished_at,
        config_path=summary.config_path,
        config_hash=summary.config_hash,
        variant_names=[v.name for v in summary.variants],
        traces=run.read_traces(),
        results=run.read_results(),
    )
    comparison = summary.comparison
    names = {v.name for v in regenerated.variants}
    if comparison is not None and comparison.kind == "ad_hoc" and comparison.baseline in names:
        comparison = compare_variants(regenerated, outcomes, comparison.baseline)
    return regenerated.model_copy(update={"comparison": comparison})
