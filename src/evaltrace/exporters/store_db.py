"""The SQLite file of the local trace store: opening it, its schema, and write transactions that retry when busy.

One database per store (``<store>/traces.sqlite3``) in WAL mode, so readers never block the writer and several
processes (web-server workers, the ``evaltrace worker``) can write the same store: each waits up to
``busy_timeout`` for the write lock, and a transaction that still finds the database busy is retried.

Tables: ``spans`` (one row per span, the latest copy wins; attributes, events and links in one JSON blob),
``traces`` (one summary per trace, maintained on write so listing never reads spans), ``evals`` (one row per
span and evaluator, with its outcome), ``span_text`` (FTS5 over inputs and outputs; a plain table searched
with LIKE when the sqlite build lacks FTS5), ``resources`` (each distinct resource stored once),
``imported_files`` (JSONL files of older versions already read), ``session_evals`` (the latest session-scope
verdict per session and evaluator; see ``store_sessions``: created on first use in older stores) and ``meta``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from evaltrace._internal.private_files import PRIVATE_FILE_MODE, make_private_dirs
from evaltrace.exceptions import EvaltraceError

__all__ = [
    "DB_NAME",
    "SESSION_SCHEMA",
    "STORE_VERSION",
    "StoreError",
    "StoreVersionError",
    "has_fts",
    "is_full",
    "open_db",
    "open_db_readonly",
    "write_transaction",
]

DB_NAME = "traces.sqlite3"
STORE_VERSION = 1
"""The schema version this evaltrace writes (``meta.version``); a store with a higher one is refused."""
BUSY_TIMEOUT_MS = 10_000
_RETRIES = 20
_T = TypeVar("_T")

SESSION_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_evals (
    session_id TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    score_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    outcome TEXT,
    value REAL,
    label TEXT,
    comment TEXT,
    judged_at TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, evaluator)
) WITHOUT ROWID;
"""
"""The table of session-scope scores; in the schema of new stores, created on first use in older ones."""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resources (id INTEGER PRIMARY KEY, json TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS spans (
    id INTEGER PRIMARY KEY,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    span_type TEXT,
    status TEXT NOT NULL,
    app_error INTEGER NOT NULL,
    start_time INTEGER NOT NULL,
    end_time INTEGER NOT NULL,
    resource_id INTEGER NOT NULL,
    service TEXT NOT NULL,
    session_id TEXT,
    user_id TEXT,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost REAL,
    data TEXT NOT NULL,
    UNIQUE (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_kind ON spans (span_type, status);
-- A rowid table (older stores have it WITHOUT ROWID; the same SQL reads both): its wide rows are appended
-- in write order, and only the narrow trace_id index takes the random-key inserts whose pages a commit rewrites.
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    root_span_id TEXT NOT NULL,
    root_name TEXT NOT NULL,
    service TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL,
    span_count INTEGER NOT NULL,
    error INTEGER NOT NULL,
    eval_pass INTEGER NOT NULL,
    eval_fail INTEGER NOT NULL,
    eval_error INTEGER NOT NULL,
    eval_not_evaluated INTEGER NOT NULL,
    eval_pending INTEGER NOT NULL,
    session_id TEXT,
    user_id TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    stored_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_start ON traces (start_time);
CREATE INDEX IF NOT EXISTS traces_stored ON traces (stored_at);
CREATE INDEX IF NOT EXISTS traces_service ON traces (service, start_time);
CREATE INDEX IF NOT EXISTS traces_error ON traces (error, start_time);
CREATE INDEX IF NOT EXISTS traces_failed ON traces (eval_fail, start_time);
CREATE INDEX IF NOT EXISTS traces_session ON traces (session_id, start_time);
CREATE INDEX IF NOT EXISTS traces_user ON traces (user_id, start_time);
CREATE TABLE IF NOT EXISTS evals (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    outcome TEXT,
    source_span_id TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id, evaluator)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS evals_source ON evals (trace_id, source_span_id);
CREATE INDEX IF NOT EXISTS evals_evaluator ON evals (evaluator, outcome, trace_id);
CREATE TABLE IF NOT EXISTS imported_files (
    name TEXT PRIMARY KEY, offset INTEGER NOT NULL, spans INTEGER NOT NULL, unreadable_lines INTEGER NOT NULL
);
"""
    + SESSION_SCHEMA
)
_FTS_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS span_text USING fts5 (trace_id UNINDEXED, text, detail = none, columnsize = 0)"
)
_PLAIN_TEXT_TABLE = "CREATE TABLE IF NOT EXISTS span_text (rowid INTEGER PRIMARY KEY, trace_id TEXT, text TEXT)"

FTS_AVAILABLE: bool | None = None
"""Whether this sqlite build has FTS5 (probed once); tests set it to False to exercise the LIKE fallback."""


def _fts_available() -> bool:
    global FTS_AVAILABLE
    if FTS_AVAILABLE is None:
        try:
            sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5 (x)")
            FTS_AVAILABLE = True
        except sqlite3.OperationalError:
            FTS_AVAILABLE = False
    return FTS_AVAILABLE


class StoreError(EvaltraceError):
    """The local store cannot be used: the file is unreadable, not a database, or corrupt."""


class StoreVersionError(StoreError):
    """The local store was written by a newer evaltrace (a higher ``meta.version``)."""


def is_busy(error: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (SQLITE_BUSY / SQLITE_LOCKED and their extended codes)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


def is_full(error: sqlite3.Error) -> bool:
    """The disk (or the filesystem's quota) is full: SQLITE_FULL, or an I/O error whose cause was ENOSPC."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        return True
    text = str(error).lower()
    return "disk is full" in text or "no space left" in text


def write_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction, retrying (with jitter) while the database is busy.

    ``busy_timeout`` already waits for the lock; a retry covers the cases SQLite reports busy at once (a WAL
    checkpoint or recovery in another process).
    """
    for attempt in range(_RETRIES):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or attempt == _RETRIES - 1:
                raise
            time.sleep(_jitter() * (attempt + 1))
            continue
        try:
            result = work(conn)
            conn.commit()  # a commit can fail too (a full disk): the transaction must not stay open
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        return result
    raise AssertionError("unreachable")  # pragma: no cover


def has_fts(conn: sqlite3.Connection) -> bool:
    """Whether this database's ``span_text`` is an FTS5 table (else it is searched with LIKE)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'fts'").fetchone()
    return row is not None and row[0] == "1"


def _create_schema(conn: sqlite3.Connection) -> None:
    if conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0]:
        return
    fts = _fts_available()
    conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA)  # one transaction: a racing process sees all or nothing
    try:
        conn.execute(_FTS_TABLE if fts else _PLAIN_TEXT_TABLE)
        conn.execute(
            "INSERT OR IGNORE INTO meta VALUES ('fts', ?), ('version', ?)", ("1" if fts else "0", str(STORE_VERSION))
        )
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a store a newer evaltrace wrote: its tables may mean something this version cannot know."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    try:
        version = int(row[0]) if row else STORE_VERSION
    except ValueError:
        version = STORE_VERSION + 1  # not a number we wrote: treat as unknown, never guess
    if version > STORE_VERSION:
        raise StoreVersionError(
            f"local store {path} was written by a newer evaltrace (store version {row[0]}, this evaltrace "
            f"reads version {STORE_VERSION}); upgrade evaltrace or use another --store"
        )


def _unusable(path: Path, exc: BaseException) -> StoreError:
    return StoreError(f"local store {path} is unreadable or corrupt ({exc})")


def _jitter() -> float:
    """A random wait between retries (random is imported here: only a busy store needs it, not CLI start-up)."""
    import random

    return random.uniform(0.01, 0.05)


def open_db_readonly(directory: Path) -> sqlite3.Connection:
    """Open the existing store database under ``directory`` for reading only (a store the user cannot write).

    Raises:
        StoreError: The file cannot be read, is not a store, or a newer evaltrace wrote it.
    """
    path = directory / DB_NAME
    try:
        return _connect_readonly(path, "mode=ro")
    except StoreVersionError:
        raise
    except sqlite3.OperationalError:
        pass  # a WAL store whose -shm file this user can neither find nor create (a folder it cannot write)
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, exc) from None
    try:
        return _connect_readonly(path, "mode=ro&immutable=1")
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, exc) from None


