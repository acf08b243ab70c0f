"""``evaltrace evaluate --phoenix URL --project NAME``: traces read back from a real Phoenix's REST API and re-judged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from phoenix_helpers import Phoenix, poll

import evaltrace
from backfill.backfill_evaluators import TurnCount, has_answer
from backfill.stored import agent_spans
from evaltrace.backfill.phoenix_source import PhoenixSource
from evaltrace.evaluation import JsonlScoreSink, PhoenixScoreSink
from evaltrace.exporters import TraceFilter
from evaltrace.exporters.store_db import DB_NAME


def _send(phoenix: Phoenix, project: str, count: int, sessions: int) -> None:
    spans = agent_spans(count, sessions, resource={"openinference.project.name": project})
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    poll(lambda: len(phoenix.spans(project)) >= 2 * count)


def test_traces_read_from_phoenix_are_judged_into_the_store_and_the_sinks(
    phoenix: Phoenix, project: str, tmp_path: Path
) -> None:
    _send(phoenix, project, 4, sessions=2)
    store, scores = tmp_path / "store", tmp_path / "scores.jsonl"
    sinks = [JsonlScoreSink(scores), PhoenixScoreSink(phoenix.url)]
    report = evaltrace.evaluate_traces([has_answer], store=store, phoenix=phoenix.url, project=project, sinks=sinks)
    assert (report.traces, report.evaluations, report.outcomes) == (4, 4, {"pass": 4})
    with sqlite3.connect(store / DB_NAME) as conn:
        # Each trace whole (agent and tool span) next to its result, the tool still under its agent.
        assert conn.execute("SELECT count(*), sum(span_count), sum(eval_pass) FROM traces").fetchone() == (4, 12, 4)
        names = conn.execute("SELECT root_name FROM traces").fetchall()
        roots = [row[0] for row in conn.execute("SELECT root_span_id FROM traces")]
    assert names == [("invoke_agent helper",)] * 4
    assert len({json.loads(line)["trace_id"] for line in scores.read_text().splitlines()}) == 4
    # And back in Phoenix: each trace's verdict annotates its root span.
    for root in roots:
        (annotation,) = poll(lambda root=root: phoenix.span_annotations(project, root))
        assert annotation["name"] == "has_answer" and annotation["result"]["label"] == "pass"


def test_a_phoenix_session_is_judged_as_one_conversation(phoenix: Phoenix, project: str, tmp_path: Path) -> None:
    _send(phoenix, project, 6, sessions=2)
    TurnCount.seen.clear()
    report = evaltrace.evaluate_traces(
        [TurnCount()],
        store=tmp_path / "store",
        phoenix=phoenix.url,
        project=project,
        where=TraceFilter(session_id="s1"),
        scope="session",
    )
    assert (report.traces, report.sessions) == (3, 1)
    (conversation,) = TurnCount.seen
    assert [t.user_input for t in conversation.turns] == ["question 1", "question 3", "question 5"]


def _send_orders(phoenix: Phoenix, project: str, order_ids: list[object]) -> None:
    tracer = TracerProvider(resource=Resource({"openinference.project.name": project})).get_tracer("orders")
    spans = []
    for order in order_ids:
        span = tracer.start_span(
            "invoke_agent helper",
            attributes={"evaltrace.span.kind": "agent", "input.value": f"order {order}", "order.id": order},
        )
        span.end()
        spans.append(span)
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    poll(lambda: len(phoenix.spans(project)) >= len(order_ids))


def test_a_where_value_matches_phoenix_attributes_as_the_local_store_does(
    phoenix: Phoenix, project: str, tmp_path: Path
) -> None:
    # A string that spells a number, and the number itself: --where order.id=12345 matches both, as locally.
    _send_orders(phoenix, project, ["12345", 12345, "A-1", "true"])
    for value, inputs in (("12345", {"order 12345"}), ("A-1", {"order A-1"}), ("true", {"order true"})):
        where = TraceFilter(attributes=(("order.id", value),))
        source = PhoenixSource(phoenix.url, project, attributes=where.attributes)
        try:
            found = [source.spans(t)[0].attributes["input.value"] for t in source.trace_ids()]
        finally:
            source.close()
        assert sorted(found) == sorted(["order 12345", "order 12345"] if value == "12345" else inputs)


def test_phoenix_traces_are_read_a_window_at_a_time_not_the_whole_project(phoenix: Phoenix, project: str) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
    assert (
        exporter.export(agent_spans(120, 0, resource={"openinference.project.name": project}))
        is SpanExportResult.SUCCESS
    )
    exporter.shutdown()

    def selection() -> list[str]:
        source = PhoenixSource(phoenix.url, project)
        try:
            return source.trace_ids() if phoenix.spans(project) else []
        finally:
            source.close()

    poll(lambda: len(selection()) == 120)
    source = PhoenixSource(phoenix.url, project)
    try:
        selected = source.trace_ids()
        assert len(selected) == 120 and not source._cache  # the selection is ids: no span kept
        held = 0
        for trace_id in selected:
            assert len(source.spans(trace_id)) == 2  # each trace whole (agent and tool span)
            held = max(held, len(source._cache))
    finally:
        source.close()
    assert held <= 50  # one window of traces at a time, never the project's 120
