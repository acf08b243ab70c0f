"""``compare``, ``promote`` and the ``runs`` verbs (list, show, summarize, push, merge); the rendering is in ``runs_render``."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from evaltrace.cli._untrusted import clean, markup_safe, plain
from evaltrace.cli.run_details import print_changes, render_details
from evaltrace.cli.run_tables import (
    LIST_COLUMNS,
    print_table,
)
from evaltrace.cli.runs_analytics import register_verbs as register_analytics
from evaltrace.cli.runs_render import _variant_rate, render_comparison
from evaltrace.cli.runs_render import render_summary as render_summary
from evaltrace.cli.tables import Cell, Column
from evaltrace.exceptions import EvaltraceError
from evaltrace.runner import (
    RunDirectory,
    compare_runs,
    compare_with_baseline,
    promote_run,
    resolve_run,
)
from evaltrace.runner.baselines import run_eval_name
from evaltrace.runner.config import DEFAULT_RUNS_DIR
from evaltrace.runner.engine import summarize_run
from evaltrace.runner.findings import trace_locations
from evaltrace.runner.gate import comparison_gate_problems, run_gate_problems
from evaltrace.runner.merge import merge_runs
from evaltrace.runner.migrate import current_summary
from evaltrace.runner.resume import UnfinishedRun, resume_command, unfinished_runs
from evaltrace.runner.rundir import CONFIG_FILE, RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from evaltrace.runner.shards import ShardSpec
from evaltrace.runner.stores import StoreSpec, open_store, parse_outputs, save_to_stores
from evaltrace.schema import RunSummary

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STORE = 3
"""The run finished and its directory is complete, but a store (``output:``, ``--sqlite``, ``--postgres``) failed."""


def register(subparsers: Any) -> None:
    """Add the ``compare`` and ``promote`` commands."""
    compare = subparsers.add_parser(
        "compare", help="compare two runs (or a run with its promoted baseline): pass rate, latency, regressions"
    )
    compare.add_argument("run_a", help="baseline run: directory, run id or unique prefix")
    compare.add_argument("run_b", nargs="?", help="run to judge; omitted: RUN_A against its promoted baseline")
    add_runs_dir(compare)
    compare.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case regressed or a baseline pass has no verdict now (for CI)",
    )
    compare.set_defaults(func=compare_command)

    promote = subparsers.add_parser("promote", help="make a run the baseline of its eval (runs/baselines/<eval>/)")
    promote.add_argument("run", help="run directory, run id or unique prefix")
    add_runs_dir(promote)
    promote.set_defaults(func=promote_command)

    runs = subparsers.add_parser("runs", help="list offline runs (run directories, SQLite or PostgreSQL) or save one")
    verbs = runs.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="list runs, newest first, with each variant's pass rate")
    add_runs_dir(listing)
    add_store_options(listing, "list the runs of")
    listing.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs in this namespace (repeatable: all must match; SQLite and PostgreSQL)",
    )
    listing.add_argument("-n", "--limit", type=int, default=20, help="how many runs to show")
    listing.set_defaults(func=list_command)

    show = verbs.add_parser("show", help="print a run's summary: outcomes per variant, evaluators, costs, cases")
    show.add_argument("run", help="run directory, run id or unique prefix")
    add_runs_dir(show)
    show.set_defaults(func=show_command)

    summarize = verbs.add_parser(
        "summarize",
        help="rebuild a run's summary.yaml from its traces.jsonl and results.jsonl (no system, no judge is called)",
    )
    summarize.add_argument("run", help="run directory, run id or unique prefix")
    add_runs_dir(summarize)
    summarize.add_argument("--drift", action="store_true", help="compare with the promoted baseline of this eval")
    summarize.set_defaults(func=summarize_command)

    push = verbs.add_parser(
        "push", help="save a run directory to a store (--sqlite/--postgres, else the run's output: stores)"
    )
    push.add_argument("run", help="run directory, run id or unique prefix")
    add_runs_dir(push)
    add_store_options(push, "save the run to")
    push.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run namespace (repeatable; default: the --namespace the run was started with)",
    )
    push.set_defaults(func=push_command)

    merge = verbs.add_parser(
        "merge", help="join the shard runs of `run --shard i/N` into one run (summary, findings, report as one run's)"
    )
    merge.add_argument("shards", nargs="+", type=Path, metavar="RUN_DIR", help="every shard's run directory, once")
    merge.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="the merged run's directory (default: a new run id)"
    )
    merge.add_argument("--drift", action="store_true", help="compare with the promoted baseline of this eval")
    add_store_options(merge, "also save the merged run to")
    merge.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case regressed, a baseline pass has no verdict now, or a variant judged nothing (CI)",
    )
    merge.set_defaults(func=merge_command)
    register_analytics(verbs)


def add_store_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """Add ``--sqlite PATH`` and ``--postgres DSN``."""
    parser.add_argument("--sqlite", type=Path, default=None, metavar="PATH", help=f"{verb} this SQLite database")
    parser.add_argument(
        "--postgres", default=None, metavar="DSN", help=f"{verb} this PostgreSQL database (postgresql://...)"
    )


def parse_namespace(pairs: list[str]) -> dict[str, str] | None:
    """``["k=v", ...]`` -> ``{k: v}`` (None when empty).

    Raises:
        ValueError: A pair is not ``KEY=VALUE``.
    """
    if not pairs:
        return None
    namespace: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--namespace expects KEY=VALUE, got {pair!r}")
        namespace[key] = value
    return namespace


def report_stores(console: Console, stored: list[str], errors: list[str], run_path: Path) -> int:
    """Print where the run was saved and which stores failed; return EXIT_STORE when one failed, else EXIT_OK."""
    for where in stored:
        console.print(plain(f"saved to {where}"), highlight=False)
    if not errors:
        return EXIT_OK
    err = Console(stderr=True)
    for problem in errors:
        err.print(Text.assemble(("store failed: ", "bold red"), clean(problem)), soft_wrap=True)
    err.print(
        plain(
            f"the run is complete in {run_path}; save it later with `evaltrace runs push {run_path}`"
            " (--sqlite PATH / --postgres DSN, or the run's output: stores)"
        ),
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_STORE


def add_runs_dir(parser: argparse.ArgumentParser) -> None:
    """Add ``--runs-dir`` (where run ids are looked up and baselines live)."""
    parser.add_argument(
        "--runs-dir", type=Path, default=Path(DEFAULT_RUNS_DIR), help="runs directory (default: ./runs)"
    )


def print_error(exc: BaseException) -> int:
    """Print ``error: <message>`` to stderr (not read as rich markup, control characters escaped); return 2."""
    Console(stderr=True).print(Text.assemble(("error: ", "bold red"), clean(exc)), soft_wrap=True)
    return EXIT_USAGE


def compare_command(args: argparse.Namespace) -> int:
    """Print the comparison of two runs, or of a run with its eval's promoted baseline."""
    console = Console()
    try:
        first = RunDirectory(resolve_run(args.run_a, args.runs_dir, argument="RUN_A"))
        judged = first  # the run whose cases moved: RUN_B, or RUN_A against its baseline
        if args.run_b is None:
            report = compare_with_baseline(first, args.runs_dir)
        else:
            judged = RunDirectory(resolve_run(args.run_b, args.runs_dir, argument="RUN_B"))
            report = compare_runs(first, judged)
    except EvaltraceError as exc:
        return print_error(exc)
    render_comparison(console, report)
    traces = judged.path / TRACES_FILE
    print_changes(console, report, str(traces))
    if any(delta.changes for delta in report.deltas):
        console.print(Text(f"Traces (line numbers above): {traces}"), soft_wrap=True)
    if not args.fail_on_regression:
        return EXIT_OK
    problems = comparison_gate_problems(report)
    for problem in problems:
        console.print(Text.assemble(("gate failed:", "red"), " ", clean(problem)), highlight=False)
    return EXIT_FAILED if problems else EXIT_OK


