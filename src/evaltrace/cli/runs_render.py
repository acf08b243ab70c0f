"""Rich rendering of a run's summary and of a comparison (split from :mod:`evaltrace.cli.runs`)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.format import format_duration_ms, format_money
from evaltrace.cli.run_tables import COMPARISON_COLUMNS, COST_COLUMNS, SUMMARY_COLUMNS, print_table, signed_duration
from evaltrace.cli.tables import Cell, Column
from evaltrace.schema import ComparisonReport, EvaluatorVariantRollup, RunSummary, VariantSummary


def _pct(value: float | None) -> str:
    return NOT_EVALUATED if value is None else f"{value * 100:.1f}%"  # None: nothing judged, not 0%


def _signed_pct(value: float) -> str:
    colour = "green" if value > 0 else "red" if value < 0 else "white"
    return f"[{colour}]{value * 100:+.1f} pts[/{colour}]"


NOT_EVALUATED = "[yellow]not evaluated[/yellow]"


def _count(value: int | None, colour: str) -> str:
    if value is None:
        return "-"  # a summary written before the count existed
    return f"[{colour}]{value}[/{colour}]" if value else "0"


def _variant_rate(v: VariantSummary) -> str:
    if v.cases_failed is not None and v.cases_passed + v.cases_failed == 0:
        return NOT_EVALUATED  # no case judged: 0/0 is not 0% and certainly not 100%
    return _pct(v.pass_rate)


def _rollup_cell(cell: EvaluatorVariantRollup | None) -> str:
    if cell is None:
        return "n/a"
    if cell.passed is None or cell.failed is None:
        return _pct(cell.pass_rate)  # a summary written before the counts existed
    judged = cell.passed + cell.failed
    parts = [f"{_pct(cell.pass_rate)} ({cell.passed}/{judged})"] if judged else []
    if cell.errors:
        parts.append(f"[red]{cell.errors} error{'s' if cell.errors > 1 else ''}[/red]")
    if cell.not_evaluated:
        parts.append(f"[yellow]{cell.not_evaluated} not evaluated[/yellow]")
    return ", ".join(parts) or "n/a"


def _fail_cell(v: VariantSummary) -> str:
    failed = _count(v.cases_failed, "red")
    # System errors (the system raised or timed out) are failures of the system: they count among "fail".
    return f"{failed} ({v.cases_errored} system)" if v.cases_errored and v.cases_failed is not None else failed


def render_summary(console: Console, summary: RunSummary, run_path: Path | None = None) -> None:
    """Print a run's outcomes per variant (pass / fail / error / not evaluated), costs, and evaluator figures."""
    outcome_rows: list[list[Cell]] = []
    cost_rows: list[list[Cell]] = []
    for v in summary.variants:
        tokens = "-"
        if v.avg_tokens_input is not None or v.avg_tokens_output is not None:
            tokens = f"{v.avg_tokens_input or 0:.0f} / {v.avg_tokens_output or 0:.0f}"
        cost = format_money(v.avg_cost_usd) or "-"
        outcome_rows.append([
            plain(v.name, single_line=True),
            str(v.cases_total),
            str(v.cases_passed),
            _fail_cell(v) if v.cases_failed is not None else f"[red]{v.cases_errored}[/red] system errors",
            _count(v.cases_eval_errors, "red"),
            _count(v.cases_not_evaluated, "yellow"),
            _variant_rate(v),
        ])  # fmt: skip
        cost_rows.append([plain(v.name, single_line=True), format_duration_ms(v.avg_latency_ms), cost, tokens])
    title = plain(f"Run {summary.run_id}" + (f"  ({run_path})" if run_path else ""))
    print_table(console, SUMMARY_COLUMNS, outcome_rows, title)
    console.print("pass rate = pass / (pass + fail): an error (evaluation failed) or not evaluated is neither")
    for v in summary.variants:
        if v.not_evaluated_reasons:
            reasons = "; ".join(f"{reason} ({n})" for reason, n in v.not_evaluated_reasons.items())
            console.print(
                Text.assemble(("not evaluated", "yellow"), clean(f" in {v.name}: {reasons}")), highlight=False
            )
    if summary.by_evaluator:
        names = [v.name for v in summary.variants]
        columns = [Column("evaluator", fold=True), *(Column(clean(n, single_line=True), fold=True) for n in names)]
        rows: list[list[Cell]] = [
            [plain(r.evaluator, single_line=True), *(_rollup_cell(r.by_variant.get(n)) for n in names)]
            for r in summary.by_evaluator
        ]
        heading = "Evaluators: pass rate over judged results (errors and skips counted apart)"
        print_table(console, columns, rows, heading)
    print_table(console, COST_COLUMNS, cost_rows, "Latency, cost and tokens (averages per case)")
    if summary.comparison is not None:
        render_comparison(console, summary.comparison)


def render_comparison(console: Console, report: ComparisonReport) -> None:
    """Print the deltas of a comparison, then the regressed, improved and unverified case ids in full."""
    what = "baseline variant" if report.kind == "ad_hoc" else "baseline run"
    rows: list[list[Cell]] = []
    for delta in report.deltas:
        rows.append([
            plain(delta.variant, single_line=True),
            NOT_EVALUATED if delta.not_evaluated else _signed_pct(delta.pass_rate_delta),
            signed_duration(delta.avg_latency_delta_ms),
            _count(len(delta.regressions), "red"),
            _count(len(delta.improvements), "green"),
            _count(len(delta.unverified), "yellow"),
        ])  # fmt: skip
    print_table(console, COMPARISON_COLUMNS, rows, plain(f"Compared with {what} {report.baseline} ({report.kind})"))
    # Case ids on lines of their own, never cut by a narrow table: they are what the reader acts on.
    for delta in report.deltas:
        for label, ids, colour in (
            ("regressed", delta.regressions, "red"),
            ("improved", delta.improvements, "green"),
            ("unverified (passed on the baseline, no verdict now)", delta.unverified, "yellow"),
        ):
            if ids:
                line = Text.assemble((label, colour), clean(f" in {delta.variant}: {', '.join(ids)}"))
                console.print(line, soft_wrap=True)
    console.print(
        f"regressions: {report.regressions_count or 0}, improvements: {report.improvements_count or 0},"
        f" unverified: {report.unverified_count or 0}"
    )
