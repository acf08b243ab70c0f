"""Our spans, evaluation events and span annotations in a real Phoenix, over OTLP/HTTP and OTLP/gRPC."""

from __future__ import annotations

from typing import Any

import pytest
from phoenix_helpers import Phoenix, poll

import evaltrace
from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, PhoenixScoreSink, evaluator
from evaltrace.schema import Score

NO_DEAD_LETTERS = {"dead_letter_dir": None, "sink_schedule_delay_s": 0.05, "emit_log_events": False}


@evaluator(name="answered")
def answered(trace: Any) -> bool:
    return bool(trace.output.final_answer)


@evaluator(name="mentions_sun", threshold=0.5)
def mentions_sun(trace: Any) -> float:
    return 1.0 if "sun" in (trace.output.final_answer or "") else 0.0


@evaltrace.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "sky": "sunny"}


@evaltrace.agent(name="weather")
def answer(question: str) -> str:
    return f"It is {get_weather('Paris')['sky']} ({question})"


def run_app() -> None:
    with evaltrace.context(session_id="it-session", user_id="it-user"):
        assert answer("weather?").startswith("It is sunny")


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in spans}


def assert_spans(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    named = by_name(spans)
    agent, tool = named["invoke_agent weather"], named["execute_tool get_weather"]
    assert (agent["span_kind"], tool["span_kind"]) == ("AGENT", "TOOL")  # from openinference.span.kind
    assert tool["parent_id"] == agent["context"]["span_id"]
    assert tool["context"]["trace_id"] == agent["context"]["trace_id"]
    assert tool["attributes"][semconv.GEN_AI_TOOL_NAME] == "get_weather"
    assert '"Paris"' in tool["attributes"][semconv.GEN_AI_TOOL_CALL_ARGUMENTS]
    for span in (agent, tool):
        assert span["attributes"][semconv.SESSION_ID] == "it-session"
        assert span["attributes"][semconv.USER_ID] == "it-user"
    return named


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_spans_and_evaluations_arrive(transport: str, phoenix: Phoenix, project: str) -> None:
    specs = [EvaluatorSpec(answered, span_kinds={"agent"}), EvaluatorSpec(mentions_sun, span_kinds={"agent"})]
    target: dict[str, Any] = (
        {"phoenix": phoenix.url} if transport == "http" else {"otlp_endpoint": phoenix.grpc, "protocol": "grpc"}
    )
    handle = evaltrace.configure(
        f"it-{transport}", evaluators=specs, local_store=False, evaluation_options=NO_DEAD_LETTERS, **target
    )
    run_app()
    assert handle.force_flush(30_000)
    spans = poll(lambda: (found := phoenix.spans(project)) and len(found) >= 2 and found)
    agent = assert_spans(spans)["invoke_agent weather"]
    assert agent["attributes"]["evaltrace.eval.answered.passed"] is True
    assert agent["attributes"]["evaltrace.eval.mentions_sun.score"] == 1.0
    results = {
        e["attributes"][semconv.GEN_AI_EVALUATION_NAME]: e["attributes"]
        for e in agent["events"]
        if e["name"] == semconv.GEN_AI_EVALUATION_RESULT_EVENT
    }
    assert set(results) == {"answered", "mentions_sun"}
    assert results["mentions_sun"][semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert results["answered"][semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "pass"


def test_scores_become_span_annotations(phoenix: Phoenix, project: str) -> None:
    handle = evaltrace.configure(
        "it-annotations",
        phoenix=phoenix.url,
        evaluators=[EvaluatorSpec(mentions_sun, span_kinds={"agent"})],
        sinks=[PhoenixScoreSink(phoenix.url)],
        local_store=False,
        evaluation_options=NO_DEAD_LETTERS,
    )
    run_app()
    assert handle.force_flush(30_000)
    spans = poll(lambda: (found := phoenix.spans(project)) and len(found) >= 2 and found)
    span_id = by_name(spans)["invoke_agent weather"]["context"]["span_id"]
    (annotation,) = poll(lambda: phoenix.span_annotations(project, span_id))
    assert annotation["name"] == "mentions_sun"
    assert annotation["annotator_kind"] == "CODE"
    assert annotation["result"]["score"] == 1.0
    assert annotation["span_id"] == span_id
    assert handle.evaluation_processor.stats()["sinks"]["phoenix"]["successes"] >= 1


def test_worker_between_app_and_phoenix(phoenix: Phoenix, project: str) -> None:
    """App (no evaluators) -> evaltrace worker over OTLP/HTTP -> Phoenix over gRPC, annotations by the worker."""
    from evaltrace.worker import EvaluationWorker, build_exporters

    exporters = build_exporters(phoenix.grpc, "grpc", None, None)
    worker = EvaluationWorker(
        [EvaluatorSpec(mentions_sun, span_kinds={"agent"})],
        [PhoenixScoreSink(phoenix.url)],
        exporters,
        port=0,
        evaluation_options=NO_DEAD_LETTERS,
    )
    with worker:
        handle = evaltrace.configure("it-worker", otlp_endpoint=worker.url, local_store=False)
        run_app()
        assert handle.force_flush(30_000)
        handle.shutdown()
        poll(lambda: worker.stats()["accepted_spans"] >= 2 and worker.stats()["inflight"] == 0)
        assert worker.force_flush(30_000)
    spans = poll(lambda: (found := phoenix.spans(project)) and len(found) >= 2 and found)
    agent = assert_spans(spans)["invoke_agent weather"]
    assert agent["attributes"]["evaltrace.eval.mentions_sun.passed"] is True
    (annotation,) = poll(lambda: phoenix.span_annotations(project, agent["context"]["span_id"]))
    assert (annotation["name"], annotation["result"]["score"]) == ("mentions_sun", 1.0)


def test_a_score_json_cannot_carry_is_stored_by_phoenix_with_replacements(phoenix: Phoenix, project: str) -> None:
    # Before: httpx 0.28 raised on the lone surrogate inside the sink; httpx 0.27 sent it escaped, and Phoenix's
    # asynchronous span annotations answered 200 and never stored it (a loss nobody counted).
    handle = evaltrace.configure("it-hard-text", phoenix=phoenix.url, local_store=False)
    run_app()
    assert handle.force_flush(30_000)
    spans = poll(lambda: (found := phoenix.spans(project)) and len(found) >= 2 and found)
    agent = by_name(spans)["invoke_agent weather"]
    score = Score(
        name="tone",
        value=1.0,
        trace_id=agent["context"]["trace_id"],
        observation_id=agent["context"]["span_id"],
        comment="half a pair: \ud800, a pair in halves: \ud83d\ude00",
        metadata={"nan": float("nan")},
    )
    sink = PhoenixScoreSink(phoenix.url)
    try:
        assert sink.export([score]).ok
    finally:
        sink.shutdown()
    (annotation,) = poll(lambda: phoenix.span_annotations(project, agent["context"]["span_id"]))
    assert annotation["result"]["explanation"] == "half a pair: \ufffd, a pair in halves: \U0001f600"
    assert annotation["metadata"] == {"nan": None}
