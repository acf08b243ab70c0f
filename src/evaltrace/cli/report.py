"""``evaltrace report``: a self-contained HTML page of an offline run, of one trace, or of one session.

``evaltrace report <run_id|run dir> -o run.html`` reports a run (matrix of cases × variants, each cell opening its
trace); ``evaltrace report <trace_id> -o report.html`` reports one trace of the local store. A reference that
names a run (a run directory, or a run id or unique prefix under ``--runs-dir``) is a run; anything else is a
trace id (``last``: the newest trace). ``evaltrace report --session <session_id>`` reports a session of the local
store: its turns as a chat and its session scores.

Exit codes: 0 written, 1 the run or trace is not found or cannot be read, 2 a reference that is neither (a path
that is no run directory, an id that is no trace id).
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any

from evaltrace.cli._untrusted import clean
from evaltrace.exceptions import EvaltraceError
from evaltrace.exporters.local_store import DEFAULT_DIRECTORY, TraceIdError, check_trace_id
from evaltrace.runner.config import DEFAULT_RUNS_DIR
from evaltrace.runner.rundir import RunDirectory, RunNotFoundError, RunPathError, resolve_run

_ARGUMENT = "RUN_OR_TRACE"


def register(subparsers: Any) -> None:
    """Add the ``report`` command."""
    report = subparsers.add_parser(
        "report",
        help="write a static HTML report of an offline run (case × variant matrix) or of one trace (waterfall, "
        "messages, tool calls, scores)",
    )
    report.add_argument(
        "target",
        metavar="RUN_OR_TRACE",
        nargs="?",
        help="run id, unique prefix or run directory; or a trace id ('last')",
    )
    report.add_argument("--session", metavar="SESSION_ID", help="report this session (its turns and scores) instead")
    report.add_argument("-o", "--output", type=Path, help="HTML file to write (default evaltrace-<id>.html)")
    report.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="trace store directory (.evaltrace)")
    report.add_argument(
        "--runs-dir", type=Path, default=Path(DEFAULT_RUNS_DIR), help="where run ids are looked up (default: ./runs)"
    )
    report.set_defaults(func=run_report)


def _run(reference: str, runs_dir: Path) -> RunDirectory | None:
    if reference == "last":
        return None  # the newest *trace*, as before runs could be reported
    try:
        return RunDirectory(resolve_run(reference, runs_dir, argument=_ARGUMENT))
    except RunPathError:
        raise
    except RunNotFoundError:
        if runs_dir.is_dir() and any(runs_dir.glob(f"{glob.escape(reference)}*")):
            raise  # names several runs: say so rather than look for a trace
        return None


def _newest_trace(store: Path) -> str:
    from evaltrace.exporters.local_store import LocalTraceStore

    newest = LocalTraceStore(store).list_traces(limit=1)
    if not newest:
        raise LookupError(f"the local store {store} holds no traces")
    return newest[0].trace_id


def run_report(args: argparse.Namespace) -> int:
    """Write the report; exit code 1 when the run or trace is not found or cannot be read, 2 for a bad reference."""
    from evaltrace.report import write_report
    from evaltrace.report.run_report import write_run_report

    if args.session is not None or args.target is None:
        return _session_report(args)
    try:
        run = _run(args.target, args.runs_dir)
        if run is not None:
            path = write_run_report(run, args.output or Path(f"evaltrace-{run.run_id}.html"))
        else:
            # Checked before the id names the default output file: ``../x`` must not write outside the cwd.
            trace_id = _newest_trace(args.store) if args.target == "last" else check_trace_id(args.target, _ARGUMENT)
            output = args.output or Path(f"evaltrace-{trace_id[:16]}.html")  # the trace's id, also for ``last``
            path = write_report(trace_id, output, args.store)
    except RunPathError as exc:
        print(clean(f"evaltrace report: {exc}"), file=sys.stderr)
        return 2
    except TraceIdError:
        problem = f"{args.target!r} is no run in {args.runs_dir} and not a trace id (up to 32 hexadecimal digits)"
        print(clean(f"evaltrace report: {_ARGUMENT}: {problem}"), file=sys.stderr)
        return 2
    except (LookupError, EvaltraceError) as exc:
        print(clean(f"evaltrace report: {exc}"), file=sys.stderr)
        return 1
    print(clean(f"wrote {path}"))
    return 0


def _session_report(args: argparse.Namespace) -> int:
    """``report --session ID``: exit code 1 when the session is not stored, 2 for a bad combination."""
    from evaltrace.report.session import default_session_output, write_session_report

    if args.session is None or args.target is not None:
        problem = "give a run or trace, or --session SESSION_ID" if args.session is None else "not both"
        print(clean(f"evaltrace report: {_ARGUMENT} or --session: {problem}"), file=sys.stderr)
        return 2
    try:
        path = write_session_report(args.session, args.output or default_session_output(args.session), args.store)
    except (LookupError, EvaltraceError) as exc:
        print(clean(f"evaltrace report: {exc}"), file=sys.stderr)
        return 1
    print(clean(f"wrote {path}"))
    return 0
