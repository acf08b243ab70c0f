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
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

__all__ = ["Cell", "Column", "FittedTable", "fit_table", "hidden_note", "print_fitted", "required_width"]

Cell = Text | str
"""A table cell: a ``Text`` (recorded text goes through :func:`evaltrace.cli._untrusted.plain`) or rich markup."""

_GAP = 2
"""Cells between two columns with the style of :func:`_new_table`: one padding cell and one blank separator."""


@dataclass(frozen=True)
class Column:
    """How one column behaves when the terminal is narrow.

    Attributes:
        header: The column's title (plain text, never read as markup; recorded text already ``clean``-ed).
        justify: ``"left"`` or ``"right"`` (numbers).
        fold: True for text that may take several lines (names, reasons); False for values shown whole.
        min_width: Narrowest useful width of a folding column (a fixed column is as wide as its widest cell).
        drop: Order in which optional columns go when the table does not fit (lowest first); None: never dropped.
        keep_empty: Show the column even when every cell is empty.
    """

    header: str
    justify: JustifyMethod = "left"
    fold: bool = False
    min_width: int = 10
    drop: int | None = None
    keep_empty: bool = False


def _plain(cell: Cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if "[" not in cell and cell.count(":") < 2:
        return cell  # no tag, escape or :emoji: code: the markup is its own text (parsing it cost ~5% of a list)
    return Text.from_markup(cell).plain


_LONGEST_WORD = 32
"""A folding column is made wide enough for its longest word up to this, so words are not split mid-way."""


def _measure(column: Column, texts: Sequence[str]) -> tuple[int, int]:
    """``(needed, natural)`` of ``column`` over the plain ``texts`` of its cells, in one pass.

    ``natural`` is the widest line (the header included); ``needed`` is that for a fixed column, and for a
    folding one ``min_width``, or its longest word when longer (up to :data:`_LONGEST_WORD`), never more than
    its widest line.
    """
    header = cell_len(column.header)
    widest = longest_word = 0
    for text in texts:
        for line in text.splitlines():
            widest = max(widest, cell_len(line))
            if column.fold:
                longest_word = max(longest_word, max((cell_len(word) for word in line.split()), default=0))
    widest = max(widest, header)
    if not column.fold:
        return widest, widest
    return min(widest, max(column.min_width, header, min(longest_word, _LONGEST_WORD))), widest


def _width(column: Column, cells: Sequence[Cell], natural: bool = False) -> int:
    """What ``column`` needs: its widest line when fixed (or ``natural``), else its minimum (:func:`_measure`)."""
    return _measure(column, [_plain(c) for c in cells])[natural]


def required_width(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], natural: bool = False) -> int:
    """Terminal cells the table needs.

    Args:
        columns: The columns shown.
        rows: Their cells.
        natural: Width with nothing folded; else with each folding column at its ``min_width``.
    """
    if not columns:
        return 0
    widths = (_width(col, [row[i] for row in rows], natural) for i, col in enumerate(columns))
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
    column with the lowest ``drop`` goes. Fixed columns are never wrapped nor cut; folding ones fold.

    Args:
        width: The console's width.
        columns: The columns, in display order.
        rows: One sequence of cells per row, in the order of ``columns``.
        title: Printed above the table by :func:`print_fitted`.

    Returns:
        The table, the columns dropped, and the width it needs.
    """
    # Each cell's plain text and each column's widths are worked out once: the dropping loop below would
    # otherwise parse every cell's markup again per round (~35 ms for 50 rows).
    plains = [[_plain(cell) for cell in row] for row in rows]
    measured = [_measure(col, [p[i] for p in plains]) for i, col in enumerate(columns)]

    def needs(shown: Sequence[int], natural: bool = False) -> int:
        return sum(measured[i][natural] for i in shown) + _GAP * (len(shown) - 1) if shown else 0

    keep = [i for i, col in enumerate(columns) if col.keep_empty or any(p[i].strip() for p in plains)]
    hidden: list[str] = []
    while (needed := needs(keep)) > width:
        optional = [i for i in keep if columns[i].drop is not None]
        if not optional:
            break  # only essential columns left: the folding ones give up their minimum below
        victim = min(optional, key=lambda i: columns[i].drop or 0)
        keep.remove(victim)
        hidden.append(columns[victim].header)
    widths = _squeeze({i: measured[i][0] for i in keep}, columns, needed - width)
    natural = needs(keep, natural=True)
    if natural > width:
        # rich's own shrinking can leave a table a few cells too wide and then cut every column: give the
        # folding columns exact widths, the room left shared out up to what each would take unfolded.
        full = {i: measured[i][1] for i in keep}
        widths = _share(widths, full, columns, width - required_width_of(widths, len(keep)))
    fixed_layout = natural > width
    table = _new_table()
    for i in keep:
        col = columns[i]
        table.add_column(
            Text(col.header),  # never read as markup: a header may be a recorded name (a variant)
            justify=col.justify,
            no_wrap=not col.fold,
            overflow="fold",
            min_width=widths[i],  # else rich squeezes a folding column down to a letter or two
            width=widths[i] if fixed_layout and col.fold else None,
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    folds = {columns[i].header: widths[i] for i in keep if columns[i].fold} if fixed_layout else {}
    return FittedTable(table, title, hidden, min(needed, width), natural, folds)


def required_width_of(widths: dict[int, int], count: int) -> int:
    """Cells taken by columns of these widths with the gaps between them."""
    return sum(widths.values()) + _GAP * max(0, count - 1)


def _share(widths: dict[int, int], full: dict[int, int], columns: Sequence[Column], room: int) -> dict[int, int]:
    """Give ``room`` spare cells to the folding columns: whole first the ones that need the fewest to be whole.

    A short value (a service name) folded in two reads worse than a long reason folded in four instead of three.
    """
    shared = dict(widths)
    for i in sorted((i for i in shared if columns[i].fold), key=lambda i: full[i] - shared[i]):
        given = min(room, full[i] - shared[i])
        shared[i] += max(0, given)
        room -= max(0, given)
    return shared


_FLOOR = 6
"""Narrowest a folding column gets when even the essential columns do not fit at their minimum widths."""


def _squeeze(widths: dict[int, int], columns: Sequence[Column], excess: int) -> dict[int, int]:
    """Take ``excess`` cells from the widest folding columns, none below :data:`_FLOOR`.

    Only the essential columns are left when this has anything to do; fixed columns keep their width, so a
    terminal too narrow even for those (under about 50 cells) is the one case where rich still cuts.
    """
    squeezed = dict(widths)
    for _ in range(max(0, excess)):
        folding = [i for i in squeezed if columns[i].fold and squeezed[i] > _FLOOR]
        if not folding:
            break
        squeezed[max(folding, key=lambda i: squeezed[i])] -= 1
    return squeezed


def hidden_note(hidden: Sequence[str]) -> Text | None:
    """``not shown at this width: kind, timeline (wider terminal: COLUMNS=200)``; None when nothing was hidden."""
    if not hidden:
        return None
    return Text(f"not shown at this width: {', '.join(hidden)} (wider terminal: COLUMNS=200)", style="dim")


def print_fitted(console: Console, fitted: FittedTable) -> None:
    """Print the title, the table, and which columns the width left out."""
    if fitted.title is not None:
        console.print(fitted.title, highlight=False)
    console.print(fitted.table)
    note = hidden_note(fitted.hidden)
    if note is not None:
        console.print(note)
