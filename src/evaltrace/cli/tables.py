"""Tables that fit the terminal: nothing cut to "…", empty columns hidden, optional columns dropped when narrow.

rich shrinks a table that is too wide by wrapping its wrappable columns and then, as a last resort, by cutting
every column with an ellipsis. The second step is what made ids and durations unreadable at 80 columns (CI
logs, pipes). Here a column is either *folding* (names, reasons: long words fold onto the next line, never cut)
or *fixed* (ids, numbers, durations: always shown whole). When the fixed columns and the folding columns'
minimum widths do not fit, optional columns are dropped, least useful first, and the caller says which ones
(see :func:`hidden_note`), so nothing disappears unannounced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evaltrace.cli.table_layout import Column, hidden_text, lay_out, measure

__all__ = ["Cell", "Column", "FittedTable", "fit_table", "hidden_note", "print_fitted", "required_width"]

Cell = Text | str
"""A table cell: a ``Text`` (recorded text goes through :func:`evaltrace.cli._untrusted.plain`) or rich markup."""

_GAP = 2
"""Cells between two columns with the style of :func:`_new_table`: one padding cell and one blank separator."""


def _plain(cell: Cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if "[" not in cell and cell.count(":") < 2:
        return cell  # no tag, escape or :emoji: code: the markup is its own text (parsing it cost ~5% of a list)
    return Text.from_markup(cell).plain


def required_width(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], natural: bool = False) -> int:
    """Terminal cells the table needs.

    Args:
        columns: The columns shown.
        rows: Their cells.
        natural: Width with nothing folded; else with each folding column at its ``min_width``.
    """
    if not columns:
        return 0
    widths = (measure(col, [_plain(row[i]) for row in rows], cell_len)[natural] for i, col in enumerate(columns))
    return sum(widths) + _GAP * (len(columns) - 1)


@dataclass
class FittedTable:
    """A table laid out for a terminal width, and what had to go."""

    table: Table
    title: Text | str | None
    """Printed above the table by :func:`print_fitted`, wrapped at the terminal's width, not the table's."""
    hidden: list[str]
    """Headers of the non-empty columns dropped for lack of width, in the order they were dropped."""
    width: int
    """Cells the table needs with its folding columns folded to their minimum (:func:`required_width`)."""
    natural_width: int
    """Cells it would take with nothing folded."""
    fold_widths: dict[str, int] = field(default_factory=dict)
    """Width of each folding column by header when the table folds (empty when every cell fits on one line)."""


def _new_table() -> Table:
    # No outer border and one blank between columns: every cell saved goes to the data (80 columns is common).
    # evaltrace.cli.plain_table draws exactly this style without rich: keep the two in step.
    return Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        expand=False,
    )


def fit_table(
    width: int, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], title: Text | str | None = None
) -> FittedTable:
    """Build a table for a terminal ``width`` cells wide.

    Columns whose cells are all empty are left out. While the table needs more than ``width``, the optional
    column with the lowest ``drop`` goes. Fixed columns are never wrapped nor cut; folding ones fold
    (:func:`evaltrace.cli.table_layout.lay_out`).

    Args:
        width: The console's width.
        columns: The columns, in display order.
        rows: One sequence of cells per row, in the order of ``columns``.
        title: Printed above the table by :func:`print_fitted`.

    Returns:
        The table, the columns dropped, and the width it needs.
    """
    # Each cell's plain text is worked out once (parsing markup per dropping round cost ~35 ms for 50 rows).
    layout = lay_out(width, columns, [[_plain(cell) for cell in row] for row in rows], cell_len)
    table = _new_table()
    for i in layout.shown:
        col = columns[i]
        table.add_column(
            Text(col.header),  # never read as markup: a header may be a recorded name (a variant)
            justify=col.justify,
            no_wrap=not col.fold,
            overflow="fold",
            min_width=layout.widths[i],  # else rich squeezes a folding column down to a letter or two
            width=layout.widths[i] if layout.fixed and col.fold else None,
        )
    for row in rows:
        table.add_row(*(row[i] for i in layout.shown))
    folds = {columns[i].header: layout.widths[i] for i in layout.shown if columns[i].fold} if layout.fixed else {}
    return FittedTable(table, title, layout.hidden, layout.needed, layout.natural, folds)


def hidden_note(hidden: Sequence[str]) -> Text | None:
    """``not shown at this width: kind, timeline (wider terminal: COLUMNS=200)``; None when nothing was hidden."""
    text = hidden_text(hidden)
    return None if text is None else Text(text, style="dim")


def print_fitted(console: Console, fitted: FittedTable) -> None:
    """Print the title, the table, and which columns the width left out."""
    if fitted.title is not None:
        console.print(fitted.title, highlight=False)
    console.print(fitted.table)
    note = hidden_note(fitted.hidden)
    if note is not None:
        console.print(note)
