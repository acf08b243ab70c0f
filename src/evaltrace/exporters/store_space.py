"""Keeping the local store inside ``max_bytes``: the database and its WAL together.

SQLite appends every commit to the ``-wal`` file and copies it back into the database at a checkpoint; the WAL
only shrinks when a checkpoint truncates it. Left to its defaults (a checkpoint every 10,000 pages of 16 kB) the
WAL grew to ~160 MB whatever ``max_bytes`` said, and on a small disk it alone filled the disk for good. So a
share of the budget is the WAL's (:func:`wal_budget`): automatic checkpoints run well before it, the file is cut
back to it after each, and the writer truncates it outright when it passes it. The rest is the database's:
past it the oldest traces are evicted down to a low-water mark (so not every batch evicts), the pages they
freed are handed back and the WAL is truncated.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaltrace.exporters.store_db import BUSY_TIMEOUT_MS, write_transaction
from evaltrace.exporters.store_writer import RetentionResult, delete_oldest, used_bytes

__all__ = [
    "CHECKPOINT_WAIT_MS",
    "DISK_RESERVE",
    "EVICT_SHARE",
    "LOW_WATER",
    "STEP_SHARE",
    "WAL_SHARE",
    "SpaceLimits",
    "SpaceKeeper",
    "evict_for_room",
    "truncate_wal",
]

WAL_SHARE = 4
"""The WAL may take a quarter of ``max_bytes`` (at most ``_WAL_MAX``), the database the rest."""
_WAL_MAX = 64 * 1024 * 1024
"""What the WAL was already cut back to after a checkpoint before caps counted it (``journal_size_limit``)."""
_MAX_CHECKPOINT_PAGES = 2_048
"""At most a checkpoint every 2,048 pages (32 MB of 16 kB pages), not SQLite's 4 MB: index pages rewritten by many
batches are copied once. (It was 10,000 pages, meant as ~40 MB of 4 kB pages, ~160 MB once pages were 16 kB.)"""
_WAL_PER_SPAN = 16_384
"""A generous estimate of the WAL one new span of a random trace leaves (a 16 kB page of each index it enters)."""
LOW_WATER = 0.8
"""Eviction for size goes down to this share of the database's budget, so the next batches do not evict again."""
STEP_SHARE = 0.05
"""Eviction for size deletes at most this share of the traces a transaction (see ``keep_within``)."""
_MAX_STEPS = 200
EVICT_SHARE = 0.1
"""On a full disk, this share of the traces (the oldest, at least one) is evicted before the batch is retried."""


