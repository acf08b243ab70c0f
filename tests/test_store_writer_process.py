"""The local store's writer process: same rows as the in-process writer, flushes, deaths, forks, shutdown."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import evaltrace
from evaltrace.exceptions import ConfigError
from evaltrace.exporters import LocalStoreExporter, LocalTraceStore, local_store
from evaltrace.exporters.store_client import WriterProcess
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.exporters.store_options import WRITER_ENV

NOW = time.time_ns()
HOUR = 3600 * 10**9


@pytest.fixture
def exporters() -> Iterator[list[LocalStoreExporter]]:
    """Exporters the test makes; each is shut down after it, so no writer process outlives its test."""
    made: list[LocalStoreExporter] = []
    yield made
    for exporter in made:
        exporter.shutdown(timeout_millis=5000)


def _exporter(made: list[LocalStoreExporter], directory: Path, **options: object) -> LocalStoreExporter:
    exporter = LocalStoreExporter(directory, max_age_s=0, max_bytes=0, **options)  # type: ignore[arg-type]
    made.append(exporter)
    return exporter


def _spans(traces: int, prefix: str = "t") -> list[ReadableSpan]:
    """Agent traces with an LLM child, evaluation results, events, session, tokens, an error, a unicode name."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope", "1.0")
    for i in range(traces):
        root = tracer.start_span(
            f"{prefix}{i} agent é",
            start_time=NOW + i,
            attributes={
                "evaltrace.span.kind": "agent",
                "input.value": f"question {i}",
                "session.id": "s1",
                "evaltrace.eval.relevance.outcome": "pass" if i % 2 else "fail",
            },
        )
        with otel_trace.use_span(root, end_on_exit=False):
            llm = tracer.start_span("chat", start_time=NOW + i + 10, attributes={"evaltrace.span.kind": "llm"})
            llm.set_attributes({"gen_ai.usage.input_tokens": 10, "evaltrace.cost_usd": 0.25, "tags": ("a", "b")})
            llm.add_event("note", {"k": "v"})
            if i % 3 == 0:
                llm.set_status(Status(StatusCode.ERROR, "boom"))
            llm.end(end_time=NOW + i + 20)
        root.end(end_time=NOW + i + 100)
    return list(memory.get_finished_spans())