def _flag_store(args: argparse.Namespace) -> StoreSpec | None:
    if args.sqlite is not None and args.postgres is not None:
        raise ValueError("give one of --sqlite and --postgres")
    if args.sqlite is not None:
        return StoreSpec("sqlite", path=str(args.sqlite), entry="--sqlite")
    if args.postgres is not None:
        return StoreSpec("postgres", dsn=args.postgres, entry="--postgres")
    return None


@dataclass(frozen=True)
class _Listed:
    """A run to list: its summary, where it is, and what makes it less than a whole finished run."""

    summary: RunSummary
    where: str
    unfinished: bool = False
    """A store's run still arriving cell by cell (``run --engine ray``), or whose driver was killed."""
    shard: ShardSpec | None = None
    """The shard a ``run --shard i/N`` run holds (partial until ``runs merge``)."""


def _summaries(args: argparse.Namespace, store: StoreSpec | None) -> list[_Listed]:
    """The runs to list, newest first."""
    if store is not None:
        wanted = parse_namespace(args.namespace)
        with open_store(store) as opened:
            stored = opened.list_runs(run_namespace=wanted)
        return [_Listed(r.summary, json.dumps(r.run_namespace), unfinished=not r.finished) for r in stored]
    found = []
    if args.runs_dir.is_dir():
        for path in sorted(args.runs_dir.iterdir(), reverse=True):
            if (path / SUMMARY_FILE).is_file():
                run = RunDirectory(path)
                found.append(_Listed(current_summary(run), str(path), shard=_shard_of(run)))
    return found


