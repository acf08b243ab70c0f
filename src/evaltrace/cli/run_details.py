"""The terminal's reading of a run beyond its tables: cases that did not pass, what changed, insights, traces.

Everything printed here is also in summary.yaml (``failed_cases``, ``eval_error_cases``, ``not_evaluated_cases``,
``comparison.deltas[].changes``, ``insights``) except the per-case trace lines, which come from traces.jsonl.
User text (reasons, errors, case ids) is printed as plain text, never read as rich markup, with terminal control
characters shown escaped (:mod:`evaltrace.cli._untrusted`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.wrap import KEEP_TOGETHER, wrap_words
from evaltrace.runner.findings import CellKey
from evaltrace.schema import ComparisonReport, RunSummary
from evaltrace.schema.runs import CaseChange, CaseReport, EvaluatorVerdict, RunInsightsSummary

__all__ = ["MAX_LINES", "render_details"]

MAX_LINES = 40
"""Cases listed per group before the rest is left to summary.yaml."""
_REASON_CHARS = 160


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def _verdict(v: EvaluatorVerdict | None) -> str:
    if v is None:
        return "unknown"
    word = v.outcome.replace("_", " ")
    if v.error_type:
        word += f" ({v.error_type})"
    if v.score is not None:
        word += f" {v.score:.2f}"
    return f"{word}: {_short(v.reason)}" if v.reason else word


def _where(line: int | None, traces: str) -> str:
    # Short: the full path is printed once, with the trace listing. One piece: it is what the reader copies.
    return f"  [trace{KEEP_TOGETHER}{Path(traces).name}:{line}]" if line is not None else ""


_HANG = 4
"""Continuation lines of a case line start this far under its text, so the case ids stand out."""


def print_wrapped(console: Console, text: str, style: str = "") -> None:
    """Print one line of recorded text wrapped between words at the console's width, continuations indented.

    rich (and a terminal, with ``soft_wrap``) would break inside a word: ``ERROR(exce`` / ``ption)``.
    """
    for line in wrap_words(clean(text, single_line=True), console.width, _HANG):
        console.print(Text(line, style=style), soft_wrap=True, highlight=False)


def _print_reports(console: Console, title: str, style: str, reports: Sequence[CaseReport], traces: str) -> None:
    if not reports:
        return
    console.print(plain(f"{title} ({len(reports)}):", style=style))
    for report in reports[:MAX_LINES]:
        why = [f"system {_short(report.system_error)}"] if report.system_error else []
        why += [f"{v.evaluator} {_verdict(v)}" for v in report.evaluators]
        if not why and report.outcome == "not_evaluated":
            why = ["no evaluator applies"]
        line = f"  {report.case_id} × {report.variant}: {'; '.join(why)}{_where(report.trace_line, traces)}"
        print_wrapped(console, line)
    if len(reports) > MAX_LINES:
        console.print(plain(f"  ... {len(reports) - MAX_LINES} more in summary.yaml"))


def _print_change(console: Console, variant: str, change: CaseChange, traces: str) -> None:
    parts = [f"{change.before} -> {change.now}"]
    if change.system_error:
        parts.append(f"system {_short(change.system_error)}")
    parts += [f"{e.evaluator}: {_verdict(e.before)} => {_verdict(e.now)}" for e in change.evaluators]
    text = f"  {change.kind} {change.case_id} in {variant}: {'; '.join(parts)}{_where(change.trace_line, traces)}"
    print_wrapped(console, text)


def _print_changes(console: Console, summary: RunSummary, traces: str) -> None:
    if summary.comparison is not None:
        print_changes(console, summary.comparison, traces)


def print_changes(console: Console, report: ComparisonReport, traces: str) -> None:
    """Print what changed for each regressed, improved or unverified case of ``report`` (nothing if none moved)."""
    if not any(d.changes for d in report.deltas):
        return
    console.print(plain(f"What changed against {report.baseline} ({report.kind}):", style="bold"))
    for delta in report.deltas:
        for change in delta.changes[:MAX_LINES]:
            _print_change(console, delta.variant, change, traces)
        if len(delta.changes) > MAX_LINES:
            console.print(plain(f"  ... {len(delta.changes) - MAX_LINES} more in summary.yaml"))


def _print_insights(console: Console, insights: RunInsightsSummary | None) -> None:
    if insights is None:
        return
    facts = [
        ("best variant", insights.best_variant),
        ("hardest case", f"{insights.hardest_case} (failed on {insights.hardest_case_failures} variant(s))"
         if insights.hardest_case else None),
        ("least accurate", insights.least_accurate_variant),
        ("fastest", insights.fastest_variant),
        ("slowest", insights.slowest_variant),
        ("cheapest", insights.cheapest_variant),
        ("most expensive", insights.most_expensive_variant),
        ("best retrieval", insights.best_retrieval_variant),
        ("worst retrieval", insights.worst_retrieval_variant),
    ]  # fmt: skip
    shown = [f"{label} {value}" for label, value in facts if value]
    if shown:
        print_wrapped(console, "Insights: " + ", ".join(shown), style="bold")
    for e in insights.evaluators:
        if e.hardest_case or e.best_variant:
            hardest = f", hardest case {e.hardest_case} ({e.hardest_case_failures})" if e.hardest_case else ""
            print_wrapped(console, f"  {e.evaluator}: best variant {e.best_variant or '-'}{hardest}")
    for problem in insights.problems:
        print_wrapped(console, f"  problem: {problem}", style="yellow")
    for line in insights.explanations:
        print_wrapped(console, f"  {line}")
    for variant, dimensions in insights.dimension_averages.items():
        averages = ", ".join(f"{name} {value:.2f}" for name, value in dimensions.items())
        print_wrapped(console, f"  rubric dimension averages of {variant}: {averages}")
    if insights.complexity_distribution:
        counts = ", ".join(f"{name} {n}" for name, n in insights.complexity_distribution.items())
        print_wrapped(console, f"  cases by complexity: {counts}")


def _print_traces(
    console: Console, locations: Mapping[CellKey, int], traces: str, run_id: str, first_shown: int | None
) -> None:
    if not locations:
        return
    by_case: dict[str, list[str]] = {}
    for (variant, case_id), line in sorted(locations.items(), key=lambda item: item[1]):
        by_case.setdefault(case_id, []).append(f"{variant}:{line}")
    console.print(plain(f"Traces: {traces}, line per case and variant", style="bold"), soft_wrap=True)
    for case_id, cells in list(by_case.items())[:MAX_LINES]:
        print_wrapped(console, f"  {case_id}  {'  '.join(cells)}")
    if len(by_case) > MAX_LINES:
        console.print(plain(f"  ... {len(by_case) - MAX_LINES} more cases"))
    print_wrapped(console, f"Open them all: evaltrace report {run_id} -o run.html")
    # A line N above is this command's N, and run.html#t-N: one numbering everywhere.
    shown = first_shown if first_shown is not None else min(locations.values())
    print_wrapped(console, f"Open one here: evaltrace traces show --run {run_id} {shown} --details")


def render_details(
    console: Console, summary: RunSummary, traces_path: Path, locations: Mapping[CellKey, int] | None = None
) -> None:
    """Print the selection, the cases that did not pass, the changes against the baseline, insights and traces.

    Args:
        console: Where to print.
        summary: The run's summary (with the findings fields filled).
        traces_path: The run's traces.jsonl (named in each trace location).
        locations: Line of each (variant, case) in traces.jsonl; omitted: the trace listing is left out.
    """
    traces = str(traces_path)
    if summary.selection is not None:
        chosen = summary.selection
        print_wrapped(console, f"Selection: {len(chosen.selected)} of {chosen.cases_total} cases")
    _print_reports(console, "Failed", "bold red", summary.failed_cases, traces)
    _print_reports(console, "Evaluation errors (no verdict)", "bold dark_orange", summary.eval_error_cases, traces)
    _print_reports(console, "Not evaluated", "bold yellow", summary.not_evaluated_cases, traces)
    _print_changes(console, summary, traces)
    _print_insights(console, summary.insights)
    listed = [*summary.failed_cases, *summary.eval_error_cases, *summary.not_evaluated_cases]
    first = next((report.trace_line for report in listed if report.trace_line is not None), None)
    _print_traces(console, locations or {}, traces, summary.run_id, first)
