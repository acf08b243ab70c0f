"""The query side of ``evaltrace traces``: the filters of ``list`` and ``export``, ``--json``, and ``export``.

Rendering lives in ``traces.py`` and its helpers; this module turns flags into a
:class:`~evaltrace.exporters.TraceFilter` and writes machine-readable output.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from evaltrace.exceptions import ConfigError
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY, parse_duration
from evaltrace.exporters.store_query import TraceFilter, Unreadable
from evaltrace.exporters.store_reader import LocalTraceStore, StoreError

__all__ = [
    "add_filter_arguments",
    "filter_from_args",
    "print_json",
    "register_export",
    "report_import",
    "store_errors",
]

EXPORT_EPILOG = """examples:
  evaltrace traces export --format otlp-json --output traces.jsonl --since 1d
  evaltrace traces export --endpoint http://localhost:4318 --failed-evals   # Jaeger, Phoenix, a collector
"""


def _since(text: str) -> float:
    try:
        return parse_duration(text, "--since")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _attribute(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or '"' in key:
        raise argparse.ArgumentTypeError(f"expected ATTRIBUTE=VALUE (no double quote in the name), got {text!r}")
    return key.strip(), value


def add_filter_arguments(parser: argparse.ArgumentParser, *, default_limit: int | None) -> None:
    """Add ``--store`` and the trace filters shared by ``list`` and ``export``."""
    parser.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    parser.add_argument("--service", help="only traces of this service.name")
    parser.add_argument("--since", type=_since, metavar="AGE", help="only traces started within AGE (90s, 15m, 1h, 7d)")
    parser.add_argument("--status", choices=("error", "ok"), help="error: a span of the application failed")
    parser.add_argument("--failed-evals", action="store_true", help="only traces with a failed evaluation")
    parser.add_argument(
        "--eval-errors",
        action="store_true",
        help="only traces with an evaluation that errored (e.g. its judge was down or refused the key)",
    )
    parser.add_argument(
        "--evaluator",
        metavar="NAME",
        help="only traces evaluated by NAME (with --failed-evals / --eval-errors: it failed / errored)",
    )
    parser.add_argument("--session", metavar="ID", help="only traces of this session.id")
    parser.add_argument("--user", metavar="ID", help="only traces of this user.id")
    parser.add_argument("--search", metavar="TEXT", help="words in inputs and outputs (each matched as a word prefix)")
    parser.add_argument(
        "--where",
        type=_attribute,
        action="append",
        default=[],
        metavar="ATTR=VALUE",
        help="a span of the trace has this attribute value, e.g. gen_ai.request.model=gpt-4o (repeatable)",
    )
    limit_help = "how many traces, newest first" + (
        f" (default {default_limit})" if default_limit else " (default all)"
    )
    parser.add_argument("-n", "--limit", type=_positive, default=default_limit, help=limit_help)
    parser.add_argument(
        "--judges", action="store_true", help="also the traces of judge calls (left out: their scores name them)"
    )


def store_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``command``; a store that cannot be read is one line on stderr and exit status 1, not a traceback."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except StoreError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run


def _since_ns(since: float | None) -> int | None:
    if since is None:
        return None
    now = time.time_ns()
    # Clamped: an age beyond the epoch (999999999999d) means every trace, not an integer overflow.
    return now - int(since * 1e9) if since * 1e9 < now else 0


def filter_from_args(args: argparse.Namespace) -> TraceFilter:
    """The :class:`TraceFilter` the parsed flags describe."""
    return TraceFilter(
        service=getattr(args, "service", None),
        since_ns=_since_ns(getattr(args, "since", None)),
        status=getattr(args, "status", None),
        failed_evals=bool(getattr(args, "failed_evals", False)),
        eval_errors=bool(getattr(args, "eval_errors", False)),
        evaluator=getattr(args, "evaluator", None),
        session_id=getattr(args, "session", None),
        user_id=getattr(args, "user", None),
        search=getattr(args, "search", None),
        limit=getattr(args, "limit", None),
        attributes=tuple(getattr(args, "where", None) or ()),
        judges=bool(getattr(args, "judges", False)),
    )


def is_filtered(args: argparse.Namespace) -> bool:
    """Whether any filter beyond ``--limit`` was given (an empty answer then means "nothing matched")."""
    names = ("service", "since", "status", "evaluator", "session", "user", "search")
    flags = ("failed_evals", "eval_errors")
    return any(getattr(args, name, None) is not None for name in names) or any(
        bool(getattr(args, flag, False)) for flag in (*flags, "where")
    )


# Inside JSON strings: characters a terminal acts on (C0, DEL, C1, bidirectional overrides, line separators).
_TERMINAL_CONTROL = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


class Jsonable(Protocol):
    """A row that prints itself as a JSON object (``TraceSummary``, a session summary)."""

    def to_json(self) -> dict[str, Any]:
        """The row's stable JSON object."""
        ...


