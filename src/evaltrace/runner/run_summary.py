"""The summary stage of a run: traces and results in config order, results.jsonl rewritten, summary.yaml written.

One code path for a run's end, ``runs merge`` and ``runs summarize``, so a merged or re-summarised run summarises
exactly as a single-process run of the same cells.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from evaltrace.runner.baselines import load_baseline, run_eval_name
from evaltrace.runner.config import EvalConfig
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluation_records import EvaluationPlan, write_evaluation_records
from evaltrace.runner.findings import baseline_run_results, describe_changes, trace_locations, with_findings
from evaltrace.runner.outcome import Cell, RunOutcome
from evaltrace.runner.resume import resume_config
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE, RunDirectory
from evaltrace.runner.shards import shard_cells
from evaltrace.runner.summary import CaseOutcomes, compare_variants, restrict_to_cases, run_comparison, summarise_run
from evaltrace.schema import ComparisonReport, EvalCase, EvaluationResult, RunSummary, Trace, utcnow
from evaltrace.schema.runs import CaseSelection

T = TypeVar("T")
K = TypeVar("K")

__all__ = [
    "RunOrder",
    "SummaryInputs",
    "evaluator_order",
    "first_per_key",
    "other_shards_cells",
    "previous_summary",
    "summarise_run_directory",
    "summarise_with_findings",
    "summarize_run",
]


@dataclass(frozen=True)
class SummaryInputs:
    """What a summary needs besides the traces and results: the run, its times, its variants, its comparison."""

    run: RunDirectory
    started_at: dt.datetime
    config_path: str
    variant_names: list[str]
    baseline_variant: str | None
    drift_runs_dir: Path | None
    cases: list[EvalCase] = field(default_factory=list)
    finished_at: dt.datetime | None = None
    """When the run finished (None: now); a summary rebuilt from stored results keeps the run's own time."""


def summarise_with_findings(
    inputs: SummaryInputs, traces: list[Trace], results: list[EvaluationResult], notes: list[str]
) -> RunSummary:
    """The summary with its findings (failing cases, insights) and comparison, each change described."""
    summary, outcomes = summarise_run(
        run_id=inputs.run.run_id,
        started_at=inputs.started_at,
        finished_at=inputs.finished_at or utcnow(),
        config_path=inputs.config_path,
        config_hash=inputs.run.read_hash(),
        variant_names=inputs.variant_names,
        traces=traces,
        results=results,
    )
    locations = trace_locations(inputs.run.path / TRACES_FILE)
    summary = with_findings(summary, outcomes, traces, results, cases=inputs.cases, locations=locations)
    meta = inputs.run.read_meta()
    selection = meta.selection if meta is not None else None
    compared = None
    if inputs.drift_runs_dir is not None:
        compared = _drift(inputs.run, inputs.drift_runs_dir, summary, outcomes, notes, selection)
    if compared is None and inputs.baseline_variant in {v.name for v in summary.variants}:
        compared = (compare_variants(summary, outcomes, str(inputs.baseline_variant)), outcomes, results)
    comparison = None
    if compared is not None:
        report, base_outcomes, base_results = compared
        comparison = describe_changes(
            report,
            traces=traces,
            results=results,
            outcomes=outcomes,
            base_outcomes=base_outcomes,
            base_results=base_results,
            locations=locations,
        )
    return summary.model_copy(update={"comparison": comparison, "selection": selection})


def _drift(
    run: RunDirectory,
    runs_dir: Path,
    summary: RunSummary,
    outcomes: CaseOutcomes,
    notes: list[str],
    selection: CaseSelection | None,
) -> tuple[ComparisonReport, CaseOutcomes, list[EvaluationResult] | None] | None:
    """The drift comparison, the baseline's outcomes and (when its run is still there) its results."""
    eval_name = run_eval_name(run)
    baseline = load_baseline(runs_dir, eval_name)
    if baseline is None:
        notes.append(f"no promoted baseline for {eval_name!r} in {runs_dir}; drift comparison skipped")
        return None
    base_summary, base_outcomes = baseline.summary, baseline.outcomes
    if selection is not None:  # part of the dataset: compare with the same cases of the baseline only
        base_summary, base_outcomes = restrict_to_cases(base_summary, base_outcomes, selection.selected)
    report = run_comparison(base_summary, base_outcomes, summary, outcomes, kind="drift")
    return report, base_outcomes, baseline_run_results(runs_dir, baseline.summary.run_id, run.run_id)


