r"""Many rows in one SQLite statement: a batch is sent as one JSON array and read back with ``json_each``.

Why not ``executemany``: Python's ``sqlite3`` releases the GIL around every ``sqlite3_step``, so ``executemany``
gives it up and takes it back once per row. While the application thread runs Python flat out, taking the GIL
back waits for the application to yield it (up to ``sys.getswitchinterval()``, 5 ms): a batch of 2,048 spans took
~4 s of wall time for 0.1 s of CPU, and the export queue filled. One ``INSERT ... SELECT ... FROM json_each(?)``
is one step: SQLite loops over the rows without the GIL, and the exporter thread waits for it once per statement.

SQLite unescapes a JSON string slowly (~8 ns a byte): a span's ``data`` blob, itself JSON full of escaped quotes,
cost ~25 us per 3 kB sent that way. A statement whose last column is long text (``text_last``) sends that column
of every row as one UTF-8 blob, each row giving its offset and length: ``substr`` of a blob is a copy.

SQLite's JSON text functions cut a string at an escaped NUL (``\u0000``); a batch holding one (or anything that
looks like one) and a SQLite built without JSON functions fall back to ``executemany``: same rows, same result.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["BulkStatement", "bulk_statement", "execute_bulk", "json_rows_available"]

_JSON_ROWS: bool | None = None
"""Whether this sqlite build has ``json_each`` and ``json_extract`` (probed once); tests may set it to False."""

# Strings are already cleaned of lone surrogates (``store_values.clean_text``): ensure_ascii=False keeps the
# payload short and is bound as UTF-8 like any other text. No circular check: rows hold primitives only.
_encode = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False).encode


def json_rows_available() -> bool:
    """Whether the linked SQLite has the JSON functions (built in since 3.38; an option before)."""
    global _JSON_ROWS
    if _JSON_ROWS is None:
        try:
            probe = sqlite3.connect(":memory:")
            try:
                _JSON_ROWS = probe.execute("SELECT json_extract(value, '$[0]') FROM json_each('[[1]]')").fetchone() == (
                    1,
                )
            finally:
                probe.close()
        except sqlite3.Error:
            _JSON_ROWS = False
    return _JSON_ROWS


class BulkStatement(NamedTuple):
    """One statement in its two forms: over a JSON array of rows, and per row for ``executemany``."""

    json: str
    many: str
    text_last: bool = False
    """The last value of each row is a string, sent in one blob with the last column of the other rows."""


def bulk_statement(template: str, width: int, *, text_last: bool = False) -> BulkStatement:
    """Both forms of ``template``, which names a row's values ``{0}`` .. ``{width - 1}`` and its source ``{rows}``.

    ``{rows}`` goes where a ``SELECT``'s ``FROM`` and ``WHERE`` would be; it ends in ``WHERE true``, which an
    ``INSERT ... SELECT`` followed by ``ON CONFLICT`` needs to parse. ``text_last``: see :class:`BulkStatement`.
    """
    columns = [f"json_extract(value, '$[{i}]')" for i in range(width)]
    if text_last:
        last = width - 1
        columns[last] = f"CAST(substr(?2, json_extract(value, '$[{last}]'), json_extract(value, '$[{width}]')) AS TEXT)"
    return BulkStatement(
        json=template.format(*columns, rows="FROM json_each(?1) WHERE true"),
        many=template.format(*(f"?{i + 1}" for i in range(width)), rows="WHERE true"),
        text_last=text_last,
    )


def _params(rows: Sequence[Sequence[object]], text_last: bool) -> tuple[str] | tuple[str, bytes]:
    if not text_last:
        return (_encode(rows),)
    texts = [str(row[-1]).encode("utf-8") for row in rows]  # cleaned of lone surrogates: never fails
    heads: list[list[object]] = []
    start = 1  # substr counts from 1
    for row, text in zip(rows, texts, strict=True):
        heads.append([*row[:-1], start, len(text)])
        start += len(text)
    return _encode(heads), b"".join(texts)


def execute_bulk(conn: sqlite3.Connection, statement: BulkStatement, rows: Sequence[Sequence[object]]) -> None:
    """Run ``statement`` for every row of ``rows`` (str, int, float or None values; ints within 64 bits).

    Raises:
        sqlite3.Error: As ``executemany`` would (the caller's transaction then rolls back all rows).
        ValueError: A float that is not finite (SQLite would store NaN as NULL; callers never pass one).
    """
    if not rows:
        return
    if json_rows_available():
        params = _params(rows, statement.text_last)
        if "\\u0000" not in params[0]:  # a false alarm (an escaped backslash before "u0000") only costs speed
            conn.execute(statement.json, params)
            return
    conn.executemany(statement.many, rows)
