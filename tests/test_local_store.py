from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import evaltrace
from evaltrace.exceptions import ConfigError
from evaltrace.exporters import LocalStoreExporter, LocalTraceStore, TraceFilter, store_db
from evaltrace.exporters.local_store import AmbiguousTraceIdError, TraceIdError
from evaltrace.exporters.span_json import span_from_dict, span_to_dict
from evaltrace.exporters.store_options import MAX_AGE_ENV, MAX_BYTES_ENV
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

NOW = time.time_ns()
HOUR = 3600 * 10**9


def _provider(exporter: LocalStoreExporter, service: str = "svc") -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _trace(
    provider: TracerProvider,
    name: str,
    *,
    start: int = NOW,
    error: bool = False,
    evals: dict[str, str] | None = None,
    text: str = "",
    session: str | None = None,
    user: str | None = None,
) -> str:
    """One agent trace with an LLM child; returns its trace id."""
    tracer = provider.get_tracer("t")
    root = tracer.start_span(name, start_time=start, attributes={"evaltrace.span.kind": "agent", "input.value": text})
    if session:
        root.set_attribute("session.id", session)
    if user:
        root.set_attribute("user.id", user)
    for evaluator, outcome in (evals or {}).items():
        root.set_attribute(f"evaltrace.eval.{evaluator}.outcome", outcome)
    with otel_trace.use_span(root, end_on_exit=False):
        llm = tracer.start_span(
            "chat gpt", start_time=start + 1000, attributes={"evaltrace.span.kind": "llm", "output.value": "answer"}
        )
        llm.set_attributes(
            {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5, "evaltrace.cost_usd": 0.25}
        )
        if error:
            llm.set_status(Status(StatusCode.ERROR, "boom"))
        llm.end(end_time=start + 2000)
    root.end(end_time=start + 5_000_000)
    return format(root.get_span_context().trace_id, "032x")


def test_round_trip_keeps_ids_status_events_and_later_copies_win(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path)
    tracer = _provider(exporter).get_tracer("t")
    with tracer.start_as_current_span("root") as root:
        with tracer.start_as_current_span("child") as child:
            child.add_event("note", {"k": "v"})
            child.set_status(Status(StatusCode.ERROR, "bad"))
            child.set_attribute("tags", ["a", "b"])
    trace_hex = format(root.get_span_context().trace_id, "032x")
    spans = LocalTraceStore(tmp_path).spans(trace_hex)
    assert [s.name for s in spans] == ["root", "child"]
    restored_child = spans[1]
    assert restored_child.parent is not None
    assert restored_child.parent.span_id == root.get_span_context().span_id
    assert restored_child.status.status_code is StatusCode.ERROR and restored_child.status.description == "bad"
    assert restored_child.events[0].name == "note" and dict(restored_child.events[0].attributes or {}) == {"k": "v"}
    assert tuple(restored_child.attributes["tags"]) == ("a", "b")  # type: ignore[index]
    assert restored_child.resource.attributes["service.name"] == "svc"

    # an enriched copy of the same span exported later replaces the first one
    data = span_to_dict(restored_child)
    data["attributes"]["evaltrace.eval.x.passed"] = False
    exporter.export([span_from_dict(data)])
    store = LocalTraceStore(tmp_path)
    again = store.spans(trace_hex[:10])
    assert len(again) == 2
    assert again[1].attributes["evaltrace.eval.x.passed"] is False  # type: ignore[index]
    (summary,) = store.list_traces()
    assert summary.span_count == 2 and summary.evaluations == {"fail": 1} and summary.root_name == "root"


