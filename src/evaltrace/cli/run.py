"""``evaltrace run eval.yaml`` and ``evaltrace re-evaluate <run>``: offline runs with a progress bar and a summary.

``evaltrace run --resume <run_id>`` continues a killed run (:func:`evaltrace.runner.resume_run`); a plain
``run`` always starts a new run and names any unfinished run of the same config.

Exit codes: 0 done (whatever the pass rate), 1 ``--fail-on-regression`` and the gate failed (a case regressed,
a case that passed on the baseline has no verdict now, or a variant judged no case), 2 a malformed eval.yaml /
cases.yaml (the message names the file, the entry and the problem) or a run that cannot be found, 3 the run
finished and its directory is complete but a store (``output:``, ``--sqlite``, ``--postgres``) could not save it,
130 Ctrl-C (SIGINT): what was saved is printed with the exact command that continues the run, never a traceback.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.run_details import render_details
from evaltrace.cli.runs import EXIT_FAILED, EXIT_USAGE, add_runs_dir, print_error, render_summary, report_stores
from evaltrace.exceptions import EvaltraceError
from evaltrace.runner import RunDirectory, RunOutcome, load_eval_config, re_evaluate, resolve_run, resume_run, run_eval
from evaltrace.runner.config import DEFAULT_RUNS_DIR
from evaltrace.runner.errors import RunInterrupted
from evaltrace.runner.findings import trace_locations
from evaltrace.runner.gate import run_gate_problems
from evaltrace.runner.postgres_store import redact_dsn
from evaltrace.runner.ray_engine import RayEngine
from evaltrace.runner.resume import resume_command
from evaltrace.runner.rundir import TRACES_FILE
from evaltrace.runner.score_push import check_sink_spec
from evaltrace.runner.select import SelectionError
from evaltrace.runner.shards import ShardError, ShardSpec, parse_shard
from evaltrace.runner.stores import configured_runs_dir
from evaltrace.schema.runs import CaseSelection


class RichProgress:
    """A rich progress bar per phase (running cases, evaluating)."""

    def __init__(self, console: Console, enabled: bool) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start(self, description: str, total: int) -> None:
        """Start a bar for a phase."""
        self._task = self._progress.add_task(description, total=total)

    def advance(self, steps: int = 1) -> None:
        """Advance the current bar by ``steps`` (one by default)."""
        if self._task is not None:
            self._progress.advance(self._task, steps)


def register(subparsers: Any) -> None:
    """Add the ``run`` and ``re-evaluate`` commands."""
    run = subparsers.add_parser("run", help="run an eval.yaml: cases × variants, traced, evaluated, summarised")
    run.add_argument("config", type=Path, nargs="?", help="the eval.yaml (optional with --resume)")
    run.add_argument(
        "--resume",
        metavar="RUN",
        default=None,
        help="continue this killed run (id, unique prefix or directory): finished cells and results are kept",
    )
    run.add_argument("--runs-dir", type=Path, default=None, help="where runs go (default: runs_dir of eval.yaml)")
    run.add_argument("--drift", action="store_true", help="compare with the promoted baseline of this eval")
    run.add_argument("--sqlite", type=Path, default=None, metavar="PATH", help="also store the run in this SQLite db")
    run.add_argument("--postgres", default=None, metavar="DSN", help="also store the run in this PostgreSQL db")
    run.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run namespace recorded in the run's stores (repeatable), e.g. --namespace branch=main",
    )
    run.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (1-based) of the cells, for CI matrices and batch jobs; join with `runs merge`",
    )
    run.add_argument(
        "--sink",
        action="append",
        default=[],
        metavar="SPEC",
        help="also send the run's scores to this score sink: jsonl:PATH, langfuse, phoenix[:URL] (repeatable)",
    )
    add_engine(run, "cells")
    _add_selection(run)
    _add_common(run)
    run.set_defaults(func=run_command)

    again = subparsers.add_parser(
        "re-evaluate", help="re-run the evaluators over a run's traces.jsonl (the system is not called)"
    )
    again.add_argument("run", help="run directory, run id or unique prefix")
    again.add_argument("--config", type=Path, default=None, help="use this eval.yaml's evaluators instead")
    again.add_argument("--drift", action="store_true", help="compare with the promoted baseline of this eval")
    add_runs_dir(again)
    _add_common(again)
    again.set_defaults(func=re_evaluate_command)


def add_engine(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--engine`` and ``--address`` (where the ``what`` run: here, or as Ray tasks on a cluster)."""
    parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help=f"run the {what} in this process (local, default) or as Ray tasks on a cluster (ray; needs evaltrace[ray])",
    )
    parser.add_argument(
        "--address",
        default=None,
        metavar="ADDRESS",
        help="the Ray cluster for --engine ray (auto, ray://HOST:PORT, HOST:PORT); default: a local one on 127.0.0.1",
    )


