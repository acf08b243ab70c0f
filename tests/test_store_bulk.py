"""A batch reaches the local store in a few statements (never one per span), and loses nothing on the way.

Python's sqlite3 gives up the GIL around every statement step: one step per span let a busy application
thread starve the exporter thread (``store_bulk``). These tests use real SDK spans and a real store file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from evaltrace.exporters import LocalStoreExporter, LocalTraceStore, store_bulk
from evaltrace.exporters.store_db import DB_NAME

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
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    exporter.export(_spans(1))  # opens the store: schema, resource row, first retention pass
    small = _statements(exporter, _spans(5))
    large = _statements(exporter, _spans(500))
    assert len(large) == len(small) < 20, large  # one statement per table, not one per span
    assert len(LocalTraceStore(tmp_path).list_traces(limit=1000)) == 506


@pytest.mark.parametrize("json_rows", [True, False], ids=["json-rows", "executemany"])
def test_both_ways_of_sending_rows_store_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_rows: bool
) -> None:
    spans = _spans(20) + _spans(3, "re-exported", {"x.nan": float("nan"), "x.inf": float("-inf")})[:2]
    monkeypatch.setattr(store_bulk, "_JSON_ROWS", None)  # probed for real
    reference = tmp_path / "probed"
    LocalStoreExporter(reference, max_age_s=0, max_bytes=0).export(spans)
    monkeypatch.setattr(store_bulk, "_JSON_ROWS", json_rows)
    store = tmp_path / "forced"
    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=0)
    exporter.export(spans[:10])
    exporter.export(spans)  # half of them again: the upsert and delete paths
    stored, expected = _dump(store), _dump(reference)
    assert stored["spans"] and [r[1:] for r in stored["spans"]] == [r[1:] for r in expected["spans"]]
    assert stored["traces"] == expected["traces"]
    assert stored["evals"] == expected["evals"] and stored["evals"]
    assert stored["text"] == expected["text"] and stored["text"]
    summary = LocalTraceStore(store).list_traces(limit=1)[0]
    assert (summary.input_tokens, summary.output_tokens, summary.cost_usd) == (3, 5, 0.000042)


def test_text_holding_a_nul_is_stored_whole(tmp_path: Path) -> None:
    """SQLite's JSON functions end a string at an escaped NUL: such a batch is sent row by row instead."""
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    spans = _spans(3, "nul\x00name", {"input.value": "before\x00after"})
    assert exporter.export(spans).name == "SUCCESS"
    store = LocalTraceStore(tmp_path)
    names = sorted(s.root_name for s in store.list_traces())
    assert names == ["nul\x00name 0", "nul\x00name 1", "nul\x00name 2"]
    (root,) = [s for s in store.spans(store.list_traces()[0].trace_id) if s.name.startswith("nul")]
    assert (root.attributes or {})["input.value"] == "before\x00after"
