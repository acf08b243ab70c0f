"""``evaltrace evaluate --phoenix URL --project NAME``: traces read back from a real Phoenix's REST API and re-judged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from phoenix_helpers import Phoenix, poll

import evaltrace
from backfill.backfill_evaluators import TurnCount, has_answer
from backfill.stored import agent_spans
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
