"""How the report writes values: escaped text, pretty JSON, money and token counts.

Everything recorded in a trace (prompts, answers, tool arguments, attribute names, tags) is untrusted: it goes
through :func:`esc` before it reaches the page, so a ``<script>`` in a prompt is shown as text, never run.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from evaltrace.cli.format import format_money

__all__ = ["MAX_VALUE_CHARS", "esc", "money", "pretty", "token_count"]

MAX_VALUE_CHARS = 20_000


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML text and for attribute values in either quote style."""
    return escape(str(value), quote=True)


def pretty(value: Any) -> str:
    """Pretty-print JSON strings and structures; cap very long values (the page must stay usable)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                value = json.loads(stripped)
            except ValueError:
                pass
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f"\n... ({len(text) - MAX_VALUE_CHARS} more characters)"
    return text


def money(usd: float) -> str:
    """US dollars as people write them, never in exponent form: the CLI's rule, so page and terminal agree.

    ``$0.000042`` (six decimals below a dollar, trailing zeros dropped down to two: ``$0.0123``, ``$0.50``),
    ``$1,234.57`` from a dollar up, ``<$0.000001`` for a positive amount that would round to zero, and an
    empty string for a value that is not a finite number.
    """
    return format_money(usd)


def token_count(tokens: int) -> str:
    """A token count with thousands separators (``12,345``)."""
    return f"{tokens:,}"
