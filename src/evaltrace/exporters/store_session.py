"""One writer's hold on the local store: the connection opened on first write, the import, retention, the cap.

Used by the exporter's thread (``writer="thread"``) and by the writer process (``store_process``) alike, so both
store, retain and count the same way. Imports no OpenTelemetry SDK.

A store that fails to write (a full disk, an I/O error) is one loss episode: one WARNING when it starts, naming
the cause, one INFO line when a batch is stored again, never a traceback per batch. Nothing stays broken: the
next batch is tried as the first was, so writing resumes by itself once there is room again.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from evaltrace._internal.episodes import LossEpisode
from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_db import DB_NAME, StoreError, is_full, open_db, write_transaction
from evaltrace.exporters.store_import import ImportReport, import_jsonl
from evaltrace.exporters.store_space import SpaceKeeper, SpaceLimits, evict_for_room
from evaltrace.exporters.store_span import StoredSpan
from evaltrace.exporters.store_writer import ResourceIds, RetentionResult, apply_retention, write_batch

__all__ = ["RETENTION_INTERVAL_S", "StoreSession", "StoreWriteError"]

logger = logging.getLogger("evaltrace.local_store")
RETENTION_INTERVAL_S = 60.0
"""Retention by age runs when the store is opened, then at most once a minute (after a batch is written); the size
cap is checked after every batch (``store_space``)."""


class StoreWriteError(Exception):
    """A batch could not be stored (a full disk, an I/O error); logged once per episode, counted by the caller."""


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
        self._space = SpaceKeeper(directory, DB_NAME)
        self._episode = LossEpisode(logger, f"local store {directory}", recovery_level=logging.INFO)

    @property
    def opened(self) -> bool:
        """Whether the store was opened (and its JSONL files imported)."""
        return self.conn is not None

    @property
    def limits(self) -> SpaceLimits:
        """The budgets of the database and its WAL that ``max_bytes`` gives."""
        return SpaceLimits(self.max_bytes)

    @property
    def failing(self) -> bool:
        """Whether the last batch could not be stored (a loss episode is going on)."""
        return self._episode.open

    def connection(self) -> sqlite3.Connection:
        """The open connection; the first call opens the store and imports its JSONL files.

        Raises:
            StoreError: The file is not a store, is corrupt, or a newer evaltrace wrote it.
        """
        if self.conn is None:
            self.conn = conn = open_db(self.directory)
            self.limits.apply(conn)
            if self.cache_kib is not None:
                conn.execute(f"PRAGMA cache_size = -{int(self.cache_kib)}")
            try:
                self.import_report = import_jsonl(conn, self.directory)
            except Exception:  # old files are a bonus: never a reason to lose the spans being exported
                log_internal_error("importing JSONL files into the local store")
        return self.conn

    def write(self, spans: Sequence[StoredSpan]) -> int:
        """Write ``spans`` in one transaction (evicting the oldest traces first if the disk is full), then retention.

        Under a small cap (``SpaceLimits.chunk_spans``) the batch is written a chunk at a time, each followed by
        the cap's upkeep, so one transaction's WAL stays within the WAL's share.

        Returns:
            How many spans could not be written (one bad span loses only itself; see ``write_batch``; chunks
            after a failing one are counted too).

        Raises:
            StoreError: The store cannot be used (corrupt, or a newer evaltrace's).
            StoreWriteError: Nothing of the batch was written (logged once per episode; the caller counts it).
            Exception: Nothing of the batch was written, for a reason that is evaltrace's bug.
        """
        size = self.limits.chunk_spans or max(1, len(spans))
        lost = stored = 0
        for start in range(0, len(spans), size):
            part = spans[start : start + size]
            try:
                conn = self.connection()
                lost += self._write_making_room(conn, part)
            except StoreError:
                raise
            except (sqlite3.Error, OSError) as exc:
                self._episode.loss(len(spans) - stored, self._cause(exc))
                if not stored:
                    raise StoreWriteError(str(exc)) from None
                return lost + len(spans) - stored  # the chunks before are stored: the rest is counted lost
            stored += len(part)
            self._upkeep(conn)
        self._episode.ok()
        if self.conn is not None:
            self._retain(self.conn)
        return lost

    def _upkeep(self, conn: sqlite3.Connection) -> None:
        """Keep the store within its cap after a commit (``store_space``)."""
        try:
            self._space.after_commit(conn, self.max_bytes, self._size_evicted)
        except sqlite3.Error as exc:  # the spans are committed: a failed clean-up is not a failed export
            if not is_full(exc):  # on a full disk the next batch tells (and makes room)
                log_internal_error("keeping the local store within max_bytes")
        except Exception:
            log_internal_error("keeping the local store within max_bytes")

    def _retain(self, conn: sqlite3.Connection) -> None:
        try:
            self._maybe_retain(conn)
        except Exception:  # the spans are committed: a failed clean-up is not a failed export
            log_internal_error("applying retention to the local store")

    def _write_making_room(self, conn: sqlite3.Connection, spans: Sequence[StoredSpan]) -> int:
        """``write_batch``; on a full disk, evict the oldest traces and try once more (not again while failing).

        While an episode goes on, old traces are not evicted batch after batch for a disk someone else filled:
        they would all go for nothing.
        """
        try:
            return write_batch(conn, spans, self.resources)
        except sqlite3.OperationalError as exc:
            if not is_full(exc) or self._episode.open:
                raise
            try:
                evicted = evict_for_room(conn)
            except sqlite3.Error:
                raise exc from None  # no room even to delete: the batch is refused
            if not evicted.traces:
                raise
            self._count(evicted, "a full disk")
        return write_batch(conn, spans, self.resources)

    def _cause(self, exc: BaseException) -> str:
        if isinstance(exc, sqlite3.Error) and is_full(exc):
            what = f"the disk is full ({exc})"
        else:
            what = f"{type(exc).__name__}: {exc}"
        return f"{what}; spans are refused until a batch can be stored again, which is tried with every batch"

    def _count(self, result: RetentionResult, why: str, level: int = logging.INFO) -> None:
        """Add evicted traces to :attr:`deleted` (``stats()``); the size cap's, batch after batch, log at DEBUG."""
        if result.traces:
            self.deleted = RetentionResult(self.deleted.traces + result.traces, self.deleted.spans + result.spans)
            logger.log(
                level,
                "local store %s: %s evicted the oldest %d trace(s), %d span(s)",
                self.directory,
                why,
                result.traces,
                result.spans,
            )

    def _size_evicted(self, result: RetentionResult) -> None:
        self._count(result, "the size cap", logging.DEBUG)

    def _maybe_retain(self, conn: sqlite3.Connection) -> None:
        now = time.monotonic()
        if now < self._next_retention or not self.max_age_s:
            return
        self._next_retention = now + RETENTION_INTERVAL_S
        max_age = self.max_age_s
        result = write_transaction(conn, lambda c: apply_retention(c, max_age, 0))
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
