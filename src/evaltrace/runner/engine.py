"""``run`` and ``re-evaluate``: cases × variants under tracing, traces persisted, then evaluated and summarised.

Order of a run (data-model.md part A): validate eval.yaml, the cases, adapters and evaluators (every config
error surfaces before the system is called) -> create ``runs/<run_id>/`` with config.yaml, config_hash.txt, the
cases snapshot and run_meta.json -> execute, appending each cell's trace to ``traces.jsonl`` as it finishes (a
system with a ``workspace`` runs each cell in its own copy and writes ``artifacts/<case>/<variant>/`` first) ->
evaluate, appending each result to ``results.jsonl`` as it finishes -> rewrite ``results.jsonl`` in order ->
``summary.yaml`` (with the ad-hoc or drift comparison) -> the ``output:`` / ``--sqlite`` / ``--postgres`` stores.

:func:`resume_run` continues a killed run from those files: cells with a trace are not run again, evaluations
with a result are not run again (a torn last line is cut off first); what was in flight at the kill is redone.

This module sets a run up and carries it through its stages, each in a module of its own: execution
(:mod:`evaltrace.runner.execution`, locally or on Ray), evaluation (:func:`evaltrace.runner.evaluate.evaluate_all`),
summary (:mod:`evaltrace.runner.run_summary`), the stores (:mod:`evaltrace.runner.stores`); re-evaluation is
:mod:`evaltrace.runner.re_evaluation`, and what a run reports is :mod:`evaltrace.runner.outcome`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.runner.adapters import Adapter, build_adapter
from evaltrace.runner.artifacts import attach_artifacts
from evaltrace.runner.config import EvalConfig, config_hash, load_eval_config, mask_secrets
from evaltrace.runner.enrichers import ConfiguredEnricher, Enrichment, TraceEnricher, build_enrichers
from evaltrace.runner.errors import RunInterrupted
from evaltrace.runner.evaluate import ConfiguredEvaluator, build_evaluators, evaluate_all, result_key
from evaltrace.runner.evaluation_records import EvaluationPlan
from evaltrace.runner.execution import RayCells, execute_cells, execute_cells_on_ray
from evaltrace.runner.outcome import NullProgress, ProgressReporter, RunOutcome, push_run_scores
from evaltrace.runner.re_evaluation import re_evaluate
from evaltrace.runner.resume import current_sys_path, incomplete_runs, resume_config
from evaltrace.runner.run_summary import (
    RunOrder,
    evaluator_order,
    first_per_key,
    other_shards_cells,
    summarise_run_directory,
    summarize_run,
)
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE, RunDirectory, RunMeta, saved_lines
from evaltrace.runner.select import apply_selection
from evaltrace.runner.shards import ShardSpec
from evaltrace.runner.simulation import UserSimulator, build_simulator
from evaltrace.runner.stores import StoreSpec, configured_runs_dir, configured_stores, save_to_stores
from evaltrace.runner.workspace import WorkspaceSource, prepare_workspaces
from evaltrace.runner.workspace_cells import WorkspaceCells
from evaltrace.schema import utcnow
from evaltrace.schema.runs import CaseSelection

if TYPE_CHECKING:
    from evaltrace.runner.ray_engine import RayEngine

# The stages live in their own modules; these names stay importable from here.
__all__ = [
    "NullProgress",
    "ProgressReporter",
    "RunOutcome",
    "evaluator_order",
    "push_run_scores",
    "re_evaluate",
    "resume_run",
    "run_eval",
    "summarise_run_directory",
    "summarize_run",
]


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
            cells=len(config.cases) * len(config.variants) - len(other_shards_cells(run, config)),
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
    earlier = [] if new_run else first_per_key(run.read_traces(), lambda t: (t.case_id, t.variant_name))
    done_cells = {(t.case_id, t.variant_name) for t in earlier} | other_shards_cells(run, config)
    log = run.append_traces(new_run=new_run)
    try:
        if options.ray is not None:
            on_ray = RayCells(options.ray, options.stores, options.run_namespace, options.progress, options.enrichers)
            fresh = execute_cells_on_ray(run, config, on_ray, done_cells, log.append, earlier, started, notes)
        else:
            cells = WorkspaceCells(options.workspaces, run.path) if options.workspaces else None
            enrichment = Enrichment(options.enrichers) if options.enrichers else None
            fresh = asyncio.run(
                execute_cells(
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
    order = RunOrder([v.name for v in config.variants], [c.id for c in config.cases], [e.name for e in evaluators])
    traces = sorted([*earlier, *fresh], key=order.trace)
    wanted = {(t.case_id, t.variant_name, e.name) for t in traces for e in evaluators}
    # Ray tasks evaluated their cells already and results.jsonl holds those results: kept, not redone.
    saved = not new_run or options.ray is not None
    kept = [r for r in first_per_key(run.read_results(), result_key) if result_key(r) in wanted] if saved else []
    log = run.append_results()
    try:
        plan = EvaluationPlan.of(config.raw, config.path)
        new_results = asyncio.run(
            evaluate_all(
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
