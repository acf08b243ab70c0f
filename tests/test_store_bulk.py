"""A batch reaches the local store in a few multi-row statements (never one per span), and loses nothing.

Python's sqlite3 gives up the GIL around every statement step: one step per span let a busy application
thread starve the exporter thread (``store_bulk``). These tests use real SDK spans and a real store file.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from evaltrace.exporters import LocalStoreExporter, LocalTraceStore, TraceFilter, store_bulk, store_writer
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.exporters.store_rows import stored_span
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

TRICKY: dict[str, Any] = {  # values whose JSON text SQLite must give back unchanged
    "x.float": 0.1,
    "x.small": 1e-7,
    "x.big": 2**62,
    "x.text": 'é "quoted" \\ back\nline\t\u2028 \U0001f600 </script>',
    "x.list": ("a", "b"),
    "x.bools": (True, False),
}


def _spans(count: int, name: str = "step", attributes: dict[str, Any] | None = None) -> list[ReadableSpan]:
    """``count`` traces of a root and a child, the child with searchable text, tokens, cost and an error."""
    tracer = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
    spans: list[ReadableSpan] = []
    for index in range(count):
        root = tracer.start_span(f"{name} {index}", attributes={"session.id": "s1", **(attributes or {})})
        child = tracer.start_span(
            "llm",
            context=set_span_in_context(root),
            attributes={
                "input.value": f"question {index} about paris",
                "gen_ai.usage.input_tokens": 3,
                "gen_ai.usage.output_tokens": 5,
                "evaltrace.cost_usd": 0.000042,
                "evaltrace.eval.relevance.outcome": "pass",
                **TRICKY,
            },
        )
        child.set_status(Status(StatusCode.ERROR, "boom"))
        child.end()
        root.end()
        spans += [s for s in (child, root) if isinstance(s, ReadableSpan)]
    return spans


def _statements(exporter: LocalStoreExporter, spans: list[ReadableSpan]) -> list[str]:
    """The SQL statements one ``export`` of ``spans`` runs from Python (each row of an ``executemany`` is one).

    Statements SQLite runs inside another (FTS5's own tables, traced as ``-- ...``) never return to Python.
    """
    seen: list[str] = []
    conn = exporter._connection()
    conn.set_trace_callback(lambda sql: None if sql.startswith("-- ") else seen.append(sql))
    try:
        assert exporter.export(spans).name == "SUCCESS"
    finally:
        conn.set_trace_callback(None)
    return seen


def _dump(store: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(store / DB_NAME) as db:
        return {
            "spans": db.execute("SELECT * FROM spans ORDER BY trace_id, span_id").fetchall(),
            "traces": [row[:-1] for row in db.execute("SELECT * FROM traces ORDER BY trace_id")],  # not stored_at
            "evals": db.execute("SELECT * FROM evals ORDER BY trace_id, span_id, evaluator").fetchall(),
            "text": db.execute("SELECT trace_id, text FROM span_text ORDER BY trace_id, text").fetchall(),
        }


def test_a_batch_is_written_in_a_few_statements_whatever_its_size(tmp_path: Path) -> None:
    # Traced on the in-process connection; the writer process runs the same write_batch.
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0, writer="thread")
    exporter.export(_spans(1))  # opens the store: schema, resource row, first retention pass
    small = _statements(exporter, _spans(5))
    large = _statements(exporter, _spans(1500))  # 3,000 spans
    assert len(small) < 20, small
    # Full statements of MAX_ROWS rows, then the rest in power-of-two sizes: never one statement per span.
    assert len(large) < 60, large
    assert len(LocalTraceStore(tmp_path).list_traces(limit=10_000)) == 1506


@pytest.mark.parametrize("total", [1, 2, 3, 5, 1023, 1024, 1025, 2500, 8191, 8192, 8193])
def test_rows_go_in_full_statements_then_one_padded_statement(total: int) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, a TEXT, b REAL)")
    statement = store_bulk.bulk_statement("INSERT INTO t (k, a, b)", 3, "ON CONFLICT (k) DO UPDATE SET a = excluded.a")
    rows = [(index, f"row {index}", index / 3) for index in range(total)]
    executed: list[str] = []
    conn.set_trace_callback(executed.append)
    store_bulk.execute_bulk(conn, statement, rows)
    conn.set_trace_callback(None)
    assert conn.execute("SELECT k, a, b FROM t ORDER BY k").fetchall() == rows  # no padding row stored
    most = store_bulk.rows_per_statement(conn, 3)
    assert len(executed) == total // most + (1 if total % most else 0)
    if total % most:  # the rest: one statement of the next power of two, padded with rows the WHERE skips
        assert executed[-1].count("), (") + 1 == store_bulk.padded_size(total % most, most)


def test_a_batch_of_one_span_traces_takes_a_handful_of_statements(tmp_path: Path) -> None:
    """Every statement returns to Python and waits for the GIL: 8,192 decorator-like spans take at most 9."""
    tracer = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
    spans: list[ReadableSpan] = []
    for index in range(8192):
        span = tracer.start_span("answer", attributes={"input.value": f"question {index}", "output.value": "42"})
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0, writer="thread")  # traced in-process
    exporter.export(spans[:1])  # opens the store
    conn = exporter._connection()
    most = store_bulk.rows_per_statement(conn, 19)
    statements = _statements(exporter, spans[1:])
    # BEGIN, the look-up, the spans, their text, the summaries in one INSERT ... SELECT, COMMIT.
    assert len(statements) <= 5 + -(-8191 // most), statements
    store = LocalTraceStore(tmp_path)
    assert len(store.list_traces(limit=10_000)) == 8192
    assert [t.root_name for t in store.list_traces(where=TraceFilter(search="question 8191"))] == ["answer"]


def test_one_span_traces_summarised_in_sql_match_the_python_summary(tmp_path: Path) -> None:
    """The ``INSERT ... SELECT`` for one-span traces gives each column as the general path computes it."""
    tracer = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
    shapes: list[dict[str, Any]] = [
        {},
        {"session.id": "s1", "user.id": "u1"},
        {"langfuse.session.id": "s2", "langfuse.user.id": "u2"},
        {"gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 5, "evaltrace.cost_usd": 0.25},
        {"gen_ai.usage.input_tokens": 7},
        {"gen_ai.usage.cost": 1.5},
    ]
    spans: list[ReadableSpan] = []
    for index, attributes in enumerate(shapes * 2):
        span = tracer.start_span(f"one {index}", attributes=attributes)
        if index >= len(shapes):
            span.set_status(Status(StatusCode.ERROR, "boom"))
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    assert exporter.export(spans).name == "SUCCESS"
    expected = sorted(store_writer._new_trace_row(row.trace_id, [row], 0)[:-1] for row in map(stored_span, spans))
    assert [tuple(row) for row in _dump(tmp_path)["traces"]] == expected


def _reference(tmp_path: Path, spans: list[ReadableSpan]) -> dict[str, list[tuple[Any, ...]]]:
    """The store ``spans`` make when each is exported alone (one-row statements)."""
    reference = tmp_path / "one-by-one"
    exporter = LocalStoreExporter(reference, max_age_s=0, max_bytes=0)
    for span in spans:
        exporter.export([span])
    return _dump(reference)


def test_a_batch_stores_what_spans_exported_one_by_one_store(tmp_path: Path) -> None:
    spans = _spans(20) + _spans(3, "re-exported", {"x.nan": float("nan"), "x.inf": float("-inf")})[:2]
    expected = _reference(tmp_path, spans[:10] + spans)
    store = tmp_path / "batched"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=0)
    exporter.export(spans[:10])
    exporter.export(spans)  # half of them again: the upsert and delete paths
    stored = _dump(store)
    assert stored["spans"] and [r[1:] for r in stored["spans"]] == [r[1:] for r in expected["spans"]]
    assert stored["traces"] == expected["traces"]
    assert stored["evals"] == expected["evals"] and stored["evals"]
    assert stored["text"] == expected["text"] and len(stored["text"]) == 21  # re-exports replaced, not added
    summary = LocalTraceStore(store).list_traces(limit=1)[0]
    assert (summary.input_tokens, summary.output_tokens, summary.cost_usd) == (3, 5, 0.000042)
    assert [t.root_name for t in LocalTraceStore(store).list_traces(where=TraceFilter(search="paris"))]


def test_a_connection_allowing_few_parameters_still_stores_every_row(tmp_path: Path) -> None:
    """SQLite before 3.32 allows 999 parameters a statement: statements then hold fewer rows."""
    spans = _spans(200)
    expected = _reference(tmp_path, spans)
    exporter = LocalStoreExporter(tmp_path / "limited", max_age_s=0, max_bytes=0, writer="thread")  # its conn is set
    conn = exporter._connection()
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    assert store_bulk.rows_per_statement(conn, 19) == 32
    assert exporter.export(spans).name == "SUCCESS"
    stored = _dump(tmp_path / "limited")
    assert [r[1:] for r in stored["spans"]] == [r[1:] for r in expected["spans"]]
    assert stored["traces"] == expected["traces"] and stored["text"] == expected["text"]


def test_text_holding_a_nul_is_stored_whole(tmp_path: Path) -> None:
    """Values are bound, never parsed from text by SQLite: a NUL inside a string is kept."""
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    spans = _spans(3, "nul\x00name", {"input.value": "before\x00after"})
    assert exporter.export(spans).name == "SUCCESS"
    store = LocalTraceStore(tmp_path)
    names = sorted(s.root_name for s in store.list_traces())
    assert names == ["nul\x00name 0", "nul\x00name 1", "nul\x00name 2"]
    (root,) = [s for s in store.spans(store.list_traces()[0].trace_id) if s.name.startswith("nul")]
    assert (root.attributes or {})["input.value"] == "before\x00after"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"x.huge": 2**70},
        {"x.path": b"report-\xff.txt".decode("utf-8", "surrogateescape")},
        {"x.nan": float("nan"), "x.inf": (1.0, float("-inf"))},
        {"x.word": "null"},
    ],
    ids=["orjson", "int-beyond-64-bits", "lone-surrogate", "non-finite-floats", "the-word-null"],
)
def test_attributes_come_back_as_they_were_whichever_encoder_wrote_them(tmp_path: Path, extra: dict[str, Any]) -> None:
    """orjson writes the blob; what it refuses or would write as null (NaN, infinities) goes through json."""
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    assert exporter.export(_spans(1, "values", extra)).name == "SUCCESS"
    store = LocalTraceStore(tmp_path)
    (root,) = [s for s in store.spans(store.list_traces()[0].trace_id) if s.name == "values 0"]
    attributes = dict(root.attributes or {})
    for key, value in extra.items():
        expected = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if key == "x.path" else value
        assert repr(attributes[key]) == repr(expected)  # repr: NaN is not equal to itself
    (child,) = [s for s in store.spans(store.list_traces()[0].trace_id) if s.name == "llm"]
    assert {k: (child.attributes or {})[k] for k in TRICKY} == TRICKY


def test_a_one_span_trace_exported_again_is_summarised_from_its_latest_copy(tmp_path: Path) -> None:
    """A one-span trace already stored leaves the ``INSERT ... SELECT`` path: its summary is recomputed."""
    tracer = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
    first = tracer.start_span("answer", attributes={"input.value": "first question"})
    first.end()
    assert isinstance(first, ReadableSpan)
    again = ReadableSpan(
        name="answer v2",
        context=first.context,
        resource=first.resource,
        attributes={"input.value": "second question", "evaltrace.eval.relevance.outcome": "fail", "user.id": "u1"},
        start_time=first.start_time,
        end_time=first.end_time,
        instrumentation_scope=first.instrumentation_scope,
    )
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    assert exporter.export([first]).name == "SUCCESS"
    assert exporter.export([again]).name == "SUCCESS"
    store = LocalTraceStore(tmp_path)
    (summary,) = store.list_traces()
    assert (summary.root_name, summary.span_count, summary.user_id) == ("answer v2", 1, "u1")
    assert summary.evaluations == {"fail": 1}
    assert not store.list_traces(where=TraceFilter(search="first"))
    assert [t.trace_id for t in store.list_traces(where=TraceFilter(search="second"))] == [summary.trace_id]
    assert len(_dump(tmp_path)["text"]) == 1


def test_float_subclasses_are_stored_as_numbers(tmp_path: Path) -> None:
    """OpenTelemetry accepts float subclasses (numpy.float64): the store keeps them numbers, not strings."""

    class Confidence(float):
        pass

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)))
    with provider.get_tracer("t").start_as_current_span("predict") as span:
        span.set_attribute("model.confidence", Confidence(0.93))
        span.set_attribute("model.probs", (Confidence(0.1), Confidence(0.9)))
        span.set_attribute("model.nan", Confidence("nan"))
    provider.shutdown()
    with LocalTraceStore(tmp_path) as store:
        (summary,) = store.list_traces()
        (stored,) = store.spans(summary.trace_id)
    attributes = dict(stored.attributes or {})
    assert attributes["model.confidence"] == 0.93 and type(attributes["model.confidence"]) is float
    assert tuple(attributes["model.probs"]) == (0.1, 0.9)
    assert math.isnan(attributes["model.nan"])


def test_a_search_row_above_every_span_id_does_not_block_new_spans(tmp_path: Path) -> None:
    """Span ids are assigned past search rows too: a store repaired by hand must keep accepting spans."""
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first", attributes={"input.value": "hello"}):
        pass
    conn = sqlite3.connect(tmp_path / DB_NAME)
    with conn:
        conn.execute("INSERT INTO span_text (rowid, trace_id, text) VALUES (2, 'x', 'stray')")
    conn.close()
    with tracer.start_as_current_span("second", attributes={"input.value": "world"}):
        pass
    provider.shutdown()
    assert exporter.stats()["lost_spans"] == 0
    with LocalTraceStore(tmp_path) as store:
        assert sorted(s.root_name for s in store.list_traces()) == ["first", "second"]
