"""A model call that answers with tool calls only has no final answer, and is never judged on an earlier one.

Issue 24: ``final_answer`` fell back to the last assistant text of the call's prompt history, so judges and
``NoPII`` graded the previous turn. Recorded OpenAI traffic (tests/fixtures/openai_tool_turns) through the real
openai client, evaluated live by the real pipeline (a judge on a real HTTP server on 127.0.0.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec
from evaltrace.evaluators import ContainsText, LLMJudge, NoPII
from evaltrace.evaluators.judge import Judge
from evaltrace.mapping import trace_from_spans
from judge_server import JudgeServer, serve_judge

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai_tool_turns"
TOOL_TURNS = FIXTURES / "test_chat_completion_tool_calls_with_content.yaml"
# An earlier turn of the same conversation answered in text, with an e-mail address in it: the tool-call turn
# that follows must not be graded on it.
EARLIER = [
    {"role": "user", "content": "How do I reach support?"},
    {"role": "assistant", "content": "Write to support.desk@example.com and we will answer within a day."},
]


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with serve_judge(lambda body: {"score": 1, "reason": "fine"}) as server:
        yield server


@pytest.fixture
def configured(judge: JudgeServer) -> Iterator[tuple[InMemorySpanExporter, Any]]:
    """evaltrace with NoPII, a text evaluator and an LLM judge on every model call; the OpenAI instrumentation."""
    saved = settings.current
    exporter = InMemorySpanExporter()
    rubric_judge = LLMJudge(rubric="Answers the question", judge=Judge("gpt-4o-mini", base_url=judge.url, api_key="k"))
    specs = [EvaluatorSpec(e, span_kinds={"llm"}) for e in (NoPII(), ContainsText("weather"), rubric_judge)]
    handle = evaltrace.configure(
        exporters=[exporter], local_store=False, batch=False, capture_content=True, evaluators=specs, sinks=[],
        evaluation_options={"hold_timeout_s": 60.0},
    )  # fmt: skip
    evaltrace.instrument_openai()
    try:
        yield exporter, handle
    finally:
        evaltrace.uninstrument_openai()
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def _chat_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The application's model calls (the judge's own calls are traced too, in traces of their own)."""
    spans = [
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("evaltrace.span.kind") == "llm" and not (s.attributes or {}).get("evaltrace.judge")
    ]
    return sorted(spans, key=lambda s: s.start_time or 0)


def test_tool_call_step_is_not_evaluated_and_the_answer_step_is(
    configured: tuple[InMemorySpanExporter, Any], judge: JudgeServer
) -> None:
    exporter, handle = configured
    asked, answered = load(TOOL_TURNS)
    api, _ = client([asked, answered], is_async=False)
    system, question = asked.request["messages"]

    @evaltrace.agent(name="weather")
    def agent() -> str:
        history: list[Any] = [system, *EARLIER, question]
        first = api.chat.completions.create(model="gpt-4o-mini", messages=history, tools=asked.request["tools"])
        calls = first.choices[0].message.tool_calls or []
        history.append(first.choices[0].message.model_dump(exclude_none=True))
        history += [m for m in answered.request["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in history[-2:]] == [c.id for c in calls]
        second = api.chat.completions.create(model="gpt-4o-mini", messages=history)
        return second.choices[0].message.content or ""

    answer = agent()
    assert handle.force_flush()
    step, final = _chat_spans(exporter)

    # The tool-call step: no answer, so nothing judged; skip reason no_answer, never the earlier turn's verdict.
    attrs = step.attributes or {}
    for name in ("pii_leakage", "contains_text", "llm_judge"):
        assert attrs[f"evaltrace.eval.{name}.outcome"] == "not_evaluated", name
        assert attrs[f"evaltrace.eval.{name}.skip_reason"] == "no_answer", name
    assert set(attrs["evaltrace.eval.not_evaluated"]) == {"pii_leakage", "contains_text", "llm_judge"}
    assert trace_from_spans([step]).output.final_answer is None
    # Its output.value is the tool calls (what trace lists and Langfuse show), not empty and not a response body.
    calls = json.loads(attrs["output.value"])[0]["parts"]
    assert [c["name"] for c in calls] == ["get_current_weather", "get_current_weather"]

    # The answering step is judged on its own answer.
    final_attrs = final.attributes or {}
    assert final_attrs["evaltrace.eval.pii_leakage.outcome"] == "pass"
    assert final_attrs["evaltrace.eval.contains_text.outcome"] == "pass"
    assert final_attrs["evaltrace.eval.llm_judge.outcome"] == "pass"
    assert trace_from_spans([final]).output.final_answer == answer
    assert len(judge.requests) == 1  # the judge was asked about the answer only
    assert "Seattle" in judge.requests[0]["body"]["messages"][-1]["content"]

    # The agent's trace answers what the agent returned: the last step's text.
    assert trace_from_spans(exporter.get_finished_spans()).output.final_answer == answer


def test_a_trace_whose_last_step_asked_for_tools_has_no_answer(
    configured: tuple[InMemorySpanExporter, Any],
) -> None:
    """The trace-level answer is the last model call's: none when that call only asked for tools."""
    exporter, handle = configured
    asked, _ = load(TOOL_TURNS)
    api, _ = client([asked], is_async=False)
    system, question = asked.request["messages"]

    @evaltrace.agent(name="weather")
    def agent() -> None:
        api.chat.completions.create(
            model="gpt-4o-mini", messages=[system, *EARLIER, question], tools=asked.request["tools"]
        )

    agent()
    assert handle.force_flush()
    trace = trace_from_spans(exporter.get_finished_spans())
    assert trace.output.final_answer is None  # not "Write to support.desk@example.com ..."
    assert [c.name for c in trace.tool_calls] == ["get_current_weather", "get_current_weather"]