def _shard_of(run: RunDirectory) -> ShardSpec | None:
    try:
        meta = run.read_meta()
    # Broad on purpose: a damaged run_meta.json must not hide the run; it lists as a whole run.
    except Exception:
        return None
    return meta.shard if meta is not None else None


def _listed_row(listed: _Listed) -> list[Cell]:
    summary = listed.summary
    rates = ", ".join(f"{markup_safe(v.name)} {_variant_rate(v)}" for v in summary.variants)
    if listed.unfinished:
        rates = "[yellow]unfinished: its cells are stored as they finish[/yellow]"
    elif listed.shard is not None:
        rates = f"[yellow]partial: shard {listed.shard.label()}[/yellow]" + (f", {rates}" if rates else "")
    regressions = summary.comparison.regressions_count if summary.comparison else None
    return [
        plain(summary.run_id, single_line=True),
        str(summary.cases_total),
        rates,
        str(regressions or "-"),
        plain(listed.where, single_line=True),
    ]


def _unfinished_row(run: UnfinishedRun) -> list[Cell]:
    of = f" of {run.cells}" if run.cells is not None else ""
    progress = f"unfinished: {run.traces_saved}{of} traces, {run.results_saved} results saved"
    if run.shard is not None:
        progress = f"partial: shard {run.shard.label()}, {progress}"
    return [
        plain(run.path.name, single_line=True),
        "-",
        f"[yellow]{progress}[/yellow]",
        "-",
        plain(run.path, single_line=True),
    ]


def list_command(args: argparse.Namespace) -> int:
    """Print a table of runs: id, variants with pass rates, comparison; unfinished runs with their resume command."""
    console = Console()
    try:
        store = _flag_store(args)
        summaries = _summaries(args, store)
    except (EvaltraceError, ValueError) as exc:
        return print_error(exc)
    # Unfinished run directories; a store's unfinished runs (cells stored as they finish) are in its list.
    unfinished = unfinished_runs(args.runs_dir) if store is None else []
    source = store.describe() if store is not None else str(args.runs_dir)
    if not summaries and not unfinished:
        console.print(plain(f"No runs in {source}."), highlight=False)
        return EXIT_OK
    listed: list[tuple[str, list[Cell], UnfinishedRun | None]] = []
    for item in summaries:
        listed.append((item.summary.run_id, _listed_row(item), None))
    listed += [(run.path.name, _unfinished_row(run), run) for run in unfinished]
    listed.sort(key=lambda item: item[0], reverse=True)  # run ids sort by start time
    listed = listed[: args.limit]
    columns = [*LIST_COLUMNS, Column("where" if store is None else "namespace", fold=True, drop=1)]
    print_table(console, columns, [row for _, row, _ in listed], plain(f"Runs in {source}"))
    if any(item.shard is not None for item in summaries) or any(run.shard is not None for run in unfinished):
        console.print(
            plain("a partial run holds one shard of `run --shard i/N`: `evaltrace runs merge` joins all shards"),
            highlight=False,
            soft_wrap=True,
        )
    # Commands on lines of their own, never folded by a narrow table: they are meant to be copied.
    for _, _, run in listed:
        if run is not None:
            console.print(
                plain(
                    f"unfinished {run.path.name} (killed, interrupted or still running);"
                    f" continue with: {resume_command(run.path)}"
                ),
                highlight=False,
                soft_wrap=True,
            )
    return EXIT_OK


