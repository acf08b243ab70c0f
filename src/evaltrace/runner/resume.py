"""What a resumed run or a re-evaluation needs from the run directory: its config and its import paths.

A re-evaluation takes the evaluators of the run's config.yaml (or of an eval.yaml given with ``--config``).

A resume continues the *same* run, so it must use the same config and cases: the run's own snapshot
(config.yaml and cases.jsonl) when config.yaml was saved verbatim; else (a literal secret was masked in it) the
original eval.yaml, provided its config hash still equals the run's. An eval.yaml given explicitly must match the
run's hash too. ``import:`` references resolve against the original eval.yaml's directory and the ``sys.path`` the
run had (both recorded in ``run_meta.json``), from any working directory.

A plain re-run of an eval.yaml never resumes on its own: the code under test may have changed while the config
did not (the hash cannot see code), so silently mixing cells of two code versions would report a system that never
existed. It starts a new run and says which unfinished run of the same config ``--resume`` could continue.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace.runner.config import (
    DEFAULT_CONCURRENCY,
    DEFAULT_RUNS_DIR,
    EvalConfig,
    config_hash,
    load_eval_config,
    load_evaluator_entries,
    load_judge,
    mask_secrets,
    system_entries,
)
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluate import ConfiguredEvaluator, build_evaluators
from evaltrace.runner.evaluation_records import EvaluationPlan
from evaltrace.runner.rundir import (
    CONFIG_FILE,
    HASH_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TRACES_FILE,
    RunDirectory,
    RunMeta,
    saved_lines,
)
from evaltrace.runner.select import restrict_to_selection
from evaltrace.runner.shards import ShardSpec, shard_cells
from evaltrace.schema import RunSummary

__all__ = [
    "ReEvaluationSetup",
    "UnfinishedRun",
    "current_sys_path",
    "incomplete_runs",
    "re_evaluation_setup",
    "resume_command",
    "resume_config",
    "unfinished_runs",
    "use_run_paths",
]


def current_sys_path() -> list[str]:
    """This process's ``sys.path`` as absolute directories ('' is the working directory), duplicates dropped."""
    return list(dict.fromkeys(os.path.abspath(entry or os.getcwd()) for entry in sys.path))


def use_run_paths(meta: RunMeta | None) -> None:
    """Make the run's imports resolvable here: its eval.yaml directory first, then its ``sys.path`` entries.

    Entries this process lacks are appended (after its own), so a module the run imported through PYTHONPATH or
    its working directory imports again, while this process's packages keep precedence.
    """
    if meta is None:
        return
    if meta.config_dir not in sys.path:
        sys.path.insert(0, meta.config_dir)
    for entry in meta.sys_path:
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.append(entry)


def _hash_of(config: EvalConfig) -> str:
    return config_hash(mask_secrets(config.raw), config.cases)


def resume_config(run: RunDirectory, config_path: Path | None) -> EvalConfig:
    """The config a resume of ``run`` continues with (see the module docstring for which one).

    Args:
        run: The run to resume.
        config_path: An eval.yaml named by the user (it must be the run's config), or None.

    Returns:
        The config, with the run's cases snapshot.

    Raises:
        RunConfigError: The config cannot be found or differs from the run's (the message says how to proceed).
    """
    meta = run.read_meta()
    use_run_paths(meta)
    expected = run.read_hash()
    # A run of part of the dataset (--case, --tag, ...) continues with exactly its recorded cases.
    selection = meta.selection if meta is not None else None
    if config_path is not None:
        config = restrict_to_selection(load_eval_config(config_path), selection)
        if _hash_of(config) != expected:
            raise RunConfigError(
                config_path, "", f"differs from the config of run {run.run_id} (config hash); start a new run instead"
            )
        return config
    if meta is None:
        raise RunConfigError(
            run.path / CONFIG_FILE, "", "this run predates resumable runs; name its eval.yaml: run EVAL --resume RUN"
        )
    cases = run.read_cases()
    if meta.config_verbatim:
        # Path: the original eval.yaml's, so relative references and error messages mean what they meant.
        return load_eval_config(meta.eval_path, raw=run.read_config(), cases=cases)
    original = Path(meta.eval_path)
    config = restrict_to_selection(load_eval_config(original), selection)
    if _hash_of(config) != expected:
        raise RunConfigError(
            original,
            "",
            f"changed since run {run.run_id} started, and its config.yaml has masked secrets so it cannot stand in;"
            " start a new run",
        )
    return config


def resume_command(run_path: Path, extra: Sequence[str] = ()) -> str:
    """The exact shell command that continues the run in ``run_path`` from the current working directory.

    ``--runs-dir`` is given unless the run lives in the default ``runs`` directory, since ``--resume`` without an
    eval.yaml looks run ids up there.

    Args:
        run_path: The run directory.
        extra: More arguments (``--sqlite PATH``, ...), appended as given.
    """
    words = ["evaltrace", "run", "--resume", run_path.name]
    if run_path.parent != Path(DEFAULT_RUNS_DIR):
        words += ["--runs-dir", str(run_path.parent)]
    return shlex.join([*words, *extra])


