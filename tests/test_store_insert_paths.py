"""New spans and their trace summaries are inserted (no statement journal), spans written before are upserted.

``store_writer`` inserts rows its look-up found new with ``INSERT OR FAIL`` and falls back to replacing when a
summary row exists anyway (a store edited by hand); these tests check that nothing is lost or left stale either
way, with real SDK spans, a real store file and both writers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import set_span_in_context

from evaltrace.exporters import LocalStoreExporter, LocalTraceStore
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.exporters.store_process import WRITER_CACHE_KIB
from evaltrace.exporters.store_session import StoreSession
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

_TRACER = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")


def _one(name: str) -> ReadableSpan:
    span = _TRACER.start_span(name, attributes={"input.value": f"{name} input"})
    span.end()
    assert isinstance(span, ReadableSpan)
    return span


def _pair(name: str) -> list[ReadableSpan]:
    root = _TRACER.start_span(name)
    child = _TRACER.start_span("child", context=set_span_in_context(root))
    child.end()
    root.end()
    return [s for s in (child, root) if isinstance(s, ReadableSpan)]


def _stale_summary(store: Path, trace_id: str) -> None:
    """A ``traces`` row with no span behind it, as a store edited by hand might hold."""
    with sqlite3.connect(store / DB_NAME) as db:
        db.execute(
            "INSERT INTO traces VALUES (?, 'gone', 'stale', 'old', 1, 1, 7, 1, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0, 1)",
            (trace_id,),
        )


def test_a_summary_left_without_spans_is_replaced_and_no_span_is_lost(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    exporter.export([_one("first")])  # creates the store
    single, pair = _one("single"), _pair("pair")
    for span in (single, pair[0]):
        assert span.context is not None
        _stale_summary(tmp_path, f"{span.context.trace_id:032x}")
    exporter.export([single, *pair, _one("other")])
    summaries = {s.root_name: s for s in LocalTraceStore(tmp_path).list_traces()}
    assert sorted(summaries) == ["first", "other", "pair", "single"]
    assert (summaries["single"].span_count, summaries["pair"].span_count) == (1, 2)
    assert summaries["single"].service_name == summaries["pair"].service_name == "svc"
    assert not summaries["single"].error  # the stale row said error
    assert exporter.stats()["lost_spans"] == 0


def test_a_batch_mixing_new_spans_and_spans_written_before_stores_each_once(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    again = _one("again")
    exporter.export([again])
    exporter.export([again, _one("new"), *_pair("new pair")])
    store = LocalTraceStore(tmp_path)
    names = sorted(s.root_name for s in store.list_traces())
    assert names == ["again", "new", "new pair"]
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM spans").fetchone()[0] == 4
        assert db.execute("SELECT count(*) FROM span_text").fetchone()[0] == 2  # the copy's text replaced
    assert exporter.stats()["lost_spans"] == 0


def test_the_writer_process_session_has_a_larger_page_cache(tmp_path: Path) -> None:
    session = StoreSession(tmp_path, 0, 0, WRITER_CACHE_KIB)
    try:
        assert session.connection().execute("PRAGMA cache_size").fetchone()[0] == -WRITER_CACHE_KIB
    finally:
        session.close()
    default = StoreSession(tmp_path, 0, 0)
    try:  # the application's own writer keeps open_db's 16 MB
        assert default.connection().execute("PRAGMA cache_size").fetchone()[0] == -16000
    finally:
        default.close()
