"""Where a list table's columns go at a terminal width, worked out without rich (issue 28).

:mod:`evaltrace.cli.tables` draws the result with rich; :mod:`evaltrace.cli.plain_table` draws the same table
without importing rich, for ``traces list``. Both lay the table out here, so the two always agree on which
columns are shown and how wide each one is.

A column is either *folding* (names, reasons: long words fold onto the next line, never cut) or *fixed* (ids,
numbers, durations: always shown whole). When the fixed columns and the folding columns' minimum widths do not
fit, optional columns are dropped, least useful first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["GAP", "Column", "Justify", "Layout", "hidden_text", "lay_out", "measure"]

Justify = Literal["default", "left", "center", "right", "full"]
"""How a column's cells are aligned (rich's ``JustifyMethod``; the tables use ``left`` and ``right``)."""

GAP = 2
"""Cells between two columns: one cell of right padding and one blank separator."""

_LONGEST_WORD = 32
"""A folding column is made wide enough for its longest word up to this, so words are not split mid-way."""

_FLOOR = 6
"""Narrowest a folding column gets when even the essential columns do not fit at their minimum widths."""


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
    justify: Justify = "left"
    fold: bool = False
    min_width: int = 10
    drop: int | None = None
    keep_empty: bool = False


def measure(column: Column, texts: Sequence[str], cell_len: Callable[[str], int]) -> tuple[int, int]:
    """``(needed, natural)`` of ``column`` over the plain ``texts`` of its cells, in one pass.

    ``natural`` is the widest line (the header included); ``needed`` is that for a fixed column, and for a
    folding one ``min_width``, or its longest word when longer (up to :data:`_LONGEST_WORD`), never more than
    its widest line.

    Args:
        column: The column.
        texts: The plain text of each of its cells.
        cell_len: Terminal cells a string takes.
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


@dataclass(frozen=True)
class Layout:
    """The columns shown and their widths (padding and separators not included)."""

    shown: list[int]
    """Indexes of the columns shown, in display order."""
    widths: dict[int, int]
    """Each shown column's minimum width by index; a folding column's exact width when ``fixed``."""
    fixed: bool
    """True when the table does not fit unfolded: its folding columns get exact widths and fold."""
    hidden: list[str]
    """Headers of the non-empty columns dropped for lack of width, in the order they were dropped."""
    needed: int
    """Cells the table needs with its folding columns folded to their minimum."""
    natural: int
    """Cells it would take with nothing folded."""
    natural_widths: dict[int, int]
    """Each shown column's widest line (its header included) by index."""


def lay_out(
    width: int, columns: Sequence[Column], plains: Sequence[Sequence[str]], cell_len: Callable[[str], int]
) -> Layout:
    """Lay a table out for a terminal ``width`` cells wide.

    Columns whose cells are all empty are left out. While the table needs more than ``width``, the optional
    column with the lowest ``drop`` goes. Fixed columns are never wrapped nor cut; folding ones fold.

    Args:
        width: The terminal's width.
        columns: The columns, in display order.
        plains: One sequence of plain cell texts per row, in the order of ``columns``.
        cell_len: Terminal cells a string takes.
    """
    # Each column's widths are worked out once: the dropping loop below would otherwise measure every cell
    # again per round.
    measured = [measure(col, [p[i] for p in plains], cell_len) for i, col in enumerate(columns)]

    def needs(shown: Sequence[int], natural: bool = False) -> int:
        return sum(measured[i][natural] for i in shown) + GAP * (len(shown) - 1) if shown else 0

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
    full = {i: measured[i][1] for i in keep}
    if natural > width:
        # rich's own shrinking can leave a table a few cells too wide and then cut every column: give the
        # folding columns exact widths, the room left shared out up to what each would take unfolded.
        widths = _share(widths, full, columns, width - required_width_of(widths, len(keep)))
    return Layout(keep, widths, natural > width, hidden, min(needed, width), natural, full)


def required_width_of(widths: dict[int, int], count: int) -> int:
    """Cells taken by columns of these widths with the gaps between them."""
    return sum(widths.values()) + GAP * max(0, count - 1)


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


def hidden_text(hidden: Sequence[str]) -> str | None:
    """``not shown at this width: kind, timeline (wider terminal: COLUMNS=200)``; None when nothing was hidden."""
    if not hidden:
        return None
    return f"not shown at this width: {', '.join(hidden)} (wider terminal: COLUMNS=200)"
