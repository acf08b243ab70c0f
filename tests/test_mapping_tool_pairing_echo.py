"""Tool results without an id or a name, and a model input echoing a call only its tool span told of.

Some providers and frameworks send a tool's result with neither a call id nor a tool name (Ollama's ``tool``
messages, some Gemini function-response shapes): it answers the first call still waiting for its result. A run
resumed after an approval, or a tool the application ran before asking the model, is known first from its tool
span (no id, as Gemini and Ollama calls often are); the model input that then repeats the call is the same call,
not a second one. A verdict on a step is about that step's calls only. Spans made with the real OpenTelemetry SDK
(``test_mapping``'s helpers), mapped eagerly and lazily.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace.evaluators import ToolCalled, ToolErrorRate
from evaltrace.mapping import trace_from_spans
from evaltrace.mapping._pairing import answered_calls
from evaltrace.schema import EvalCase, ToolCall, Trace, TraceMessage
from test_mapping import T0_NS, Spans, agent, llm, spans, text, tool

__all__ = ["spans"]  # the fixture, used by name

ERROR = Status(StatusCode.ERROR)


def call_part(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call", "name": name, "arguments": arguments}
    if call_id is not None:
        part["id"] = call_id
    return part


def asked(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "parts": list(parts)}


def anonymous(response: Any) -> dict[str, Any]:
    """A tool message naming neither the call nor the tool (Ollama's ``{"role": "tool", "content": ...}``)."""
    return {"role": "tool", "parts": [{"type": "tool_call_response", "response": response}]}


def named(name: str, response: Any, call_id: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response", "name": name, "response": response}
    if call_id is not None:
        part["id"] = call_id
    return {"role": "tool", "parts": [part]}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "parts": [text(content)]}


def said(content: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [text(content)]}


def chat(spans: Spans, inputs: list[Any], outputs: list[Any] | None, start: int, root: Any) -> None:
    values: dict[str, Any] = {sc.GEN_AI_INPUT_MESSAGES: inputs}
    if outputs is not None:  # None: the model call recorded no output messages
        values[sc.GEN_AI_OUTPUT_MESSAGES] = outputs
    spans.span("chat m", llm(**values), start, start + 1, root)


def both(spans: Spans) -> list[Trace]:
    """The trace mapped eagerly and lazily (the live pipeline's)."""
    return [trace_from_spans(spans.finished()), trace_from_spans(spans.finished(), lazy=True)]


def tool_messages(trace: Trace) -> list[Any]:
    return [m.content for m in trace.messages if m.role == "tool"]


def call_messages(trace: Trace) -> list[tuple[str, dict[str, Any]]]:
    return [(m.tool_call.name, m.tool_call.arguments) for m in trace.messages if m.tool_call is not None]


# --- results naming neither call nor tool ---


def test_anonymous_results_answer_the_waiting_calls_in_order() -> None:
    """Two calls of different tools, no ids; the results name nothing: the first answers the first call."""
    weather, clock = ToolCall(name="weather", arguments={"city": "Paris"}), ToolCall(name="time")
    first, second = TraceMessage(role="tool", content="sunny"), TraceMessage(role="tool", content="11:00")
    messages = [
        TraceMessage(role="user", content="Weather and time?"),
        TraceMessage(role="assistant", tool_call=weather),
        TraceMessage(role="assistant", tool_call=clock),
        first,
        second,
    ]
    pairing = answered_calls(messages)
    assert pairing.answers == {id(first): weather, id(second): clock}
    assert pairing.unanswered == [] and pairing.open == []


def test_an_anonymous_result_skips_a_call_a_named_result_answered_already() -> None:
    weather, clock = ToolCall(name="weather"), ToolCall(name="time")
    by_name, rest = TraceMessage(role="tool", name="weather", content="sunny"), TraceMessage(role="tool", content="11")
    messages = [
        TraceMessage(role="user", content="q"),
        TraceMessage(role="assistant", tool_call=weather),
        TraceMessage(role="assistant", tool_call=clock),
        by_name,
        rest,
    ]
    assert answered_calls(messages).answers == {id(by_name): weather, id(rest): clock}


def test_a_user_message_closes_the_calls_an_anonymous_result_could_answer() -> None:
    """The earlier turn's call never got a result: the next turn's anonymous result is its own call's."""
    earlier, now = ToolCall(name="time"), ToolCall(name="weather")
    result = TraceMessage(role="tool", content="sunny")
    messages = [
        TraceMessage(role="user", content="Time?"),
        TraceMessage(role="assistant", tool_call=earlier),
        TraceMessage(role="user", content="Weather, then."),
        TraceMessage(role="assistant", tool_call=now),
        result,
    ]
    pairing = answered_calls(messages)
    assert pairing.answers == {id(result): now}
    assert pairing.unanswered == [earlier] and pairing.open == []


def test_an_anonymous_result_after_a_user_message_answers_no_earlier_turns_call(spans: Spans) -> None:
    """Turn 1's call was declined (no span, no result); turn 2's input ends with a result naming nothing.

    Nothing ties it to turn 1's call, closed by the user message: it answers nothing (no result, no error).
    """
    declined = ToolCall(name="delete", arguments={"x": 1})
    result = TraceMessage(role="tool", content="L")
    messages = [
        TraceMessage(role="user", content="q1"),
        TraceMessage(role="assistant", tool_call=declined),
        TraceMessage(role="user", content="never mind; q2"),
        result,
    ]
    pairing = answered_calls(messages)
    assert pairing.answers == {} and pairing.unanswered == [declined]
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q1")], [asked(call_part("delete", {"x": 1}))], 1, root)
    sent = [user("q1"), asked(call_part("delete", {"x": 1})), user("never mind; q2"), anonymous("L")]
    chat(spans, sent, [said("ok")], 3, root)
    root.end(end_time=T0_NS + 5_000_000)
    for trace in both(spans):
        assert [c.name for c in trace.tool_calls] == ["delete"]
        assert trace.tool_results == []


def test_ollama_style_results_are_each_calls_own_in_the_tool_views(spans: Spans) -> None:
    """Ollama: calls without ids, the results the model is sent name nothing; the second tool failed."""
    root = spans.start("invoke_agent a", agent(), 0)
    calls = asked(call_part("weather", {"city": "Paris"}), call_part("time", {"tz": "CET"}))
    chat(spans, [user("Weather and time in Paris?")], [calls], 1, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Paris"}, "sunny"), 3, 4, root)
    spans.span("execute_tool time", tool("time", {"tz": "CET"}, "no clock"), 5, 6, root, ERROR)
    sent = [user("Weather and time in Paris?"), calls, anonymous("sunny"), anonymous("no clock")]
    chat(spans, sent, [said("Sunny; no time.")], 7, root)
    root.end(end_time=T0_NS + 9_000_000)
    for trace in both(spans):
        assert [c.name for c in trace.tool_calls] == ["weather", "time"]
        assert [r.content for r in trace.tool_results] == ["sunny", {"error": "no clock"}]
        assert tool_messages(trace) == ["sunny", "no clock"]  # what the model was sent, each once
        assert ToolErrorRate().evaluate(trace).score == 0.5


# --- a model input echoing a call only its tool span told of ---


@pytest.mark.parametrize("failed", [False, True], ids=["ok", "tool_failed"])
def test_a_resumed_runs_call_without_an_id_is_one_call_where_the_model_was_sent_it(spans: Spans, failed: bool) -> None:
    """The tool ran first (an approved call); the model input holds the earlier turn, then this call and result."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00"), 1, 2, root, ERROR if failed else None)
    earlier = [user("Time?"), asked(call_part("get_time", {})), named("get_time", "10:00"), said("10.")]
    sent = [*earlier, user("And now?"), asked(call_part("get_time", {})), named("get_time", "11:00")]
    chat(spans, sent, [said("11.")], 3, root)
    root.end(end_time=T0_NS + 5_000_000)
    for trace in both(spans):
        assert [(c.name, c.started_at is not None, c.from_tool_span) for c in trace.tool_calls] == [
            ("get_time", True, False)  # the span's call, which the model input recorded
        ]
        assert [r.content for r in trace.tool_results] == [{"error": "11:00"} if failed else "11:00"]
        # the conversation as it happened: the earlier turn's call, then this turn's once, where it was made
        roles = [m.role for m in trace.messages]
        assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
        assert tool_messages(trace) == ["10:00", "11:00"]


def test_an_echo_takes_the_earliest_copy_not_counted_yet(spans: Spans) -> None:
    """Step 1's model call recorded search(a); step 2's did not, and its span ran search(a) again (no ids)."""
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q")], [asked(call_part("search", {"q": "a"}))], 1, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A1"), 3, 4, root)
    first = [user("q"), asked(call_part("search", {"q": "a"})), named("search", "A1")]
    chat(spans, first, None, 5, root)  # step 2: recorded no output
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A2"), 7, 8, root, ERROR)
    # The next input holds both calls, equal: step 2's is the copy step 1's call (counted already) leaves.
    sent = [*first, asked(call_part("search", {"q": "a"})), named("search", "A2")]
    chat(spans, sent, [said("A.")], 9, root)
    root.end(end_time=T0_NS + 11_000_000)
    for trace in both(spans):
        assert [(c.arguments, c.from_tool_span) for c in trace.tool_calls] == [({"q": "a"}, False)] * 2
        assert [r.content for r in trace.tool_results] == ["A1", {"error": "A2"}]
        assert call_messages(trace) == [("search", {"q": "a"})] * 2  # not three: the echo is step 2's call
        assert ToolErrorRate().evaluate(trace).score == 0.5
        assert ToolCalled().evaluate(trace, EvalCase(id="c", expected={"must_call_tools": ["search"]})).passed
