"""Many rows in one SQLite statement: ``INSERT ... VALUES (?, ...), (?, ...), ...`` with every value bound.

Why not ``executemany``: Python's ``sqlite3`` releases the GIL around every ``sqlite3_step``, so ``executemany``
gives it up and takes it back once per row. While the application thread runs Python flat out, taking the GIL
back waits for the application to yield it (up to ``sys.getswitchinterval()``, 5 ms): a batch of 2,048 spans took
~4 s of wall time for 0.1 s of CPU, and the export queue filled. One multi-row ``INSERT`` is one step: SQLite
loops over the rows without the GIL, and the exporter thread waits for it once per statement.

Why bound values rather than one JSON array read with ``json_each`` (the previous way): SQLite parses the row
again for every ``json_extract``, and unescapes strings slowly; binding is a copy. A span row cost ~15 us that
way against ~5 us bound (``benchmarks/README.md``).

How many statements: each one returns to Python and takes the GIL back, a wait of up to the switch interval
whenever the application thread is busy; with 13 statements for a batch of 8,192 one-span traces (spans cut at
1,024 rows), the end-to-end check still lost spans, with 7 (4,096 rows) it lost none (``benchmarks/README.md``).
So a statement binds up to :data:`MAX_PARAMETERS` values, the span rows up to :data:`SPAN_PARAMETERS` (never
more than the connection allows: 32,766 by default, 250,000 in Debian's and Ubuntu's builds), in up to
:data:`MAX_ROWS` rows. Each size is prepared once and kept in the connection's statement cache: preparing costs
~10 us a row, more than running it, and a prepared statement holds ~86 bytes per value (6.6 MB at 4,096 rows of
19; each statement's sizes together, twice its largest at most). A batch is cut into full statements,
and the rest goes in one statement of a few sizes (:func:`padded_size`), padded with rows a ``WHERE`` skips.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import NamedTuple

__all__ = [
    "MAX_PARAMETERS",
    "SPAN_PARAMETERS",
    "MAX_ROWS",
    "BulkStatement",
    "bulk_statement",
    "execute_bulk",
    "execute_flat",
    "padded_size",
    "rows_per_statement",
]

MAX_ROWS = 8192
"""Rows per statement at most: a whole export batch (``LOCAL_STORE_MAX_BATCH``) of a narrow row."""
MAX_PARAMETERS = 32_766
"""Values bound per statement at most by default (SQLite's default limit; ~2.8 MB prepared)."""
SPAN_PARAMETERS = 80_000
"""Values bound per statement at most for the span rows, where the connection allows as many: 4,096 rows of 19
(6.6 MB prepared), so a full batch of 8,192 spans is two statements."""


class BulkStatement(NamedTuple):
    """One multi-row statement: ``head``, then ``row`` repeated once per row (comma separated), then ``tail``."""

    head: str
    row: str
    tail: str
    width: int
    """Parameters (``?``) in ``row``."""
    most_values: int = MAX_PARAMETERS
    """Values one statement binds at most (within the connection's limit)."""


def bulk_statement(
    head: str, width: int, tail: str = "", *, row: str | None = None, most_values: int = MAX_PARAMETERS
) -> BulkStatement:
    """A statement ``head VALUES row, row, ... tail``; ``row`` defaults to ``width`` plain ``?`` values.

    ``row`` may hold expressions (a sub-select) as long as it binds exactly ``width`` anonymous parameters.
    """
    if row is None:
        row = "(" + ", ".join("?" * width) + ")"
    if row.count("?") != width:
        raise ValueError(f"row {row!r} binds {row.count('?')} parameters, not {width}")
    return BulkStatement(head, row, tail, width, most_values)


@lru_cache(maxsize=256)
def _sql(statement: BulkStatement, rows: int) -> str:
    # Rows whose first value is NULL are padding (see execute_flat); the WHERE also lets an ON CONFLICT follow.
    # Full and padded statements of one size are one SQL text: one prepared statement (the WHERE costs ~0.05 us
    # a row).
    values = ", ".join([statement.row] * rows)
    return f"{statement.head} SELECT * FROM (VALUES {values}) WHERE column1 IS NOT NULL {statement.tail}"


def rows_per_statement(conn: sqlite3.Connection, width: int, most_values: int = MAX_PARAMETERS) -> int:
    """The most rows of ``width`` values one statement may bind: a power of two, at most :data:`MAX_ROWS`."""
    # 32,766 by default, 999 before SQLite 3.32, 250,000 in some distributions' builds.
    limit = min(most_values, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    rows = MAX_ROWS
    while rows > 1 and rows * width > limit:
        rows //= 2
    return rows


def padded_size(rows: int, most: int) -> int:
    """The statement size that holds the ``rows`` (at most ``most``, a power of two) left after full statements.

    The next power of two: one statement (a statement more would cost a GIL wait), for at most as many padding
    rows as real ones (each costs SQLite about half a real row). A statement's sizes together hold twice its
    largest at most (a prepared statement holds ~86 bytes a value). Sizes a quarter apart (less memory) cost
    ~5% more exporter CPU in the benchmark, from padding.
    """
    return min(most, 1 << (rows - 1).bit_length())


def execute_bulk(conn: sqlite3.Connection, statement: BulkStatement, rows: Sequence[Sequence[object]]) -> None:
    """Run ``statement`` for every row of ``rows``, in as few statements as the parameter limit allows.

    Raises:
        sqlite3.Error: As ``executemany`` would (the caller's transaction then rolls back all rows).
    """
    execute_flat(conn, statement, list(chain.from_iterable(rows)))


def execute_flat(conn: sqlite3.Connection, statement: BulkStatement, values: list[object]) -> None:
    """:func:`execute_bulk` for rows given one after the other in one list (``width`` values each).

    The writer builds these lists without a tuple per row left alive: thousands of live tuples made the
    garbage collector run (and scan them) often, ~2.5 us a span.

    Full statements first; the rest goes in one statement of a few sizes (:func:`padded_size`),
    filled up with rows of NULLs that its ``WHERE column1 IS NOT NULL`` skips (the first value of a real row is
    never NULL: a key): one statement where cutting the rest into exact powers of two took up to
    ``log2(MAX_ROWS)``, each a GIL wait.

    Raises:
        sqlite3.Error: As ``executemany`` would (the caller's transaction then rolls back all rows).
    """
    width = statement.width
    most = rows_per_statement(conn, width, statement.most_values)
    total = len(values) // width
    full = total - total % most
    step = most * width
    for start in range(0, full * width, step):
        conn.execute(_sql(statement, most), values[start : start + step] if total > most else values)
    left = total - full
    if left:
        size = padded_size(left, most)
        rest = values[full * width :] if full else values
        rest.extend([None] * (width * (size - left)))  # a copy, or the caller's list it no longer needs
        conn.execute(_sql(statement, size), rest)
