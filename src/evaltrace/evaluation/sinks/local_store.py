"""Local store sink: session-scope scores into the store's ``session_evals`` table (one row per session and evaluator).

Span and trace scores need no sink here: they reach the store on their spans (the enriched span, or the
``evaluation {name}`` span that follows it). Session scores belong to no span, so this sink writes them, through the
store's own write transaction (``BEGIN IMMEDIATE``, retried while another writer holds the lock), on the sink
worker's thread. ``configure()`` adds it when the local store is on and a session-scope evaluator is configured.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace._internal import forks
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.exporters.store_db import StoreError, is_busy, open_db
from evaltrace.exporters.store_sessions import ensure_session_table, write_session_scores
from evaltrace.schema import Score


class LocalStoreSessionSink:
    """Write session scores to ``<directory>/traces.sqlite3``; other scores are accepted and left to their spans.

    Args:
        directory: The local store's directory (``.evaltrace`` by default in ``configure()``).
    """

    name = "local_store"

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).absolute()
        self._conn: sqlite3.Connection | None = None
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a connection of its own on first use (SQLite connections never cross a fork)."""
        self._conn = None

    def export(self, batch: Sequence[Score]) -> SinkResult:
        """Upsert the batch's session scores; a busy or unwritable store is retried, a corrupt one rejected."""
        sessions = tuple(score for score in batch if score.session_id is not None)
        if not sessions:
            return SinkResult()
        try:
            conn = self._connection()
            write_session_scores(conn, sessions)
        except StoreError as exc:  # corrupt, or a newer evaltrace's: retrying cannot help
            return SinkResult(rejected=sessions, error=str(exc))
        except sqlite3.OperationalError as exc:
            self._close()
            return SinkResult(
                failed=sessions, error=f"local store busy or unwritable: {exc}" if is_busy(exc) else str(exc)
            )
        except OSError as exc:  # the folder cannot be created (a full or read-only disk): may recover
            return SinkResult(failed=sessions, error=f"local store {self.directory}: {exc}")
        return SinkResult()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = open_db(self.directory)
            ensure_session_table(conn)  # a store an earlier version made lacks the table
            self._conn = conn
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered here (the worker batches); always True."""
        return True

    def shutdown(self) -> None:
        """Close the connection."""
        self._close()


def with_session_store(sinks: Sequence[Any], directory: Path | None, evaluators: Sequence[Any]) -> list[Any]:
    """``sinks`` plus a :class:`LocalStoreSessionSink` for ``directory`` when a session-scope evaluator is set.

    Not when no store is written (``directory`` None) or a sink named ``local_store`` is given already.
    """
    given = list(sinks)
    if directory is None or not any(getattr(item, "scope", None) == "session" for item in evaluators):
        return given
    if any(getattr(sink, "name", None) == LocalStoreSessionSink.name for sink in given):
        return given
    return [*given, LocalStoreSessionSink(directory)]
