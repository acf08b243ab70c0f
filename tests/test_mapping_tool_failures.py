"""Tool spans that failed, ran again, or ran before the model call that was sent them (a resumed run).

Spans made with the real OpenTelemetry SDK (``test_mapping``'s helpers), mapped as the pipeline maps them.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace.mapping import trace_from_spans
from test_mapping import T0_NS, Spans, agent, at, llm, spans, text, tool

__all__ = ["spans"]  # the fixture, used by name

ERROR = Status(StatusCode.ERROR)


def _call(call_id: str, city: str) -> dict[str, Any]:
    part = {"type": "tool_call", "id": call_id, "name": "get_weather", "arguments": {"city": city}}
    return {"role": "assistant", "parts": [part]}


def _result(call_id: str, response: Any) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


def _user(content: str) -> dict[str, Any]:
    return {"role": "user", "parts": [text(content)]}


def _said(content: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [text(content)]}


# Turn 1 asked for Paris's weather; the server numbers call ids per response, so turn 2's call is call_0 again.
EARLIER_TURN = [_user("Weather in Paris?"), _call("call_0", "Paris"), _result("call_0", "sunny"), _said("Sunny.")]


@pytest.mark.parametrize("failed", [False, True], ids=["ok", "tool_failed"])
def test_a_resumed_run_takes_its_own_call_not_an_earlier_turns_under_the_same_id(spans: Spans, failed: bool) -> None:
    """The approved call runs first, then the model is sent the history: turn 1's call_0 is history, not this run's."""
    root = spans.start("invoke_agent a", agent(), 0)
    london = tool("get_weather", {"city": "London"}, "rainy", "call_0")
    spans.span("execute_tool get_weather", london, 1, 2, root, status=ERROR if failed else None)
    inputs = [*EARLIER_TURN, _user("And London?"), _call("call_0", "London"), _result("call_0", "rainy")]
    outputs = [_said("Rainy in London.")]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs, sc.GEN_AI_OUTPUT_MESSAGES: outputs}), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.arguments, c.started_at) for c in result.tool_calls] == [({"city": "London"}, at(1))]
    assert [r.content for r in result.tool_results] == [{"error": "rainy"} if failed else "rainy"]
    calls = [m.tool_call for m in result.messages if m.tool_call is not None]
    assert [(c.arguments, c.started_at) for c in calls] == [({"city": "Paris"}, None), ({"city": "London"}, at(1))]
    # the messages are what the model was sent: turn 1's result, and this run's as sent even when its span failed
    assert [m.content for m in result.messages if m.role == "tool"] == ["sunny", "rainy"]


def test_a_resumed_call_is_not_adopted_by_another_tools_copy_under_its_id(spans: Spans) -> None:
    """The input holds a call_0 of another tool only: the span's call stays a call of its own, with its result."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool lookup", tool("lookup", {"city": "Paris"}, "found", "call_0"), 1, 2, root)
    inputs = [*EARLIER_TURN, _user("And now?")]
    spans.span(
        "chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs, sc.GEN_AI_OUTPUT_MESSAGES: [_said("Ok.")]}), 3, 4, root
    )
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.name, c.started_at) for c in result.tool_calls] == [("lookup", at(1))]
    assert ("lookup", "found") in [(r.name, r.content) for r in result.tool_results]
    assert [m.tool_call.name for m in result.messages if m.tool_call is not None] == ["lookup", "get_weather"]


def _chat(spans: Spans, inputs: list[Any], outputs: list[Any], start: int, root: Any) -> None:
    spans.span(
        "chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs, sc.GEN_AI_OUTPUT_MESSAGES: outputs}), start, start + 1, root
    )


ASKED = [_user("Weather in London?")]


def test_a_failed_last_step_with_a_recorded_result_is_an_error_result(spans: Spans) -> None:
    """The tool returned an error message (a LangChain error ToolMessage) and the run stopped there."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, ASKED, [_call("call_1", "London")], 1, root)
    failed = tool("get_weather", {"city": "London"}, "Error: city not found", "call_1")
    spans.span("execute_tool get_weather", failed, 3, 4, root, status=ERROR)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [r.content for r in result.tool_results] == [{"error": "Error: city not found"}]


def test_a_failed_span_whose_result_is_an_error_already_is_not_wrapped_again(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, ASKED, [_call("call_1", "London")], 1, root)
    failed = tool("get_weather", {"city": "London"}, {"error": "service down"}, "call_1")
    spans.span("execute_tool get_weather", failed, 3, 4, root, status=ERROR)
    _chat(
        spans, [*ASKED, _call("call_1", "London"), _result("call_1", {"error": "service down"})], [_said("?")], 5, root
    )
    root.end(end_time=T0_NS + 7_000_000)
    result = trace_from_spans(spans.finished())
    assert [r.content for r in result.tool_results] == [{"error": "service down"}]


def test_a_call_that_failed_then_ran_again_and_succeeded_has_the_last_result(spans: Spans) -> None:
    """A retry under the same call id: the model was sent the result of the run that succeeded; no error."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, ASKED, [_call("call_1", "London")], 1, root)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "London"}, "busy", "call_1"), 3, 4, root, ERROR)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "London"}, "rainy", "call_1"), 5, 6, root)
    _chat(spans, [*ASKED, _call("call_1", "London"), _result("call_1", "rainy")], [_said("Rainy.")], 7, root)
    root.end(end_time=T0_NS + 9_000_000)
    result = trace_from_spans(spans.finished())
    assert [(r.tool_call_id, r.content) for r in result.tool_results] == [("call_1", "rainy")]


def test_a_resumed_call_that_failed_then_succeeded_has_the_last_result(spans: Spans) -> None:
    """Run before the model call (a resumed run), failed, run again: the model's input recorded the call only."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "London"}, "busy", "call_1"), 1, 2, root, ERROR)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "London"}, "rainy", "call_1"), 3, 4, root)
    _chat(spans, [*ASKED, _call("call_1", "London")], [_said("Rainy.")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.id, c.started_at) for c in result.tool_calls] == [("call_1", at(1))]
    assert [(r.tool_call_id, r.content) for r in result.tool_results] == [("call_1", "rainy")]


def test_a_call_is_not_adopted_by_an_earlier_turns_call_of_the_same_tool_with_other_arguments(spans: Spans) -> None:
    """The tool ran before the model call, which was sent only the earlier turn: its call_0 is Paris's, not this."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "London"}, "rainy", "call_0"), 1, 2, root)
    _chat(spans, [*EARLIER_TURN, _user("And London?")], [_said("Rainy.")], 3, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.arguments, c.started_at) for c in result.tool_calls] == [({"city": "London"}, at(1))]
    paris = next(
        m.tool_call for m in result.messages if m.tool_call is not None and m.tool_call.arguments["city"] == "Paris"
    )
    assert paris.started_at is None  # history: no span of this trace ran it
