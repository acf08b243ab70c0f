"""One writer's hold on the local store: the connection opened on first write, the import, retention.

Used by the exporter's thread (``writer="thread"``) and by the writer process (``store_process``) alike, so both
store, retain and count the same way. Imports no OpenTelemetry SDK.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_db import open_db, write_transaction
from evaltrace.exporters.store_import import ImportReport, import_jsonl
from evaltrace.exporters.store_span import StoredSpan
from evaltrace.exporters.store_writer import ResourceIds, RetentionResult, apply_retention, write_batch

__all__ = ["RETENTION_INTERVAL_S", "StoreSession"]

logger = logging.getLogger("evaltrace.local_store")
RETENTION_INTERVAL_S = 60.0
"""Retention runs when the store is opened, then at most once a minute (after a batch is written)."""


class StoreSession:
    """A connection to ``<directory>/traces.sqlite3`` opened on the first :meth:`write`; not thread-safe."""

    def __init__(self, directory: Path, max_age_s: float, max_bytes: int, cache_kib: int | None = None) -> None:
        """Remember where the store is and its limits (``0`` disables one); nothing is opened yet.

        ``cache_kib`` replaces the connection's page cache size (``open_db`` sets 16 MB, for a writer inside the
        application); the writer process sets more (``store_process.WRITER_CACHE_KIB``).
        """
        self.directory = directory
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes
        self.cache_kib = cache_kib
        self.conn: sqlite3.Connection | None = None
        self.resources = ResourceIds()
        self.deleted = RetentionResult()
        self.import_report = ImportReport()
        self._next_retention = 0.0

    @property
    def opened(self) -> bool:
        """Whether the store was opened (and its JSONL files imported)."""
        return self.conn is not None

    def connection(self) -> sqlite3.Connection:
        """The open connection; the first call opens the store and imports its JSONL files.

        Raises:
            StoreError: The file is not a store, is corrupt, or a newer evaltrace wrote it.
        """
        if self.conn is None:
            self.conn = conn = open_db(self.directory)
            if self.cache_kib is not None:
                conn.execute(f"PRAGMA cache_size = -{int(self.cache_kib)}")
            try:
                self.import_report = import_jsonl(conn, self.directory)
            except Exception:  # old files are a bonus: never a reason to lose the spans being exported
                log_internal_error("importing JSONL files into the local store")
        return self.conn

    def write(self, spans: Sequence[StoredSpan]) -> int:
        """Write ``spans`` in one transaction, then retention when it is due.

        Returns:
            How many spans could not be written (one bad span loses only itself; see ``write_batch``).

        Raises:
            StoreError: The store cannot be used (corrupt, or a newer evaltrace's).
            Exception: Nothing of the batch was written.
        """
        conn = self.connection()
        lost = write_batch(conn, spans, self.resources)
        try:
            self._maybe_retain(conn)
        except Exception:  # the spans are committed: a failed clean-up is not a failed export
            log_internal_error("applying retention to the local store")
        return lost

    def _maybe_retain(self, conn: sqlite3.Connection) -> None:
        now = time.monotonic()
        if now < self._next_retention:
            return
        self._next_retention = now + RETENTION_INTERVAL_S
        max_age, max_bytes = self.max_age_s, self.max_bytes
        result = write_transaction(conn, lambda c: apply_retention(c, max_age, max_bytes))
        if result.traces:
            # executescript steps the pragma to the end; a plain execute() frees a single page.
            conn.executescript("PRAGMA incremental_vacuum;")  # hand the freed pages back to the disk
            self.deleted = RetentionResult(self.deleted.traces + result.traces, self.deleted.spans + result.spans)
            logger.info(
                "local store %s: retention deleted %d trace(s), %d span(s)", self.directory, result.traces, result.spans
            )

    def close(self) -> None:
        """Close the connection (a later :meth:`write` opens it again)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
