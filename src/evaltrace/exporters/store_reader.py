"""Reading the local store: :class:`LocalTraceStore`, and checking the trace ids users type.

Kept apart from the exporter so that ``evaltrace traces list`` reads the store without importing the
OpenTelemetry SDK (spans are only rebuilt, with the SDK, by ``show`` and ``export``).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.exceptions import EvaltraceError
from evaltrace.exporters.store_db import DB_NAME, StoreError, open_db, open_db_readonly
from evaltrace.exporters.store_import import ImportReport, import_jsonl
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY
from evaltrace.exporters.store_query import (
    TraceFilter,
    TraceSummary,
    Unreadable,
    find_traces,
    resolve_trace_id,
    trace_spans,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.exporters.store_sessions import SessionSummary

__all__ = ["LocalTraceStore", "StoreError", "TraceIdError", "check_trace_id"]

_TRACE_ID = re.compile(r"[0-9a-f]{1,32}")


class TraceIdError(EvaltraceError, LookupError):
    """A trace reference that is not a trace id or a prefix of one (32 hexadecimal digits at most)."""


def check_trace_id(reference: str, argument: str = "trace id") -> str:
    """Return ``reference`` lower-cased when it is a trace id or a prefix of one.

    Trace ids are only ever compared with what the store holds, never used to build a path; checking them still
    turns ``../x`` or ``/etc/passwd`` into a clear error instead of a silent "not found".

    Raises:
        TraceIdError: It holds anything but hexadecimal digits, or more than 32 of them.
    """
    lowered = reference.lower()
    if not _TRACE_ID.fullmatch(lowered):
        raise TraceIdError(f"{argument}: {reference!r} is not a trace id (up to 32 hexadecimal digits)")
    return lowered


class LocalTraceStore:
    """Reads traces back from a local store directory (importing older JSONL files on first open)."""

    def __init__(self, directory: str | Path = DEFAULT_DIRECTORY) -> None:
        """Open the store rooted at ``directory`` (which may not exist yet: it then reads as empty).

        The database is opened on first use; every reading method then raises :class:`StoreError` when the
        store is unreadable, corrupt or written by a newer evaltrace. A store this user cannot write is read
        read-only (older JSONL files are then not imported).
        """
        self.directory = Path(directory)
        self.traces_dir = self.directory / "traces"
        self._conn: sqlite3.Connection | None = None
        self.import_report = ImportReport()

    def _connection(self) -> sqlite3.Connection | None:
        """The open database, None when nothing is stored.

        Raises:
            StoreError: The store cannot be opened: unreadable, corrupt, or written by a newer evaltrace.
        """
        if self._conn is None:
            path = self.directory / DB_NAME
            if not path.exists() and not any(self.traces_dir.glob("*.jsonl")):
                return None  # nothing stored: reading creates no file
            if path.exists() and not (os.access(path, os.W_OK) and os.access(self.directory, os.W_OK)):
                self._conn = open_db_readonly(self.directory)  # another user's store: read it, import nothing
                return self._conn
            try:
                self._conn = open_db(self.directory)
            except OSError as exc:
                raise StoreError(f"local store {path} cannot be opened ({exc.strerror or exc})") from None
            self.import_report = import_jsonl(self._conn, self.directory)
        return self._conn

    def close(self) -> None:
        """Close the database connection (reopened on next use)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> LocalTraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_traces(self, limit: int | None = None, where: TraceFilter | None = None) -> list[TraceSummary]:
        """Summaries of the stored traces ``where`` selects, newest first (``limit`` wins over ``where.limit``)."""
        conn = self._connection()
        if conn is None:
            return []
        query = where or TraceFilter()
        if limit is not None:
            query = TraceFilter(**{**query.__dict__, "limit": limit})
        return find_traces(conn, query)

    def resolve(self, trace_id: str) -> str | None:
        """The full id of the one stored trace ``trace_id`` is or starts with, or None.

        Raises:
            TraceIdError: ``trace_id`` is not hexadecimal (:func:`check_trace_id`).
            AmbiguousTraceIdError: Several traces start with it (a ``LookupError`` listing them).
        """
        prefix = check_trace_id(trace_id)
        conn = self._connection()
        return None if conn is None else resolve_trace_id(conn, prefix)

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """All spans of the trace whose id is ``trace_id`` or starts with it, by start time ([] when none).

        Raises:
            TraceIdError: ``trace_id`` is not hexadecimal (:func:`check_trace_id`).
            AmbiguousTraceIdError: The prefix matches several traces (a ``LookupError``).
        """
        full = self.resolve(trace_id)
        conn = self._connection()
        return [] if full is None or conn is None else trace_spans(conn, full)

    def list_sessions(self, limit: int = 20) -> list[SessionSummary]:
        """Summaries of the stored sessions (traces sharing ``session.id``), most recently active first."""
        from evaltrace.exporters.store_sessions import find_sessions  # here: `traces list` starts without it

        conn = self._connection()
        return [] if conn is None else find_sessions(conn, limit)

    def session(self, session_id: str) -> tuple[SessionSummary, list[list[ReadableSpan]]] | None:
        """One session's summary and its traces' spans, oldest trace first (its turns); None when not stored."""
        from evaltrace.exporters.store_sessions import find_sessions, session_trace_ids

        conn = self._connection()
        if conn is None:
            return None
        found = find_sessions(conn, 1, session_id)
        if not found:
            return None
        return found[0], [trace_spans(conn, trace_id) for trace_id in session_trace_ids(conn, session_id)]

    def iter_traces(
        self, where: TraceFilter | None = None, unreadable: Unreadable | None = None
    ) -> Iterator[tuple[TraceSummary, list[ReadableSpan]]]:
        """Each trace ``where`` selects with its spans, newest first (for ``evaltrace traces export``).

        With ``unreadable`` (a partly corrupt store), span rows that cannot be decoded and traces whose rows
        cannot be read (a damaged page) are skipped and counted there; every readable span is still given.
        Without it, the first such error is raised.

        Raises:
            StoreError: The list of traces itself cannot be read.
        """
        conn = self._connection()
        if conn is None:
            return
        try:
            summaries = find_traces(conn, where or TraceFilter())
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"local store {self.directory / DB_NAME}: its list of traces is unreadable ({exc})"
            ) from None
        for summary in summaries:
            try:
                spans = trace_spans(conn, summary.trace_id, unreadable)
            except sqlite3.DatabaseError:
                if unreadable is None:
                    raise
                unreadable.spans += summary.span_count
                unreadable.traces += 1
                continue
            yield summary, spans

    def counts(self) -> dict[str, Any]:
        """Traces and spans stored, and what imports of older JSONL files read and skipped overall."""
        conn = self._connection()
        if conn is None:
            return {"traces": 0, "spans": 0, "imported_spans": 0, "imported_unreadable_lines": 0}
        imported = conn.execute(
            "SELECT coalesce(sum(spans), 0), coalesce(sum(unreadable_lines), 0) FROM imported_files"
        )
        spans, bad = imported.fetchone()
        return {
            "traces": conn.execute("SELECT count(*) FROM traces").fetchone()[0],
            "spans": conn.execute("SELECT count(*) FROM spans").fetchone()[0],
            "imported_spans": spans,
            "imported_unreadable_lines": bad,
        }
