"""A turn's tool calls are the ones it made, never those of the history its first model call was sent again.

A multi-turn application sends the earlier turns (their tool calls and results included) with each new question.
Before, a follow-up turn that called no tool passed ``ToolCalled`` on the call an earlier turn made, and a
conversation counted that call once per later turn. Recorded OpenAI traffic (tests/fixtures/openai_tool_turns)
through the real openai client, each turn a trace of its own in one session, mapped from the real spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluators import ToolCalled, ToolErrorRate
from evaltrace.evaluators._base import context_chunks
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Conversation, Trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai_tool_turns"
TOOL_TURNS = FIXTURES / "test_chat_completion_tool_calls_with_content.yaml"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    saved = settings.current
    spans = InMemorySpanExporter()
    handle = evaltrace.configure(exporters=[spans], local_store=False, batch=False, capture_content=True, sinks=[])
    evaltrace.instrument_openai()
    try:
        yield spans
    finally:
        evaltrace.uninstrument_openai()
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def _two_turns(exporter: InMemorySpanExporter) -> tuple[Trace, Trace]:
    """Turn 1 asks for the weather (a tool call, its results, an answer); turn 2 follows up with that history."""
    asked, answered = load(TOOL_TURNS)
    # The follow-up's reply is the recorded answer again: what is judged here is which calls each turn made.
    api, _ = client([asked, answered, answered], is_async=False)
    system, question = asked.request["messages"]
    history: list[Any] = [system, question]

    @evaltrace.agent(name="weather")
    def first_turn() -> str:
        first = api.chat.completions.create(model="gpt-4o-mini", messages=history, tools=asked.request["tools"])
        history.append(first.choices[0].message.model_dump(exclude_none=True))
        history.extend(m for m in answered.request["messages"] if m["role"] == "tool")
        second = api.chat.completions.create(model="gpt-4o-mini", messages=history, tools=asked.request["tools"])
        answer = second.choices[0].message.content or ""
        history.append({"role": "assistant", "content": answer})
        return answer

    @evaltrace.agent(name="weather")
    def second_turn() -> str:
        history.append({"role": "user", "content": "Thanks! Should I take an umbrella?"})
        reply = api.chat.completions.create(model="gpt-4o-mini", messages=history, tools=asked.request["tools"])
        return reply.choices[0].message.content or ""

    with evaltrace.context(session_id="chat-1"):
        first_turn()
        second_turn()
    spans = exporter.get_finished_spans()
    trace_ids = list(dict.fromkeys(s.context.trace_id for s in spans if s.context is not None))
    assert len(trace_ids) == 2
    one, two = (
        trace_from_spans([s for s in spans if s.context is not None and s.context.trace_id == t]) for t in trace_ids
    )
    return one, two


def test_a_follow_up_turn_has_no_tool_call_of_the_turn_before(exporter: InMemorySpanExporter) -> None:
    one, two = _two_turns(exporter)
    names = ["get_current_weather", "get_current_weather"]
    assert [c.name for c in one.tool_calls] == names
    assert [r.tool_call_id for r in one.tool_results] == [c.id for c in one.tool_calls]
    # The history is still in the follow-up's messages (what its model was sent) ...
    assert [m.tool_call.name for m in two.messages if m.tool_call is not None] == names
    # ... but it made no call, so it returned no result either.
    assert two.tool_calls == [] and two.tool_results == []

    assert ToolCalled("get_current_weather").evaluate(one, None).passed is True
    verdict = ToolCalled("get_current_weather").evaluate(two, None)
    assert verdict.passed is False and verdict.detail is not None
    assert verdict.detail["missing"] == ["get_current_weather"]
    # Tool health is about this turn's results: none here, so not evaluated (never a pass on turn 1's).
    assert ToolErrorRate().evaluate(two, None).status == "skipped"


def test_a_conversation_counts_each_tool_call_once(exporter: InMemorySpanExporter) -> None:
    one, two = _two_turns(exporter)
    conversation = Conversation.from_traces("chat-1", [two, one])
    assert [len(turn.tool_calls) for turn in conversation.turns] == [2, 0]
    assert len(conversation.tool_calls) == 2 and len(conversation.tool_results) == 2


def test_a_stored_follow_up_turn_read_back_keeps_its_own_tool_views(exporter: InMemorySpanExporter) -> None:
    """Judging a stored trace again gives the same verdict: the supplied (empty) views are kept, not re-derived."""
    _, two = _two_turns(exporter)
    for dumped in (two.model_dump_json(), two.model_dump_json(exclude_unset=True)):
        again = Trace.model_validate_json(dumped)
        assert again.tool_calls == [] and again.tool_results == []
        assert again.messages == two.messages
    # A Trace built by hand without the views still derives them from all its messages.
    assert len(Trace.model_validate(two.model_dump(exclude={"tool_calls", "tool_results"})).tool_calls) == 2


def test_an_answer_in_a_follow_up_turn_is_grounded_on_the_tool_results_it_was_shown(
    exporter: InMemorySpanExporter,
) -> None:
    one, two = _two_turns(exporter)
    shown = [r.content for r in one.tool_results]
    assert context_chunks(two) == context_chunks(one) == shown
