"""A simulated conversation's case trace counts each turn's own tool calls once.

An application that sends the earlier turns (their tool calls and results) again with each message has them in
every later turn's messages; each turn's Trace holds only its own calls (issue: a verdict on a turn is about that
turn), and the case trace, built from the turns, must not count an earlier call again per later turn.
"""

from __future__ import annotations

import datetime as dt

from opentelemetry.trace import Status, StatusCode

from evaltrace.mapping import trace_from_spans
from evaltrace.runner.case_turns import case_trace, conversation_messages
from evaltrace.schema import EvalCase, ToolCall, ToolResult, Trace, TraceMessage, TraceOutput
from test_mapping import T0_NS, Spans, agent, spans, tool
from test_mapping_tool_pairing import _call, _chat, _result, _said, _user

__all__ = ["spans"]  # the fixture, used by name

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
CALL = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})


def _turn(said: str, answer: str, messages: list[TraceMessage], **views: list[ToolCall] | list[ToolResult]) -> Trace:
    return Trace(
        run_id="run",
        case_id="case",
        variant_name="v",
        started_at=T0,
        finished_at=T0,
        input={"message": said},
        output=TraceOutput(final_answer=answer),
        messages=messages,
        **views,
    )


def test_each_turns_own_tool_steps_once() -> None:
    asked = [
        TraceMessage(role="user", content="Weather?"),
        TraceMessage(role="assistant", tool_call=CALL),
        TraceMessage(role="tool", name="get_weather", tool_call_id="c1", content="rainy"),
        TraceMessage(role="assistant", content="Rainy."),
    ]
    first = _turn("Weather?", "Rainy.", asked)  # views derived: its own call and result
    again = [*asked, TraceMessage(role="user", content="Umbrella?"), TraceMessage(role="assistant", content="Yes.")]
    second = _turn("Umbrella?", "Yes.", again, tool_calls=[], tool_results=[])  # as the mapping gives it
    messages = conversation_messages([first, second])
    assert [(m.role, m.content, m.tool_call and m.tool_call.id) for m in messages] == [
        ("user", "Weather?", None),
        ("assistant", None, "c1"),
        ("tool", "rainy", None),
        ("assistant", "Rainy.", None),
        ("user", "Umbrella?", None),
        ("assistant", "Yes.", None),
    ]


def test_a_turns_own_step_under_a_reused_call_id_is_listed_once() -> None:
    """The server names each turn's call call_0; turn 2's call and result equal turn 1's: listed once, turn 2's own."""
    call = ToolCall(id="call_0", name="get_time", arguments={})
    first_steps = [
        TraceMessage(role="assistant", tool_call=call),
        TraceMessage(role="tool", name="get_time", tool_call_id="call_0", content="10:00"),
    ]
    asked = [TraceMessage(role="user", content="Time?"), *first_steps, TraceMessage(role="assistant", content="10.")]
    first = _turn("Time?", "10.", asked)
    again = [
        *asked,
        TraceMessage(role="user", content="Now?"),
        *first_steps,
        TraceMessage(role="assistant", content="Still 10."),
    ]
    own_call, own_result = again[-3].tool_call, ToolResult(tool_call_id="call_0", name="get_time", content="10:00")
    second = _turn("Now?", "Still 10.", again, tool_calls=[own_call], tool_results=[own_result])  # as the mapping gives
    messages = conversation_messages([first, second])
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Time?"),
        ("assistant", None),
        ("tool", "10:00"),
        ("assistant", "10."),
        ("user", "Now?"),
        ("assistant", None),
        ("tool", "10:00"),
        ("assistant", "Still 10."),
    ]


def test_a_turn_whose_last_call_failed_lists_each_of_its_steps(spans: Spans) -> None:
    """Its failed call's result view is an error, its message the text the model was sent: both steps are listed."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, [_user("q")], [_call("c1", "a", {})], 1, root)
    spans.span("execute_tool a", tool("a", {}, "A", "c1"), 2, 3, root)
    sent = [_user("q"), _call("c1", "a", {}), _result("c1", "a", "A")]
    _chat(spans, sent, [_call("c2", "b", {})], 4, root)
    spans.span("execute_tool b", tool("b", {}, "boom", "c2"), 5, 6, root, Status(StatusCode.ERROR))
    sent = [*sent, _call("c2", "b", {}), _result("c2", "b", "b failed, please retry")]
    _chat(spans, sent, [_said("done")], 7, root)
    root.end(end_time=T0_NS + 10_000_000)
    for turn in (trace_from_spans(spans.finished()), trace_from_spans(spans.finished(), lazy=True)):
        assert [r.content for r in turn.tool_results] == ["A", {"error": "b failed, please retry"}]
        listed = conversation_messages([turn])
        assert [(m.role, m.tool_call.id if m.tool_call else m.tool_call_id, m.content) for m in listed] == [
            ("user", None, None),
            ("assistant", "c1", None),
            ("tool", "c1", "A"),
            ("assistant", "c2", None),
            ("tool", "c2", "b failed, please retry"),  # what the model was sent
            ("assistant", None, "done"),
        ]
        # The case trace counts the turn's own results as the turn does: the failed call's an error.
        whole = case_trace(EvalCase(id="c"), "v", "run", "s", [turn], {}, None)
        assert [r.content for r in whole.tool_results] == ["A", {"error": "b failed, please retry"}]