@dataclass(frozen=True)
class SpaceLimits:
    """The byte budgets that follow from ``max_bytes`` (``0``: no cap on the database; the WAL stays within 64 MB)."""

    max_bytes: int
    batch_wal: int = 0
    """The largest WAL one transaction left so far: the room the next one needs on top of the database."""

    @property
    def wal_bytes(self) -> int:
        """The WAL's share: checkpoints keep it below this."""
        return min(self.max_bytes // WAL_SHARE, _WAL_MAX) if self.max_bytes else _WAL_MAX

    @property
    def data_bytes(self) -> int:
        """The database file's share: past it the oldest traces are evicted.

        What is left once the WAL's share, or the WAL a transaction was seen to write if more, is set aside (a
        batch of random trace ids dirties a 16 kB page of each index per span: ~14 kB of WAL a span, so a batch
        can need more than a small cap's share); never less than a quarter of the cap.
        """
        return max(self.max_bytes // WAL_SHARE, self.max_bytes - max(self.wal_bytes, self.batch_wal))

    @property
    def small(self) -> bool:
        """A cap under 256 MB: the WAL is emptied after every batch, so it holds one transaction at most."""
        return 0 < self.max_bytes < WAL_SHARE * _WAL_MAX

    @property
    def chunk_spans(self) -> int | None:
        """Under a small cap, the most spans one transaction takes (a batch is written in several), else ``None``.

        The export queue hands the store up to 8,192 spans at once: ~100 MB of WAL in one transaction, whatever
        the cap. At ~14 kB of WAL a span (random trace ids dirty a 16 kB page of each index), a chunk's WAL
        fits in the WAL's share.
        """
        return max(1, self.wal_bytes // _WAL_PER_SPAN) if self.small else None

    def apply(self, conn: sqlite3.Connection) -> None:
        """Set this connection's automatic checkpoint and WAL size limit from the budget."""
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = max(16, min(_MAX_CHECKPOINT_PAGES, self.wal_bytes // 2 // page_size))  # half: a batch fits on top
        conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        conn.execute(f"PRAGMA journal_size_limit = {self.wal_bytes}")


def _wal_size(directory: Path, db_name: str) -> int:
    try:
        return os.stat(directory / f"{db_name}-wal").st_size
    except OSError:
        return 0


def _file_bytes(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA page_count").fetchone()[0]) * int(conn.execute("PRAGMA page_size").fetchone()[0])


CHECKPOINT_WAIT_MS = 250
"""How long a truncating checkpoint waits for another process's write or read to end (then a later batch tries)."""


def truncate_wal(conn: sqlite3.Connection) -> bool:
    """Copy the WAL into the database and cut it to zero bytes, if no other process is in the way.

    It waits (at most :data:`CHECKPOINT_WAIT_MS`, not the connection's 10 s) for another writer, and for readers
    of an older snapshot (``traces list`` in another process): a batch never waits long behind a reader, and the
    WAL is truncated after a later batch instead.

    Returns:
        Whether the WAL was emptied.
    """
    conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_WAIT_MS}")
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return not busy


def _give_back(conn: sqlite3.Connection, checkpoint: bool = True) -> bool:
    """Hand freed pages back to the disk; whether the WAL was emptied (not tried again when ``checkpoint`` is off)."""
    # executescript steps the pragma to the end; a plain execute() frees a single page.
    conn.executescript("PRAGMA incremental_vacuum;")  # freed pages leave the file (auto_vacuum = INCREMENTAL)
    return checkpoint and truncate_wal(conn)  # the database file shrinks when the WAL is copied back


def _disk_bound(directory: Path, on_disk: int, batch_wal: int) -> int | None:
    """What the store may take of its disk: what it holds plus the free room, less a reserve.

    The reserve is :data:`DISK_RESERVE`, an eighth of that room, or twice the largest WAL a batch left (with 16 kB
    pages and random trace ids, ~14 kB a span), whichever is most: a checkpoint grows the database before it
    empties the WAL, and the next batch needs as much WAL room again. A store that filled its disk to the last
    byte could do neither, and never write again.
    """
    try:
        stat = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs (Windows): only max_bytes bounds the store
        return None
    room = on_disk + stat.f_bavail * stat.f_frsize
    return max(1, room - max(DISK_RESERVE, room // 8, 2 * batch_wal))


DISK_RESERVE = 2_000_000
"""Room always left free on the store's disk (see ``_disk_bound``)."""


class SpaceKeeper:
    """Keeps one writer's store within its budget after each commit (:meth:`after_commit`).

    It learns how much WAL one transaction writes (``batch_wal``), measured only after a batch that followed an
    emptied WAL: a WAL that several batches (or a reader holding an old snapshot) left behind says nothing
    about one batch, and would shrink the database's share for nothing.
    """

    def __init__(self, directory: Path, db_name: str) -> None:
        """Keep the store ``directory / db_name``."""
        self.directory = directory
        self.db_name = db_name
        self.batch_wal = 0
        self._emptied = False

    def after_commit(
        self, conn: sqlite3.Connection, max_bytes: int, evicted: Callable[[RetentionResult], None]
    ) -> None:
        """Truncate a WAL past its share, evict the oldest traces when the database passes its share.

        The budget is ``max_bytes``, or less when the disk is smaller (``_disk_bound``): old traces are evicted
        before the disk is full, rather than new spans refused. Under a small budget (``SpaceLimits.small``) the
        WAL is emptied after every batch. Most batches cost a ``stat``, a ``statvfs`` and two pragmas.

        Args:
            conn: The writer's connection, outside a transaction.
            max_bytes: The cap (``0``: none).
            evicted: Told of each eviction step once committed (a later step may fail on a full disk).
        """
        wal = _wal_size(self.directory, self.db_name)
        if self._emptied:
            self.batch_wal = max(self.batch_wal, wal)
        self._emptied = False
        limits = SpaceLimits(max_bytes, self.batch_wal)
        bound = _disk_bound(self.directory, _file_bytes(conn) + wal, max(self.batch_wal, wal))
        if bound is not None and (not max_bytes or bound < max_bytes):
            limits = SpaceLimits(bound, self.batch_wal)
        if wal > limits.wal_bytes or (wal and limits.small):
            self._emptied = truncate_wal(conn)
        if not limits.max_bytes or _file_bytes(conn) <= limits.data_bytes:
            return
        self._emptied = _give_back(conn)  # pages freed by re-exported spans may be enough
        if _file_bytes(conn) <= limits.data_bytes:
            return
        low = int(limits.data_bytes * LOW_WATER)
        for _ in range(_MAX_STEPS):
            # Pages in use, not the file's size: a file that cannot shrink yet (a reader holds the WAL, or an
            # older store without auto_vacuum) must not make every trace go.
            used = used_bytes(conn)
            if used <= low:
                break
            # A step at a time, each committed, its pages handed back and the WAL emptied: deleting a fifth of a
            # store in one transaction would put most of its pages in the WAL, on a disk that may not hold them.
            share = min(STEP_SHARE, max(0.01, (1 - low / used) * 1.1))
            result = write_transaction(conn, functools.partial(delete_oldest, share=share))
            if not result.traces:
                break
            evicted(result)
            self._emptied = _give_back(conn, self._emptied)  # behind a reader, waiting once a batch is enough


def evict_for_room(conn: sqlite3.Connection) -> RetentionResult:
    """The disk is full: evict the oldest :data:`EVICT_SHARE` of the traces and give their pages back.

    Deleting needs a little room in the WAL too: when even that fails, nothing is evicted (the error is raised).
    """
    try:
        truncate_wal(conn)  # a WAL holding committed pages: copied back, its room is reused
    except sqlite3.OperationalError:
        pass
    result = write_transaction(conn, lambda c: delete_oldest(c, EVICT_SHARE))
    if result.traces:
        try:
            _give_back(conn)
        except sqlite3.OperationalError:
            pass  # the pages stay free inside the file: the retried batch reuses them
    return result