def incomplete_runs(runs_dir: Path, eval_name: str, digest: str) -> list[str]:
    """Ids of runs of ``eval_name`` under ``runs_dir`` with this config hash that never wrote their summary."""
    if not runs_dir.is_dir():
        return []
    found = []
    for path in sorted(runs_dir.glob(f"*_{eval_name}")):
        if (path / SUMMARY_FILE).exists() or not (path / HASH_FILE).is_file():
            continue
        if (path / HASH_FILE).read_text(encoding="utf-8").strip() == digest:
            found.append(path.name)
    return found


@dataclass(frozen=True)
class UnfinishedRun:
    """A run directory without its summary: killed, interrupted, or still running.

    Attributes:
        path: The run directory.
        cells: Its cells (cases × variants, or its shard's), or None when its config or cases snapshot cannot
            be read.
        traces_saved: Cells with a trace saved (not run again on resume).
        results_saved: Evaluation results saved (not evaluated again on resume).
        shard: The shard of a ``run --shard i/N`` run (None: a whole run).
    """

    path: Path
    cells: int | None
    traces_saved: int
    results_saved: int
    shard: ShardSpec | None = None


def unfinished_runs(runs_dir: Path) -> list[UnfinishedRun]:
    """The runs under ``runs_dir`` that never wrote their summary, newest first (any config)."""
    if not runs_dir.is_dir():
        return []
    found = []
    for path in sorted(runs_dir.iterdir(), reverse=True):
        # config.yaml is written first: a run killed before its first trace is still one to resume.
        if (path / SUMMARY_FILE).exists() or not (path / CONFIG_FILE).is_file():
            continue
        run = RunDirectory(path)
        shard: ShardSpec | None = None
        try:
            every = {(c.id, v) for c in run.read_cases() for v in config_variant_names(run.read_config())}
            meta = run.read_meta()
            shard = meta.shard if meta is not None else None
            cells: int | None = len(every if shard is None else shard_cells(every, shard))
        # Broad on purpose: one damaged run must not hide the others; its resume names what is wrong.
        except Exception:
            cells = None
        saved = saved_lines(path / TRACES_FILE), saved_lines(path / RESULTS_FILE)
        found.append(UnfinishedRun(path, cells, *saved, shard=shard))
    return found


@dataclass(frozen=True)
class ReEvaluationSetup:
    """The evaluators, concurrency and baseline variant of a re-evaluation, and the file they came from.

    ``variant_names`` are the run's variants in config order (from its config.yaml; empty if it names none).
    """

    evaluators: list[ConfiguredEvaluator]
    concurrency: int
    baseline: str | None
    source: Path
    variant_names: list[str]
    plan: EvaluationPlan
    entries: list[dict[str, Any]]


def re_evaluation_setup(run: RunDirectory, config_path: Path | None, previous: RunSummary | None) -> ReEvaluationSetup:
    """Evaluators, concurrency and baseline variant from ``config_path``, else from the run's config.yaml.

    Args:
        run: The run.
        config_path: An eval.yaml whose evaluators to use instead, or None.
        previous: The run's summary, if it has one (runs made before run_meta.json find imports through it).

    Raises:
        RunConfigError: An evaluator cannot be built.
    """
    if config_path is not None:
        source = Path(config_path)
        raw = load_eval_config(source).raw
        base_dir = source.parent
    else:
        source = run.path / CONFIG_FILE
        raw = run.read_config()
        # Imported evaluators live next to the original eval.yaml (or on the run's sys.path), not in the run
        # directory: run_meta.json says where, whatever the working directory is now.
        meta = run.read_meta()
        use_run_paths(meta)
        if meta is not None:
            base_dir = Path(meta.config_dir)
        else:  # a run made before run_meta.json existed
            base_dir = Path(previous.config_path).parent if previous else run.path
    entries = load_evaluator_entries(source, raw.get("evaluators"))
    plan = EvaluationPlan.of(raw, source)
    concurrency = raw.get("concurrency")
    baseline = raw.get("baseline")
    built = build_evaluators(
        plan.entries(entries),
        source,
        base_dir=base_dir,
        judge=load_judge(source, raw.get("judge")),
        pythonpath=raw.get("pythonpath") or [],
    )
    return ReEvaluationSetup(
        evaluators=plan.select(built),
        concurrency=concurrency if isinstance(concurrency, int) and concurrency > 0 else DEFAULT_CONCURRENCY,
        baseline=baseline if isinstance(baseline, str) else None,
        source=source,
        variant_names=config_variant_names(run.read_config()),
        plan=plan,
        entries=entries,
    )


def config_variant_names(raw: dict[str, Any]) -> list[str]:
    """The variant names of a raw eval.yaml (``systems:``/``variants:``), in config order."""
    variants = system_entries(raw)
    if not isinstance(variants, list):
        return []
    return [str(v["name"]) for v in variants if isinstance(v, dict) and "name" in v]
