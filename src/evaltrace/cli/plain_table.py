"""The list tables of :mod:`evaltrace.cli.tables`, drawn without importing rich (issue 28).

Importing ``rich.console`` and drawing 20 rows with rich's ``Table`` cost ``traces list`` about 400M of its 450M
instructions. This module writes the same characters and the same SGR codes, byte for byte, for the one table
style the CLI uses (``SIMPLE_HEAD``, no edge, one cell of right padding) and the text printed around it. The
layout comes from :mod:`evaltrace.cli.table_layout`, as for the rich table; cells wrap with rich's own word-wrap
rules (words move to the next line, a word longer than its column folds).

It draws only what it can draw exactly: text whose characters all take one cell, styles made of plain
attributes and the 16 standard colours, and a table that fits the terminal once laid out. For anything else
:func:`draw_table` returns False and the caller prints with rich; ``tests/test_cli_plain_table.py`` compares the
two outputs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from evaltrace.cli.table_layout import Column, Justify, lay_out
from evaltrace.cli.terminal import Terminal

__all__ = ["Styled", "draw_table", "drawable", "print_styled"]

_SINGLE_CELL = frozenset(
    chr(code)
    for start, end in (
        # rich's own one-cell ranges (rich.cells), and two characters the CLI prints (→ and …)
        (0x20, 0x7E),
        (0xA0, 0xAC),
        (0xAE, 0x2FF),
        (0x370, 0x482),
        (0x2500, 0x25FC),
        (0x2800, 0x28FF),
        (0x2192, 0x2192),
        (0x2026, 0x2026),
    )
    for code in range(start, end + 1)
)
"""Characters one terminal cell wide by rich's measure: text made of these has ``len`` cells."""

_ATTRIBUTES = {"bold": "1", "dim": "2", "italic": "3", "underline": "4"}
_COLORS = {
    name: str(base + number)
    for number, color in enumerate(("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"))
    for name, base in ((color, 30), (f"bright_{color}", 90))
}
_WORD = re.compile(r"\s*\S+\s*")


@dataclass
class Styled:
    """Text with a style, and styled spans inside it: the part of rich's ``Text`` the list tables use.

    Attributes:
        text: The characters (recorded text already ``clean``-ed).
        style: Style of the whole text (``"red"``, ``"bold yellow"``; ``""`` for none).
        spans: ``(start, end, style)`` runs, in the order they were added.
    """

    text: str
    style: str = ""
    spans: list[tuple[int, int, str]] = field(default_factory=list)

    def append(self, text: str, style: str = "") -> None:
        """Add ``text`` at the end, styled ``style`` (rich's ``Text.append``)."""
        if style:
            self.spans.append((len(self.text), len(self.text) + len(text), style))
        self.text += text

    def _crop(self, length: int) -> None:
        self.text = self.text[:length]
        self.spans = [(s, min(e, length), style) for s, e, style in self.spans if s < length]


def _sgr(style: str, no_color: bool) -> str | None:
    """The SGR parameters of ``style`` as rich writes them (attributes, then colour); None if unknown here."""
    attributes: set[str] = set()
    color = ""
    for word in style.split():
        if word in _ATTRIBUTES:
            attributes.add(word)
        elif word in _COLORS:
            color = "" if no_color else _COLORS[word]
        else:
            return None
    codes = [code for name, code in _ATTRIBUTES.items() if name in attributes]
    return ";".join([*codes, color] if color else codes)


def drawable(cells: Sequence[Styled | str]) -> bool:
    """True when this module draws ``cells`` exactly as rich would (one-cell characters, known styles)."""
    for cell in cells:
        if isinstance(cell, str):
            if not _SINGLE_CELL.issuperset(cell):
                return False
            continue
        if not _SINGLE_CELL.issuperset(cell.text):
            return False
        if any(_sgr(style, False) is None for style in (cell.style, *(span[2] for span in cell.spans))):
            return False
    return True


def _divide_line(text: str, width: int) -> list[int]:
    """Where rich's ``divide_line`` breaks ``text`` (one-cell characters) at ``width``, folding long words."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            chunks = [word[i : i + width] for i in range(0, len(word), width)]
            for number, chunk in enumerate(chunks, 1):
                if start:
                    breaks.append(start)
                if number == len(chunks):
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def _divide(text: Styled, breaks: list[int]) -> list[Styled]:
    ranges = list(zip([0, *breaks], [*breaks, len(text.text)], strict=True))
    return [
        Styled(
            text.text[a:b],
            text.style,
            [(max(s, a) - a, min(e, b) - a, st) for s, e, st in text.spans if min(e, b) > max(s, a)],
        )
        for a, b in ranges
    ]


def _wrap(text: Styled, width: int, justify: Justify, no_wrap: bool) -> list[Styled]:
    """Rich's ``Text.wrap`` for one-cell text without newlines or tabs (``overflow="fold"``)."""
    if no_wrap:
        lines = [Styled(text.text, text.style, list(text.spans))]
    else:
        lines = _divide(text, _divide_line(text.text, width))
        for line in lines:
            excess = len(line.text) - width
            if excess > 0:  # rich's rstrip_end: trailing blanks past the width go
                blanks = len(line.text) - len(line.text.rstrip())
                line._crop(len(line.text) - min(blanks, excess))
    for line in lines:
        if justify == "left":
            length = len(line.text)
            line._crop(width)
            if length < width:
                line.text += " " * (width - length)
        elif justify == "right":
            line._crop(len(line.text.rstrip()))
            line._crop(width)
            pad = width - len(line.text)
            line.text = " " * pad + line.text
            line.spans = [(s + pad, e + pad, style) for s, e, style in line.spans]
        line._crop(width)
    return lines


