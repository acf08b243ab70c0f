"""The embedded default backend: spans in an indexed SQLite file under ``.evaltrace/``, and a reader for it.

:class:`LocalStoreExporter` builds each batch's rows on the export queue's thread and hands them to a writer
process (``store_client``/``store_process``) that owns the database and writes the batch in one transaction,
so neither the application thread nor its GIL pays for SQLite; with ``writer="thread"``, where no usable
``sys.executable`` exists, or after the writer process died, the export queue's thread writes them itself
(``store_session``). :class:`LocalTraceStore` (defined in ``store_reader``, which imports no OpenTelemetry SDK,
and re-exported here) lists and reads traces through indexes. JSON Lines files that older versions wrote under
``.evaltrace/traces/`` are imported on first open. See ``store_db`` for the schema and ``store_options`` for
retention.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import forks
from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_client import WriterProcess, WriterStartError, python_is_usable
from evaltrace.exporters.store_db import StoreError
from evaltrace.exporters.store_import import ImportReport
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY, LocalStoreOptions
from evaltrace.exporters.store_query import AmbiguousTraceIdError, TraceFilter, TraceSummary
from evaltrace.exporters.store_reader import LocalTraceStore, TraceIdError, check_trace_id
from evaltrace.exporters.store_rows import stored_row, stored_span
from evaltrace.exporters.store_session import RETENTION_INTERVAL_S, StoreSession, StoreWriteError
from evaltrace.exporters.store_span import from_plain

__all__ = [
    "DEFAULT_DIRECTORY",
    "RETENTION_INTERVAL_S",
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
SHUTDOWN_TIMEOUT_S = 10.0
"""How long :meth:`LocalStoreExporter.shutdown` waits for the writer process to finish what it was sent."""
SETTLE_TIMEOUT_S = 10.0
"""While the writer process cannot store (a full disk), how long ``export`` waits to learn its batch's outcome."""
_abandoned: list[object] = []