def _connect_readonly(path: Path, flags: str) -> sqlite3.Connection:
    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}?{flags}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
    )
    conn.isolation_level = None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _check_version(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def open_db(directory: Path) -> sqlite3.Connection:
    """Open (creating it ``0600`` with its schema when missing) the store database under ``directory``.

    SQLite gives the ``-wal`` and ``-shm`` files the database file's mode, so they are private too.

    Raises:
        StoreError: The file is not a store or is corrupt, or a newer evaltrace wrote it.
        sqlite3.OperationalError: The database stayed busy, or the disk is full.
        OSError: The folder or file cannot be created or opened for writing.
    """
    try:
        return _open_db(directory)
    except sqlite3.OperationalError as exc:
        if is_busy(exc) or is_full(exc):  # passing conditions, not a broken store: a later open may work
            raise
        raise _unusable(directory / DB_NAME, exc) from None
    except sqlite3.DatabaseError as exc:
        raise _unusable(directory / DB_NAME, exc) from None


def _open_db(directory: Path) -> sqlite3.Connection:
    make_private_dirs(directory)
    path = directory / DB_NAME
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE))  # an empty file is a new database
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        _configure(conn)
        _check_version(conn, path)
    except BaseException:
        conn.close()  # a corrupt or newer store: never leak the connection
        raise
    return conn


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA cache_size = -16000")  # 16 MB: the id indexes of a large store stay in memory
    # Checkpoint every 32 MB of WAL (2,048 pages of 16 kB) rather than 4 MB: index pages rewritten by many batches
    # are copied once. A writer's session sets both from its max_bytes (store_space.SpaceLimits).
    conn.execute("PRAGMA wal_autocheckpoint = 2048")
    conn.execute("PRAGMA journal_size_limit = 67108864")  # and the WAL file shrinks back to 64 MB after one
    for attempt in range(_RETRIES):
        try:
            # auto_vacuum and page_size only take effect before the first table. auto_vacuum lets retention hand
            # space back to the disk; 16 kB pages (not 4 kB) halve what a commit costs: fewer pages, frames and
            # checksums per batch written (older stores keep their page size, and work the same).
            conn.execute("PRAGMA page_size = 16384")  # first: once auto_vacuum is set, the page size is fixed
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across app crashes, fast commits
            _create_schema(conn)
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or attempt == _RETRIES - 1:
                raise
            time.sleep(_jitter() * (attempt + 1))