def test_summary_counts_outcomes_tokens_cost_and_only_application_errors(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path)
    provider = _provider(exporter)
    trace_id = _trace(
        provider,
        "agent",
        evals={"helpful": "pass", "tone": "fail", "judge": "error", "pii": "not_evaluated"},
        session="s-1",
        user="u-1",
    )
    tracer = provider.get_tracer("t")
    # A late evaluation span whose evaluation errored: an evaluation outcome, not an application error.
    (root_span,) = [s for s in LocalTraceStore(tmp_path).spans(trace_id) if s.name == "agent"]
    parent = otel_trace.NonRecordingSpan(root_span.get_span_context())
    with otel_trace.use_span(parent):
        with tracer.start_as_current_span(
            "evaluation late",
            attributes={"evaltrace.span.kind": "evaluation", "gen_ai.evaluation.name": "late", "error.type": "Timeout"},
        ) as late:
            late.set_status(Status(StatusCode.ERROR, "judge timed out"))
    (summary,) = LocalTraceStore(tmp_path).list_traces()
    assert summary.trace_id == trace_id and summary.root_name == "agent" and summary.span_count == 3
    assert summary.evaluations == {"pass": 1, "fail": 1, "error": 2, "not_evaluated": 1}
    assert summary.error is False
    assert (summary.input_tokens, summary.output_tokens, summary.cost_usd) == (10, 5, 0.25)
    assert (summary.session_id, summary.user_id) == ("s-1", "u-1")
    assert summary.to_json()["evaluations"] == {"pass": 1, "fail": 1, "error": 2, "not_evaluated": 1, "pending": 0}


def test_summaries_are_the_same_whatever_batches_and_order_spans_arrive_in(tmp_path: Path) -> None:
    # A trace first seen in a batch is summarised in Python; one with stored spans is recomputed in SQL. Both
    # must agree, with the root arriving last, spans split over batches and a whole batch exported twice.
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for n in range(3):
        _trace(provider, f"agent-{n}", start=NOW + n, error=n == 1, evals={"tone": "fail", "pii": "pass"},
               session=f"s-{n}", user="ada")  # fmt: skip
    spans = list(memory.get_finished_spans())  # children before their roots, as the SDK ends them
    orders = {
        "one batch": [spans],
        "one batch, twice": [spans, spans],
        "root first, alone": [[s] for s in reversed(spans)],
        "children first, then roots": [[s for s in spans if s.parent], [s for s in spans if not s.parent]],
        "split mid-trace": [spans[:3], spans[3:]],
    }
    summaries = {}
    for label, batches in orders.items():
        exporter = LocalStoreExporter(tmp_path / label.replace(" ", "-").replace(",", ""))
        for batch in batches:
            assert exporter.export(batch).name == "SUCCESS"
        summaries[label] = [t.to_json() for t in LocalTraceStore(exporter.directory).list_traces()]
        exporter.shutdown()
    first = summaries["one batch"]
    assert [t["root_name"] for t in first] == ["agent-2", "agent-1", "agent-0"]
    assert [t["span_count"] for t in first] == [2, 2, 2] and [t["status"] for t in first] == ["ok", "error", "ok"]
    assert first[0]["evaluations"] == {"pass": 1, "fail": 1, "error": 0, "not_evaluated": 0, "pending": 0}
    assert (first[0]["input_tokens"], first[0]["cost_usd"], first[0]["session_id"]) == (10, 0.25, "s-2")
    for label, listed in summaries.items():
        assert listed == first, label


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    exporter = LocalStoreExporter(tmp_path)
    web, batch = _provider(exporter, "web"), _provider(exporter, "batch")
    ids = {
        "old": _trace(batch, "nightly", start=NOW - 48 * HOUR, text="weekly report"),
        "failed": _trace(web, "checkout", start=NOW - 2 * HOUR, evals={"tone": "fail", "helpful": "pass"}),
        "errored": _trace(web, "search", start=NOW - HOUR, error=True, session="s-9", text="the light rain in Paris"),
        "fine": _trace(web, "search", start=NOW - 60 * 10**9, evals={"tone": "pass"}, user="ada"),
    }
    return tmp_path, ids


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (TraceFilter(), ["fine", "errored", "failed", "old"]),
        (TraceFilter(limit=2), ["fine", "errored"]),
        (TraceFilter(service="batch"), ["old"]),
        (TraceFilter(since_ns=NOW - 3 * HOUR), ["fine", "errored", "failed"]),
        (TraceFilter(status="error"), ["errored"]),
        (TraceFilter(status="ok", service="web"), ["fine", "failed"]),
        (TraceFilter(failed_evals=True), ["failed"]),
        (TraceFilter(evaluator="tone"), ["fine", "failed"]),
        (TraceFilter(evaluator="helpful", failed_evals=True), []),
        (TraceFilter(evaluator="tone", failed_evals=True), ["failed"]),
        (TraceFilter(session_id="s-9"), ["errored"]),
        (TraceFilter(user_id="ada"), ["fine"]),
        (TraceFilter(search="light rain"), ["errored"]),
        (TraceFilter(search="Pari"), ["errored"]),
        (TraceFilter(search='week "report'), ["old"]),
        (TraceFilter(search="answer"), ["fine", "errored", "failed", "old"]),
        (TraceFilter(search="snow"), []),
    ],
)
def test_filters(filled: tuple[Path, dict[str, str]], where: TraceFilter, expected: list[str]) -> None:
    directory, ids = filled
    names = {trace_id: name for name, trace_id in ids.items()}
    assert [names[s.trace_id] for s in LocalTraceStore(directory).list_traces(where=where)] == expected