def summarise_run_directory(
    run: RunDirectory,
    config: EvalConfig,
    evaluator_names: Sequence[str],
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    started: dt.datetime,
    notes: list[str],
    drift_dir: Path | None = None,
    finished: dt.datetime | None = None,
) -> RunOutcome:
    """Put a run's traces and results in config order, write results.jsonl and summary.yaml; not yet stored.

    A run's own end, and ``runs merge``'s (:mod:`evaltrace.runner.merge`): one summary code path, so a merged
    run summarises exactly as a single-process run of the same cells. traces.jsonl is written (and sealed) only
    when the run has none yet (a merge); a run appended its own as cells finished.

    Args:
        run: The run directory.
        config: The run's config (variant and case order; baseline variant).
        evaluator_names: The evaluators' result names, in config order.
        traces: Every trace of the run, in any order.
        results: Every evaluation result of the run, in any order.
        started: When the run started.
        notes: Notes for the user; the drift comparison adds to them.
        drift_dir: Compare with the promoted baseline in this runs directory (None: the baseline variant).
        finished: When the run finished (None: now).
    """
    order = RunOrder([v.name for v in config.variants], [c.id for c in config.cases], evaluator_names)
    ordered_traces = sorted(traces, key=order.trace)
    if not (run.path / TRACES_FILE).exists():
        run.write_traces(ordered_traces)
    ordered = sorted(results, key=order.result)
    run.write_results(ordered)  # the same results, in order and without torn or stray lines
    variant_names = [v.name for v in config.variants]
    inputs = SummaryInputs(
        run, started, str(config.path), variant_names, config.baseline, drift_dir, config.cases, finished
    )
    summary = summarise_with_findings(inputs, ordered_traces, ordered, notes)
    run.write_summary(summary)
    plan = EvaluationPlan.of(config.raw, config.path)
    write_evaluation_records(run.path, run.run_id, plan, config.evaluators, ordered_traces, ordered)
    return RunOutcome(run, summary, ordered_traces, ordered, notes)


def evaluator_order(results: Sequence[EvaluationResult]) -> list[str]:
    """The evaluators in config order, read from a run's ordered results (no evaluator is built).

    Every cell has one result per evaluator, written in config order, so a cell's names are that order. Reading
    it from the results, not by building the evaluators, lets a CI job merge or re-summarise without the
    project's code.
    """
    cells: dict[tuple[str, str], list[str]] = {}
    for result in results:
        cells.setdefault((result.variant_name, result.case_id), []).append(result.evaluator)
    return max(cells.values(), key=len, default=[])


def other_shards_cells(run: RunDirectory, config: EvalConfig) -> set[Cell]:
    """The cells a shard run leaves to the other shards (none for a whole run): never executed here."""
    meta = run.read_meta()
    if meta is None or meta.shard is None:
        return set()
    every = {(c.id, v.name) for v in config.variants for c in config.cases}
    return every - shard_cells(every, meta.shard)


def first_per_key(items: Sequence[T], key: Callable[[T], K]) -> list[T]:
    """The first item of each key, in order (a line saved twice counts once)."""
    seen: dict[K, T] = {}
    for item in items:
        seen.setdefault(key(item), item)
    return list(seen.values())


