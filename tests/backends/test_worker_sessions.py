"""Session-scope evaluation in ``evaltrace worker``: three traces of one session over OTLP/HTTP on 127.0.0.1.

The worker receives each trace in its own request (as from three application requests), judges the session once
it is idle, re-judges it when a later trace arrives, and writes the session score to the JSONL sink and the
local store it exports to (through the store's session sink).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags
from otlp_receivers import poll

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation
from evaltrace.worker import EvaluationWorker

FLAGS = TraceFlags(TraceFlags.SAMPLED)
SEEN: list[Conversation] = []


@evaluator(name="turns")
def turns(conversation: Conversation) -> EvaluationResult:
    SEEN.append(conversation)
    return EvaluationResult(evaluator="turns", passed=True, score=float(len(conversation.turns)))


def _turn(trace_id: int, question: str, start_s: int, **extra: object) -> list[ReadableSpan]:
    """One turn of the conversation as a foreign SDK sends it: Langfuse's session attribute on its root."""
    start = 1_700_000_000_000_000_000 + start_s * 1_000_000_000
    root = ReadableSpan(
        name="invoke_agent chat",
        context=SpanContext(trace_id, 0x01, False, FLAGS),
        parent=None,
        resource=Resource({"service.name": "chat"}),
        attributes={
            semconv.LANGFUSE_SESSION_ID: "worker-chat",
            semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT,
            "input.value": question,
            "output.value": f"answer to {question}",
            **extra,
        },
        start_time=start,
        end_time=start + 500_000_000,
    )
    return [root]


@pytest.fixture(params=[0.5])
def worker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[EvaluationWorker, Path, Path]]:
    SEEN.clear()
    store, scores = tmp_path / "store", tmp_path / "scores.jsonl"
    options = {
        "dead_letter_dir": None,
        "emit_log_events": False,
        "trace_quiet_period_s": 0.1,
        "session_quiet_period_s": request.param,
        "sink_schedule_delay_s": 0.01,
    }
    with EvaluationWorker(
        [EvaluatorSpec(turns, scope="session")],
        [JsonlScoreSink(scores)],
        [LocalStoreExporter(store, writer="thread")],
        port=0,
        grpc_port=None,
        evaluation_options=options,
    ) as running:
        yield running, store, scores


def _send(url: str, spans: list[ReadableSpan]) -> None:
    sender = HttpExporter(endpoint=url + "/v1/traces")
    assert sender.export(spans) is SpanExportResult.SUCCESS
    sender.shutdown()


def test_the_worker_judges_a_session_once_idle_and_again_after_a_late_trace(
    worker: tuple[EvaluationWorker, Path, Path],
) -> None:
    running, store, scores = worker
    for i, trace_id in enumerate((0xA1, 0xA2, 0xA3)):
        _send(running.url, _turn(trace_id << 64, f"q{i}", i))
    poll(lambda: len(SEEN) == 1, timeout=60)
    assert [t.user_input for t in SEEN[0].turns] == ["q0", "q1", "q2"]
    _send(running.url, _turn(0xA4 << 64, "q3", 3))
    poll(lambda: len(SEEN) == 2, timeout=60)
    assert len(SEEN[1].turns) == 4 and SEEN[1].extra["revision"] == 2
    assert running.force_flush(10_000)
    lines = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [(s["session_id"], s["value"], s["metadata"]["revision"]) for s in lines] == [
        ("worker-chat", 3.0, 1),
        ("worker-chat", 4.0, 2),
    ]
    with sqlite3.connect(store / DB_NAME) as conn:
        rows = conn.execute("SELECT session_id, evaluator, revision, value FROM session_evals").fetchall()
    assert rows == [("worker-chat", "turns", 2, 4.0)]
    assert running.pipeline.processor.stats()["sessions"]["judged"] == 2


@pytest.mark.parametrize("worker", [600.0], indirect=True)  # only the marker can make the session due in time
def test_the_session_end_marker_reaches_the_worker(worker: tuple[EvaluationWorker, Path, Path]) -> None:
    running, _, _ = worker
    _send(running.url, _turn(0xB1 << 64, "hello", 0, **{semconv.EVALTRACE_SESSION_END: "worker-chat"}))
    poll(lambda: len(SEEN) == 1, timeout=60)
    assert running.pipeline.processor.stats()["sessions"]["ended"] == 1


def test_the_worker_flag_sets_the_session_quiet_period_and_a_bad_one_is_named(tmp_path: Path) -> None:
    import subprocess
    import sys

    main = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    args = [sys.executable, "-c", main, "worker", "--port", "0", "--grpc-port", "0", "--session-quiet-period", "-1"]
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "session_quiet_period_s" in result.stderr and "must not be negative" in result.stderr