def test_search_falls_back_to_like_without_fts5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_db, "FTS_AVAILABLE", False)  # in this process: its own thread writes
    provider = _provider(LocalStoreExporter(tmp_path, writer="thread"))
    rain = _trace(provider, "a", text="light rain 100%")
    _trace(provider, "b", text="sunny")
    store = LocalTraceStore(tmp_path)
    assert [s.trace_id for s in store.list_traces(where=TraceFilter(search="ght rai"))] == [rain]
    assert [s.trace_id for s in store.list_traces(where=TraceFilter(search="100%"))] == [rain]
    assert store.list_traces(where=TraceFilter(search="_")) == []  # LIKE wildcards are escaped


def test_prefixes_resolve_uniquely_or_list_the_candidates(tmp_path: Path) -> None:
    provider = _provider(LocalStoreExporter(tmp_path))
    ids = [_trace(provider, f"t{i}") for i in range(40)]
    store = LocalTraceStore(tmp_path)
    target = ids[0]
    unique = next(target[:n] for n in range(1, 33) if sum(i.startswith(target[:n]) for i in ids) == 1)
    assert [s.name for s in store.spans(unique.upper())][0] == "t0"
    shared = next(p for p in (format(n, "x") for n in range(16)) if sum(i.startswith(p) for i in ids) > 1)
    with pytest.raises(AmbiguousTraceIdError) as caught:
        store.spans(shared)
    assert all(c in str(caught.value) for c in caught.value.candidates) and len(caught.value.candidates) > 1
    assert store.spans("f" * 32) == [] or "f" * 32 in ids
    with pytest.raises(TraceIdError):
        store.spans("../etc/passwd")


def _jsonl_record(trace: str, span: str, name: str) -> dict[str, object]:
    return {
        "trace_id": trace, "span_id": span, "parent_span_id": None, "name": name, "kind": "INTERNAL",
        "start_time": NOW, "end_time": NOW + 10, "status": {"code": "UNSET"}, "attributes": {}, "events": [],
        "links": [], "resource": {"service.name": "legacy"}, "scope": {"name": "t"},
    }  # fmt: skip


def test_jsonl_files_are_imported_once_counted_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    day = folder / "2026-01-01.jsonl"
    lines = [json.dumps(_jsonl_record("1" * 32, "2" * 16, "ok")), "not json", json.dumps({"trace_id": "x"})]
    day.write_text("\n".join(lines) + "\n" + '{"trace_id": "1111')  # a last line without its newline
    store = LocalTraceStore(tmp_path)
    assert [s.name for s in store.spans("1" * 32)] == ["ok"]
    # The unfinished last line is left for later (a writer may still be writing it), not counted yet.
    assert (store.import_report.files, store.import_report.spans, store.import_report.unreadable_lines) == (1, 1, 2)
    assert day.exists() and day.read_text().startswith(lines[0])

    again = LocalTraceStore(tmp_path)
    assert again.list_traces()[0].service_name == "legacy"
    assert again.import_report.files == 0  # remembered: not read twice

    with day.open("a") as f:  # an older evaltrace still appending: only the new lines are read
        f.write("\n" + json.dumps(_jsonl_record("3" * 32, "4" * 16, "later")) + "\n")
    third = LocalTraceStore(tmp_path)
    assert {s.root_name for s in third.list_traces()} == {"ok", "later"}
    assert third.import_report.spans == 1
    assert third.counts() == {"traces": 2, "spans": 2, "imported_spans": 2, "imported_unreadable_lines": 3}