def _rows(directory: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, without the write times."""
    with sqlite3.connect(directory / DB_NAME) as db:
        return {
            "spans": db.execute("SELECT * FROM spans ORDER BY id").fetchall(),
            "traces": [r[:-1] for r in db.execute("SELECT * FROM traces ORDER BY trace_id")],  # stored_at last
            "evals": db.execute("SELECT * FROM evals ORDER BY trace_id, span_id, evaluator").fetchall(),
            "text": db.execute("SELECT rowid, * FROM span_text ORDER BY rowid").fetchall(),
            "resources": db.execute("SELECT * FROM resources").fetchall(),
        }


def _count(directory: Path) -> int:
    with sqlite3.connect(directory / DB_NAME) as db:
        return int(db.execute("SELECT count(*) FROM spans").fetchone()[0])


def _stopped(exporter: LocalStoreExporter) -> int:
    """Start the writer process and stop it (SIGSTOP): it reads nothing more until continued or killed."""
    exporter.export(_spans(1, "warm-up"))
    assert exporter.force_flush(30_000)
    pid = exporter.writer_pid
    assert pid is not None and pid != os.getpid()
    os.kill(pid, signal.SIGSTOP)
    return pid


def test_spans_written_by_the_process_are_the_rows_the_thread_writes(
    tmp_path: Path, exporters: list[LocalStoreExporter]
) -> None:
    spans = _spans(30)
    by_thread = _exporter(exporters, tmp_path / "thread", writer="thread")
    by_process = _exporter(exporters, tmp_path / "process", writer="process")
    for exporter in (by_thread, by_process):
        assert exporter.export(spans[:20]).name == "SUCCESS"
        assert exporter.export(spans[10:]).name == "SUCCESS"  # re-exported copies: the upsert path
        assert exporter.force_flush(30_000)
    assert by_thread.writer_pid is None and by_process.writer_pid is not None
    thread_rows, process_rows = _rows(tmp_path / "thread"), _rows(tmp_path / "process")
    assert len(process_rows["spans"]) == 60 and len(process_rows["evals"]) == 30
    assert process_rows == thread_rows
    assert by_process.stats() == by_thread.stats()


def test_export_returns_once_handed_over_and_force_flush_waits_until_stored(
    tmp_path: Path, exporters: list[LocalStoreExporter]
) -> None:
    exporter = _exporter(exporters, tmp_path, writer="process")
    pid = _stopped(exporter)
    try:
        assert exporter.export(_spans(5)).name == "SUCCESS"  # the stopped writer has not read it: still returns
        assert _count(tmp_path) == 2  # the warm-up trace only
        assert exporter.force_flush(200) is False  # not stored yet: the flush says so at its timeout
    finally:
        os.kill(pid, signal.SIGCONT)
    assert exporter.force_flush(30_000)
    assert _count(tmp_path) == 12
    assert [t.root_name for t in LocalTraceStore(tmp_path).list_traces()][0] == "t4 agent é"


def test_a_killed_writer_counts_what_it_had_not_stored_and_later_spans_are_still_stored(
    tmp_path: Path, exporters: list[LocalStoreExporter], caplog: pytest.LogCaptureFixture
) -> None:
    exporter = _exporter(exporters, tmp_path, writer="process")
    pid = _stopped(exporter)
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert exporter.export(_spans(3)).name == "SUCCESS"  # 6 spans in the pipe, never read
        os.kill(pid, signal.SIGKILL)
        assert exporter.force_flush(30_000)  # the death settles them: counted lost, not waited for
        assert exporter.stats()["lost_spans"] == 6
        assert exporter.export(_spans(2, "after")).name == "SUCCESS"
        assert exporter.export(_spans(2, "later")).name == "SUCCESS"
    assert exporter.writer_pid is None  # written in this process from now on
    names = {t.root_name for t in LocalTraceStore(tmp_path).list_traces()}
    assert {"after0 agent é", "after1 agent é", "later0 agent é", "later1 agent é"} <= names
    assert not any(name.startswith("t") for name in names)
    assert exporter.stats()["lost_spans"] == 6  # nothing counted twice
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]  # once
    assert f"writer process (pid {pid})" in warning and "6 span(s)" in warning and "counted lost" in warning


def test_two_writer_processes_share_one_store(tmp_path: Path, exporters: list[LocalStoreExporter]) -> None:
    first = _exporter(exporters, tmp_path, writer="process")
    second = _exporter(exporters, tmp_path, writer="process")
    batches = {first: [_spans(40, f"a{n}-") for n in range(5)], second: [_spans(40, f"b{n}-") for n in range(5)]}

    def write(exporter: LocalStoreExporter) -> None:
        for batch in batches[exporter]:
            exporter.export(batch)

    threads = [threading.Thread(target=write, args=(e,)) for e in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert first.force_flush(30_000) and second.force_flush(30_000)
    assert first.writer_pid != second.writer_pid
    assert _count(tmp_path) == 2 * 5 * 80
    assert LocalTraceStore(tmp_path).counts()["traces"] == 2 * 5 * 40
    assert first.stats()["lost_spans"] == second.stats()["lost_spans"] == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_writer_and_leaves_the_parents_alone(
    tmp_path: Path, exporters: list[LocalStoreExporter]
) -> None:
    exporter = _exporter(exporters, tmp_path, writer="process")
    exporter.export(_spans(1, "parent-before"))
    assert exporter.force_flush(30_000)
    parent_writer = exporter.writer_pid
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its writer's pid, or the failure, then leave without running pytest's exit
        code = 1
        try:
            os.close(read)
            exporter.export(_spans(1, "child"))
            flushed = exporter.force_flush(30_000)
            os.write(write, f"{exporter.writer_pid} {flushed} {exporter.stats()['lost_spans']}".encode())
            exporter.shutdown(timeout_millis=10_000)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        child_writer, flushed, lost = answer.read().decode().split()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child_writer not in ("None", str(parent_writer)) and flushed == "True" and lost == "0"
    exporter.export(_spans(1, "parent-after"))  # the parent's writer was not closed by the child
    assert exporter.force_flush(30_000) and exporter.writer_pid == parent_writer
    names = {t.root_name.split(" ")[0] for t in LocalTraceStore(tmp_path).list_traces()}
    assert names == {"parent-before0", "child0", "parent-after0"}


def test_shutdown_with_a_hung_writer_ends_at_its_timeout_and_counts_the_rest(
    tmp_path: Path, exporters: list[LocalStoreExporter]
) -> None:
    exporter = _exporter(exporters, tmp_path, writer="process")
    pid = _stopped(exporter)
    exporter.export(_spans(2))
    stopping = threading.Thread(target=exporter.shutdown, kwargs={"timeout_millis": 300})
    stopping.start()
    stopping.join(60)  # a bound for a broken test, not a timing claim: the timeout is 0.3 s
    assert not stopping.is_alive()
    assert exporter.stats()["lost_spans"] == 4
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped: nothing left behind
    assert exporter.export(_spans(1)).name == "FAILURE"  # shut down


def test_retention_in_the_writer_process_is_counted_here(tmp_path: Path, exporters: list[LocalStoreExporter]) -> None:
    writer = _exporter(exporters, tmp_path, writer="process")
    writer.export(_spans(3))
    assert writer.force_flush(30_000)
    with sqlite3.connect(tmp_path / DB_NAME) as db:  # as if two traces had been written two days ago
        db.execute("UPDATE traces SET stored_at = ? WHERE root_name != 't2 agent é'", (NOW - 48 * HOUR,))
    aged = LocalStoreExporter(tmp_path, max_age_s=24 * 3600, max_bytes=0, writer="process")
    exporters.append(aged)
    aged.export(_spans(1, "new"))  # the writer process opens the store: its first retention pass
    assert aged.force_flush(30_000)
    assert aged.stats()["retention_deleted_traces"] == 2 and aged.stats()["retention_deleted_spans"] == 4
    assert {t.root_name for t in LocalTraceStore(tmp_path).list_traces()} == {"t2 agent é", "new0 agent é"}


def test_the_writer_process_starts_on_the_first_export_not_at_configure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[WriterProcess] = []

    class Recorded(WriterProcess):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            started.append(self)

    monkeypatch.setattr(local_store, "WriterProcess", Recorded)
    monkeypatch.setenv(WRITER_ENV, "process")
    handle = evaltrace.configure(local_store=str(tmp_path), handle_sigterm=False)
    try:
        assert started == []  # start-up budgets: no process at configure
        with otel_trace.get_tracer("t").start_as_current_span("first"):
            pass
        assert handle.force_flush()
        assert len(started) == 1 and not started[0].dead
        assert [t.root_name for t in LocalTraceStore(tmp_path).list_traces()] == ["first"]
    finally:
        handle.shutdown()
    assert started[0].dead  # shut down with the pipeline


def test_without_a_usable_python_the_thread_writes(
    tmp_path: Path, exporters: list[LocalStoreExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/usr/local/bin/uwsgi")  # an embedding program, not a Python
    exporter = _exporter(exporters, tmp_path, writer="process")
    exporter.export(_spans(1))
    assert exporter.writer_pid is None and _count(tmp_path) == 2


def test_a_writer_that_cannot_start_falls_back_losing_nothing(
    tmp_path: Path,
    exporters: list[LocalStoreExporter],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = tmp_path / "bin" / "python3"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(broken))
    exporter = _exporter(exporters, tmp_path / "store", writer="process")
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert exporter.export(_spans(2)).name == "SUCCESS"
        exporter.export(_spans(1, "again"))
    assert exporter.writer_pid is None and _count(tmp_path / "store") == 6
    assert exporter.stats()["lost_spans"] == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "no writer process" in warning and "exited before it was ready (code 3)" in warning


def test_a_bad_writer_option_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"local_store\.writer.*'fork'"):
        LocalStoreExporter(tmp_path, writer="fork")
    with pytest.raises(ConfigError, match=r"local_store\.writer.*'threads'"):
        evaltrace.configure(local_store={"directory": str(tmp_path), "writer": "threads"})
    monkeypatch.setenv(WRITER_ENV, "subprocess")
    with pytest.raises(ConfigError, match=rf"{WRITER_ENV}.*'subprocess'"):
        LocalStoreExporter(tmp_path)
    monkeypatch.setenv(WRITER_ENV, " Thread ")
    assert LocalStoreExporter(tmp_path).options.writer == "thread"


def test_the_writer_exits_by_itself_when_the_application_dies_and_keeps_what_it_was_handed(tmp_path: Path) -> None:
    app = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store_writer_process import _spans
        from evaltrace.exporters import LocalStoreExporter
        exporter = LocalStoreExporter({str(tmp_path)!r}, max_age_s=0, max_bytes=0, writer="process")
        exporter.export(_spans(50))
        print(exporter.writer_pid, flush=True)
        os._exit(0)  # no shutdown, no flush: as a crash would
        """
    )
    done = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=120, check=True)
    writer = int(done.stdout.strip())
    for _ in range(600):  # its input pipe closed with the application: it stores what it read, then exits
        try:
            os.kill(writer, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(writer, signal.SIGKILL)
        pytest.fail("the writer process outlived its application by 30 s")
    assert _count(tmp_path) == 100
