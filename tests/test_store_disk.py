"""The local store on a small or full disk: a real tmpfs mounted for each disk test (they need root).

``max_bytes`` bounds the database and its WAL together, the oldest traces are evicted rather than new spans
refused, a full disk is one WARNING per episode, and writing resumes by itself once there is room. Without the
right to mount, the tests skip with the reason, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.store_db import DB_NAME
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

CAP = 5_000_000
SLACK = 64 * 1024
"""What db + WAL may exceed the cap by after a batch: none is expected; a few pages of SQLite's own rounding."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount a tmpfs of the given size (``"8m"``) under ``tmp_path``; unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        mount_cmd = shutil.which("mount")
        result = (
            subprocess.run(
                [mount_cmd, "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                capture_output=True,
                text=True,
                check=False,
            )
            if mount_cmd
            else None
        )
        if result is None or result.returncode != 0:
            why = "no mount command" if result is None else result.stderr.strip() or f"exit {result.returncode}"
            reason = f"cannot mount a tmpfs for the disk tests ({why}); they need root (or CAP_SYS_ADMIN)"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI is set but {reason}")
            pytest.skip(reason)
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def _spans(prefix: str, count: int = 200, size: int = 2000) -> list[ReadableSpan]:
    """``count`` traces of one span each, named ``<prefix><i>``, with ``size`` characters of input."""
    tracer = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
    spans: list[ReadableSpan] = []
    for i in range(count):
        span = tracer.start_span(f"{prefix}{i}", attributes={"input.value": f"{prefix}{i} " + "x" * size})
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    return spans


def _on_disk(store: Path) -> int:
    """The database and its WAL, as the disk holds them."""
    return sum(p.stat().st_size for p in (store / DB_NAME, store / f"{DB_NAME}-wal") if p.exists())


def _names(store: Path, prefix: str) -> set[str]:
    with sqlite3.connect(store / DB_NAME) as db:
        return {r[0] for r in db.execute("SELECT name FROM spans WHERE name LIKE ?", (f"{prefix}%",))}


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with a ballast file."""
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as out:  # unbuffered: a write that does not fit fails here, not at close
        for block in (65536, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * block)
            except OSError:
                pass
    return ballast


def test_max_bytes_bounds_the_database_and_its_wal_and_keeps_the_newest_spans(
    small_disk: Callable[[str], Path],
) -> None:
    store = small_disk("64m") / "store"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=CAP)
    try:
        batches = 60  # ~60 x 200 spans x 2 kB: 24 MB of input into a 5 MB cap
        largest = 0
        for k in range(batches):
            assert exporter.export(_spans(f"b{k}-")) is SpanExportResult.SUCCESS
            largest = max(largest, _on_disk(store))
        assert largest <= CAP + SLACK, f"db + WAL reached {largest} bytes with max_bytes={CAP}"
        stats = exporter.stats()
        assert stats["lost_spans"] == 0  # nothing refused: old spans made room
        assert stats["retention_deleted_spans"] > 0
        stored = _names(store, "b")
        assert len(stored) + stats["retention_deleted_spans"] == batches * 200  # every span stored or counted evicted
        assert _names(store, f"b{batches - 1}-") == {f"b{batches - 1}-{i}" for i in range(200)}  # the newest kept
        assert not _names(store, "b0-")  # the oldest went first
    finally:
        exporter.shutdown()  # before the tmpfs is unmounted


def test_a_batch_larger_than_a_small_cap_never_takes_the_wal_past_it(small_disk: Callable[[str], Path]) -> None:
    """The export queue hands the store up to 8,192 spans at once: written a chunk at a time, WAL emptied after each."""
    store = small_disk("64m") / "store"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=CAP)
    largest = 0
    done = threading.Event()

    def watch() -> None:  # db + WAL while batches are written, not only between them
        nonlocal largest
        while not done.is_set():
            try:
                largest = max(largest, _on_disk(store))
            except OSError:  # the WAL truncated between exists() and stat()
                pass
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for k in range(3):
            assert exporter.export(_spans(f"big{k}-", 4000, 500)) is SpanExportResult.SUCCESS
    finally:
        done.set()
        watcher.join()
        exporter.shutdown()
    assert exporter.stats()["lost_spans"] == 0
    assert largest <= CAP * 1.1, f"db + WAL reached {largest} bytes while a batch was written, max_bytes={CAP}"
    assert _names(store, "big2-") >= {f"big2-{i}" for i in range(3900, 4000)}  # the newest kept


def test_on_a_disk_smaller_than_max_bytes_old_traces_make_room_and_no_span_is_refused(
    small_disk: Callable[[str], Path],
) -> None:
    disk = small_disk("32m")
    store = disk / "store"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=100_000_000)  # the cap cannot be reached
    try:
        batches = 60  # ~60 x 200 spans x 2 kB, ~14 kB of WAL a span: several times what the disk holds
        for k in range(batches):
            assert exporter.export(_spans(f"b{k}-")) is SpanExportResult.SUCCESS
        stats = exporter.stats()
        assert stats["lost_spans"] == 0  # the oldest traces were evicted before the disk was full
        assert stats["retention_deleted_spans"] > 0
        assert len(_names(store, "b")) + stats["retention_deleted_spans"] == batches * 200
        assert _names(store, f"b{batches - 1}-") == {f"b{batches - 1}-{i}" for i in range(200)}
        free = os.statvfs(disk)
        assert free.f_bavail * free.f_frsize > 0
    finally:
        exporter.shutdown()  # before the tmpfs is unmounted


def test_a_reader_holding_an_old_snapshot_never_stalls_the_writer(tmp_path: Path) -> None:
    """The WAL cannot be truncated while another process reads an older snapshot: batches go on regardless."""
    store = tmp_path / "store"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=CAP)
    try:
        assert exporter.export(_spans("first-", 50)) is SpanExportResult.SUCCESS
        reader = sqlite3.connect(store / DB_NAME, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM spans").fetchone()  # a read transaction: its snapshot stays
        started = time.monotonic()
        for k in range(8):  # each past the WAL's share: a truncating checkpoint after every one
            assert exporter.export(_spans(f"b{k}-")) is SpanExportResult.SUCCESS
        elapsed = time.monotonic() - started
        reader.execute("COMMIT")
        reader.close()
        assert elapsed < 40, f"8 batches took {elapsed:.1f} s behind a reader (a 10 s busy wait each?)"
        assert len(_names(store, "b7-")) == 200 and exporter.stats()["lost_spans"] == 0
        assert len(_names(store, "b")) >= 400  # the file could not shrink meanwhile: eviction did not take all
    finally:
        exporter.shutdown()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _export_until_stored(exporter: LocalStoreExporter, store: Path, prefix: str, deadline_s: float = 60.0) -> int:
    """Export batches (``<prefix><n>-``) until one is stored; how many were tried."""
    deadline = time.monotonic() + deadline_s
    tried = 0
    while time.monotonic() < deadline:
        name = f"{prefix}{tried}-"
        tried += 1
        exporter.export(_spans(name, 50))
        if _names(store, name):
            return tried
        time.sleep(0.1)
    raise AssertionError(f"no batch was stored within {deadline_s} s after the disk had room again")


def test_a_full_disk_is_one_warning_per_episode_and_writing_resumes_by_itself(
    small_disk: Callable[[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    disk = small_disk("6m")
    store = disk / "store"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=3_000_000)
    try:
        caplog.set_level(logging.INFO, logger="evaltrace")
        assert exporter.export(_spans("before-", 50)) is SpanExportResult.SUCCESS
        assert len(_names(store, "before-")) == 50
        for episode in range(2):
            caplog.clear()
            ballast = _fill(disk)
            for k in range(8):
                exporter.export(_spans(f"full{episode}-{k}-", 50))
            lost = exporter.stats()["lost_spans"]
            assert lost > 0, "the disk was full, yet nothing was refused"
            warnings = _warnings(caplog)
            assert len(warnings) == 1, warnings  # one per episode: no traceback per batch, no "works again" between
            assert "disk is full" in warnings[0] and str(store) in warnings[0]
            assert not any(r.exc_info for r in caplog.records)
            caplog.clear()
            ballast.unlink()
            _export_until_stored(exporter, store, f"after{episode}-")
            for k in range(3):  # and it stays well: every later batch is stored, with no further warning
                assert exporter.export(_spans(f"later{episode}-{k}-", 50)) is SpanExportResult.SUCCESS
                assert len(_names(store, f"later{episode}-{k}-")) == 50
            assert _warnings(caplog) == []
            assert any("works again" in r.getMessage() for r in caplog.records)  # the end of the episode, at INFO
            assert exporter.stats()["lost_spans"] >= lost
    finally:
        exporter.shutdown()  # before the tmpfs is unmounted
