"""Import the JSON Lines files older versions wrote (``<store>/traces/*.jsonl``) into the SQLite store, once.

Each file's imported length is remembered, so a file is read once, and a file still growing (an older
evaltrace still running) is read on from where the last import stopped. Lines that are not spans are
counted, logged and remembered; files are never deleted or changed.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaltrace.exporters.store_rows import StoredSpan
    from evaltrace.exporters.store_writer import ResourceIds

__all__ = ["ImportReport", "import_jsonl"]

# The writer and logging are imported by the functions that use them: the readers (``evaltrace traces list``)
# import this module for ImportReport, and a store without JSONL files imports nothing (issue 28, CLI start-up).
_LOGGER = "evaltrace.local_store"
_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class ImportReport:
    """What one import pass read."""

    files: int = 0
    spans: int = 0
    unreadable_lines: int = 0
    unreadable_files: int = 0


def _parse(lines: list[bytes]) -> tuple[list[StoredSpan], int]:
    # Imported here: a store without JSONL files is read without the OpenTelemetry SDK (CLI start-up).
    from evaltrace.exporters.span_json import span_from_dict
    from evaltrace.exporters.store_rows import stored_span

    spans: list[StoredSpan] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            spans.append(stored_span(span_from_dict(json.loads(line))))
        except Exception:  # a torn line of a crashed writer, or not a span at all: counted, never fatal
            bad += 1
    return spans, bad


def _offset(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT offset FROM imported_files WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


def _import_file(conn: sqlite3.Connection, path: Path, resources: ResourceIds) -> tuple[int, int] | None:
    from evaltrace.exporters.store_writer import in_transaction, write_spans

    """Import what is new in ``path``; None when nothing was.

    Only whole lines are read: a last line without its newline may be one an older evaltrace is still
    writing, and is read by a later import once complete. Each chunk is written under the write lock after
    checking the remembered offset again, so two processes importing at once never import a chunk twice.
    """
    offset = _offset(conn, path.name)
    size = path.stat().st_size
    if size <= offset:
        return None
    total_spans = total_bad = 0
    with path.open("rb") as f:
        while offset < size:
            f.seek(offset)
            chunk = f.read(_CHUNK_BYTES)
            end = chunk.rfind(b"\n") + 1
            if end == 0 and len(chunk) < _CHUNK_BYTES:
                break  # a last line still being written: left for a later import
            if end == 0:
                end = len(chunk)  # one line longer than a chunk: not a span we could have written
            spans, bad = _parse(chunk[:end].split(b"\n"))

            def work(
                c: sqlite3.Connection,
                start: int = offset,
                spans: list[StoredSpan] = spans,
                bad: int = bad,
                end: int = end,
            ) -> bool:
                if _offset(c, path.name) != start:
                    return False  # another process imported this chunk first
                write_spans(c, spans, resources)
                c.execute(
                    "INSERT INTO imported_files VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "offset = excluded.offset, spans = spans + excluded.spans, "
                    "unreadable_lines = unreadable_lines + excluded.unreadable_lines",
                    (path.name, start + end, len(spans), bad),
                )
                return True

            if not in_transaction(conn, resources, work):
                offset = _offset(conn, path.name)
                continue
            offset += end
            total_spans += len(spans)
            total_bad += bad
    return (total_spans, total_bad) if total_spans or total_bad else None


def import_jsonl(conn: sqlite3.Connection, store_dir: Path) -> ImportReport:
    """Import what is new in ``<store_dir>/traces/*.jsonl``.

    A file that cannot be read (a dangling link, another user's file) is logged, counted in
    ``unreadable_files`` and skipped: it never stops the store from opening.
    """
    folder = store_dir / "traces"
    if not folder.is_dir():
        return ImportReport()
    import logging

    from evaltrace.exporters.store_writer import ResourceIds

    logger = logging.getLogger(_LOGGER)
    files = spans = bad = unreadable = 0
    resources = ResourceIds()
    for path in sorted(folder.glob("*.jsonl")):
        try:
            result = _import_file(conn, path, resources)
        except OSError as exc:
            unreadable += 1
            logger.warning("%s: cannot be read and was skipped (%s)", path, exc.strerror or exc)
            continue
        if result is None:
            continue
        files += 1
        spans += result[0]
        bad += result[1]
        if result[1]:
            logger.warning("%s: %d line(s) are not spans and were skipped; the file is kept", path, result[1])
    return ImportReport(files, spans, bad, unreadable)
