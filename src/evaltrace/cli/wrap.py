"""Text fitted to a terminal width without splitting a word: middle-shortened names and word-wrapped lines.

A terminal (or rich with ``soft_wrap``) breaks a long line at the last column, inside whatever token is there:
``ERROR(exce`` / ``ption)``. These helpers break only between words and indent every continuation line under
the start of its text, so a score, an evaluator name or a ``traces.jsonl:19`` reference is always read whole.
A name too long for its column is shortened in the middle (``invoke_agent very_lo…_name``): its start and end
are what tell spans apart.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, set_cell_size

__all__ = ["ELLIPSIS", "KEEP_TOGETHER", "facts_line", "shorten_middle", "wrap_words"]

ELLIPSIS = "\u2026"
KEEP_TOGETHER = "\u00a0"
"""Join words with this (NO-BREAK SPACE) to keep them on one line; :func:`wrap_words` prints it as a space."""


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells: whole when it fits, else its start and end around ``…``.

    Args:
        text: One line of text.
        width: Cells available (at least 1 is assumed).
    """
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS
    room = width - 1
    head_cells = (room + 1) // 2
    tail_cells = room - head_cells
    head = set_cell_size(text, head_cells).rstrip()
    tail = ""
    for char in reversed(text):
        if cell_len(char + tail) > tail_cells:
            break
        tail = char + tail
    return f"{head}{ELLIPSIS}{tail}"


def wrap_words(text: str, width: int, indent: int = 0) -> list[str]:
    """``text`` broken into lines of at most ``width`` cells, between words only.

    Continuation lines start ``indent`` cells further in than the first line's own leading blanks. A single
    word longer than the room (a long path) gets a line of its own, whole: a token is never split.
    :data:`KEEP_TOGETHER` joins words that must stay on one line and is printed as a plain space.

    Args:
        text: One line of text (leading blanks are kept as the first line's indentation).
        width: The terminal's width.
        indent: Extra indentation of continuation lines.
    """
    lead = len(text) - len(text.lstrip(" "))
    # Words with the blanks before each (kept as written: "reason  [trace ...]" keeps its two blanks).
    # Not str.split(): it would also break at KEEP_TOGETHER.
    pieces = re.findall(r"( *)([^ ]+)", text[lead:])
    lines: list[str] = []
    current = " " * lead
    fresh = True  # nothing on the current line yet but its indentation
    for blanks, word in pieces:
        if fresh or cell_len(current + blanks + word) <= width:
            current += word if fresh else blanks + word
            fresh = False
            continue
        lines.append(current)
        current = " " * (lead + indent) + word
    lines.append(current)
    return [line.replace(KEEP_TOGETHER, " ") for line in lines]


def facts_line(facts: list[str], width: int) -> list[str]:
    """``facts`` joined with `` · `` and wrapped at ``width``, each fact kept whole (``1 error``, never ``1`` / ``error``)."""
    joined = " · ".join(fact.replace(" ", KEEP_TOGETHER) for fact in facts)
    return wrap_words(joined, width, 2)
