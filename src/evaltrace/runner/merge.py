"""``evaltrace runs merge``: join the shard runs of one config (``run --shard i/N``) into one complete run.

The merged run holds every shard's traces and results, put back in config order, and is summarised by the very
code a single-process run uses (:func:`evaltrace.runner.run_summary.summarise_run_directory`), so its results, summary,
findings and comparison equal those of one process running the same cells, timings and ids aside.

Every shard must be finished (have its summary), share the config hash and N, and appear exactly once; anything
else is a :class:`~evaltrace.runner.shards.ShardError` naming the shard, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evaltrace._internal.private_files import PRIVATE_DIR_MODE, make_private_dirs
from evaltrace.runner.engine import RunOutcome, evaluator_order, push_run_scores, summarise_run_directory
from evaltrace.runner.resume import resume_config
from evaltrace.runner.rundir import CONFIG_FILE, SUMMARY_FILE, RunDirectory, RunMeta
from evaltrace.runner.shards import ShardError, ShardSpec
from evaltrace.runner.stores import StoreSpec, configured_stores, save_to_stores
from evaltrace.schema import utcnow

__all__ = ["merge_runs"]


def _shard_of(run: RunDirectory) -> tuple[RunMeta, ShardSpec]:
    meta = run.read_meta()
    if meta is None or meta.shard is None:
        raise ShardError(f"{run.path}: not a shard run (it was not started with --shard i/N)")
    if not (run.path / SUMMARY_FILE).is_file():
        raise ShardError(
            f"shard {meta.shard.label()} ({run.path}) did not finish; continue it with"
            f" `evaltrace run --resume {run.path}` first"
        )
    return meta, meta.shard


def _check(runs: Sequence[RunDirectory]) -> list[tuple[RunDirectory, RunMeta, ShardSpec]]:
    """Every shard of one config and one N, exactly once; else a ShardError naming the odd one out."""
    if not runs:
        raise ShardError("name the shard runs to merge")
    shards = [(run, *_shard_of(run)) for run in runs]
    first, _, first_shard = shards[0]
    digest = first.read_hash()
    seen: dict[int, RunDirectory] = {}
    for run, _, shard in shards:
        if shard.count != first_shard.count:
            raise ShardError(
                f"{run.path} is shard {shard.label()}, but {first.path} is shard {first_shard.label()}:"
                " shards of different N cannot be merged"
            )
        if run.read_hash() != digest:
            raise ShardError(f"{run.path} ran another config than {first.path} (config hash): not shards of one run")
        if shard.index in seen:
            raise ShardError(f"shard {shard.label()} is given twice: {seen[shard.index]} and {run.path}")
        seen[shard.index] = run
    missing = [f"{i}/{first_shard.count}" for i in range(1, first_shard.count + 1) if i not in seen]
    if missing:
        raise ShardError(f"missing shard(s) {', '.join(missing)}: merge needs all {first_shard.count}")
    return shards


def _target(out: Path | None, first: RunDirectory, eval_name: str) -> RunDirectory:
    if out is None:
        return RunDirectory.create(first.path.parent, eval_name, utcnow())
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ShardError(f"--out {out}: already exists and is not an empty directory")
    make_private_dirs(out.parent)
    out.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    out.chmod(PRIVATE_DIR_MODE)
    return RunDirectory(out)


def merge_runs(
    paths: Sequence[Path], *, out: Path | None = None, drift: bool = False, stores: Sequence[StoreSpec] = ()
) -> RunOutcome:
    """Merge the shard runs in ``paths`` into one run directory, summarised and saved to the config's stores.

    Args:
        paths: The shard run directories (every shard of the run, each once, in any order).
        out: The merged run's directory (new or empty); default: a new run id beside the first shard.
        drift: Compare with the promoted baseline in the merged run's runs directory, as ``run --drift`` does.
        stores: Stores to save the merged run to besides the config's ``output:`` ones (``--sqlite``, ...).

    Returns:
        The merged run's outcome.

    Raises:
        ShardError: A shard is missing, given twice, unfinished, of another config or N, or not a shard.
        RunConfigError: The shards' config cannot be rebuilt.
    """
    shards = _check([RunDirectory(p) for p in paths])
    first, first_meta, _ = shards[0]
    config = resume_config(first, None)  # the shards' own config and cases snapshot
    traces = [t for run, _, _ in shards for t in run.read_traces()]
    results = [r for run, _, _ in shards for r in run.read_results()]
    starts = [meta.started_at for _, meta, _ in shards if meta.started_at is not None]
    started = min(starts) if starts else utcnow()
    merged = _target(out, first, config.name)
    verbatim = (first.path / CONFIG_FILE).read_text(encoding="utf-8")  # as the shards saved it, comments and all
    merged.write_config(first.read_config(), first.read_hash(), first.read_cases(), verbatim=verbatim)
    merged.write_meta(first_meta.model_copy(update={"shard": None, "started_at": started}))
    notes = [f"merged {len(shards)} shards: " + ", ".join(str(run.path) for run, _, _ in shards)]
    names = evaluator_order(results)
    drift_dir = merged.path.parent if drift else None
    outcome = summarise_run_directory(merged, config, names, traces, results, started, notes, drift_dir)
    stored, errors = save_to_stores(
        [*configured_stores(config), *stores],
        outcome.summary,
        outcome.traces,
        outcome.results,
        eval_name=config.name,
        run_namespace=first_meta.run_namespace,
    )
    outcome.stored, outcome.store_errors = stored, errors
    push_run_scores(outcome, config.sinks)
    return outcome