_Segment = tuple[str, str]


def _segments(line: Styled, around: str = "") -> list[_Segment]:
    """The ``(text, style)`` pieces rich writes for one line: split wherever a span starts or ends."""
    spans = ([(0, len(line.text), line.style)] if line.style else []) + line.spans
    if not spans:
        return [(line.text, around)] if line.text else []
    cuts = sorted({0, len(line.text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    pieces: list[_Segment] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if b > a:
            style = " ".join(st for s, e, st in spans if s <= a and e >= b)
            pieces.append((line.text[a:b], f"{around} {style}".strip()))
    return pieces


def _write(terminal: Terminal, lines: list[list[_Segment]]) -> None:
    out: list[str] = []
    for line in lines:
        for text, style in line:
            codes = _sgr(style, terminal.no_color) if terminal.ansi and style else None
            out.append(f"\x1b[{codes}m{text}\x1b[0m" if codes else text)
        out.append("\n")
    terminal.stream.write("".join(out))


def print_styled(terminal: Terminal, text: Styled) -> None:
    """Print ``text`` wrapped at the terminal's width, as rich's ``Console.print`` does (no padding)."""
    _write(terminal, [_segments(line) for line in _wrap(text, terminal.width, "default", no_wrap=False)])


def draw_table(
    terminal: Terminal, columns: Sequence[Column], rows: Sequence[Sequence[Styled]], title: Styled | None = None
) -> list[str] | None:
    """Print a title and a table as :func:`evaltrace.cli.tables.print_fitted` does, without its note.

    Args:
        terminal: Where and how to write.
        columns: The columns, in display order.
        rows: One sequence of cells per row, in the order of ``columns``; check them with :func:`drawable` first.
        title: Printed above the table, wrapped at the terminal's width.

    Returns:
        The headers of the columns left out for lack of width, or None (and nothing printed) when the table
        would not fit the terminal even so: rich cuts every column then, so the caller prints with rich.
    """
    layout = lay_out(terminal.width, columns, [[cell.text for cell in row] for row in rows], len)
    shown = layout.shown
    if not shown:
        return None  # rich draws an empty table its own way
    # rich's column widths: a folding column's own when the table folds, else the widest line; one cell of
    # padding on every column but the last.
    widths = [
        (layout.widths[i] if layout.fixed and columns[i].fold else max(layout.widths[i], layout.natural_widths[i]))
        for i in shown
    ]
    pads = [1] * (len(shown) - 1) + [0]
    if sum(widths) + sum(pads) + len(shown) - 1 > terminal.width:
        return None
    lines: list[list[_Segment]] = []
    if title is not None:
        lines += [_segments(line) for line in _wrap(title, terminal.width, "default", no_wrap=False)]
    header = [Styled(columns[i].header) for i in shown]
    for number, row in enumerate([header, *([row[i] for i in shown] for row in rows)]):
        around = "bold" if number == 0 else ""  # rich's table.header style
        cells: list[list[list[_Segment]]] = []
        for position, (i, cell) in enumerate(zip(shown, row, strict=True)):
            column, width, pad = columns[i], widths[position], pads[position]
            padding = [(" " * pad, around)] if pad else []
            cells.append(
                [_segments(line, around) + padding for line in _wrap(cell, width, column.justify, not column.fold)]
            )
        height = max(len(cell_lines) for cell_lines in cells)
        for position, cell_lines in enumerate(cells):
            blank = [[(" " * (widths[position] + pads[position]), around)]] * (height - len(cell_lines))
            cells[position] = blank + cell_lines if number == 0 else cell_lines + blank  # headers sit at the bottom
        for line_number in range(height):
            segments: list[_Segment] = []
            for position, cell_lines in enumerate(cells):
                if position:
                    segments.append((" ", ""))
                segments += cell_lines[line_number]
            lines.append(segments)
        if number == 0:
            lines.append([("─" * (sum(widths) + sum(pads) + len(shown) - 1), "")])
    _write(terminal, lines)
    return layout.hidden
