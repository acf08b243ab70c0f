"""``run`` and ``re-evaluate``: cases × variants under tracing, traces persisted, then evaluated and summarised.

Order of a run (data-model.md part A): validate eval.yaml, the cases, adapters and evaluators (every config
error surfaces before the system is called) -> create ``runs/<run_id>/`` with config.yaml, config_hash.txt, the
cases snapshot and run_meta.json -> execute, appending each cell's trace to ``traces.jsonl`` as it finishes (a
system with a ``workspace`` runs each cell in its own copy and writes ``artifacts/<case>/<variant>/`` first) ->
evaluate, appending each result to ``results.jsonl`` as it finishes -> rewrite ``results.jsonl`` in order ->
``summary.yaml`` (with the ad-hoc or drift comparison) -> the ``output:`` / ``--sqlite`` / ``--postgres`` stores.

:func:`resume_run` continues a killed run from those files: cells with a trace are not run again, evaluations
with a result are not run again (a torn last line is cut off first); what was in flight at the kill is redone.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.runner.adapters import Adapter, build_adapter
from evaltrace.runner.artifacts import attach_artifacts
from evaltrace.runner.baselines import load_baseline, run_eval_name
from evaltrace.runner.capture import capture_run
from evaltrace.runner.config import (
    EvalConfig,
    config_hash,
    load_eval_config,
    mask_secrets,
)
from evaltrace.runner.enrichers import ConfiguredEnricher, Enrichment, TraceEnricher, build_enrichers
from evaltrace.runner.errors import RunConfigError, RunInterrupted
from evaltrace.runner.evaluate import ConfiguredEvaluator, ResultKey, build_evaluators, evaluate_traces, result_key
from evaltrace.runner.evaluation_records import EvaluationPlan, write_evaluation_records
from evaltrace.runner.findings import baseline_run_results, describe_changes, trace_locations, with_findings
from evaltrace.runner.resume import current_sys_path, incomplete_runs, re_evaluation_setup, resume_config
from evaltrace.runner.rundir import (
    CONFIG_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TRACES_FILE,
    RunDirectory,
    RunMeta,
    saved_lines,
)
from evaltrace.runner.score_push import push_scores, run_scores
from evaltrace.runner.select import apply_selection
from evaltrace.runner.shards import ShardSpec, shard_cells
from evaltrace.runner.simulation import UserSimulator, build_simulator, run_conversation
from evaltrace.runner.stores import StoreSpec, configured_runs_dir, configured_stores, parse_outputs, save_to_stores
from evaltrace.runner.summary import CaseOutcomes, compare_variants, restrict_to_cases, run_comparison, summarise_run
from evaltrace.runner.workspace import WorkspaceSource, prepare_workspaces
from evaltrace.runner.workspace_cells import WorkspaceCells
from evaltrace.schema import ComparisonReport, EvalCase, EvaluationResult, RetryConfig, RunSummary, Trace, utcnow
from evaltrace.schema.runs import CaseSelection

if TYPE_CHECKING:
    from evaltrace.runner.ray_engine import RayEngine

T = TypeVar("T")
K = TypeVar("K")

__all__ = [
    "NullProgress",
    "ProgressReporter",
    "RunOutcome",
    "re_evaluate",
    "evaluator_order",
    "push_run_scores",
    "resume_run",
    "run_eval",
    "summarise_run_directory",
    "summarize_run",
]


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
        stored: The stores (``output:``, ``--sqlite``, ``--postgres``) the run was saved to.
        store_errors: One message per store that could not save the run (the run directory is complete).
    """

    run: RunDirectory
    summary: RunSummary
    traces: list[Trace]
    results: list[EvaluationResult]
    notes: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    store_errors: list[str] = field(default_factory=list)


Cell = tuple[str, str]
"""(case id, variant name)."""


