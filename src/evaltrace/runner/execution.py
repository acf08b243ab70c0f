"""The execution stage of a run: every missing (case, variant) cell run under tracing, each trace saved as it exists.

Locally (:func:`execute_cells`: asyncio, ``concurrency`` cells at once, workspaces, simulated users, enrichers) or as
Ray tasks (:func:`execute_cells_on_ray`, whose tasks also evaluate their cell; each cell also goes to the database
stores as it finishes).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evaltrace.runner.adapters import Adapter
from evaltrace.runner.capture import capture_run
from evaltrace.runner.config import EvalConfig
from evaltrace.runner.enrichers import ConfiguredEnricher, Enrichment
from evaltrace.runner.evaluate import result_key
from evaltrace.runner.outcome import Cell, ProgressReporter
from evaltrace.runner.run_summary import first_per_key
from evaltrace.runner.rundir import RunDirectory
from evaltrace.runner.simulation import UserSimulator, run_conversation
from evaltrace.runner.stores import StoreSpec
from evaltrace.runner.workspace_cells import WorkspaceCells
from evaltrace.schema import EvalCase, RunSummary, Trace

if TYPE_CHECKING:
    from evaltrace.runner.ray_engine import RayEngine

__all__ = ["RayCells", "execute_cells", "execute_cells_on_ray"]


async def execute_cells(
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


@dataclass(frozen=True)
class RayCells:
    """What :func:`execute_cells_on_ray` needs besides the run: the engine, the stores, the namespace, the rest.

    Attributes:
        engine: The cluster and retries.
        stores: The run's stores (each finished cell goes to the database ones at once).
        run_namespace: The command line's namespace for the stores.
        progress: The progress receiver.
        enrichers: TraceEnrichers, run in each task.
    """

    engine: RayEngine
    stores: Sequence[StoreSpec]
    run_namespace: dict[str, str] | None
    progress: ProgressReporter
    enrichers: Sequence[ConfiguredEnricher]


def execute_cells_on_ray(
    run: RunDirectory,
    config: EvalConfig,
    options: RayCells,
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
        saved = [r for r in first_per_key(run.read_results(), result_key) if (r.case_id, r.variant_name) in kept]
        stream.start(earlier, saved)
    results = run.append_results()
    try:
        with stream:
            return execute_on_ray(
                options.engine,
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