def print_json(summaries: Sequence[Jsonable]) -> None:
    r"""Print ``summaries`` as one JSON array of objects with stable keys (see docs/viewing.md).

    Strict JSON (never ``NaN`` or ``Infinity``); characters a terminal would act on are ``\u`` escapes, other
    text is printed as it is.
    """
    text = json.dumps([s.to_json() for s in summaries], ensure_ascii=False, indent=2, allow_nan=False)
    sys.stdout.write(_TERMINAL_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")


def report_import(store: LocalTraceStore) -> None:
    """Say on stderr what opening the store imported from older JSONL files (the files are kept)."""
    report = store.import_report
    if report.unreadable_files:
        print(
            f"note: {report.unreadable_files} JSONL file(s) in {store.traces_dir} cannot be read and were skipped",
            file=sys.stderr,
        )
    if report.files:
        skipped = f", skipped {report.unreadable_lines} unreadable line(s)" if report.unreadable_lines else ""
        print(
            f"note: imported {report.spans} span(s) from {report.files} JSONL file(s) in {store.traces_dir}"
            f"{skipped}; the files are kept",
            file=sys.stderr,
        )


def register_export(verbs: Any) -> None:
    """Add ``evaltrace traces export``."""
    export = verbs.add_parser(
        "export",
        help="write stored traces as OTLP/JSON, or send them to an OTLP endpoint",
        epilog=EXPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("--format", choices=("otlp-json",), default="otlp-json", help="file format (otlp-json)")
    target = export.add_mutually_exclusive_group()
    target.add_argument("-o", "--output", type=Path, help="file to write (default: standard output)")
    target.add_argument("--endpoint", help="OTLP endpoint to send to (http://host:4318, or host:4317 with grpc)")
    export.add_argument("--protocol", choices=("http/protobuf", "grpc"), help="OTLP protocol (default http/protobuf)")
    export.add_argument("--headers", help="OTLP headers, k=v,k2=v2")
    add_filter_arguments(export, default_limit=None)
    export.set_defaults(func=export_traces)


@store_errors
def export_traces(args: argparse.Namespace) -> int:
    """Write or send the traces the filters select; prints a count on stderr."""
    from evaltrace.exporters.otlp_json import send_traces, write_otlp_json

    store = LocalTraceStore(args.store)
    store.counts()  # opens the store (importing older JSONL files) so the note below comes first
    report_import(store)
    unreadable = Unreadable()  # a partly corrupt store: every readable span goes out, the rest is reported
    traces = (spans for _, spans in store.iter_traces(filter_from_args(args), unreadable))
    if args.endpoint is not None:
        from evaltrace._internal import backends
        from evaltrace._internal.otlp_settings import resolve_otlp

        try:
            settings = resolve_otlp(args.endpoint, args.protocol, args.headers or {})
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        assert settings is not None  # an explicit endpoint always resolves
        result = send_traces(traces, backends.otlp_target(settings).build())
        print(f"sent {result.sent_spans} span(s) to {settings.endpoint}", file=sys.stderr)
        if result.failed_spans:
            print(f"error: {result.failed_spans} span(s) were refused or not delivered", file=sys.stderr)
        return 1 if _report_unreadable(unreadable, args.store) or result.failed_spans else 0
    if args.output is None:
        count, spans = write_otlp_json(traces, sys.stdout)
    else:
        from evaltrace._internal.private_files import make_private_dirs, private_opener

        make_private_dirs(args.output.resolve().parent)
        with open(args.output, "w", encoding="utf-8", opener=private_opener) as out:  # 0600: prompts inside
            count, spans = write_otlp_json(traces, out)
    print(f"exported {count} trace(s), {spans} span(s)", file=sys.stderr)
    return 1 if _report_unreadable(unreadable, args.store) else 0


def _report_unreadable(unreadable: Unreadable, store: Path) -> bool:
    """Name what a partly corrupt store kept back (one line on stderr); whether anything was."""
    if not unreadable.spans and not unreadable.traces:
        return False
    print(
        f"error: {unreadable.spans} span(s) in {unreadable.traces} trace(s) of {store} could not be read (the store "
        "is partly corrupt) and were not exported; every readable span was",
        file=sys.stderr,
    )
    return True
