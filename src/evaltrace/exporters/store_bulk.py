"""Many rows in one SQLite statement: ``INSERT ... VALUES (?, ...), (?, ...), ...`` with every value bound.

Why not ``executemany``: Python's ``sqlite3`` releases the GIL around every ``sqlite3_step``, so ``executemany``
gives it up and takes it back once per row. While the application thread runs Python flat out, taking the GIL
back waits for the application to yield it (up to ``sys.getswitchinterval()``, 5 ms): a batch of 2,048 spans took
~4 s of wall time for 0.1 s of CPU, and the export queue filled. One multi-row ``INSERT`` is one step: SQLite
loops over the rows without the GIL, and the exporter thread waits for it once per statement.

Why bound values rather than one JSON array read with ``json_each`` (the previous way): SQLite parses the row
again for every ``json_extract``, and unescapes strings slowly; binding is a copy. A span row cost ~15 us that
way against ~5 us bound (``benchmarks/README.md``).

A statement holds at most :data:`MAX_ROWS` rows (and never more parameters than the connection allows). Each
statement size is prepared once and kept in the connection's statement cache: preparing a 1,000-row statement
costs ~10 us a row, more than running it. So a batch is cut into full statements, and the rest into
power-of-two sizes: a bounded set of sizes, and ``log2(MAX_ROWS)`` extra statements at most.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import chain
from typing import NamedTuple, TypeVar

__all__ = ["MAX_ROWS", "BulkStatement", "bulk_chunks", "bulk_statement", "execute_bulk", "rows_per_statement"]

MAX_ROWS = 1024
"""Rows per statement at most: each size's prepared statement (~0.5 MB at 1,024 rows) stays cached."""


class BulkStatement(NamedTuple):
    """One multi-row statement: ``head``, then ``row`` repeated once per row (comma separated), then ``tail``."""

    head: str
    row: str
    tail: str
    width: int
    """Parameters (``?``) in ``row``."""


def bulk_statement(head: str, width: int, tail: str = "", *, row: str | None = None) -> BulkStatement:
    """A statement ``head VALUES row, row, ... tail``; ``row`` defaults to ``width`` plain ``?`` values.

    ``row`` may hold expressions (a sub-select) as long as it binds exactly ``width`` anonymous parameters.
    """
    if row is None:
        row = "(" + ", ".join("?" * width) + ")"
    if row.count("?") != width:
        raise ValueError(f"row {row!r} binds {row.count('?')} parameters, not {width}")
    return BulkStatement(head, row, tail, width)


@lru_cache(maxsize=256)
def _sql(statement: BulkStatement, rows: int) -> str:
    return f"{statement.head} VALUES {', '.join([statement.row] * rows)} {statement.tail}"


def rows_per_statement(conn: sqlite3.Connection, width: int) -> int:
    """The most rows of ``width`` values one statement may bind: :data:`MAX_ROWS`, a power of two, or fewer."""
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)  # 32,766 by default, 999 before SQLite 3.32
    rows = MAX_ROWS
    while rows > 1 and rows * width > limit:
        rows //= 2
    return rows


_T = TypeVar("_T")


def bulk_chunks(conn: sqlite3.Connection, width: int, rows: Sequence[_T]) -> Iterator[Sequence[_T]]:
    """``rows`` cut as one statement each: full statements, then the rest in power-of-two sizes."""
    most = rows_per_statement(conn, width)
    start, total = 0, len(rows)
    while start < total:
        left = total - start
        size = most if left >= most else 1 << (left.bit_length() - 1)  # the largest power of two that fits
        yield rows[start : start + size]
        start += size


def execute_bulk(conn: sqlite3.Connection, statement: BulkStatement, rows: Sequence[Sequence[object]]) -> None:
    """Run ``statement`` for every row of ``rows``, in a few statements (see the module docstring).

    Raises:
        sqlite3.Error: As ``executemany`` would (the caller's transaction then rolls back all rows).
    """
    for chunk in bulk_chunks(conn, statement.width, rows):
        conn.execute(_sql(statement, len(chunk)), list(chain.from_iterable(chunk)))