class RunOrder:
    """Config order: variants, then cases, then evaluators (unknown ones last)."""

    def __init__(self, variants: Sequence[str], cases: Sequence[str], evaluators: Sequence[str]) -> None:
        self._variants = {name: i for i, name in enumerate(variants)}
        self._cases = {case: i for i, case in enumerate(cases)}
        self._evaluators = {name: i for i, name in enumerate(evaluators)}

    def trace(self, trace: Trace) -> tuple[int, int]:
        """Sort key of a trace."""
        return (
            self._variants.get(trace.variant_name, len(self._variants)),
            self._cases.get(trace.case_id, len(self._cases)),
        )

    def result(self, result: EvaluationResult) -> tuple[int, int, int]:
        """Sort key of a result."""
        return (
            self._variants.get(result.variant_name, len(self._variants)),
            self._cases.get(result.case_id, len(self._cases)),
            self._evaluators.get(result.evaluator, len(self._evaluators)),
        )


def previous_summary(run: RunDirectory) -> RunSummary | None:
    """The run's summary.yaml, or None when it has none yet."""
    # A run interrupted during evaluation has traces but no summary yet; re-evaluate completes it.
    if not (run.path / SUMMARY_FILE).is_file():
        return None
    return run.read_summary()


def summarize_run(run: RunDirectory, *, runs_dir: Path | None = None, drift: bool = False) -> RunOutcome:
    """Rebuild a run's summary.yaml from its traces.jsonl and results.jsonl: no system, no evaluator is called.

    The summary is computed by the code a run ends with (:func:`summarise_run_directory`), so it equals the one
    the run wrote, except the comparison when ``drift`` asks for one against today's promoted baseline. The run's
    own start and end times are kept (from the old summary, else run_meta.json and the last result). Nothing is
    saved to the stores: ``evaltrace runs push`` does that.

    Args:
        run: The run directory (finished: every cell has its trace and every trace its results).
        runs_dir: Where promoted baselines live, for ``drift`` (default: the run's parent directory).
        drift: Compare with the promoted baseline.

    Returns:
        The outcome; ``stored`` and ``store_errors`` are empty.

    Raises:
        RunConfigError: The run's config snapshot cannot be read, or the run is unfinished (a cell without its
            trace or an evaluation without its result): ``run --resume`` or ``re-evaluate`` completes it.
        SchemaError: A line of traces.jsonl or results.jsonl is not valid.
    """
    config = resume_config(run, None)  # the run's own config and cases snapshot; no evaluator is built
    traces, results = run.read_traces(), run.read_results()
    names = evaluator_order(results)
    _check_finished(run, config, traces, results, names)
    previous = previous_summary(run)
    meta = run.read_meta()
    if previous is not None:
        started, finished = previous.started_at, previous.finished_at
    else:
        stamps = [t.started_at for t in traces]
        started = meta.started_at if meta is not None and meta.started_at is not None else min(stamps, default=utcnow())
        finished = max([t.finished_at for t in traces] + [r.finished_at for r in results], default=started)
    notes: list[str] = []
    drift_dir = (runs_dir or run.path.parent) if drift else None
    return summarise_run_directory(run, config, names, traces, results, started, notes, drift_dir, finished)


def _check_finished(
    run: RunDirectory, config: EvalConfig, traces: list[Trace], results: list[EvaluationResult], names: list[str]
) -> None:
    """Raise when a summary of these files would describe a run that is not there yet (cells or results missing)."""
    expected = {(c.id, v.name) for v in config.variants for c in config.cases} - other_shards_cells(run, config)
    missing = len(expected - {(t.case_id, t.variant_name) for t in traces})
    per_cell: dict[Cell, int] = {}
    for result in results:
        per_cell[(result.case_id, result.variant_name)] = per_cell.get((result.case_id, result.variant_name), 0) + 1
    wanted = len(names) or len(config.evaluators)  # no result at all: each evaluator owes one per cell
    unjudged = sum(1 for t in traces if per_cell.get((t.case_id, t.variant_name), 0) < wanted)
    if missing or unjudged:
        what = f"{missing} cell(s) without a trace" if missing else f"{unjudged} trace(s) without all their results"
        raise RunConfigError(
            run.path / RESULTS_FILE,
            "",
            f"run {run.run_id} is unfinished ({what}); complete it with `evaltrace run --resume {run.run_id}`"
            " or `evaltrace re-evaluate`, which call the system or the evaluators",
        )