async def _execute(
    config: EvalConfig,
    adapters: list[Adapter],
    run_id: str,
    progress: ProgressReporter,
    done: set[Cell],
    on_trace: Callable[[Trace], None],
    cells: WorkspaceCells | None = None,
    simulator: UserSimulator | None = None,
    enrichment: Enrichment | None = None,
) -> list[Trace]:
    """Run every (case, variant) not in ``done``; each trace goes to ``on_trace`` as soon as it exists.

    ``cells`` runs the cells of variants with a workspace, each in its own copy (filesystem evals);
    ``simulator`` plays the user of ``simulated_user`` cases, whose whole conversation is one cell's trace.
    """
    limit = asyncio.Semaphore(config.concurrency)
    todo = [
        (adapter, case, variant.name)
        for variant, adapter in zip(config.variants, adapters, strict=True)
        for case in config.cases
        if (case.id, variant.name) not in done
    ]
    progress.start("running cases", len(todo))
    with capture_run(config.name) as capture:

        async def one(adapter: Adapter, case: EvalCase, variant: str) -> Trace:
            async with limit:
                if case.simulated_user is not None and simulator is not None:
                    trace = await run_conversation(capture, adapter, case, variant, run_id, simulator)
                elif cells is None:
                    trace = await capture.execute(adapter, case, variant, run_id)
                else:
                    trace = await cells.execute(capture, adapter, case, variant, run_id)
                if enrichment is not None:  # before it is saved: traces are write-once
                    trace = await enrichment.enrich(trace)
            on_trace(trace)  # persisted before any evaluator runs, and before a kill could lose it
            progress.advance()
            return trace

        try:
            return list(await asyncio.gather(*(one(*job) for job in todo)))
        finally:
            closing = [a.aclose() for a in adapters] + ([simulator.aclose()] if simulator is not None else [])
            await asyncio.gather(*closing, return_exceptions=True)
            if cells is not None:
                await cells.aclose()
            if enrichment is not None:
                enrichment.close()


async def _evaluate(
    traces: list[Trace],
    cases: list[EvalCase],
    evaluators: list[ConfiguredEvaluator],
    concurrency: int,
    progress: ProgressReporter,
    done: set[ResultKey] | None = None,
    on_result: Callable[[EvaluationResult], None] | None = None,
    retry: RetryConfig | None = None,
) -> list[EvaluationResult]:
    progress.start("evaluating", len(traces))
    results = await evaluate_traces(
        traces,
        cases,
        evaluators,
        concurrency=concurrency,
        on_done=progress.advance,
        done=done or set(),
        on_result=on_result,
    )
    for attempt in range(retry.max_retries if retry is not None else 0):
        assert retry is not None
        failed = {result_key(r) for r in results if r.status == "failed"}
        if not failed:
            break
        # The evaluation block's retry_config: only the failed evaluations run again, after the backoff.
        await asyncio.sleep(retry.initial_delay_ms / 1000 * retry.backoff_multiplier**attempt)
        keep = set(done or ()) | {key for r in results if (key := result_key(r)) not in failed}
        again = await evaluate_traces(
            traces, cases, evaluators, concurrency=concurrency, done=keep, on_result=on_result
        )
        redone = {result_key(r): r for r in again}
        results = [redone.get(result_key(r), r) for r in results]
    return results


@dataclass(frozen=True)
class _SummaryInputs:
    run: RunDirectory
    started_at: dt.datetime
    config_path: str
    variant_names: list[str]
    baseline_variant: str | None
    drift_runs_dir: Path | None
    cases: list[EvalCase] = field(default_factory=list)
    finished_at: dt.datetime | None = None
    """When the run finished (None: now); a summary rebuilt from stored results keeps the run's own time."""


