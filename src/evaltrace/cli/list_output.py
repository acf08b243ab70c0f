"""Print a list table or a one-line message without rich where that prints exactly what rich would (issue 28).

``traces list`` and ``sessions list`` go through here: :mod:`evaltrace.cli.plain_table` draws when the terminal
(:func:`evaltrace.cli.terminal.detect`) and every cell allow an exact copy of rich's output; otherwise rich is
imported and prints, through :mod:`evaltrace.cli.tables` as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from evaltrace.cli._untrusted import clean
from evaltrace.cli.plain_table import Styled, draw_table, drawable, print_styled
from evaltrace.cli.table_layout import Column, hidden_text
from evaltrace.cli.terminal import detect

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["print_list", "print_message", "rich_text"]


def rich_text(cell: Styled) -> Text:
    """``cell`` as a rich ``Text`` (same characters, style and spans), for the rich path."""
    from rich.text import Span, Text

    return Text(cell.text, style=cell.style, spans=[Span(*span) for span in cell.spans])


def print_list(columns: Sequence[Column], rows: Sequence[Sequence[Styled]], title: str) -> None:
    """Print ``title``, the table and the note on hidden columns, as ``print_fitted(fit_table(...))`` does.

    Args:
        columns: The columns, in display order.
        rows: One sequence of cells per row (recorded text already ``clean``-ed).
        title: Printed above the table (recorded text is escaped here).
    """
    terminal = detect()
    heading = Styled(clean(title))
    if terminal is not None and drawable([heading, *(cell for row in rows for cell in row)]):
        hidden = draw_table(terminal, columns, rows, heading)
        if hidden is not None:
            note = hidden_text(hidden)
            if note is not None:
                print_styled(terminal, Styled(note, "dim"))
            return
    from rich.console import Console

    from evaltrace.cli._untrusted import plain
    from evaltrace.cli.tables import fit_table, print_fitted

    console = Console()
    cells = [[rich_text(cell) for cell in row] for row in rows]
    print_fitted(console, fit_table(console.width, columns, cells, plain(title)))


def print_message(message: str) -> None:
    """Print one message of recorded text (control characters escaped) as rich's ``Console().print`` would."""
    terminal = detect()
    text = Styled(clean(message))
    if terminal is not None and drawable([text]):
        print_styled(terminal, text)
        return
    from rich.console import Console

    from evaltrace.cli._untrusted import plain

    Console().print(plain(message))