class LocalStoreExporter(SpanExporter):
    """Writes exported spans to ``<directory>/traces.sqlite3``, one transaction per ``export`` call.

    The database and its WAL files are ``0600`` and the folders evaltrace creates ``0700``: spans hold prompts
    and outputs. Several processes may write the same store. Retention deletes whole traces, oldest first, and
    counts them in :meth:`stats`. With the writer process, ``export`` returns once the batch is handed over:
    :meth:`force_flush` waits until it is stored.
    """

    def __init__(
        self,
        directory: str | Path | LocalStoreOptions = DEFAULT_DIRECTORY,
        *,
        max_age_s: float | None = None,
        max_bytes: int | None = None,
        writer: str | None = None,
    ) -> None:
        """Create the exporter; the store (and the writer process) is opened on the first export.

        Args:
            directory: Store root, or :class:`LocalStoreOptions` (then the settings below are ignored).
            max_age_s: Retention by age (default ``EVALTRACE_LOCAL_STORE_MAX_AGE``, else 7 days; 0 = forever).
            max_bytes: Retention by size (default ``EVALTRACE_LOCAL_STORE_MAX_BYTES``, else 1 GB; 0 = no cap).
            writer: ``"process"`` or ``"thread"`` (default ``EVALTRACE_LOCAL_STORE_WRITER``, else ``"process"``).

        Raises:
            ConfigError: A setting, or its environment variable, is invalid.
        """
        options = (
            directory
            if isinstance(directory, LocalStoreOptions)
            else LocalStoreOptions(Path(directory), max_age_s, max_bytes, writer)
        )
        self.options = options.resolved()
        # Absolute now: the writer process and an in-process fallback after a chdir() write the same store.
        self.directory = Path(self.options.directory).absolute()
        self.on_lost: Callable[[int, str], None] | None = None
        """Told of spans lost after ``export`` returned SUCCESS (the export queue moves them to ``export_failed``)."""
        self._lock = threading.Lock()
        self._closed = False
        self._disabled = False
        self._lost_spans = 0
        self._session = self._new_session()
        self._use_process = self.options.writer == "process" and python_is_usable()
        self._process: WriterProcess | None = None
        self._starting: WriterProcess | None = None  # spawned, not ready yet: shutdown() kills it
        self._processes: list[WriterProcess] = []  # every one started in this process, for their counts
        forks.reinit_after_fork(self)

    def _new_session(self) -> StoreSession:
        return StoreSession(self.directory, self.options.max_age_s or 0.0, self.options.max_bytes or 0)

    @property
    def import_report(self) -> ImportReport:
        """What the first open imported from JSONL files (in this process or its writer process)."""
        for process in self._processes:
            if process.import_report.files or process.import_report.unreadable_files:
                return process.import_report
        return self._session.import_report

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id while one is writing for this exporter, else ``None``."""
        process = self._process
        return process.pid if process is not None and not process.dead else None

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock, session and writer process on first export (never the parent's)."""
        self._lock = threading.Lock()
        if self._session.conn is not None:
            _abandoned.append(self._session.conn)  # closing it here could disturb the parent's locks; never use it
        self._session = self._new_session()
        for process in self._processes:
            process.abandon_after_fork()  # the parent's pipe: never written from here
            _abandoned.append(process)
        self._process = None
        self._starting = None
        self._processes = []
        self._lost_spans = 0  # counts are per process, as the export queue's

    def _connection(self) -> sqlite3.Connection:
        """The in-process connection (the thread writer's)."""
        return self._session.connection()

    def _writer(self) -> WriterProcess | None:
        """The writer process, started on first use; ``None`` when batches are written in this process."""
        if not self._use_process:
            return None
        process = self._process
        if process is not None and process.dead and process.restartable:
            process = self._process = None  # retired after a torn frame (store_client): a new one takes over
        if process is None:
            try:
                process = self._start_writer()
            except WriterStartError as exc:
                if self._closed:  # shut down while it started: shutdown() killed it
                    return None
                self._use_process = False  # nothing was sent: nothing lost, this process writes instead
                logger.warning("local store: no writer process (%s); spans are written in this process", exc)
                return None
            if self._closed:  # shut down while it started: nothing may outlive shutdown()
                process.close(0.0)
                return None
        if process.dead:
            self._use_process = False  # it said so once (store_client): this process writes from now on
            return None
        return process

    def _start_writer(self) -> WriterProcess:
        process = WriterProcess(self.directory, self.options.max_age_s or 0.0, self.options.max_bytes or 0)
        process.on_lost = self._lost_after_export
        self._starting = process
        try:
            process.start()
        finally:
            self._starting = None
        self._process = process
        self._processes.append(process)
        return process

    def _lost_after_export(self, spans: int, cause: str) -> None:
        listener = self.on_lost
        if listener is not None:
            listener(spans, cause)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Store ``spans`` in one transaction; a failure is logged and reported, never raised.

        With the writer process this returns once the batch is handed over (waiting, without the GIL, while
        the process is busy with earlier batches). A span SQLite refuses loses only itself: the batch is then
        written span by span, and the spans that still fail are counted in :meth:`stats` (``lost_spans``).
        """
        if self._closed or self._disabled:
            return SpanExportResult.FAILURE
        if self._process is not None and self._process.store_unusable:
            self._disabled = True  # the writer process logged why, once
            return SpanExportResult.FAILURE
        try:
            if self._use_process:
                rows = [stored_row(span) for span in spans]  # outside the lock: JSON work needs no database
                with self._lock:
                    process = self._writer()
                    if process is not None and process.failing:  # this batch's outcome is the export's result
                        lost = process.send_settled(rows, SETTLE_TIMEOUT_S)
                        if lost is not None:
                            return self._settled(lost, len(rows))
                    elif process is not None and process.send(rows):
                        return SpanExportResult.SUCCESS
                stored = [from_plain(row) for row in rows]  # the writer process is gone: written here
            else:
                stored = [stored_span(span) for span in spans]
            with self._lock:
                if self._closed:  # shut down while this batch waited: the export queue counts it failed
                    return SpanExportResult.FAILURE
                lost = self._session.write(stored)
                self._lost_spans += lost
            if lost:
                self._lost_after_export(lost, "spans refused by SQLite")
        except StoreWriteError:  # a full disk...: the session logged it once for the episode
            self._lost_spans += len(spans)
            return SpanExportResult.FAILURE
        except StoreError as exc:  # corrupt, or a newer evaltrace's: it will not heal while this process runs
            self._disabled = True  # one warning, not one per batch
            logger.warning("%s; spans are not written to it", exc)
            return SpanExportResult.FAILURE
        except Exception:
            self._lost_spans += len(spans)
            log_internal_error("writing spans to the local store")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS  # spans lost one by one are logged and counted, the rest are stored

    def _settled(self, lost: int, sent: int) -> SpanExportResult:
        """The result of a batch the writer process answered while failing: FAILURE when none of it was stored."""
        if sent and lost >= sent:
            return SpanExportResult.FAILURE  # counted in the process's lost_spans; the export queue counts it failed
        if lost:
            self._lost_after_export(lost, "spans refused by SQLite")
        return SpanExportResult.SUCCESS

    def stats(self) -> dict[str, int]:
        """What retention deleted in this process, spans it could not write, and what the first open imported.

        Counts include what the writer process acknowledged so far, and the spans it had not acknowledged when
        it died (``lost_spans``).
        """
        report = self.import_report
        processes = self._processes
        return {
            "retention_deleted_traces": self._session.deleted.traces + sum(p.deleted_traces for p in processes),
            "retention_deleted_spans": self._session.deleted.spans + sum(p.deleted_spans for p in processes),
            "imported_spans": report.spans,
            "imported_unreadable_lines": report.unreadable_lines,
            "imported_unreadable_files": report.unreadable_files,
            "lost_spans": self._lost_spans + sum(p.lost_spans for p in processes),
        }

    def shutdown(self, timeout_millis: int = int(SHUTDOWN_TIMEOUT_S * 1000)) -> None:
        """Stop accepting spans; let the writer process finish within ``timeout_millis``; close the database.

        Returns within ``timeout_millis`` (plus about a second if the writer must be killed), with no writer
        process left running: one still starting is killed. What the writer process has not acknowledged by
        then is counted lost (``lost_spans``) and logged.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        self._closed = True
        starting = self._starting
        if starting is not None:
            starting.kill()  # nothing was sent to it yet; the export starting it returns FAILURE
        process = self._process
        if process is not None:  # outside the lock: an export blocked on a full pipe holds it
            process.close(deadline - time.monotonic())
        if self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                self._session.close()
            finally:
                self._lock.release()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until the writer process stored every batch handed to it.

        Batches written in this process are committed before ``export`` returns.

        Spans lost are counted in ``stats()["lost_spans"]`` and told to ``on_lost`` (so the export queue's counts
        and ``EvaltraceHandle.force_flush`` report them), not here: a provider's flush on an older SDK stops at
        the first False, which would leave the application's own processors unflushed.

        Returns:
            False at the timeout.
        """
        process = self._process
        return process is None or process.wait(timeout_millis / 1000)