def _summarise(
    inputs: _SummaryInputs, traces: list[Trace], results: list[EvaluationResult], notes: list[str]
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


@dataclass(frozen=True)
class _Options:
    drift_dir: Path | None
    stores: list[StoreSpec]
    run_namespace: dict[str, str] | None
    progress: ProgressReporter
    workspaces: dict[str, WorkspaceSource] = field(default_factory=dict)
    """Variant name -> its workspace source (filesystem evals)."""
    simulator: UserSimulator | None = None
    """Plays the user of ``simulated_user`` cases (None: the run has none)."""
    sinks: Sequence[str | ScoreSink] = ()
    """Score sinks the finished run's scores go to (``sinks:`` of eval.yaml, then ``--sink``)."""
    enrichers: Sequence[ConfiguredEnricher] = ()
    """TraceEnrichers run over each new trace before it is saved (``enrichers:`` of eval.yaml, then Python's)."""
    ray: RayEngine | None = None
    """Run the cells as Ray tasks (:mod:`evaltrace.runner.ray_engine`); None: in this process."""


def run_eval(
    config_path: Path | str,
    *,
    runs_dir: Path | None = None,
    drift: bool = False,
    sqlite_path: Path | None = None,
    run_namespace: dict[str, str] | None = None,
    progress: ProgressReporter | None = None,
    selection: CaseSelection | None = None,
    postgres_dsn: str | None = None,
    shard: ShardSpec | None = None,
    sinks: Sequence[str | ScoreSink] = (),
    enrichers: Sequence[TraceEnricher] = (),
    engine: RayEngine | None = None,
) -> RunOutcome:
    """Run an eval.yaml end to end and write its run directory.

    A new run always starts afresh; when an unfinished run of the same config exists, a note names it (see
    :func:`resume_run`).

    Args:
        config_path: The eval.yaml.
        runs_dir: Where the run directory goes (default: the config's ``runs_dir``, relative to the cwd).
        drift: Compare with the promoted baseline of this eval (kind ``drift``) instead of the baseline variant.
        sqlite_path: Also store the run in this SQLite database.
        run_namespace: Namespace recorded with the run in its stores (project, branch, ...); its keys win over
            an ``output:`` store's ``run_namespace``.
        progress: Progress receiver (default: none).
        selection: Run part of the dataset (:mod:`evaltrace.runner.select`); recorded in run_meta.json and the
            summary, and the config hash covers the chosen cases only.
        postgres_dsn: Also store the run in this PostgreSQL database.
        shard: Run only this shard's cells (:mod:`evaltrace.runner.shards`); recorded in run_meta.json. A shard
            is a partial run: it is not saved to the stores (``runs merge`` of all shards is).
        sinks: Score sinks for the run's scores besides eval.yaml's ``sinks:`` (:mod:`evaltrace.runner.score_push`):
            specs (``jsonl:PATH``, ``langfuse``, ``phoenix[:URL]``) or sink objects. A shard pushes none.
        enrichers: TraceEnrichers run over each trace after eval.yaml's ``enrichers:``
            (:mod:`evaltrace.runner.enrichers`).
        engine: Run the cells as Ray tasks on a cluster (:mod:`evaltrace.runner.ray_engine`); None: here.

    Returns:
        The outcome.

    Raises:
        RunConfigError: The config, the cases, an adapter or an evaluator is malformed (nothing was run).
        SelectionError: The selection is malformed or matches no case (nothing was run).
    """
    config, selection = apply_selection(load_eval_config(config_path), selection)
    if engine is not None:
        from evaltrace.runner.ray_engine import check_config

        check_config(config)
    target_dir = runs_dir if runs_dir is not None else configured_runs_dir(config)
    masked = mask_secrets(config.raw)
    digest = config_hash(masked, config.cases)
    unfinished = incomplete_runs(target_dir, config.name, digest)
    adapters = _adapters(config)
    evaluators = _evaluators(config)
    configured_enrichers = build_enrichers(config.raw.get("enrichers"), config.path, config.pythonpath)
    all_enrichers = [*configured_enrichers, *(ConfiguredEnricher(e) for e in enrichers)]
    if engine is not None and all_enrichers:  # one the workers cannot receive is refused before anything runs
        from evaltrace.runner.ray_engine import pickled_enrichers

        pickled_enrichers(all_enrichers)
    simulator = build_simulator(config)
    workspaces = prepare_workspaces(config.variants, adapters, config.path, key=config.variants_key)
    started = utcnow()
    run = RunDirectory.create(target_dir, config.name, started)
    verbatim = config.path.read_text(encoding="utf-8") if masked == config.raw else None
    run.write_config(masked, digest, config.cases, verbatim=verbatim)
    run.write_meta(
        RunMeta(
            eval_path=str(config.path.resolve()),
            config_dir=str(config.path.resolve().parent),
            sys_path=current_sys_path(),
            config_verbatim=verbatim is not None,
            started_at=started,
            selection=selection,
            run_namespace=run_namespace,
            shard=shard,
        )
    )
    notes = [
        f"run {rid} of this config did not finish; `evaltrace run --resume {rid}` continues it" for rid in unfinished
    ]
    stores = _stores(configured_stores(config), sqlite_path, postgres_dsn) if shard is None else []
    options = _Options(
        target_dir if drift else None,
        stores,
        run_namespace,
        progress or NullProgress(),
        workspaces,
        simulator,
        sinks=[*config.sinks, *sinks] if shard is None else [],
        enrichers=all_enrichers,
        ray=engine,
    )
    return _carry_out(run, config, adapters, evaluators, started, options, new_run=True, notes=notes)


def _evaluators(config: EvalConfig) -> list[ConfiguredEvaluator]:
    """The config's evaluators, as its ``evaluation`` block chooses and configures them."""
    plan = EvaluationPlan.of(config.raw, config.path)
    entries = plan.entries(config.evaluators)
    return plan.select(build_evaluators(entries, config.path, judge=config.judge, pythonpath=config.pythonpath))


def _adapters(config: EvalConfig) -> list[Adapter]:
    return [
        build_adapter(v, config.path, i, key=config.variants_key, pythonpath=config.pythonpath)
        for i, v in enumerate(config.variants)
    ]


def resume_run(
    run: RunDirectory,
    *,
    config_path: Path | str | None = None,
    drift: bool = False,
    sqlite_path: Path | None = None,
    run_namespace: dict[str, str] | None = None,
    progress: ProgressReporter | None = None,
    postgres_dsn: str | None = None,
    sinks: Sequence[str | ScoreSink] = (),
    engine: RayEngine | None = None,
) -> RunOutcome:
    """Continue a run that was killed (or finish one that already completed, which only re-summarises it).

    Cells (case, variant) with a trace in traces.jsonl are not run again, and evaluations with a result in
    results.jsonl are not run again; a torn last line of either file is cut off first. The run's own config
    and cases are used (:func:`evaltrace.runner.resume.resume_config`).

    Args:
        run: The run directory.
        config_path: Its eval.yaml, if the run's saved config cannot stand in (it must hash the same).
        drift: Compare with the promoted baseline (in the run's parent directory).
        sqlite_path: Also store the run in this SQLite database.
        run_namespace: Namespace recorded with the run in its stores (default: the run's own, from run_meta.json).
        progress: Progress receiver.
        postgres_dsn: Also store the run in this PostgreSQL database.
        sinks: Score sinks besides eval.yaml's ``sinks:`` (a shard pushes none).
        engine: Run the missing cells as Ray tasks on a cluster; None: here.

    Returns:
        The outcome of the whole run (earlier and new traces and results).

    Raises:
        RunConfigError: The run's config cannot be rebuilt, or ``config_path`` is not the run's config.
    """
    config = resume_config(run, None if config_path is None else Path(config_path))
    adapters = _adapters(config)
    evaluators = _evaluators(config)
    simulator = build_simulator(config)
    workspaces = prepare_workspaces(config.variants, adapters, config.path, key=config.variants_key)
    meta = run.read_meta()
    started = meta.started_at if meta is not None and meta.started_at is not None else utcnow()
    notes = run.repair()
    # A shard is a partial run: only the merged run of all shards goes to the stores.
    partial = meta is not None and meta.shard is not None
    stores = [] if partial else _stores(configured_stores(config), sqlite_path, postgres_dsn)
    if partial and (sqlite_path is not None or postgres_dsn is not None):
        notes.append("a shard run is saved to no store; `evaltrace runs merge` of all shards saves the merged run")
    if run_namespace is None and meta is not None:
        run_namespace = meta.run_namespace
    options = _Options(
        run.path.parent if drift else None,
        stores,
        run_namespace,
        progress or NullProgress(),
        workspaces,
        simulator,
        sinks=[] if partial else [*config.sinks, *sinks],
        enrichers=build_enrichers(config.raw.get("enrichers"), config.path, config.pythonpath),
        ray=engine,
    )
    return _carry_out(run, config, adapters, evaluators, started, options, new_run=False, notes=notes)


def _stores(configured: list[StoreSpec], sqlite_path: Path | None, postgres_dsn: str | None) -> list[StoreSpec]:
    """The config's ``output:`` stores, then those named on the command line."""
    stores = list(configured)
    if sqlite_path is not None:
        stores.append(StoreSpec("sqlite", path=str(sqlite_path), entry="--sqlite"))
    if postgres_dsn is not None:
        stores.append(StoreSpec("postgres", dsn=postgres_dsn, entry="--postgres"))
    return stores


def _carry_out(
    run: RunDirectory,
    config: EvalConfig,
    adapters: list[Adapter],
    evaluators: list[ConfiguredEvaluator],
    started: dt.datetime,
    options: _Options,
    *,
    new_run: bool,
    notes: list[str],
) -> RunOutcome:
    """Execute the missing cells, evaluate the missing results, summarise: the common body of runs and resumes.

    Raises:
        RunInterrupted: Ctrl-C stopped it (what was saved is kept for ``run --resume``).
    """
    try:
        return _carry_out_steps(run, config, adapters, evaluators, started, options, new_run=new_run, notes=notes)
    except KeyboardInterrupt as stop:
        # The appenders closed on the way out: every line in the files is whole, so it is what a resume keeps.
        raise RunInterrupted(
            run.path,
            cells=len(config.cases) * len(config.variants) - len(_other_shards(run, config)),
            traces_saved=saved_lines(run.path / TRACES_FILE),
            results_saved=saved_lines(run.path / RESULTS_FILE),
            complete=(run.path / SUMMARY_FILE).is_file(),
        ) from stop


def _carry_out_steps(
    run: RunDirectory,
    config: EvalConfig,
    adapters: list[Adapter],
    evaluators: list[ConfiguredEvaluator],
    started: dt.datetime,
    options: _Options,
    *,
    new_run: bool,
    notes: list[str],
) -> RunOutcome:
    earlier = [] if new_run else _first_per_key(run.read_traces(), lambda t: (t.case_id, t.variant_name))
    done_cells = {(t.case_id, t.variant_name) for t in earlier} | _other_shards(run, config)
    log = run.append_traces(new_run=new_run)
    try:
        if options.ray is not None:
            fresh = _execute_on_ray(run, config, options, done_cells, log.append, earlier, started, notes)
        else:
            cells = WorkspaceCells(options.workspaces, run.path) if options.workspaces else None
            enrichment = Enrichment(options.enrichers) if options.enrichers else None
            fresh = asyncio.run(
                _execute(
                    config,
                    adapters,
                    run.run_id,
                    options.progress,
                    done_cells,
                    log.append,
                    cells,
                    options.simulator,
                    enrichment,
                )
            )
    finally:
        log.close()
    run.seal_traces()
    order = _Order([v.name for v in config.variants], [c.id for c in config.cases], [e.name for e in evaluators])
    traces = sorted([*earlier, *fresh], key=order.trace)
    wanted = {(t.case_id, t.variant_name, e.name) for t in traces for e in evaluators}
    # Ray tasks evaluated their cells already and results.jsonl holds those results: kept, not redone.
    saved = not new_run or options.ray is not None
    kept = [r for r in _first_per_key(run.read_results(), result_key) if result_key(r) in wanted] if saved else []
    log = run.append_results()
    try:
        plan = EvaluationPlan.of(config.raw, config.path)
        new_results = asyncio.run(
            _evaluate(
                attach_artifacts(traces, run.path),  # filesystem evals: each trace's artifact, read from disk
                config.cases,
                evaluators,
                plan.concurrency(config.concurrency),
                options.progress,
                {result_key(r) for r in kept},
                log.append,
                plan.retry,
            )
        )
    finally:
        log.close()
    outcome = summarise_run_directory(
        run, config, [e.name for e in evaluators], traces, [*kept, *new_results], started, notes, options.drift_dir
    )
    # Only now, with the run directory complete: a store that fails loses nothing (see runner/stores.py).
    outcome.stored, outcome.store_errors = save_to_stores(
        options.stores,
        outcome.summary,
        outcome.traces,
        outcome.results,
        eval_name=config.name,
        run_namespace=options.run_namespace,
    )
    push_run_scores(outcome, options.sinks)
    return outcome


def push_run_scores(outcome: RunOutcome, sinks: Sequence[str | ScoreSink]) -> None:
    """Send a finished run's scores to ``sinks``, recording each sink with the stores (a failure exits 3)."""
    if not sinks:
        return
    scores = run_scores(outcome.summary, outcome.traces, outcome.results)
    delivered, failed = push_scores(sinks, scores, outcome.run.path)
    outcome.stored += delivered
    outcome.store_errors += failed


def _execute_on_ray(
    run: RunDirectory,
    config: EvalConfig,
    options: _Options,
    done: set[Cell],
    on_trace: Callable[[Trace], None],
    earlier: list[Trace],
    started: dt.datetime,
    notes: list[str],
) -> list[Trace]:
    """The missing cells as Ray tasks, each trace and its results appended as the task finishes.

    Each finished cell also goes to the database stores at once (:mod:`evaltrace.runner.store_stream`), after the
    run directory; a resume first sends the cells it keeps.
    """
    from evaltrace.runner.ray_engine import execute_on_ray
    from evaltrace.runner.store_stream import CellStream

    assert options.ray is not None
    placeholder = RunSummary(
        run_id=run.run_id,
        started_at=started,
        finished_at=started,
        config_path=str(config.path),
        config_hash=run.read_hash(),
        cases_total=len(config.cases),
    )
    stream = CellStream(options.stores, placeholder, eval_name=config.name, run_namespace=options.run_namespace)
    if options.stores:
        kept = {(t.case_id, t.variant_name) for t in earlier}
        saved = [r for r in _first_per_key(run.read_results(), result_key) if (r.case_id, r.variant_name) in kept]
        stream.start(earlier, saved)
    results = run.append_results()
    try:
        with stream:
            return execute_on_ray(
                options.ray,
                config,
                run.run_id,
                done,
                on_trace,
                results.append,
                options.progress,
                stream.cell,
                options.enrichers,
            )
    finally:
        results.close()
        notes.extend(stream.notes)


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
    order = _Order([v.name for v in config.variants], [c.id for c in config.cases], evaluator_names)
    ordered_traces = sorted(traces, key=order.trace)
    if not (run.path / TRACES_FILE).exists():
        run.write_traces(ordered_traces)
    ordered = sorted(results, key=order.result)
    run.write_results(ordered)  # the same results, in order and without torn or stray lines
    variant_names = [v.name for v in config.variants]
    inputs = _SummaryInputs(
        run, started, str(config.path), variant_names, config.baseline, drift_dir, config.cases, finished
    )
    summary = _summarise(inputs, ordered_traces, ordered, notes)
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


def _other_shards(run: RunDirectory, config: EvalConfig) -> set[Cell]:
    """The cells a shard run leaves to the other shards (none for a whole run): never executed here."""
    meta = run.read_meta()
    if meta is None or meta.shard is None:
        return set()
    every = {(c.id, v.name) for v in config.variants for c in config.cases}
    return every - shard_cells(every, meta.shard)


def _first_per_key(items: Sequence[T], key: Callable[[T], K]) -> list[T]:
    seen: dict[K, T] = {}
    for item in items:
        seen.setdefault(key(item), item)
    return list(seen.values())


class _Order:
    """Config order: variants, then cases, then evaluators (unknown ones last)."""

    def __init__(self, variants: Sequence[str], cases: Sequence[str], evaluators: Sequence[str]) -> None:
        self._variants = {name: i for i, name in enumerate(variants)}
        self._cases = {case: i for i, case in enumerate(cases)}
        self._evaluators = {name: i for i, name in enumerate(evaluators)}

    def trace(self, trace: Trace) -> tuple[int, int]:
        return (
            self._variants.get(trace.variant_name, len(self._variants)),
            self._cases.get(trace.case_id, len(self._cases)),
        )

    def result(self, result: EvaluationResult) -> tuple[int, int, int]:
        return (
            self._variants.get(result.variant_name, len(self._variants)),
            self._cases.get(result.case_id, len(self._cases)),
            self._evaluators.get(result.evaluator, len(self._evaluators)),
        )


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
        The outcome (saved to the ``output:`` stores of the run's own config.yaml).
    """
    progress = progress or NullProgress()
    previous = _previous_summary(run)
    setup = re_evaluation_setup(run, config_path, previous)
    stores = parse_outputs(run.path / CONFIG_FILE, run.read_config().get("output"))
    cases = run.read_cases()
    known = setup.variant_names or ([v.name for v in previous.variants] if previous else [])
    traces = run.read_traces()  # appended as cells finished: put them back in config order
    variant_names = [*known, *dict.fromkeys(t.variant_name for t in traces if t.variant_name not in known)]
    order = _Order(variant_names, [c.id for c in cases], [e.name for e in setup.evaluators])
    traces.sort(key=order.trace)
    evaluated = attach_artifacts(traces, run.path)  # filesystem evals: each trace's artifact, read from disk
    concurrency = setup.plan.concurrency(setup.concurrency)
    retry = setup.plan.retry
    results = asyncio.run(_evaluate(evaluated, cases, setup.evaluators, concurrency, progress, retry=retry))
    run.write_results(results)
    started = previous.started_at if previous else min((t.started_at for t in traces), default=utcnow())
    notes: list[str] = []
    inputs = _SummaryInputs(
        run,
        started,
        previous.config_path if previous else str(setup.source),
        variant_names,
        setup.baseline,
        (runs_dir or run.path.parent) if drift else None,
        cases,
    )
    summary = _summarise(inputs, traces, results, notes)
    run.write_summary(summary)
    write_evaluation_records(run.path, run.run_id, setup.plan, setup.entries, traces, results)
    meta = run.read_meta()
    namespace = meta.run_namespace if meta is not None else None
    stored, errors = save_to_stores(
        stores, summary, traces, results, eval_name=run_eval_name(run), run_namespace=namespace
    )
    outcome = RunOutcome(run, summary, traces, results, notes, stored, errors)
    sinks = run.read_config().get("sinks")
    push_run_scores(outcome, [str(s) for s in sinks] if isinstance(sinks, list) else [])
    return outcome


def _previous_summary(run: RunDirectory) -> RunSummary | None:
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
    previous = _previous_summary(run)
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
    expected = {(c.id, v.name) for v in config.variants for c in config.cases} - _other_shards(run, config)
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
