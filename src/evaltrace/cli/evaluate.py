"""``evaltrace evaluate``: run evaluators over stored traces (the local store, or OTLP/JSON files) without the app.

Exit status: 0 when every selected trace was judged (whatever the verdicts, unless ``--fail-on-fail``), 1 when a
verdict failed with ``--fail-on-fail``, a judge budget stopped the backfill, or the store could not be written,
2 for a usage error (an unknown evaluator, a bad file, no trace matched).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltrace.cli._untrusted import clean
from evaltrace.cli.traces_query import add_filter_arguments, filter_from_args, is_filtered
from evaltrace.exceptions import EvaltraceError

__all__ = ["not_evaluated_reason_lines", "register"]


def register(subparsers: Any) -> None:
    """Add ``evaltrace evaluate``."""
    parser = subparsers.add_parser(
        "evaluate",
        help="re-judge stored traces with evaluators, without running the application",
    )
    which = parser.add_argument_group("evaluators")
    which.add_argument(
        "-e",
        "--evaluator-entry",
        dest="entries",
        action="append",
        default=[],
        metavar="NAME[:k=v,...]",
        help="a catalogue evaluator with options (contains:text=refund), or module:attr (repeatable)",
    )
    which.add_argument(
        "--evaluators", type=Path, metavar="FILE", help="a YAML file with an evaluators: list (eval.yaml)"
    )
    add_filter_arguments(parser, default_limit=None)
    parser.add_argument("--trace", action="append", default=[], metavar="ID", help="only this trace (repeatable)")
    parser.add_argument(
        "--otlp-json", action="append", default=[], type=Path, metavar="FILE", help="read traces from OTLP/JSON files"
    )
    parser.add_argument("--phoenix", metavar="URL", help="read traces from this Phoenix server (with --project)")
    parser.add_argument("--project", metavar="NAME", help="the Phoenix project to read")
    parser.add_argument(
        "--scope",
        choices=("span", "trace", "session"),
        default=None,
        help="what is judged; default: session for conversation-only evaluators, trace for the others",
    )
    parser.add_argument("--span-kind", action="append", metavar="KIND", help="span scope: only spans of this kind")
    parser.add_argument("--span-name", metavar="GLOB", help="span scope: only spans whose name matches")
    parser.add_argument(
        "--sink", action="append", default=[], metavar="SPEC", help="jsonl:PATH, langfuse, phoenix[:URL]"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="evaluations at once (default 8)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per evaluation (default 60)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be judged and estimate the cost")
    parser.add_argument("--restart", action="store_true", help="ignore what a killed run finished; start over")
    parser.add_argument("--fail-on-fail", action="store_true", help="exit 1 when any verdict is a fail")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--json",
        action="store_true",
        help='for scripts: stdout is the report as one JSON object, or {"error": ...}; all else goes to stderr',
    )
    parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="judge here (local, default) or each trace/session as a Ray task on a cluster (ray; evaltrace[ray])",
    )
    parser.add_argument(
        "--address", default=None, metavar="ADDRESS", help="the Ray cluster for --engine ray (auto, ray://HOST:PORT)"
    )
    parser.set_defaults(func=evaluate_command)


class _Failed(Exception):
    """The run ends without a report: ``message`` goes to stderr (and, with ``--json``, stdout), exit ``status``."""

    def __init__(self, message: str, status: int = 2, *, label: str = "error: ") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.line = f"{label}{message}"  # what stderr shows


def _selection_key(args: argparse.Namespace) -> str:
    """The filters as written (``--since 1d``, not the instant it meant), so a resumed run finds its checkpoint."""
    names = (
        "service",
        "since",
        "status",
        "failed_evals",
        "eval_errors",
        "evaluator",
        "session",
        "user",
        "search",
        "where",
    )
    return repr([(n, getattr(args, n, None)) for n in (*names, "limit")])


def evaluate_command(args: argparse.Namespace) -> int:
    """Run the backfill the flags describe.

    With ``--json`` stdout holds exactly one JSON object: the report, or ``{"error": "..."}`` when the run ends
    without one (the message is on stderr too, the exit status the same). Whatever else is written to stdout
    meanwhile (an evaluator's ``print``, a C library's output) goes to stderr.
    """
    if not args.json:
        try:
            return _evaluate(args, print)
        except _Failed as exc:
            print(exc.line, file=sys.stderr)
            return exc.status
    import json

    from evaltrace.cli.json_stdout import stdout_for_json_only

    with stdout_for_json_only() as write_json:
        try:
            return _evaluate(args, write_json)
        except _Failed as exc:
            print(exc.line, file=sys.stderr)
            write_json(json.dumps({"error": exc.message}))
            return exc.status


def _evaluate(args: argparse.Namespace, write_json: Callable[[str], None]) -> int:
    """Check the flags, load the evaluators, run the backfill and print its report (``write_json`` with --json)."""
    from evaltrace.cli.evaluate_entries import EntryError, load_entries
    from evaltrace.exceptions import ConfigError
    from evaltrace.exporters.store_db import StoreError

    if not args.entries and args.evaluators is None:
        raise _Failed("no evaluator given: use -e NAME (or module:attr) or --evaluators FILE")
    if args.concurrency < 1:
        raise _Failed(f"--concurrency: expected a whole number >= 1, got {args.concurrency}")
    if args.otlp_json and (is_filtered(args) or args.trace or args.limit):
        raise _Failed("the trace filters select from the local store (or --phoenix), not from --otlp-json files")
    if args.phoenix and args.otlp_json:
        raise _Failed("read traces from --otlp-json files or from --phoenix, not both")
    if (args.span_kind or args.span_name) and args.scope != "span":
        raise _Failed("--span-kind and --span-name apply to --scope span")
    try:
        evaluators = load_entries(args.entries, args.evaluators)
        sinks = _sinks(args.sink)
    except (EntryError, ConfigError) as exc:
        raise _Failed(str(exc)) from None
    return _report(_run(args, evaluators, sinks, ConfigError, StoreError), args, write_json)


def _sinks(specs: list[str]) -> list[Any] | None:
    if not specs:
        return None
    from evaltrace.worker.loading import build_sinks

    return build_sinks(specs)


def _run(args: argparse.Namespace, evaluators: list[Any], sinks: Any, config_error: Any, store_error: Any) -> Any:
    """The backfill's report.

    Raises:
        _Failed: A usage error (2), a store, source or engine that failed (1), an interrupt (130).
    """
    from rich.console import Console

    from evaltrace.backfill import BackfillStoreError, evaluate_traces
    from evaltrace.backfill.phoenix_source import PhoenixSourceError
    from evaltrace.cli.run import RichProgress

    console = Console(stderr=True)
    where = filter_from_args(args) if not args.otlp_json else None
    if args.phoenix and where is not None and where == type(where)():
        where = None
    with RichProgress(console, enabled=not args.no_progress and not args.dry_run and not args.json) as progress:
        started = [False]
        shown = [0]

        def advance(done: int, total: int) -> None:
            if not started[0]:
                progress.start("judging traces", total)
                started[0] = True
            # ``done`` counts selected traces: a session finished advances the bar by its selected traces.
            progress.advance(done - shown[0])
            shown[0] = done

        try:
            report = evaluate_traces(
                evaluators,
                store=args.store,
                where=where,
                trace_ids=args.trace,
                otlp_json=args.otlp_json,
                phoenix=args.phoenix,
                project=args.project,
                scope=args.scope,
                span_kinds=args.span_kind,
                span_name=args.span_name,
                sinks=sinks,
                concurrency=args.concurrency,
                timeout_s=args.timeout,
                resume=not args.restart,
                dry_run=args.dry_run,
                on_progress=advance,
                selection_key=_selection_key(args),
                engine=args.engine,
                address=args.address,
            )
        except config_error as exc:
            raise _Failed(str(exc)) from None
        except (store_error, BackfillStoreError, PhoenixSourceError) as exc:
            raise _Failed(str(exc), 1) from None
        except EvaltraceError as exc:  # the Ray engine: Ray missing, the cluster unreachable, a unit lost
            raise _Failed(str(exc), 1) from None
        except KeyboardInterrupt:
            raise _Failed(
                "interrupted: run the same command again to judge the rest (finished traces are kept)", 130, label=""
            ) from None
    return report


def _counted(report: Any) -> str:
    """What was selected and judged, in the units of the scopes run."""
    counted = f"{report.traces} trace(s) selected: {report.spans} span(s)"
    if report.scopes == ["session"]:
        counted = f"{report.traces} trace(s) selected: {report.sessions} session(s) of {report.spans} trace(s)"
    elif "session" in report.scopes:  # a pass per scope: trace (or span) evaluators, then session ones
        counted = f"{report.traces} trace(s) selected: {report.spans} span(s) or turn(s), {report.sessions} session(s)"
    if report.without_session:
        counted += f"; {report.without_session} trace(s) without a session.id skipped"
    return counted


SHOWN_REASONS = 10
"""Reasons printed per evaluator, most frequent first; the rest are summed on one line (``--json`` has them all)."""
SHOWN_REASON_LENGTH = 200
"""Characters of a reason printed (an evaluator's message may quote a whole answer); ``--json`` has it whole."""


def not_evaluated_reason_lines(by_evaluator: dict[str, dict[str, int]]) -> list[str]:
    """The not-evaluated evaluations under each evaluator, one line per reason with a count (none: no lines).

    At most :data:`SHOWN_REASONS` reasons per evaluator, the most frequent first, then one line counting the others:
    an evaluator whose message names what it judged has as many reasons as evaluations.
    """
    lines: list[str] = []
    for evaluator, reasons in sorted(by_evaluator.items()):
        counted = sorted(((r, n) for r, n in reasons.items() if n), key=lambda item: (-item[1], item[0]))
        if not counted:
            continue
        if not lines:
            lines.append("not evaluated, by evaluator and reason:")
        # An evaluator's reason may quote what it judged: shown inert (control characters escaped), on one line.
        lines.append(f"  {clean(evaluator, single_line=True)}: {sum(n for _, n in counted)} not_evaluated")
        lines += [f"    {_shown_reason(reason)}: {count}" for reason, count in counted[:SHOWN_REASONS]]
        others = counted[SHOWN_REASONS:]
        if others:
            lines.append(
                f"    ... and {len(others)} other reason(s): {sum(n for _, n in others)} evaluation(s) (all in --json)"
            )
    return lines


def _shown_reason(reason: str) -> str:
    shown = clean(reason, single_line=True)
    if len(shown) > SHOWN_REASON_LENGTH:
        shown = f"{shown[:SHOWN_REASON_LENGTH]}... ({len(reason)} characters)"
    return shown


def _report(report: Any, args: argparse.Namespace, write_json: Callable[[str], None]) -> int:
    if report.traces == 0:
        source = ", ".join(map(str, args.otlp_json)) if args.otlp_json else f"{args.store}"
        if args.phoenix:
            source = f"Phoenix project {args.project!r} at {args.phoenix}"
        raise _Failed(f"no traces in {source} match this selection; nothing to judge")
    if args.json:
        import dataclasses
        import json

        write_json(json.dumps(dataclasses.asdict(report), sort_keys=True))
        return _exit_status(report, args)
    counted = _counted(report)
    if report.dry_run:
        print(f"dry run: {counted}, {report.evaluations} evaluation(s) would run")
        if not report.judge_models:
            print("no evaluator calls a judge: no judge cost")
        elif report.estimated_cost_usd is not None:
            print(
                f"estimated judge cost: ${report.estimated_cost_usd:.4f} with {', '.join(report.judge_models)} "
                "(an estimate: the text a judge is sent / 4 as tokens, at genai-prices rates)"
            )
        if report.unpriced_models:
            print(f"no price known for judge model(s) {', '.join(report.unpriced_models)}: not in the estimate")
        return 0
    outcomes = ", ".join(f"{count} {outcome}" for outcome, count in sorted(report.outcomes.items())) or "none"
    print(f"{counted}; {report.evaluations} evaluation(s): {outcomes}")
    for line in not_evaluated_reason_lines(report.not_evaluated_by_evaluator):
        print(line)
    if report.undelivered:
        print(
            f"undelivered: {report.undelivered} score(s) a sink did not take (dead-lettered, or dropped without a file)"
        )
    if report.scores_rejected:
        print(
            f"rejected: {report.scores_rejected} score(s) their evaluator's ScoreConfig refused (not sent; see the"
            " warnings)"
        )
    if report.resumed:
        print(f"resumed: {report.resumed} trace(s) or session(s) were already judged by the interrupted run")
    return _exit_status(report, args)


def _exit_status(report: Any, args: argparse.Namespace) -> int:
    """1 when a budget stopped the backfill (said on stderr) or, with ``--fail-on-fail``, a verdict failed."""
    if report.dry_run:
        return 0
    if report.stopped is not None:
        print("stopped: a judge budget is spent; run the same command again later to judge the rest", file=sys.stderr)
        return 1
    return 1 if args.fail_on_fail and report.failed else 0