def test_the_exporter_imports_on_first_open(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a.jsonl").write_text(json.dumps(_jsonl_record("5" * 32, "6" * 16, "legacy")) + "\n")
    exporter = LocalStoreExporter(tmp_path)
    _trace(_provider(exporter), "new")
    assert exporter.stats()["imported_spans"] == 1
    assert {s.root_name for s in LocalTraceStore(tmp_path).list_traces()} == {"legacy", "new"}


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    assert LocalTraceStore(tmp_path / "none").list_traces() == []
    assert not (tmp_path / "none").exists()


def test_retention_by_age_and_size_is_counted(tmp_path: Path) -> None:
    # The pass is forced below through the in-process session (test_store_writer_process covers the writer's).
    exporter = LocalStoreExporter(tmp_path, max_age_s=24 * 3600, max_bytes=0, writer="thread")
    provider = _provider(exporter)
    old = _trace(provider, "old", start=NOW - 48 * HOUR)
    young = _trace(provider, "young", start=NOW - 48 * HOUR)  # old timestamps alone (a skewed clock) are kept
    assert {s.trace_id for s in LocalTraceStore(tmp_path).list_traces()} == {old, young}
    with sqlite3.connect(tmp_path / "traces.sqlite3") as db:  # as if "old" had been written two days ago
        db.execute("UPDATE traces SET stored_at = ? WHERE trace_id = ?", (NOW - 48 * HOUR, old))
    exporter._session._next_retention = 0.0  # the next export runs the next pass (normally a minute later)
    _trace(provider, "trigger")
    assert old not in {s.trace_id for s in LocalTraceStore(tmp_path).list_traces()}
    assert exporter.stats()["retention_deleted_traces"] == 1 and exporter.stats()["retention_deleted_spans"] == 2

    sized = LocalStoreExporter(tmp_path / "sized", max_age_s=0, max_bytes=10**9, writer="thread")
    sized_provider = _provider(sized)
    for i in range(300):
        _trace(sized_provider, f"t{i}", start=NOW - (300 - i) * 10**9, text="x" * 2000)
    full = LocalTraceStore(tmp_path / "sized").counts()["traces"]
    with sqlite3.connect(tmp_path / "sized" / "traces.sqlite3") as db:
        used = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    # Most of the data, never the empty tables' own pages (one 16 kB page each at least).
    sized._session.max_bytes = used * 3 // 4
    sized._session._next_retention = 0.0
    _trace(sized_provider, "newest", text="y")
    kept = LocalTraceStore(tmp_path / "sized").list_traces()
    assert 0 < len(kept) < full and kept[0].root_name == "newest"
    assert sized.stats()["retention_deleted_traces"] == full + 1 - len(kept)
    assert min(int(s.root_name[1:]) for s in kept if s.root_name != "newest") > 0  # the oldest went first


def test_a_store_with_the_older_4k_pages_is_written_and_searched_as_before(tmp_path: Path) -> None:
    """New stores get 16 kB pages; a store an earlier version made keeps its 4 kB pages and works the same."""
    older = sqlite3.connect(tmp_path / store_db.DB_NAME)
    older.execute("PRAGMA page_size = 4096")
    older.execute("PRAGMA journal_mode = WAL")  # writes the header: the page size is now fixed
    older.close()
    provider = _provider(LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0))
    first = _trace(provider, "first", text="hello paris")
    second = _trace(provider, "second", text="hello rome", start=NOW + 1)
    with sqlite3.connect(tmp_path / store_db.DB_NAME) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
    store = LocalTraceStore(tmp_path)
    assert [t.trace_id for t in store.list_traces(where=TraceFilter(search="hello"))] == [second, first]
    assert [t.trace_id for t in store.list_traces(where=TraceFilter(search="rome"))] == [second]
    new = LocalTraceStore(tmp_path / "new")
    LocalStoreExporter(tmp_path / "new").export([])
    _trace(_provider(LocalStoreExporter(tmp_path / "new")), "x")
    with sqlite3.connect(tmp_path / "new" / store_db.DB_NAME) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 16384
    assert len(new.list_traces()) == 1


