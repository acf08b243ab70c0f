"""``run --engine ray``: the cells of a run as Ray tasks on a cluster, their results streamed into the run directory.

Each cell (case, variant) is one Ray task that executes the cell under tracing and runs the evaluators on its
trace, returning both. The driver (the process running ``evaltrace run``) keeps at most ``concurrency`` tasks in
flight, so the eval.yaml's ``concurrency`` bounds the cells (and their evaluations) running at once across the
whole cluster, not per node; it appends each finished cell's trace and results to ``traces.jsonl`` and
``results.jsonl`` at once, and advances the progress bar.

Guarantees:

- A cell's id is (case id, variant name), the same on every attempt. Only the driver writes, and it writes a
  cell once: a task Ray retries (its node was lost; ``max_retries``) or a duplicate answer is never counted twice.
- A killed driver leaves whole lines in the run directory; ``run --resume RUN --engine ray`` runs only the cells
  without a trace (the local runner's resume, unchanged).
- Workers rebuild the config, adapters and evaluators from the pickled :class:`EvalConfig` (once per worker
  process and run) and import the project's code from the eval.yaml's directory and the driver's ``sys.path``,
  so every node needs the project at the same path (a shared filesystem or the same checkout), as with
  ``--shard``.
- The run's TraceEnrichers (eval.yaml's ``enrichers:`` and Python's) run in the task, where the cell's trace is
  built, before it is evaluated and sent back: the driver saves the enriched trace, as the local engine does,
  with the same structured ``enrichment_errors``. They travel pickled (Ray's cloudpickle) and are unpickled once
  per worker process and run, after the driver's ``sys.path`` is set; one that cannot be pickled is refused
  before the run starts.

Ray is imported only here, and only when the engine is used (``pip install 'evaltrace[ray]'``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from evaltrace.exceptions import EvaltraceError
from evaltrace.runner.adapters import build_adapter
from evaltrace.runner.capture import capture_run
from evaltrace.runner.config import EvalConfig
from evaltrace.runner.enrichers import ConfiguredEnricher, Enrichment
from evaltrace.runner.evaluate import ConfiguredEvaluator, build_evaluators, evaluate_traces
from evaltrace.runner.simulation import UserSimulator, build_simulator, run_conversation
from evaltrace.schema import EvaluationResult, Trace

if TYPE_CHECKING:
    from evaltrace.runner.outcome import ProgressReporter

__all__ = [
    "LOOPBACK",
    "RayEngine",
    "RayEngineError",
    "as_finished",
    "check_config",
    "pickled_enrichers",
    "connected",
    "error_cause",
    "execute_on_ray",
    "use_driver_paths",
]

LOOPBACK = "127.0.0.1"
"""The address a cluster started for a run binds (never the machine's network address)."""

Cell = tuple[str, str]


class RayEngineError(EvaltraceError):
    """Ray is missing, the cluster cannot be reached, or a cell failed on the cluster after its retries."""


@dataclass(frozen=True)
class RayEngine:
    """Run a run's cells as Ray tasks.

    Attributes:
        address: The cluster (``auto``, ``ray://host:port``, ``host:port``); None starts a local cluster on
            127.0.0.1 for the run, shut down at its end. Ignored when this process is already connected to Ray.
        max_retries: How often Ray re-runs a cell whose worker or node died.
    """

    address: str | None = None
    max_retries: int = 3


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayEngineError("--engine ray needs Ray: pip install 'evaltrace[ray]'") from None
    return ray


@contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Yield the ``ray`` module connected to ``address`` (or to a local cluster on 127.0.0.1 started for the block).

    A connection this process already has is used as it is and left open; one made here is shut down after.

    Raises:
        RayEngineError: Ray is not installed, or the cluster cannot be reached.
    """
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    with _loopback_only(ray, address is None):
        try:
            if address is None:
                # "local": a new cluster even when another runs on this machine (ray.init would join that one).
                # Loopback only, no dashboard: a run's private cluster is reachable from this machine alone.
                ray.init(
                    address="local",
                    _node_ip_address=LOOPBACK,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayEngineError(f"cannot connect to the Ray cluster at {address or 'local'}: {exc}") from exc
        try:
            yield ray
        finally:
            ray.shutdown()


_SINGLE_NODE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for multi-node clusters; off, its servers bind 127.0.0.1 rather than every interface."""


@contextmanager
def _loopback_only(ray: Any, private: bool) -> Iterator[None]:
    """For a cluster started for the run: every Ray server on loopback, the driver resolving 127.0.0.1 as itself.

    ``_node_ip_address`` alone leaves the GCS, raylet and agents listening on 0.0.0.0 and the machine's address;
    with multi-node clusters off, they bind 127.0.0.1 only. The processes Ray starts read the variable; this
    process read it when Ray was imported, so its constant is switched too, both restored afterwards.
    """
    if not private:
        yield
        return
    ray_constants: Any = None
    try:
        from ray._private import ray_constants
    except ImportError:  # a Ray that moved it: the variable still reaches the processes it starts
        pass
    saved_env = os.environ.get(_SINGLE_NODE)
    saved_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[_SINGLE_NODE] = "0"
    if saved_flag is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if saved_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(_SINGLE_NODE, None)
        else:
            os.environ[_SINGLE_NODE] = saved_env


@dataclass(frozen=True)
class _Job:
    """What every task of one run needs (put in the object store once)."""

    config: EvalConfig
    run_id: str
    sys_path: list[str]
    enrichers: bytes = b""
    """The run's enrichers, pickled: unpickled only once the driver's ``sys.path`` is set (they are the
    project's objects; Ray would unpickle a task's arguments before). Empty: none."""


_built: dict[str, list[ConfiguredEvaluator]] = {}
"""Run id -> its evaluators, built once per worker process (a judge keeps its client across cells)."""

_enrichments: dict[str, Enrichment] = {}
"""Run id -> its enrichers, unpickled once per worker process (their threads serve every cell of the run)."""


def use_driver_paths(sys_path: list[str], first: str | None = None) -> None:
    """Make the driver's imports resolve on this worker: ``first`` (eval.yaml's directory) first, then its path."""
    if first is not None and first not in sys.path:
        sys.path.insert(0, first)
    for entry in sys_path:
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.append(entry)


def _evaluators(job: _Job) -> list[ConfiguredEvaluator]:
    if job.run_id not in _built:
        config = job.config
        _built[job.run_id] = build_evaluators(
            config.evaluators, config.path, judge=config.judge, pythonpath=config.pythonpath
        )
    return _built[job.run_id]


def _enrichment(job: _Job) -> Enrichment | None:
    if not job.enrichers:
        return None
    if job.run_id not in _enrichments:
        _enrichments[job.run_id] = Enrichment(_ray().cloudpickle.loads(job.enrichers))
    return _enrichments[job.run_id]


def pickled_enrichers(enrichers: Sequence[ConfiguredEnricher]) -> bytes:
    """The enrichers as the tasks receive them (empty bytes for none).

    Raises:
        RayEngineError: Ray is missing, or an enricher cannot be pickled (named), so it cannot reach the workers.
    """
    if not enrichers:
        return b""
    ray = _ray()
    for item in enrichers:
        try:
            ray.cloudpickle.dumps(item)
        # Broad on purpose: pickling an arbitrary object raises anything (TypeError, PicklingError, ...).
        except Exception as exc:
            raise RayEngineError(
                f"enricher {item.name!r} cannot be sent to the Ray workers, where each cell's trace is built:"
                f" {type(exc).__name__}: {exc}; make it picklable (build clients lazily) or run without --engine ray"
            ) from None
    data: bytes = ray.cloudpickle.dumps(list(enrichers))
    return data


async def _cell(job: _Job, case_id: str, variant_index: int) -> tuple[Trace, list[EvaluationResult]]:
    config = job.config
    case = next(c for c in config.cases if c.id == case_id)
    variant = config.variants[variant_index]
    adapter = build_adapter(variant, config.path, variant_index, key=config.variants_key, pythonpath=config.pythonpath)
    simulator: UserSimulator | None = build_simulator(config) if case.simulated_user is not None else None
    try:
        with capture_run(config.name) as capture:
            if case.simulated_user is not None and simulator is not None:
                trace = await run_conversation(capture, adapter, case, variant.name, job.run_id, simulator)
            else:
                trace = await capture.execute(adapter, case, variant.name, job.run_id)
            enrichment = _enrichment(job)
            if enrichment is not None:  # here, where the trace is built: the driver saves it as enriched
                trace = await enrichment.enrich(trace)
    finally:
        closing = [adapter.aclose()] + ([simulator.aclose()] if simulator is not None else [])
        await asyncio.gather(*closing, return_exceptions=True)
    results = await evaluate_traces([trace], config.cases, _evaluators(job), concurrency=config.concurrency)
    return trace, results


def run_cell(job: _Job, case_id: str, variant_index: int) -> tuple[Trace, list[EvaluationResult]]:
    """One cell on a Ray worker: its trace and its evaluation results (the body of the Ray task)."""
    use_driver_paths(job.sys_path, str(job.config.path.resolve().parent))
    return asyncio.run(_cell(job, case_id, variant_index))


def check_config(config: EvalConfig) -> None:
    """Refuse what the Ray engine cannot run, before the run starts.

    Raises:
        RayEngineError: Ray is not installed, or a system has a workspace (its artifacts are written on the
            driver's disk).
    """
    _ray()
    for index, variant in enumerate(config.variants):
        if variant.workspace is not None:
            raise RayEngineError(
                f"{config.path}: {config.variants_key}[{index}].workspace: a system with a workspace writes its"
                " artifacts into the run directory on this machine; run it without --engine ray"
            )


def execute_on_ray(
    engine: RayEngine,
    config: EvalConfig,
    run_id: str,
    done: set[Cell],
    on_trace: Callable[[Trace], None],
    on_result: Callable[[EvaluationResult], None],
    progress: ProgressReporter,
    on_cell: Callable[[Trace, list[EvaluationResult]], None] | None = None,
    enrichers: Sequence[ConfiguredEnricher] = (),
) -> list[Trace]:
    """Run every cell not in ``done`` on the cluster; write each as it finishes; return the new traces.

    Each finished cell goes to ``on_trace`` and ``on_result`` (the run directory), then to ``on_cell`` (the
    database stores), once.

    ``enrichers`` run in each task over the cell's trace before it is evaluated.

    Raises:
        RayEngineError: Ray is missing, the cluster is unreachable, a system has a workspace, an enricher cannot
            be pickled, or a cell failed on the cluster after its retries (what finished is saved: ``run
            --resume`` continues).
    """
    check_config(config)
    shipped = pickled_enrichers(enrichers)
    todo = [
        (case.id, index)
        for index, variant in enumerate(config.variants)
        for case in config.cases
        if (case.id, variant.name) not in done
    ]
    progress.start("running cases", len(todo))
    if not todo:
        return []
    from evaltrace.runner.resume import current_sys_path

    with connected(engine.address) as ray:
        task = ray.remote(run_cell).options(
            max_retries=engine.max_retries, retry_exceptions=False, scheduling_strategy="SPREAD"
        )
        job = ray.put(_Job(config, run_id, current_sys_path(), shipped))
        written: set[Cell] = set(done)
        fresh: list[Trace] = []
        submitted = ((task.remote(job, case_id, i), (case_id, config.variants[i].name)) for case_id, i in todo)
        for cell, ref in as_finished(ray, submitted, config.concurrency):
            trace, results = _answer(ray, ref, cell)
            if cell in written:  # never counted twice, whatever the cluster answers
                continue
            written.add(cell)
            on_trace(trace)
            for result in results:
                on_result(result)
            if on_cell is not None:
                on_cell(trace, results)
            fresh.append(trace)
            progress.advance()
        return fresh


K = TypeVar("K")


def as_finished(ray: Any, submitted: Iterator[tuple[Any, K]], limit: int) -> Iterator[tuple[K, Any]]:
    """Yield (key, object ref) of tasks as they finish, submitting from ``submitted`` to keep ``limit`` in flight.

    ``submitted`` is lazy: a task is made only when a slot is free. Whatever is still in flight when the caller
    stops (an error, Ctrl-C) is cancelled.
    """
    pending: dict[Any, K] = {}
    try:
        while True:
            for ref, key in submitted:
                pending[ref] = key
                if len(pending) >= limit:
                    break
            if not pending:
                return
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield pending.pop(ref), ref
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def _answer(ray: Any, ref: Any, cell: Cell) -> tuple[Trace, list[EvaluationResult]]:
    try:
        trace, results = ray.get(ref)
    except ray.exceptions.RayError as exc:
        raise RayEngineError(
            f"cell {cell[0]!r} x {cell[1]!r} failed on the Ray cluster after its retries: {type(exc).__name__}:"
            f" {error_cause(exc)} (finished cells are saved; `evaltrace run --resume` continues)"
        ) from exc
    return trace, list(results)


def error_cause(exc: BaseException) -> str:
    """The last line of a Ray error's text, where the exception underneath is named."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
