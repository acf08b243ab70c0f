"""The table of ``evaltrace traces list``: one row per trace, fitted to the terminal (:mod:`evaltrace.cli.tables`).

Trace ids are printed whole when the table fits with them; otherwise as the shortest unique prefixes of at
least 12 digits, which ``traces show`` and ``report`` accept. Optional columns (session, user, service, spans,
tokens, cost) are left out when no trace has them, and dropped in that order when the terminal is narrow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from evaltrace.cli._untrusted import clean
from evaltrace.cli.format import format_count, format_duration_ms, format_money, unique_prefixes
from evaltrace.cli.list_output import rich_text
from evaltrace.cli.plain_table import Styled, draw_table, drawable, print_styled
from evaltrace.cli.table_layout import Column, hidden_text, lay_out
from evaltrace.cli.terminal import Terminal, detect

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["draw_trace_list", "print_trace_list", "render_trace_list"]

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


def _evaluations(summary: Any) -> Styled:
    counts = getattr(summary, "evaluations", None)
    text = Styled("")
    if not isinstance(counts, dict):
        return text
    for outcome, style in _OUTCOME_STYLES.items():
        count = counts.get(outcome)
        if isinstance(count, int) and count:
            text.append((", " if text.text else "") + f"{count} {outcome.replace('_', ' ')}", style=style)
    return text


def _row(summary: Any, shown_id: str) -> list[Styled]:
    started = dt.datetime.fromtimestamp(summary.start_time / 1e9, dt.UTC).strftime(
        "%Y-%m-%d %H:%M"
    )  # minutes: 3 cells more for data at 80 columns
    session, user = getattr(summary, "session_id", None), getattr(summary, "user_id", None)
    recorded = (summary.root_name, summary.service_name, session, user)
    return [
        Styled(shown_id),
        Styled(started),
        *(Styled(clean(value or "", single_line=True)) for value in recorded),
        Styled(format_duration_ms(summary.duration_ms)),
        Styled(str(summary.span_count)),
        Styled(_tokens(summary)),
        Styled(format_money(_number(summary, "cost_usd"))),
        _evaluations(summary),
        Styled("ERROR", "red") if summary.error else Styled("ok", "green"),
    ]


def _rows(width: int, summaries: Sequence[Any], cell_len: Callable[[str], int]) -> tuple[list[list[Styled]], bool]:
    """The rows to draw at ``width``, and whether their ids are shortened.

    Trace ids are whole when the table fits with them; else (whole ids cost 20 cells a row) unique prefixes,
    before any column is dropped.
    """
    rows = [_row(s, s.trace_id) for s in summaries]
    layout = lay_out(width, _COLUMNS, [[cell.text for cell in row] for row in rows], cell_len)
    if not layout.hidden and layout.needed <= width:
        return rows, False
    prefixes = unique_prefixes([s.trace_id for s in summaries])
    return [_row(s, prefixes[s.trace_id]) for s in summaries], True


def _ids_note(summaries: Sequence[Any]) -> str:
    ids = [s.trace_id for s in summaries]
    return f"ids are unique prefixes: evaltrace traces show {unique_prefixes(ids)[ids[0]]}"


def render_trace_list(console: Console, summaries: Sequence[Any], title: str) -> None:
    """Print ``summaries`` (``TraceSummary`` rows, newest first) with rich, as a table that fits ``console.width``.

    Args:
        console: Where to print.
        summaries: The traces to list.
        title: The table's title (recorded text is escaped).
    """
    from rich.cells import cell_len
    from rich.text import Text

    from evaltrace.cli._untrusted import plain
    from evaltrace.cli.tables import fit_table, print_fitted

    rows, short = _rows(console.width, summaries, cell_len)
    cells = [[rich_text(cell) for cell in row] for row in rows]
    print_fitted(console, fit_table(console.width, _COLUMNS, cells, plain(title)))
    if short:
        console.print(Text(_ids_note(summaries), style="dim"))


def draw_trace_list(terminal: Terminal, summaries: Sequence[Any], title: str) -> bool:
    """Print what :func:`render_trace_list` prints, without rich; False (nothing printed) where it cannot.

    It cannot when a cell holds a character rich may count as other than one cell, or when the table does not
    fit the terminal even laid out (:func:`evaltrace.cli.plain_table.draw_table`).

    Args:
        terminal: Where and how to write (:func:`evaltrace.cli.terminal.detect`).
        summaries: The traces to list.
        title: The table's title (recorded text is escaped).
    """
    rows, short = _rows(terminal.width, summaries, len)
    heading = Styled(clean(title))
    if not drawable([heading, *(cell for row in rows for cell in row)]):
        return False
    hidden = draw_table(terminal, _COLUMNS, rows, heading)
    if hidden is None:
        return False
    note = hidden_text(hidden)
    if note is not None:
        print_styled(terminal, Styled(note, "dim"))
    if short:
        print_styled(terminal, Styled(_ids_note(summaries), "dim"))
    return True


def print_trace_list(summaries: Sequence[Any], title: str) -> None:
    """Print ``summaries`` on standard output as :func:`render_trace_list` does, without rich where it can.

    The table is drawn by :func:`draw_trace_list` when the terminal's rules and every cell are ones it draws
    exactly as rich would (start-up and drawing cost a fraction, issue 28); otherwise by rich.

    Args:
        summaries: The traces to list.
        title: The table's title (recorded text is escaped).
    """
    terminal = detect()
    if terminal is not None and draw_trace_list(terminal, summaries, title):
        return
    from rich.console import Console

    render_trace_list(Console(), summaries, title)
