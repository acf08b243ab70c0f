"""``evaltrace traces show --run RUN REF``: one cell of an offline run, read from its traces.jsonl.

``REF`` is what the run summary prints: a line of traces.jsonl (``19`` or ``traces.jsonl:19``, the same cell
as ``run.html#t-19``) or ``CASE/VARIANT``. The cell is shown like a stored trace: a header, the span tree with
timing bars from the timeline the run keeps (:mod:`evaltrace.runner.span_timeline`), its evaluations and
answer, and with ``--details`` the conversation as chat bubbles (:mod:`evaltrace.cli.span_details`).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.format import format_count, format_duration_ms, format_money
from evaltrace.cli.run_details import print_wrapped
from evaltrace.cli.runs import EXIT_FAILED, print_error
from evaltrace.cli.span_details import message_lines
from evaltrace.cli.tables import Cell, Column, fit_table, print_fitted
from evaltrace.cli.waterfall import _KIND_COLOURS
from evaltrace.cli.wrap import facts_line, shorten_middle
from evaltrace.exceptions import EvaltraceError
from evaltrace.report.chat import chat_messages
from evaltrace.runner.config import DEFAULT_RUNS_DIR
from evaltrace.runner.findings import CellKey, trace_locations, verdict_of
from evaltrace.runner.rundir import TRACES_FILE, RunDirectory, resolve_run
from evaltrace.runner.span_timeline import TimelineSpan, read_timeline
from evaltrace.schema import Trace

__all__ = ["show_run_trace"]

_LINE = re.compile(r"(?:.*:)?(\d+)")
_BAR_MIN, _BAR_MAX = 10, 40
_NAME_MIN = 24


class _ReferenceError(ValueError):
    """``REF`` names no cell of the run."""


def _find(reference: str, locations: dict[CellKey, int], traces: Path) -> int:
    """The traces.jsonl line ``reference`` names."""
    lines = {line: key for key, line in locations.items()}
    number = _LINE.fullmatch(reference)
    if number is not None:
        line = int(number.group(1))
        if line not in lines:
            raise _ReferenceError(
                f"no trace on line {line} of {traces} (its traces are on lines 1-{max(lines, default=0)})"
            )
        return line
    case_id, slash, variant = reference.rpartition("/")
    if slash and (variant, case_id) in locations:
        return locations[variant, case_id]
    first = min(locations, key=locations.__getitem__, default=("VARIANT", "CASE"))
    raise _ReferenceError(
        f"no cell {reference!r} in {traces}: give a line (19 or traces.jsonl:19) or CASE/VARIANT,"
        f" e.g. {first[1]}/{first[0]}"
    )


def _bar(row: TimelineSpan, total: float, width: int) -> Text:
    begin = min(int(row.start_ms / total * width), width - 1)
    length = min(max(1, int(row.duration_ms / total * width)), width - begin)
    return Text(" " * begin + "█" * length + " " * (width - begin - length), style=_KIND_COLOURS.get(row.kind, "white"))


def _tree(console: Console, timeline: list[TimelineSpan]) -> None:
    total = max((r.start_ms + r.duration_ms for r in timeline), default=0.0) or 1.0
    indents = ["  " * r.depth + ("└ " if r.depth else "") for r in timeline]
    kinds = max(len("kind"), *(len(r.kind) for r in timeline))
    durations = max(len("duration"), *(len(format_duration_ms(r.duration_ms)) for r in timeline))
    natural = max(
        len(i) + len(clean(r.name, single_line=True)) + (2 if r.error else 0)
        for i, r in zip(indents, timeline, strict=True)
    )
    room = console.width - kinds - durations - 6  # three gaps of two cells
    bar = min(_BAR_MAX, room - max(_NAME_MIN, min(natural, room - _BAR_MIN)))
    name_width = room - bar if bar >= _BAR_MIN else room + 2
    rows: list[list[Cell]] = []
    for indent, row in zip(indents, timeline, strict=True):
        mark = " ✗" if row.error else ""
        name = Text(
            indent + shorten_middle(clean(row.name, single_line=True), max(4, name_width - len(indent) - len(mark)))
        )
        if mark:
            name.append(mark, style="bold red")
        cells: list[Cell] = [
            name,
            plain(row.kind, _KIND_COLOURS.get(row.kind, "white")),
            format_duration_ms(row.duration_ms),
        ]
        rows.append([*cells, _bar(row, total, bar)] if bar >= _BAR_MIN else cells)
    columns = [Column("span"), Column("kind"), Column("duration", justify="right")]
    columns += [Column("timeline")] if bar >= _BAR_MIN else []
    print_fitted(console, fit_table(console.width, columns, rows))


def _print_cell(console: Console, run: RunDirectory, trace: Trace, line: int, details: bool) -> None:
    console.print(plain(f"{trace.case_id} × {trace.variant_name}", "bold"))
    facts = [f"run {run.run_id}", f"{TRACES_FILE}:{line}", format_duration_ms(trace.latency_ms)]
    m = trace.metrics
    if m.token_input is not None or m.token_output is not None:
        facts.append(f"tokens {format_count(m.token_input) or '-'} in · {format_count(m.token_output) or '-'} out")
    if m.cost_usd is not None:
        facts.append(f"cost {format_money(m.cost_usd)}")
    if isinstance(trace.extra.get("trace_id"), str):
        facts.append(f"trace {trace.extra['trace_id']}")
    for wrapped in facts_line(facts, console.width):
        console.print(plain(wrapped), soft_wrap=True)
    timeline = read_timeline(trace.extra)
    if timeline:
        _tree(console, timeline)
    else:
        console.print(plain("no span timing in this run (recorded by runs of a newer evaltrace)", "dim"))
    results = [r for r in run.read_results() if (r.case_id, r.variant_name) == (trace.case_id, trace.variant_name)]
    for verdict in map(verdict_of, results):
        word = verdict.outcome.replace("_", " ") + (f" ({verdict.error_type})" if verdict.error_type else "")
        score = f" {verdict.score:.2f}" if verdict.score is not None else ""
        reason = f": {verdict.reason}" if verdict.reason else ""
        print_wrapped(console, f"evaluation {verdict.evaluator} {word}{score}{reason}")
    if trace.error is not None:
        print_wrapped(console, f"system error {trace.error.type}: {trace.error.message}", "red")
    else:
        console.print(plain("answer", "bold"))
        console.print(Padding(plain(trace.output.final_answer or "(none)"), (0, 0, 0, 2)))
    if details:
        console.print(plain("messages", "bold underline"))
        for message in chat_messages(trace.messages):
            for shown in message_lines(message):
                console.print(shown)
    report = f"in the run report: run.html#t-{line} (evaltrace report {run.run_id} -o run.html)"
    print_wrapped(console, report, "dim")


def show_run_trace(args: argparse.Namespace) -> int:
    """Print one cell of the run ``args.run``; exit 2 for a run that cannot be found, 1 for a cell that is not in it."""
    console = Console()
    try:
        run = RunDirectory(resolve_run(args.run, args.runs_dir or Path(DEFAULT_RUNS_DIR), argument="--run"))
    except EvaltraceError as exc:
        return print_error(exc)
    traces = run.path / TRACES_FILE
    try:
        line = _find(args.trace_id, trace_locations(traces), traces)
        raw = traces.read_text(encoding="utf-8").splitlines()[line - 1]
        trace = Trace.model_validate(json.loads(raw))
    except _ReferenceError as exc:
        console.print(plain(f"error: {exc}", "red"))
        return EXIT_FAILED
    except (OSError, ValueError) as exc:
        console.print(plain(f"error: cannot read line of {traces}: {exc}", "red"))
        return EXIT_FAILED
    _print_cell(console, run, trace, line, args.details)
    return 0