def ray_engine(args: argparse.Namespace) -> RayEngine | None:
    """The Ray engine that ``--engine``/``--address`` ask for (None: local).

    Raises:
        ValueError: ``--address`` without ``--engine ray``.
    """
    if args.engine != "ray":
        if args.address is not None:
            raise ValueError("--address names a Ray cluster: give it with --engine ray")
        return None
    return RayEngine(address=args.address)


def _add_selection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "selecting cases", "run part of the dataset; filters combine with AND, then --sample, then --limit"
    )
    group.add_argument("--case", action="append", default=[], metavar="ID", help="case id or glob (repeatable: any)")
    group.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="case with this tag in metadata.tags (repeatable: any)",
    )
    group.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="dotted path into the case equals VALUE, e.g. metadata.topic=weather (repeatable: all)",
    )
    group.add_argument("--sample", type=int, default=None, metavar="N", help="a random sample of N cases")
    group.add_argument("--seed", type=int, default=None, metavar="S", help="seed of --sample (default 0)")
    group.add_argument("--limit", type=int, default=None, metavar="N", help="at most the first N cases")


def _selection(args: argparse.Namespace) -> CaseSelection | None:
    selection = CaseSelection(
        cases=args.case, tags=args.tag, where=args.where, sample=args.sample, seed=args.seed, limit=args.limit
    )
    if selection == CaseSelection():
        return None
    if args.resume is not None:
        raise SelectionError("selection flags cannot be combined with --resume: a run keeps the cases it started with")
    return selection


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case regressed, a baseline pass has no verdict now, or a variant judged nothing (CI)",
    )


def _namespace(pairs: list[str]) -> dict[str, str] | None:
    if not pairs:
        return None
    namespace: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--namespace expects KEY=VALUE, got {pair!r}")
        namespace[key] = value
    return namespace


def _report(console: Console, outcome: RunOutcome, fail_on_regression: bool) -> int:
    for note in outcome.notes:
        console.print(Text.assemble(("note:", "yellow"), " ", clean(note)))
    render_summary(console, outcome.summary, outcome.run.path)
    traces = outcome.run.path / TRACES_FILE
    render_details(console, outcome.summary, traces, trace_locations(traces))
    saved = report_stores(console, outcome.stored, outcome.store_errors, outcome.run.path)
    if not fail_on_regression:
        return saved
    problems = run_gate_problems(outcome.summary)
    for problem in problems:
        console.print(Text.assemble(("gate failed:", "red"), " ", clean(problem)), highlight=False)
    return EXIT_FAILED if problems else saved


EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a process that SIGINT ended."""


def _store_flags(args: argparse.Namespace) -> list[str]:
    """The flags naming where the run is saved (and how it is compared), to repeat on ``--resume``/``runs push``."""
    flags: list[str] = []
    if args.sqlite is not None:
        flags += ["--sqlite", str(args.sqlite)]
    if args.postgres is not None:
        # Never echo a password (terminals and CI logs are read by others): libpq finds it in PGPASSWORD/.pgpass.
        flags += ["--postgres", redact_dsn(args.postgres)]
    return flags


def _interrupted(stop: RunInterrupted | None, args: argparse.Namespace) -> int:
    """Say what a Ctrl-C left saved and how to go on; return 130."""
    err = Console(stderr=True)
    if stop is None:
        err.print(plain("interrupted: no run was left unfinished"), highlight=False, soft_wrap=True)
        return EXIT_INTERRUPTED
    if stop.complete:
        push = shlex.join(["evaltrace", "runs", "push", str(stop.run_path), *_store_flags(args)])
        lines = [
            f"interrupted while saving to the stores: the run is complete in {stop.run_path}",
            f"save it with: {push}",
        ]
    else:
        sinks = [word for spec in getattr(args, "sink", []) for word in ("--sink", spec)]
        extra = [*_store_flags(args), *sinks, *(["--drift"] if args.drift else [])]
        lines = [
            f"interrupted: saved {stop.traces_saved} of {stop.cells} traces and {stop.results_saved} evaluation"
            f" results in {stop.run_path}",
            f"continue with: {resume_command(stop.run_path, extra)}",
        ]
    for line in lines:
        err.print(plain(line), highlight=False, soft_wrap=True)
    return EXIT_INTERRUPTED


def run_command(args: argparse.Namespace) -> int:
    """Run an eval.yaml and print its summary (Ctrl-C: what was saved and the ``--resume`` command, exit 130)."""
    try:
        return _run_command(args)
    except RunInterrupted as stop:
        return _interrupted(stop, args)
    except KeyboardInterrupt:
        # Before the run directory existed (loading the config) or once the run was done (printing its summary):
        # either way nothing is left to resume.
        return _interrupted(None, args)


def _run_command(args: argparse.Namespace) -> int:
    console = Console()
    try:
        namespace = _namespace(args.namespace)
        selection = _selection(args)
        shard = _shard(args)
        sinks = [check_sink_spec(spec) for spec in args.sink]
        engine = ray_engine(args)
    except ValueError as exc:
        return print_error(exc)
    if args.config is None and args.resume is None:
        print_error(ValueError("name an eval.yaml, or a run to continue with --resume RUN"))
        return EXIT_USAGE
    try:
        with RichProgress(console, not args.no_progress) as progress:
            if args.resume is not None:
                outcome = _resume(args, namespace, progress, sinks, engine)
            else:
                outcome = run_eval(
                    args.config,
                    runs_dir=args.runs_dir,
                    drift=args.drift,
                    sqlite_path=args.sqlite,
                    run_namespace=namespace,
                    progress=progress,
                    selection=selection,
                    postgres_dsn=args.postgres,
                    shard=shard,
                    sinks=sinks,
                    engine=engine,
                )
    except EvaltraceError as exc:
        return print_error(exc)
    return _report(console, outcome, args.fail_on_regression)


def _shard(args: argparse.Namespace) -> ShardSpec | None:
    if args.shard is None:
        return None
    if args.resume is not None:
        raise ShardError("--shard cannot be combined with --resume: a shard run resumes as the shard it started as")
    if args.sink:
        raise ShardError("--shard pushes no scores (a shard is a partial run): give --sink to `runs merge`")
    if args.sqlite is not None or args.postgres is not None:
        raise ShardError("--shard saves no store (a shard is a partial run): give --sqlite/--postgres to `runs merge`")
    return parse_shard(args.shard)


def _resume(
    args: argparse.Namespace,
    namespace: dict[str, str] | None,
    progress: RichProgress,
    sinks: list[str],
    engine: RayEngine | None,
) -> RunOutcome:
    runs_dir = args.runs_dir
    if runs_dir is None:
        runs_dir = configured_runs_dir(load_eval_config(args.config)) if args.config else Path(DEFAULT_RUNS_DIR)
    run = RunDirectory(resolve_run(args.resume, runs_dir, argument="--resume"))
    return resume_run(
        run,
        config_path=args.config,
        drift=args.drift,
        sqlite_path=args.sqlite,
        run_namespace=namespace,
        progress=progress,
        postgres_dsn=args.postgres,
        sinks=sinks,
        engine=engine,
    )


def re_evaluate_command(args: argparse.Namespace) -> int:
    """Re-evaluate a run from its traces and print the new summary."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))
        with RichProgress(console, not args.no_progress) as progress:
            outcome = re_evaluate(run, config_path=args.config, runs_dir=None, drift=args.drift, progress=progress)
    except EvaltraceError as exc:
        return print_error(exc)
    return _report(console, outcome, args.fail_on_regression)
