"""Numbers as people read them in the terminal: money, durations, token counts and short unique id prefixes.

Every CLI renderer formats through here, so ``traces list``, ``traces show``, ``runs list`` and ``compare`` agree
(``$0.000042``, never ``4.185e-05``; ``1.24 s``, never ``1240.0 ms``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["format_count", "format_duration_ms", "format_duration_ns", "format_money", "unique_prefixes"]

_MICRO = "\u00b5"  # MICRO SIGN; one terminal cell wide, like the ASCII letters around it


def format_money(usd: float | None) -> str:
    """A cost in US dollars as people write it, never in exponent form; the HTML report's rule.

    Six decimals below a dollar with trailing zeros dropped down to two (``4.185e-05`` -> ``$0.000042``,
    ``0.0123`` -> ``$0.0123``, ``0.5`` -> ``$0.50``), cents from a dollar up (``$1,234.57``), and ``<$0.000001``
    for an amount that would round to zero (too small to print is still not free; ``-<$0.000001`` below zero).
    ``-0.0`` is ``$0.00``.

    Args:
        usd: The amount; None (or not a finite number) gives ``""``, so an unknown cost is an empty cell.
    """
    if usd is None or not math.isfinite(usd):
        return ""
    sign, amount = ("-", -usd) if usd < 0 else ("", abs(usd))  # abs: -0.0 is zero, shown "$0.00"
    # Rounded first, then read: what decides "too small" is the printed text, never a threshold beside it.
    text = f"{amount:,.2f}" if amount >= 1 else f"{amount:.6f}".rstrip("0")
    if amount > 0 and not text.strip("0.,"):
        return f"{sign}<$0.000001"
    whole, _, fraction = text.partition(".")
    return f"{sign}${whole}.{fraction.ljust(2, '0')}"


def _three_digits(value: float, unit: str) -> str:
    """``value`` with three significant digits (1.24, 12.3, 850) and its unit."""
    if value < 10:
        return f"{value:.2f} {unit}"
    if value < 100:
        return f"{value:.1f} {unit}"
    return f"{value:.0f} {unit}"


def format_duration_ns(nanoseconds: float | None) -> str:
    """A duration as people read it: ``420 ns``, ``850 µs``, ``12.3 ms``, ``1.24 s``, ``2m05s``, ``1h02m``.

    Args:
        nanoseconds: The duration; None gives ``""`` (a span that never ended), a negative one ``0 ns``.
    """
    if nanoseconds is None or not math.isfinite(nanoseconds):
        return ""
    ns = max(0.0, nanoseconds)
    # Round first, so 999.7 µs reads "1.00 ms", never "1000 µs".
    if round(ns) < 1_000:
        return f"{ns:.0f} ns"
    if float(f"{ns / 1e3:.3g}") < 1_000:
        return _three_digits(float(f"{ns / 1e3:.3g}"), f"{_MICRO}s")
    if float(f"{ns / 1e6:.3g}") < 1_000:
        return _three_digits(float(f"{ns / 1e6:.3g}"), "ms")
    if float(f"{ns / 1e9:.3g}") < 60:
        return _three_digits(float(f"{ns / 1e9:.3g}"), "s")
    seconds = round(ns / 1e9)
    if seconds < 3_600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    minutes = round(ns / 60e9)
    if minutes < 24 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    hours = round(ns / 3_600e9)
    return f"{hours // 24}d{hours % 24:02d}h"


def format_duration_ms(milliseconds: float | None) -> str:
    """:func:`format_duration_ns` for a duration in milliseconds (what summaries store)."""
    return "" if milliseconds is None else format_duration_ns(milliseconds * 1e6)


def format_count(value: int | float | None) -> str:
    """A count with thousands separators (``12,345``); ``""`` for None."""
    if value is None:
        return ""
    return f"{value:,.0f}"


def unique_prefixes(ids: Sequence[str], minimum: int = 12) -> dict[str, str]:
    """The shortest prefix of each id, at least ``minimum`` characters, that no other id of ``ids`` starts with.

    ``traces show`` and ``report`` accept any unique prefix, so a table can print these instead of 32 digits.
    Uniqueness is among ``ids`` (the rows shown); with 12 hexadecimal digits (48 bits) a clash with a trace not
    shown is unlikely even in a million traces, and ``show`` names an ambiguous prefix rather than guessing.

    Args:
        ids: The ids shown together (duplicates allowed).
        minimum: Never shorter than this (nor than the id itself).
    """
    ordered = sorted(set(ids))
    prefixes: dict[str, str] = {}
    for index, current in enumerate(ordered):
        # In sorted order the id sharing the longest prefix with ``current`` is a neighbour.
        shared = 0
        for neighbour in ordered[max(0, index - 1) : index] + ordered[index + 1 : index + 2]:
            common = 0
            for a, b in zip(current, neighbour, strict=False):
                if a != b:
                    break
                common += 1
            shared = max(shared, common)
        prefixes[current] = current[: max(minimum, shared + 1)]
    return prefixes
