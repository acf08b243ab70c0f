"""The columns of the run tables (``run``, ``runs list``/``show``, ``compare``) and how they are printed.

Fitted to the terminal like every CLI table (:mod:`evaltrace.cli.tables`): run ids and figures whole, variant
names and pass-rate lists folding, the run list's ``where`` column dropped first when narrow.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from evaltrace.cli.format import format_duration_ms
from evaltrace.cli.tables import Cell, Column, fit_table, print_fitted

__all__ = ["COMPARISON_COLUMNS", "COST_COLUMNS", "LIST_COLUMNS", "SUMMARY_COLUMNS", "print_table", "signed_duration"]

SUMMARY_COLUMNS = (
    Column("variant", fold=True),
    *(Column(h, justify="right") for h in ("cases", "pass", "fail", "error", "not evaluated", "pass rate")),
)
COST_COLUMNS = (
    Column("variant", fold=True),
    *(Column(h, justify="right") for h in ("latency", "cost", "tokens in / out")),
)
COMPARISON_COLUMNS = (
    Column("variant", fold=True),
    *(Column(h, justify="right") for h in ("pass rate", "avg latency", "regressions", "improvements", "unverified")),
)
LIST_COLUMNS = (
    Column("run id"),
    Column("cases", justify="right"),
    Column("pass rate by variant", fold=True, min_width=16),
    Column("regressions", justify="right", drop=2),
)
"""Without the last column, ``where`` (run directories) or ``namespace`` (a database), which is added last."""


def print_table(console: Console, columns: Sequence[Column], rows: list[list[Cell]], title: Text | str | None) -> None:
    """Print a table fitted to ``console``'s width, and a note naming any column left out."""
    print_fitted(console, fit_table(console.width, columns, rows, title))


def signed_duration(milliseconds: float) -> str:
    """A latency change: ``+1.24 s``, ``-850 µs``, ``±0``."""
    if milliseconds == 0:
        return "±0"
    return ("+" if milliseconds > 0 else "-") + format_duration_ms(abs(milliseconds))
