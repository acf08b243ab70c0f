"""``run`` and ``re-evaluate``: cases × variants under tracing, traces persisted, then evaluated and summarised.

Order of a run (data-model.md part A): validate eval.yaml, the cases, adapters and evaluators (every config
error surfaces before the system is called) -> create ``runs/<run_id>/`` with config.yaml, config_hash.txt and
the cases snapshot -> execute -> write ``traces.jsonl`` -> evaluate -> write ``results.jsonl`` ->
``summary.yaml`` (with the ad-hoc or drift comparison) -> optionally the SQLite store.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from evaltrace.runner.adapters import Adapter, build_adapter
from evaltrace.runner.baselines import load_baseline, run_eval_name
from evaltrace.runner.capture import capture_run
from evaltrace.runner.config import (
    DEFAULT_CONCURRENCY,
    EvalConfig,
    config_hash,
    load_eval_config,
    load_evaluator_entries,
    mask_secrets,
)
from evaltrace.runner.evaluate import ConfiguredEvaluator, build_evaluators, evaluate_traces
from evaltrace.runner.rundir import CONFIG_FILE, SUMMARY_FILE, RunDirectory
from evaltrace.runner.sqlite_store import SqliteRunStore
from evaltrace.runner.summary import CaseOutcomes, compare_variants, run_comparison, summarise_run
from evaltrace.schema import ComparisonReport, EvalCase, EvaluationResult, RunSummary, Trace, utcnow

__all__ = ["NullProgress", "ProgressReporter", "RunOutcome", "re_evaluate", "run_eval"]


class ProgressReporter(Protocol):
    """Receives progress of the two phases (executing, evaluating)."""

    def start(self, description: str, total: int) -> None:
        """A phase of ``total`` steps begins."""
        ...

    def advance(self) -> None:
        """One step of the current phase is done."""
        ...


class NullProgress:
    """Reports nothing."""

    def start(self, description: str, total: int) -> None:
        """Ignore."""

    def advance(self) -> None:
        """Ignore."""


@dataclass
class RunOutcome:
    """What a run (or re-evaluation) produced.

    Attributes:
        run: The run directory.
        summary: The summary written to summary.yaml.
        traces: The traces (as in traces.jsonl).
        results: The evaluation results (as in results.jsonl).
        notes: Things the user should know (e.g. ``--drift`` without a promoted baseline).
    """

    run: RunDirectory
    summary: RunSummary
    traces: list[Trace]
    results: list[EvaluationResult]
    notes: list[str] = field(default_factory=list)


async def _execute(config: EvalConfig, adapters: list[Adapter], run_id: str, progress: ProgressReporter) -> list[Trace]:
    limit = asyncio.Semaphore(config.concurrency)
    progress.start("running cases", len(config.cases) * len(config.variants))
    with capture_run(config.name) as capture:

        async def one(adapter: Adapter, case: EvalCase, variant: str) -> Trace:
            async with limit:
                trace = await capture.execute(adapter, case, variant, run_id)
            progress.advance()
            return trace

        try:
            jobs = [
                one(adapter, case, variant.name)
                for variant, adapter in zip(config.variants, adapters, strict=True)
                for case in config.cases
            ]
            return list(await asyncio.gather(*jobs))
        finally:
            await asyncio.gather(*(a.aclose() for a in adapters), return_exceptions=True)


async def _evaluate(
    traces: list[Trace],
    cases: list[EvalCase],
    evaluators: list[ConfiguredEvaluator],
    concurrency: int,
    progress: ProgressReporter,
) -> list[EvaluationResult]:
    progress.start("evaluating", len(traces))
    return await evaluate_traces(traces, cases, evaluators, concurrency=concurrency, on_done=progress.advance)


@dataclass(frozen=True)
class _SummaryInputs:
    run: RunDirectory
    started_at: dt.datetime
    config_path: str
    variant_names: list[str]
    baseline_variant: str | None
    drift_runs_dir: Path | None


def _summarise(
    inputs: _SummaryInputs, traces: list[Trace], results: list[EvaluationResult], notes: list[str]
) -> RunSummary:
    summary, outcomes = summarise_run(
        run_id=inputs.run.run_id,
        started_at=inputs.started_at,
        finished_at=utcnow(),
        config_path=inputs.config_path,
        config_hash=inputs.run.read_hash(),
        variant_names=inputs.variant_names,
        traces=traces,
        results=results,
    )
    comparison = None
    if inputs.drift_runs_dir is not None:
        comparison = _drift(inputs.run, inputs.drift_runs_dir, summary, outcomes, notes)
    if comparison is None and inputs.baseline_variant in {v.name for v in summary.variants}:
        comparison = compare_variants(summary, outcomes, str(inputs.baseline_variant))
    return summary.model_copy(update={"comparison": comparison})


def _drift(
    run: RunDirectory, runs_dir: Path, summary: RunSummary, outcomes: CaseOutcomes, notes: list[str]
) -> ComparisonReport | None:
    eval_name = run_eval_name(run)
    baseline = load_baseline(runs_dir, eval_name)
    if baseline is None:
        notes.append(f"no promoted baseline for {eval_name!r} in {runs_dir}; drift comparison skipped")
        return None
    return run_comparison(baseline.summary, baseline.outcomes, summary, outcomes, kind="drift")


def run_eval(
    config_path: Path | str,
    *,
    runs_dir: Path | None = None,
    drift: bool = False,
    sqlite_path: Path | None = None,
    run_namespace: dict[str, str] | None = None,
    progress: ProgressReporter | None = None,
) -> RunOutcome:
    """Run an eval.yaml end to end and write its run directory.

    Args:
        config_path: The eval.yaml.
        runs_dir: Where the run directory goes (default: the config's ``runs_dir``, relative to the cwd).
        drift: Compare with the promoted baseline of this eval (kind ``drift``) instead of the baseline variant.
        sqlite_path: Also store the run in this SQLite database.
        run_namespace: Namespace recorded with the run in SQLite (project, branch, ...).
        progress: Progress receiver (default: none).

    Returns:
        The outcome.

    Raises:
        RunConfigError: The config, the cases, an adapter or an evaluator is malformed (nothing was run).
    """
    progress = progress or NullProgress()
    config = load_eval_config(config_path)
    adapters = [build_adapter(v, config.path, i) for i, v in enumerate(config.variants)]
    evaluators = build_evaluators(config.evaluators, config.path)
    target_dir = runs_dir if runs_dir is not None else config.runs_dir
    started = utcnow()
    run = _start_run(config, target_dir, started)
    traces = asyncio.run(_execute(config, adapters, run.run_id, progress))
    run.write_traces(traces)  # before any evaluator runs: a crash below never loses what the system did
    results = asyncio.run(_evaluate(traces, config.cases, evaluators, config.concurrency, progress))
    run.write_results(results)
    notes: list[str] = []
    variant_names = [v.name for v in config.variants]
    drift_dir = target_dir if drift else None
    inputs = _SummaryInputs(run, started, str(config.path), variant_names, config.baseline, drift_dir)
    summary = _summarise(inputs, traces, results, notes)
    run.write_summary(summary)
    if sqlite_path is not None:
        with SqliteRunStore(sqlite_path) as store:
            store.save_run(summary, traces, results, eval_name=config.name, run_namespace=run_namespace)
    return RunOutcome(run, summary, traces, results, notes)


def _start_run(config: EvalConfig, runs_dir: Path, started: dt.datetime) -> RunDirectory:
    """Create the run directory with config.yaml (verbatim when nothing needed masking), hash and cases."""
    run = RunDirectory.create(runs_dir, config.name, started)
    masked = mask_secrets(config.raw)
    verbatim = config.path.read_text(encoding="utf-8") if masked == config.raw else None
    run.write_config(masked, config_hash(masked, config.cases), config.cases, verbatim=verbatim)
    return run


def re_evaluate(
    run: RunDirectory,
    *,
    config_path: Path | None = None,
    runs_dir: Path | None = None,
    drift: bool = False,
    progress: ProgressReporter | None = None,
) -> RunOutcome:
    """Re-run the evaluators over a run's traces.jsonl (the system is never called); rewrite results and summary.

    Args:
        run: The run directory.
        config_path: An eval.yaml whose evaluators to use instead of the run's own config.yaml.
        runs_dir: Where promoted baselines live, for ``drift`` (default: the run's parent directory).
        drift: Compare with the promoted baseline.
        progress: Progress receiver.

    Returns:
        The outcome.
    """
    progress = progress or NullProgress()
    previous = _previous_summary(run)
    setup = _re_evaluation_setup(run, config_path, previous)
    traces = run.read_traces()
    results = asyncio.run(_evaluate(traces, run.read_cases(), setup.evaluators, setup.concurrency, progress))
    run.write_results(results)
    variant_names = (
        [v.name for v in previous.variants] if previous else list(dict.fromkeys(t.variant_name for t in traces))
    )
    started = previous.started_at if previous else min((t.started_at for t in traces), default=utcnow())
    notes: list[str] = []
    inputs = _SummaryInputs(
        run,
        started,
        previous.config_path if previous else str(setup.source),
        variant_names,
        setup.baseline,
        (runs_dir or run.path.parent) if drift else None,
    )
    summary = _summarise(inputs, traces, results, notes)
    run.write_summary(summary)
    return RunOutcome(run, summary, traces, results, notes)


@dataclass(frozen=True)
class _ReEvaluationSetup:
    evaluators: list[ConfiguredEvaluator]
    concurrency: int
    baseline: str | None
    source: Path


def _re_evaluation_setup(
    run: RunDirectory, config_path: Path | None, previous: RunSummary | None
) -> _ReEvaluationSetup:
    """Evaluators, concurrency and baseline variant from ``config_path``, else from the run's config.yaml."""
    if config_path is not None:
        source = Path(config_path)
        raw = load_eval_config(source).raw
        base_dir = source.parent
    else:
        source = run.path / CONFIG_FILE
        raw = run.read_config()
        # Imported evaluators live next to the original eval.yaml, not in the run directory.
        base_dir = Path(previous.config_path).parent if previous else run.path
    entries = load_evaluator_entries(source, raw.get("evaluators"))
    concurrency = raw.get("concurrency")
    baseline = raw.get("baseline")
    return _ReEvaluationSetup(
        evaluators=build_evaluators(entries, source, base_dir=base_dir),
        concurrency=concurrency if isinstance(concurrency, int) and concurrency > 0 else DEFAULT_CONCURRENCY,
        baseline=baseline if isinstance(baseline, str) else None,
        source=source,
    )


def _previous_summary(run: RunDirectory) -> RunSummary | None:
    # A run interrupted during evaluation has traces but no summary yet; re-evaluate completes it.
    if not (run.path / SUMMARY_FILE).is_file():
        return None
    return run.read_summary()
