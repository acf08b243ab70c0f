r"""Recorded text made safe for a terminal, for every CLI renderer.

Span names, attribute values, reasons, case ids and error messages pass through here before they are printed.

Recorded text comes from the traced application, its users and the model, so it may hold terminal control
sequences (colours that hide text, a cursor move that overwrites a line, an OSC 8 hyperlink, a title change) or
rich markup (``[link=https://evil]x[/link]``). Control characters are shown escaped (``\x1b``), never sent to the
terminal, so the reader sees that something was there; markup is either escaped or never parsed (a ``Text``).
rich's own ``Text`` drops only a few control characters and lets ESC through, hence this module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["clean", "markup_safe", "plain"]

# C0 (but newline and tab), DEL, C1 (8-bit CSI/OSC...), and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_LINE_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(value: object, *, single_line: bool = False) -> str:
    r"""Return ``str(value)`` with every terminal control character shown escaped (``ESC`` becomes ``\x1b``).

    Args:
        value: Recorded text (anything: it is converted with ``str``).
        single_line: Escape newlines and tabs too (a table cell or a one-line message); else they are kept.
    """
    pattern = _CONTROL_OR_LINE_BREAK if single_line else _CONTROL
    return pattern.sub(_escaped, str(value))


def plain(value: object, style: str = "", *, single_line: bool = False) -> Text:
    """Recorded text as a rich ``Text``: never read as markup, control characters escaped."""
    from rich.text import Text  # here: `traces list` draws its table without rich (issue 28)

    return Text(clean(value, single_line=single_line), style=style)


def markup_safe(value: object) -> str:
    """Recorded text to put inside a rich markup string: control characters and markup both escaped."""
    from rich.markup import escape

    return escape(clean(value))
