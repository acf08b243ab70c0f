"""``evaltrace report <trace_id> -o report.html``: a self-contained HTML page of one trace from the local store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evaltrace.exporters.local_store import DEFAULT_DIRECTORY


def register(subparsers: Any) -> None:
    """Add the ``report`` command."""
    report = subparsers.add_parser(
        "report", help="write a static HTML report of one trace (waterfall, messages, tool calls, scores)"
    )
    report.add_argument("trace_id", help="trace id or a unique prefix of it ('last' for the newest)")
    report.add_argument("-o", "--output", type=Path, help="HTML file to write (default evaltrace-<trace id>.html)")
    report.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    """Write the report; exit code 1 when the trace is not found."""
    from evaltrace.report import write_report

    output = args.output or Path(f"evaltrace-{args.trace_id[:16]}.html")
    try:
        path = write_report(args.trace_id, output, args.store)
    except LookupError as exc:
        print(f"evaltrace report: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0
