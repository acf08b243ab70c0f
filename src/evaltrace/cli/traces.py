"""``evaltrace traces list`` and ``evaltrace traces show <trace_id>``: read the local store and print it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evaltrace.cli.traces_query import (
    add_filter_arguments,
    filter_from_args,
    is_filtered,
    print_json,
    register_export,
    report_import,
    store_errors,
)
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY
from evaltrace.exporters.store_reader import LocalTraceStore, TraceIdError, check_trace_id


def register(subparsers: Any) -> None:
    """Add the ``traces`` noun and its verbs."""
    traces = subparsers.add_parser("traces", help="inspect traces in the local store")
    verbs = traces.add_subparsers(dest="verb", metavar="VERB", required=True)

    list_parser = verbs.add_parser("list", help="list stored traces, newest first")
    add_filter_arguments(list_parser, default_limit=20)
    list_parser.add_argument("--json", action="store_true", help="print a JSON array (stable keys) for scripts")
    list_parser.set_defaults(func=list_traces)

    show = verbs.add_parser("show", help="print one trace as a tree with timing bars")
    show.add_argument(
        "trace_id",
        metavar="TRACE_ID",
        help="trace id or a unique prefix of it ('last' for the newest); with --run: a traces.jsonl line"
        " (19 or traces.jsonl:19) or CASE/VARIANT",
    )
    show.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    show.add_argument("--details", action="store_true", help="also print messages, tool calls and thinking")
    show.add_argument(
        "--run", metavar="RUN", default=None, help="read the trace from this offline run (id, prefix or directory)"
    )
    show.add_argument("--runs-dir", type=Path, default=None, help="where --run ids are looked up (default: ./runs)")
    show.set_defaults(func=show_trace)
    register_export(verbs)


@store_errors
def list_traces(args: argparse.Namespace) -> int:
    """Print a table of stored traces."""
    store = LocalTraceStore(args.store)
    summaries = store.list_traces(where=filter_from_args(args))
    report_import(store)
    if args.json:
        print_json(summaries)
        return 0
    # The table is drawn without rich where it can be (issue 28): `traces list` starts without it.
    from evaltrace.cli.list_output import print_message
    from evaltrace.cli.trace_table import print_trace_list

    if not summaries and is_filtered(args):
        print_message(f"No traces in {args.store} match these filters.")
        return 0
    if not summaries:
        print_message(f"No traces in {args.store} yet. Run your app after evaltrace.configure().")
        return 0
    print_trace_list(summaries, f"Traces in {args.store}")
    return 0


@store_errors
def show_trace(args: argparse.Namespace) -> int:
    """Print one trace as a waterfall tree (from the local store, or a cell of an offline run with ``--run``)."""
    if args.run is not None:
        from evaltrace.cli.run_trace import show_run_trace  # here: `traces list` starts without the runner

        return show_run_trace(args)
    from rich.console import Console

    from evaltrace.cli._untrusted import plain

    console = Console()
    store = LocalTraceStore(args.store)
    trace_id = args.trace_id
    if trace_id == "last":
        latest = store.list_traces(limit=1)
        if not latest:
            console.print(plain(f"No traces in {args.store}", "red"))
            return 1
        trace_id = latest[0].trace_id
    try:
        spans = store.spans(check_trace_id(trace_id, "TRACE_ID"))
    except TraceIdError as exc:
        Console(stderr=True).print(plain(f"error: {exc}", "red"))
        return 2
    except LookupError as exc:
        console.print(plain(exc, "red"))
        return 1
    if not spans:
        console.print(plain(f"No trace {trace_id!r} in {args.store}", "red"))
        return 1
    from evaltrace.cli.waterfall import render_waterfall  # here: `traces list` starts without it (~130 ms)

    render_waterfall(console, spans, details=args.details)
    return 0
