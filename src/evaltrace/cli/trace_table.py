"""The table of ``evaltrace traces list``: one row per trace, fitted to the terminal (:mod:`evaltrace.cli.tables`).

Trace ids are printed whole when the table fits with them; otherwise as the shortest unique prefixes of at
least 12 digits, which ``traces show`` and ``report`` accept. Optional columns (session, user, service, spans,
tokens, cost) are left out when no trace has them, and dropped in that order when the terminal is narrow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from evaltrace.cli._untrusted import plain
from evaltrace.cli.format import format_count, format_duration_ms, format_money, unique_prefixes
from evaltrace.cli.tables import Cell, Column, fit_table, print_fitted

__all__ = ["render_trace_list"]

_COLUMNS = (
    Column("trace id"),
    Column("started (UTC)"),
    Column("root", fold=True, min_width=12),
    Column("service", fold=True, min_width=12, drop=3),
    Column("session", drop=1),
    Column("user", drop=2),
    Column("duration", justify="right"),
    Column("spans", justify="right", drop=4),
    Column("tokens", justify="right", drop=5),
    Column("cost", justify="right", drop=6),
    Column("evaluations", fold=True, min_width=13),
    Column("status"),
)
_OUTCOME_STYLES = {"pass": "green", "fail": "red", "error": "bold yellow", "not_evaluated": "dim", "pending": "dim"}


def _number(summary: Any, name: str) -> float | None:
    """A numeric field of the summary; None when the store has no such field or it is 0 (nothing recorded)."""
    value = getattr(summary, name, None)  # older stores' summaries lack the field
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value else None


def _tokens(summary: Any) -> str:
    tokens_in, tokens_out = _number(summary, "input_tokens"), _number(summary, "output_tokens")
    if tokens_in is None and tokens_out is None:
        return ""
    return f"{format_count(tokens_in) or '-'}→{format_count(tokens_out) or '-'}"


def _evaluations(summary: Any) -> Text:
    counts = getattr(summary, "evaluations", None)
    text = Text()
    if not isinstance(counts, dict):
        return text
    for outcome, style in _OUTCOME_STYLES.items():
        count = counts.get(outcome)
        if isinstance(count, int) and count:
            text.append((", " if text else "") + f"{count} {outcome.replace('_', ' ')}", style=style)
    return text


def _row(summary: Any, shown_id: str) -> list[Cell]:
    started = dt.datetime.fromtimestamp(summary.start_time / 1e9, dt.UTC).strftime(
        "%Y-%m-%d %H:%M"
    )  # minutes: 3 cells more for data at 80 columns
    session, user = getattr(summary, "session_id", None), getattr(summary, "user_id", None)
    return [
        Text(shown_id),
        started,
        *(plain(recorded or "", single_line=True) for recorded in (summary.root_name, summary.service_name)),
        *(plain(recorded or "", single_line=True) for recorded in (session, user)),
        format_duration_ms(summary.duration_ms),
        str(summary.span_count),
        _tokens(summary),
        format_money(_number(summary, "cost_usd")),
        _evaluations(summary),
        Text("ERROR", style="red") if summary.error else Text("ok", style="green"),
    ]


def render_trace_list(console: Console, summaries: Sequence[Any], title: str) -> None:
    """Print ``summaries`` (``TraceSummary`` rows, newest first) as a table that fits ``console.width``.

    Args:
        console: Where to print.
        summaries: The traces to list.
        title: The table's title (recorded text is escaped).
    """
    ids = [s.trace_id for s in summaries]
    fitted = fit_table(console.width, _COLUMNS, [_row(s, s.trace_id) for s in summaries], plain(title))
    short = False
    if fitted.hidden or fitted.width > console.width:
        # Whole ids cost 20 cells a row: prefixes first, then columns.
        prefixes = unique_prefixes(ids)
        rows = [_row(s, prefixes[s.trace_id]) for s in summaries]
        fitted = fit_table(console.width, _COLUMNS, rows, plain(title))
        short = True
    print_fitted(console, fitted)
    if short:
        example = unique_prefixes(ids)[ids[0]]
        console.print(Text(f"ids are unique prefixes: evaltrace traces show {example}", style="dim"))
