"""The embedded default backend: spans in an indexed SQLite file under ``.evaltrace/``, and a reader for it.

:class:`LocalStoreExporter` writes each batch in one transaction from the export queue's thread (the
application thread never touches the database); :class:`LocalTraceStore` (defined in ``store_reader``, which
imports no OpenTelemetry SDK, and re-exported here) lists and reads traces through indexes. JSON Lines files that older versions wrote under ``.evaltrace/traces/`` are imported on first open.
See ``store_db`` for the schema and ``store_options`` for retention.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import forks
from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_db import StoreError, open_db, write_transaction
from evaltrace.exporters.store_import import ImportReport, import_jsonl
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY, LocalStoreOptions
from evaltrace.exporters.store_query import AmbiguousTraceIdError, TraceFilter, TraceSummary
from evaltrace.exporters.store_reader import LocalTraceStore, TraceIdError, check_trace_id
from evaltrace.exporters.store_rows import stored_span
from evaltrace.exporters.store_writer import ResourceIds, RetentionResult, apply_retention, write_batch

__all__ = [
    "DEFAULT_DIRECTORY",
    "AmbiguousTraceIdError",
    "LocalStoreExporter",
    "LocalStoreOptions",
    "LocalTraceStore",
    "TraceFilter",
    "TraceIdError",
    "TraceSummary",
    "check_trace_id",
]

logger = logging.getLogger("evaltrace.local_store")
RETENTION_INTERVAL_S = 60.0
"""Retention runs when the exporter opens the store, then at most once a minute (on the exporter thread)."""
_abandoned: list[sqlite3.Connection] = []


class LocalStoreExporter(SpanExporter):
    """Writes exported spans to ``<directory>/traces.sqlite3``, one transaction per ``export`` call.

    The database and its WAL files are ``0600`` and the folders evaltrace creates ``0700``: spans hold prompts
    and outputs. Several processes may write the same store. Retention deletes whole traces, oldest first, and
    counts them in :meth:`stats`.
    """

    def __init__(
        self,
        directory: str | Path | LocalStoreOptions = DEFAULT_DIRECTORY,
        *,
        max_age_s: float | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """Create the exporter; the store is opened on the first export.

        Args:
            directory: Store root, or :class:`LocalStoreOptions` (then the limits below are ignored).
            max_age_s: Retention by age (default ``EVALTRACE_LOCAL_STORE_MAX_AGE``, else 7 days; 0 = forever).
            max_bytes: Retention by size (default ``EVALTRACE_LOCAL_STORE_MAX_BYTES``, else 1 GB; 0 = no cap).

        Raises:
            ConfigError: A limit, or its environment variable, is invalid.
        """
        options = (
            directory
            if isinstance(directory, LocalStoreOptions)
            else LocalStoreOptions(Path(directory), max_age_s, max_bytes)
        )
        self.options = options.resolved()
        self.directory = Path(self.options.directory)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._resources = ResourceIds()
        self._closed = False
        self._next_retention = 0.0
        self._deleted = RetentionResult()
        self._lost_spans = 0
        self._disabled = False
        self.import_report = ImportReport()
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock and, on first export, a new connection (never the parent's)."""
        self._lock = threading.Lock()
        if self._conn is not None:
            _abandoned.append(self._conn)  # closing it here could disturb the parent's locks; just never use it
        self._conn = None
        self._resources = ResourceIds()
        self._deleted = RetentionResult()
        self._lost_spans = 0  # counts are per process, as the export queue's

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = conn = open_db(self.directory)
            try:
                self.import_report = import_jsonl(conn, self.directory)
            except Exception:  # old files are a bonus: never a reason to lose the spans being exported
                log_internal_error("importing JSONL files into the local store")
        return self._conn

    def _maybe_retain(self, conn: sqlite3.Connection) -> None:
        now = time.monotonic()
        if now < self._next_retention:
            return
        self._next_retention = now + RETENTION_INTERVAL_S
        max_age, max_bytes = self.options.max_age_s or 0.0, self.options.max_bytes or 0
        result = write_transaction(conn, lambda c: apply_retention(c, max_age, max_bytes))
        if result.traces:
            # executescript steps the pragma to the end; a plain execute() frees a single page.
            conn.executescript("PRAGMA incremental_vacuum;")  # hand the freed pages back to the disk
            self._deleted = RetentionResult(self._deleted.traces + result.traces, self._deleted.spans + result.spans)
            logger.info(
                "local store %s: retention deleted %d trace(s), %d span(s)", self.directory, result.traces, result.spans
            )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans`` in one transaction; a failure is logged and reported, never raised.

        A span SQLite refuses loses only itself: the batch is then written span by span, and the spans that
        still fail are counted in :meth:`stats` (``lost_spans``).
        """
        if self._closed or self._disabled:
            return SpanExportResult.FAILURE
        try:
            rows = [stored_span(span) for span in spans]  # outside the lock: JSON work needs no database
            with self._lock:
                conn = self._connection()
                lost = write_batch(conn, rows, self._resources)
                self._lost_spans += lost
        except StoreError as exc:  # corrupt, or a newer evaltrace's: it will not heal while this process runs
            self._disabled = True  # one warning, not one per batch
            logger.warning("%s; spans are not written to it", exc)
            return SpanExportResult.FAILURE
        except Exception:
            self._lost_spans += len(spans)
            log_internal_error("writing spans to the local store")
            return SpanExportResult.FAILURE
        try:
            with self._lock:
                self._maybe_retain(conn)
        except Exception:  # the spans are committed: a failed clean-up is not a failed export
            log_internal_error("applying retention to the local store")
        return SpanExportResult.SUCCESS  # spans lost one by one are logged and counted, the rest are stored

    def stats(self) -> dict[str, int]:
        """What retention deleted in this process, spans it could not write, and what the first open imported."""
        return {
            "retention_deleted_traces": self._deleted.traces,
            "retention_deleted_spans": self._deleted.spans,
            "imported_spans": self.import_report.spans,
            "imported_unreadable_lines": self.import_report.unreadable_lines,
            "imported_unreadable_files": self.import_report.unreadable_files,
            "lost_spans": self._lost_spans,
        }

    def shutdown(self) -> None:
        """Stop accepting spans and close the database."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every export is committed before it returns; nothing to flush."""
        return True