def test_store_files_are_private(tmp_path: Path) -> None:
    os.umask(0o022)
    _trace(_provider(LocalStoreExporter(tmp_path / "store")), "secret prompt")
    files = [p for p in (tmp_path / "store").iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"traces.sqlite3", "traces.sqlite3-wal", "traces.sqlite3-shm"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), [oct(p.stat().st_mode) for p in files]
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o700


def test_concurrent_threads_lose_nothing(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path)
    tracer = _provider(exporter).get_tracer("t")
    big = "x" * 20_000

    def work(n: int) -> None:
        for i in range(50):
            with tracer.start_as_current_span(f"w{n}-{i}") as span:
                span.set_attribute("input.value", big)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert LocalTraceStore(tmp_path).counts()["spans"] == 400


WRITER = textwrap.dedent(
    """
    import sys, evaltrace
    handle = evaltrace.configure("writer-" + sys.argv[2], local_store=sys.argv[1], handle_sigterm=False)
    from opentelemetry import trace
    tracer = trace.get_tracer("w")
    for i in range(int(sys.argv[3])):
        with tracer.start_as_current_span("root", attributes={"input.value": "q" * 200}):
            for j in range(4):
                with tracer.start_as_current_span("child"):
                    pass
        if i % 50 == 0:
            handle.force_flush(10_000)  # many small transactions interleave with the other writers
    assert handle.force_flush(30_000)
    lost = handle.evaluation_processor.stats()["exporters"]["local_store"]["lost"]
    assert lost == 0, lost
    handle.shutdown()
    """
)


def test_several_processes_write_one_store_without_losing_spans(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGFUSE_", "PYTEST_"))}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(store), str(n), "400"], env=env, stderr=subprocess.PIPE)
        for n in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
        assert b"local_store" not in err, err.decode()  # no export failure was logged
    counts = LocalTraceStore(store).counts()
    assert counts == {"traces": 1200, "spans": 6000, "imported_spans": 0, "imported_unreadable_lines": 0}
    services = {s.service_name for s in LocalTraceStore(store).list_traces()}
    assert services == {"writer-0", "writer-1", "writer-2"}
    # Row ids are given by each writer inside its transaction: every search row is its own span's.
    assert len(LocalTraceStore(store).list_traces(where=TraceFilter(search="q"))) == 1200
    with sqlite3.connect(store / "traces.sqlite3") as db:
        joined = "SELECT count(*) FROM span_text AS t JOIN spans AS s ON s.id = t.rowid AND s.trace_id = t.trace_id"
        assert db.execute(joined).fetchone()[0] == 1200
    assert sqlite3.connect(store / "traces.sqlite3").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_options_from_configure_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_AGE_ENV, "3d")
    monkeypatch.setenv(MAX_BYTES_ENV, "200MB")
    exporter = LocalStoreExporter(tmp_path)
    assert (exporter.options.max_age_s, exporter.options.max_bytes) == (3 * 86400, 200_000_000)
    handle = evaltrace.configure(
        local_store={"directory": tmp_path / "s", "max_age": "12h"}, batch=False, handle_sigterm=False
    )
    try:
        otel_trace.get_tracer("t").start_span("x").end()
    finally:
        handle.shutdown()
    assert LocalTraceStore(tmp_path / "s").list_traces()[0].root_name == "x"
    monkeypatch.setenv(MAX_BYTES_ENV, "lots")
    with pytest.raises(ConfigError, match=MAX_BYTES_ENV):
        LocalStoreExporter(tmp_path)
    with pytest.raises(ConfigError, match=MAX_BYTES_ENV):
        evaltrace.configure(local_store=True, batch=False, handle_sigterm=False)
    monkeypatch.delenv(MAX_BYTES_ENV)
    with pytest.raises(ConfigError, match="unknown option"):
        evaltrace.configure(local_store={"max_size": 1}, batch=False, handle_sigterm=False)
    with pytest.raises(ConfigError, match="max_age_s"):
        LocalStoreExporter(tmp_path, max_age_s=-1)
