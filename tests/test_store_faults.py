"""The local store under faults: values SQLite refuses, rolled-back batches, unreadable, corrupt or newer stores,
JSONL files being written or imported twice at once, retention giving space back, and strict CLI output.

Every test uses a real store file, real SDK spans and the real CLI; each fails on the code before its fix.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
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

import evaltrace
from evaltrace.cli import main
from evaltrace.cli.trace_totals import trace_totals
from evaltrace.exporters import LocalStoreExporter, LocalTraceStore, store_import
from evaltrace.exporters.otlp_json import otlp_json_line
from evaltrace.exporters.store_db import DB_NAME, open_db
from evaltrace.exporters.store_import import import_jsonl
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

NOW = time.time_ns()


def _provider(exporter: LocalStoreExporter, service: str = "svc") -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _batch(
    exporter: LocalStoreExporter, names: list[str], attributes: dict[str, Any] | None = None, service: str = "svc"
) -> None:
    """Real SDK spans ended together and exported in one ``export`` call, as a batch processor does."""
    tracer = TracerProvider(resource=Resource({"service.name": service})).get_tracer("t")
    spans: list[ReadableSpan] = []
    for name in names:
        span = tracer.start_span(name, attributes=attributes if name.startswith("bad") else None)
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    assert exporter.export(spans).name == "SUCCESS"


def _span_count(store: Path) -> int:
    with sqlite3.connect(store / DB_NAME) as db:
        return int(db.execute("SELECT count(*) FROM spans").fetchone()[0])


SURROGATE = b"report-\xff.txt".decode("utf-8", "surrogateescape")  # a file name os.listdir gives back


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("bad surrogate value", {"input.value": SURROGATE}),
        ("bad surrogate name " + SURROGATE, {}),
        ("bad huge tokens", {"gen_ai.usage.input_tokens": 2**63, "evaltrace.span.kind": "llm"}),
        ("bad nan cost", {"evaltrace.cost_usd": float("nan"), "evaltrace.span.kind": "llm"}),
        ("bad infinite cost", {"evaltrace.cost_usd": float("inf"), "evaltrace.span.kind": "llm"}),
    ],
)
def test_a_value_sqlite_cannot_hold_is_cleaned_and_its_batch_kept(
    tmp_path: Path, name: str, attributes: dict[str, Any]
) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    _batch(exporter, ["good 1", "good 2", name, "good 3"], attributes)
    assert _span_count(tmp_path) == 4 and exporter.stats()["lost_spans"] == 0
    summaries = {s.root_name: s for s in LocalTraceStore(tmp_path).list_traces()}
    bad = next(s for n, s in summaries.items() if n.startswith("bad"))
    assert bad.cost_usd == 0.0  # NaN and infinity are not costs
    assert bad.input_tokens in (0, 2**63 - 1)  # a runaway count is kept as the largest one
    (span,) = LocalTraceStore(tmp_path).spans(bad.trace_id)
    assert "\ufffd" in span.name + str(dict(span.attributes or {})) or "surrogate" not in name


def _refuse_spans_named(store: Path, name: str) -> None:
    """A real SQLite failure on one span only: a trigger that aborts its insert."""
    with sqlite3.connect(store / DB_NAME) as db:
        db.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON spans WHEN NEW.name = '{name}' "
            "BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END"
        )


def test_a_span_sqlite_refuses_loses_only_itself_and_is_counted(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    _batch(exporter, ["first"])  # creates the store
    _refuse_spans_named(tmp_path, "bad")
    _batch(exporter, ["good 1", "good 2", "bad", "good 3", "good 4"])
    assert {s.root_name for s in LocalTraceStore(tmp_path).list_traces()} == {
        "first",
        "good 1",
        "good 2",
        "good 3",
        "good 4",
    }
    assert exporter.stats()["lost_spans"] == 1


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_spans_the_writer_loses_are_never_counted_exported(tmp_path: Path, redact: bool) -> None:
    # The thread writer reported its loss during export, before the batch's SUCCESS was counted, and a loss behind
    # redaction never reached the export queue: both were counted exported.
    _batch(LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0), ["first"])  # creates the store
    _refuse_spans_named(tmp_path, "bad")  # a real SQLite failure of one span
    handle = evaltrace.configure(local_store=tmp_path, redact=redact, handle_sigterm=False)
    try:
        tracer = handle.provider.get_tracer("t")
        for name in ("good 1", "bad", "good 2", "good 3"):
            tracer.start_span(name).end()
        assert handle.force_flush(30_000) is False  # a span was lost: the flush does not say it went well
        stats = handle.evaluation_processor.stats()["exporters"]["local_store"]
        assert (stats["exported"], stats["export_failed"], stats["lost"], stats["received"]) == (3, 1, 1, 4)
        assert {s.root_name for s in LocalTraceStore(tmp_path).list_traces()} == {"first", "good 1", "good 2", "good 3"}
        assert handle.force_flush(30_000)  # nothing lost since
    finally:
        handle.shutdown()


def test_a_rolled_back_batch_leaves_no_stale_resource_id(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    _batch(exporter, ["first"])
    _refuse_spans_named(tmp_path, "bad")
    new_service = _provider(exporter, "new-service")
    tracer = new_service.get_tracer("t")
    bad = tracer.start_span("bad")
    bad.end()  # the only span of its batch: the batch fails, rolling back the new resource row
    later = tracer.start_span("later")
    later.end()
    store = LocalTraceStore(tmp_path)
    (summary,) = [s for s in store.list_traces() if s.root_name == "later"]
    (span,) = store.spans(summary.trace_id)  # before the fix: written with a resource id that did not exist
    assert span.resource.attributes["service.name"] == "new-service"
    assert exporter.stats()["lost_spans"] == 1


@pytest.mark.parametrize("query", ["gpt-4o", "x-ray", "a:b", "don't", "GPT_4o", "4o"])
def test_search_words_with_punctuation_match_instead_of_crashing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    provider = _provider(LocalStoreExporter(tmp_path))
    tracer = provider.get_tracer("t")
    tracer.start_span("hit", attributes={"input.value": "ask gpt-4o about an x-ray, a:b and don't stop"}).end()
    tracer.start_span("miss", attributes={"input.value": "nothing here"}).end()
    assert main(["traces", "list", "--store", str(tmp_path), "--json", "--search", query]) == 0
    assert [t["root_name"] for t in json.loads(capsys.readouterr().out)] == ["hit"]


@pytest.fixture
def unreadable_jsonl(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "2024-01-01.jsonl").mkdir()  # stands for a file this user cannot open
    (folder / "2024-01-02.jsonl").symlink_to(tmp_path / "gone.jsonl")  # a dangling link
    return tmp_path


def test_unreadable_jsonl_files_are_skipped_and_counted_never_fatal(
    unreadable_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exporter = LocalStoreExporter(unreadable_jsonl)
    tracer = _provider(exporter).get_tracer("t")
    for name in ("one", "two"):
        tracer.start_span(name).end()  # before the fix: every export failed, re-opening (and leaking) a connection
    assert exporter.stats()["imported_unreadable_files"] == 2
    assert main(["traces", "list", "--store", str(unreadable_jsonl)]) == 0
    captured = capsys.readouterr()
    assert "one" in captured.out and "2 JSONL file(s)" in captured.err and "Traceback" not in captured.err


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "EVALTRACE_RAISE_INTERNAL_ERRORS": ""},
    )


def test_a_corrupt_store_is_one_line_error_and_exit_1(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / DB_NAME).write_bytes(b"this is not a database at all" * 200)
    exporter = LocalStoreExporter(tmp_path)
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        for _ in range(3):
            _provider(exporter).get_tracer("t").start_span("lost").end()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]  # once, not per batch
    assert "is unreadable or corrupt" in warning
    for args in (["list"], ["show", "abc"], ["export"]):
        result = _cli("traces", *args, "--store", str(tmp_path))
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: local store {tmp_path / DB_NAME} is unreadable or corrupt (file is not a database)"
        ]


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[list[Path]]:
    """Paths the test makes unwritable for this user: ``chmod``, or for root (whom modes do not bind) ``chattr +i``."""
    paths: list[Path] = []
    yield paths
    for path in reversed(paths):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True, timeout=30)
        path.chmod(0o700 if path.is_dir() else 0o600)


def _make_unwritable(paths: list[Path], path: Path) -> None:
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a file unwritable")
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, timeout=30)
        if made.returncode != 0:  # e.g. a tmpfs without inode flags
            pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
    else:
        path.chmod(0o555 if path.is_dir() else 0o444)
    paths.append(path)
    assert not os.access(path, os.W_OK)


def test_a_store_this_user_cannot_write_is_read_read_only(tmp_path: Path, unwritable: list[Path]) -> None:
    store = tmp_path / ".evaltrace"
    exporter = LocalStoreExporter(store)
    _provider(exporter).get_tracer("t").start_span("kept").end()
    exporter.shutdown()
    _make_unwritable(unwritable, store / DB_NAME)
    _make_unwritable(unwritable, store)  # no -shm file can be created next to it either
    result = _cli("traces", "list", "--json", "--store", str(store))
    assert result.returncode == 0, result.stderr  # before the fix: PermissionError traceback
    assert [t["root_name"] for t in json.loads(result.stdout)] == ["kept"]
    assert _cli("traces", "show", json.loads(result.stdout)[0]["trace_id"], "--store", str(store)).returncode == 0


def _make_newer(store: Path) -> None:
    with sqlite3.connect(store / DB_NAME) as db:
        db.execute("UPDATE meta SET value = '2' WHERE key = 'version'")
        db.execute("ALTER TABLE traces ADD COLUMN added_by_a_newer_version TEXT")


def test_a_store_of_a_newer_version_is_refused_clearly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    _provider(LocalStoreExporter(tmp_path)).get_tracer("t").start_span("old").end()
    _make_newer(tmp_path)
    exporter = LocalStoreExporter(tmp_path)
    tracer = _provider(exporter).get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        for name in ("a", "b", "c"):
            tracer.start_span(name).end()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "written by a newer evaltrace" in warnings[0]
    assert main(["traces", "list", "--store", str(tmp_path)]) == 1
    assert "written by a newer evaltrace" in capsys.readouterr().err
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM spans").fetchone()[0] == 1  # nothing written into it


def _record(trace: str, name: str) -> str:
    return json.dumps(
        {
            "trace_id": trace, "span_id": "2" * 16, "parent_span_id": None, "name": name, "kind": "INTERNAL",
            "start_time": NOW, "end_time": NOW + 10, "status": {"code": "UNSET"}, "attributes": {}, "events": [],
            "links": [], "resource": {"service.name": "legacy"}, "scope": {"name": "t"},
        }
    )  # fmt: skip


def test_a_jsonl_line_still_being_written_is_imported_once_complete(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    day = tmp_path / "traces" / "day.jsonl"
    second = _record("b" * 32, "second")
    day.write_text(_record("a" * 32, "first") + "\n" + second[:40])  # an older evaltrace mid-write
    first_open = LocalTraceStore(tmp_path)
    assert [t.root_name for t in first_open.list_traces()] == ["first"]
    first_open.close()
    with day.open("a") as f:
        f.write(second[40:] + "\n")
    assert {t.root_name for t in LocalTraceStore(tmp_path).list_traces()} == {"first", "second"}
    assert LocalTraceStore(tmp_path).counts()["imported_unreadable_lines"] == 0


def test_two_processes_importing_at_once_import_each_span_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "traces").mkdir()
    lines = [_record(f"{i:032x}", f"s{i}") for i in range(1, 201)]
    (tmp_path / "traces" / "a.jsonl").write_text("\n".join(lines) + "\n")
    open_db(tmp_path).close()
    # Both importers have read the remembered offset and parsed the file before either writes: the race.
    both_parsed = threading.Barrier(2, timeout=30)
    parse = store_import._parse

    def parse_then_wait(chunk: list[bytes]) -> tuple[list[object], int]:
        result = parse(chunk)
        both_parsed.wait()
        return result  # type: ignore[return-value]

    monkeypatch.setattr(store_import, "_parse", parse_then_wait)
    reports = []

    def run() -> None:
        conn = open_db(tmp_path)
        try:
            reports.append(import_jsonl(conn, tmp_path))
        finally:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.spans for r in reports) == [0, 200]
    assert LocalTraceStore(tmp_path).counts()["imported_spans"] == 200


def test_retention_gives_the_freed_space_back_to_the_disk(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0, writer="thread")  # its session is tuned below
    tracer = _provider(exporter).get_tracer("t")
    for i in range(400):
        tracer.start_span(f"t{i}", attributes={"input.value": f"{i} " + "x" * 4000}).end()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        before = db.execute("PRAGMA page_count").fetchone()[0]
    exporter._session.max_bytes = 100_000
    exporter._session._next_retention = 0.0
    tracer.start_span("newest").end()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        after = db.execute("PRAGMA page_count").fetchone()[0]
    assert exporter.stats()["retention_deleted_traces"] > 300
    assert after < before / 4  # before the fix: one page handed back per pass


def test_list_and_show_agree_on_tokens_and_cost_of_nested_model_spans(tmp_path: Path) -> None:
    tracer = _provider(LocalStoreExporter(tmp_path)).get_tracer("t")
    usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20, "evaltrace.cost_usd": 0.01}
    # An @llm function around an instrumented chat call: both spans carry the same usage.
    with tracer.start_as_current_span("answer", attributes={"evaltrace.span.kind": "llm", **usage}):
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", **usage}):
            pass
        with tracer.start_as_current_span("tool", attributes={"evaltrace.span.kind": "tool"}):
            pass
    store = LocalTraceStore(tmp_path)
    (summary,) = store.list_traces()
    totals = trace_totals(store.spans(summary.trace_id))
    assert (summary.input_tokens, summary.output_tokens, summary.cost_usd) == (100, 20, 0.01)
    assert (totals.input_tokens, totals.output_tokens, totals.cost_usd) == (100, 20, 0.01)


def test_list_json_is_strict_and_escapes_terminal_controls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracer = _provider(LocalStoreExporter(tmp_path)).get_tracer("t")
    tracer.start_span("evil \u009b31m \u202e txt.exe café").end()
    with sqlite3.connect(tmp_path / DB_NAME) as db:  # an infinite cost in a store written before the fix
        db.execute("UPDATE traces SET cost = ?", (float("inf"),))
    assert main(["traces", "list", "--store", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert "\u009b" not in out and "\u202e" not in out and "café" in out
    (trace,) = json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert trace["root_name"] == "evil \u009b31m \u202e txt.exe café" and trace["cost_usd"] is None


def test_since_beyond_the_epoch_lists_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _provider(LocalStoreExporter(tmp_path)).get_tracer("t").start_span("kept").end()
    assert main(["traces", "list", "--store", str(tmp_path), "--json", "--since", "999999999999d"]) == 0
    assert [t["root_name"] for t in json.loads(capsys.readouterr().out)] == ["kept"]


def test_otlp_export_gives_back_trace_state_remote_parent_and_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    received = InMemorySpanExporter()
    provider = _provider(LocalStoreExporter(tmp_path))
    provider.add_span_processor(SimpleSpanProcessor(received))
    tracer = provider.get_tracer(
        "lib", "1.2", schema_url="https://opentelemetry.io/schemas/1.21.0", attributes={"a": 1}
    )
    state = otel_trace.TraceState([("vendor", "v1")])
    remote = otel_trace.SpanContext(0xABC, 0xDEF, True, otel_trace.TraceFlags(1), state)
    linked = otel_trace.SpanContext(0x111, 0x222, False, otel_trace.TraceFlags(1), otel_trace.TraceState([("k", "v")]))
    parent = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote))
    with tracer.start_as_current_span("op", context=parent, links=[otel_trace.Link(linked, {"l": "x"})]):
        pass
    assert main(["traces", "export", "--store", str(tmp_path)]) == 0
    exported = json.loads(capsys.readouterr().out)["resourceSpans"][0]["scopeSpans"][0]
    original = json.loads(otlp_json_line(received.get_finished_spans()))["resourceSpans"][0]["scopeSpans"][0]
    assert exported == original
    assert exported["schemaUrl"] and exported["scope"]["attributes"]
    assert exported["spans"][0]["traceState"] == "vendor=v1" and exported["spans"][0]["flags"] == 0x300
    (span,) = LocalTraceStore(tmp_path).spans(exported["spans"][0]["traceId"])
    assert span.links[0].context.trace_state == otel_trace.TraceState([("k", "v")])  # OTLP's encoder drops it