def show_command(args: argparse.Namespace) -> int:
    """Print a stored run's summary and the cases that did not pass, as ``evaltrace run`` printed them."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))
        summary = current_summary(run)
    except EvaltraceError as exc:
        return print_error(exc)
    render_summary(console, summary, run.path)
    traces = run.path / TRACES_FILE
    render_details(console, summary, traces, trace_locations(traces))
    return EXIT_OK


def summarize_command(args: argparse.Namespace) -> int:
    """Rewrite a finished run's summary.yaml from its stored traces and results, then print it."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))
        outcome = summarize_run(run, runs_dir=args.runs_dir if args.drift else None, drift=args.drift)
    except EvaltraceError as exc:
        return print_error(exc)
    for note in outcome.notes:
        console.print(Text.assemble(("note:", "yellow"), " ", clean(note)))
    render_summary(console, outcome.summary, run.path)
    console.print(plain(f"rewrote {run.path / SUMMARY_FILE} from {TRACES_FILE} and {RESULTS_FILE}"), highlight=False)
    return EXIT_OK


def promote_command(args: argparse.Namespace) -> int:
    """Copy a run's summary (and per-case outcomes) to ``runs/baselines/<eval_name>/``."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))
        target = promote_run(run, args.runs_dir)
    except EvaltraceError as exc:
        return print_error(exc)
    console.print(plain(f"promoted {run.run_id} -> {target}"))
    return EXIT_OK


def push_command(args: argparse.Namespace) -> int:
    """Save a run directory (summary, traces, results) to a store: the one named, else the run's ``output:``."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))
        meta = run.read_meta()
        namespace = parse_namespace(args.namespace) or (meta.run_namespace if meta is not None else None)
        flag = _flag_store(args)
        stores = [flag] if flag is not None else parse_outputs(run.path / CONFIG_FILE, run.read_config().get("output"))
        if not any(s.type != "local_files" for s in stores):
            raise ValueError(f"run {run.run_id} names no database store in its output:; give --sqlite or --postgres")
        summary, traces, results = current_summary(run), run.read_traces(), run.read_results()
    except (EvaltraceError, ValueError) as exc:
        return print_error(exc)
    stored, errors = save_to_stores(
        stores, summary, traces, results, eval_name=run_eval_name(run), run_namespace=namespace
    )
    return report_stores(console, stored, errors, run.path)


def merge_command(args: argparse.Namespace) -> int:
    """Merge shard runs into one run and print its summary (exit 2 naming a missing/duplicate/foreign shard)."""
    console = Console()
    try:
        store = _flag_store(args)
        outcome = merge_runs(args.shards, out=args.out, drift=args.drift, stores=[store] if store else [])
    except (EvaltraceError, ValueError) as exc:
        return print_error(exc)
    for note in outcome.notes:
        console.print(Text.assemble(("note:", "yellow"), " ", clean(note)))
    render_summary(console, outcome.summary, outcome.run.path)
    saved = report_stores(console, outcome.stored, outcome.store_errors, outcome.run.path)
    if not args.fail_on_regression:
        return saved
    problems = run_gate_problems(outcome.summary)
    for problem in problems:
        console.print(Text.assemble(("gate failed:", "red"), " ", clean(problem)), highlight=False)
    return EXIT_FAILED if problems else saved
