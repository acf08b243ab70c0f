"""``evaltrace traces list`` and ``evaltrace traces show <trace_id>``: read the local store, print with rich."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evaltrace.cli._untrusted import plain
from evaltrace.cli.waterfall import render_waterfall
from evaltrace.exporters.local_store import DEFAULT_DIRECTORY, LocalTraceStore, TraceIdError, check_trace_id


def register(subparsers: Any) -> None:
    """Add the ``traces`` noun and its verbs."""
    traces = subparsers.add_parser("traces", help="inspect traces in the local store")
    verbs = traces.add_subparsers(dest="verb", metavar="VERB", required=True)

    list_parser = verbs.add_parser("list", help="list stored traces, newest first")
    list_parser.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    list_parser.add_argument("-n", "--limit", type=int, default=20, help="how many traces to show")
    list_parser.set_defaults(func=list_traces)

    show = verbs.add_parser("show", help="print one trace as a tree with timing bars")
    show.add_argument("trace_id", help="trace id or a unique prefix of it ('last' for the newest)")
    show.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    show.add_argument("--details", action="store_true", help="also print messages, tool calls and thinking")
    show.set_defaults(func=show_trace)


def list_traces(args: argparse.Namespace) -> int:
    """Print a table of stored traces."""
    console = Console()
    summaries = LocalTraceStore(args.store).list_traces(limit=args.limit)
    if not summaries:
        console.print(plain(f"No traces in {args.store}/traces yet. Run your app after evaltrace.configure()."))
        return 0
    table = Table(title=plain(f"Traces in {args.store}"))
    for column in ("trace id", "root", "service", "started (UTC)", "duration", "spans", "status"):
        table.add_column(column)
    for s in summaries:
        started = dt.datetime.fromtimestamp(s.start_time / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        status = "[red]ERROR[/red]" if s.error else "[green]ok[/green]"
        table.add_row(
            *(plain(recorded, single_line=True) for recorded in (s.trace_id, s.root_name, s.service_name)),
            started,
            f"{s.duration_ms:.1f} ms",
            str(s.span_count),
            status,
        )
    console.print(table)
    return 0


def show_trace(args: argparse.Namespace) -> int:
    """Print one trace as a waterfall tree."""
    console = Console()
    store = LocalTraceStore(args.store)
    trace_id = args.trace_id
    if trace_id == "last":
        latest = store.list_traces(limit=1)
        if not latest:
            console.print(plain(f"No traces in {args.store}/traces", "red"))
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
        console.print(plain(f"No trace {trace_id!r} in {args.store}/traces", "red"))
        return 1
    render_waterfall(console, spans, details=args.details)
    return 0
