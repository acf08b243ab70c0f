"""Results placed where they belong: several at one place keep the order their spans ran; only assistant calls match.

``ToolPlacer.insert_results`` puts each executed call's result after the call's tool messages, all in one pass; two
results due at the same place keep the order of their spans (as inserting them one by one did). A tool span matches
a call the model made (an assistant message's), never one a user or tool message holds: a chat input may carry a
call's text in any role, and the span is then a call of its own. The placer's API where only it can build the shape
(one call pending twice, a call held by a tool message); otherwise spans made with the real OpenTelemetry SDK
(``test_mapping``'s helpers), mapped eagerly and lazily.
"""

from __future__ import annotations

import pytest

from evaltrace._internal import semconv as sc
from evaltrace.mapping import trace_from_spans
from evaltrace.mapping._tools import ToolPlacer
from evaltrace.schema import ToolCall, TraceMessage
from test_mapping import Spans, agent, llm, spans, text, tool

__all__ = ["spans"]  # the fixture, used by name


def _shape(messages: list[TraceMessage]) -> list[tuple[str, str | None, object]]:
    return [(m.role, m.tool_call_id, m.content if m.tool_call is None else m.tool_call.id) for m in messages]


def test_results_due_at_one_place_keep_the_order_their_spans_ran() -> None:
    """A call a tool message holds right after an assistant call: both results go after it, in pending order."""
    asked = ToolCall(id="c1", name="get_time", arguments={})
    held = ToolCall(id="c2", name="get_date", arguments={})
    messages = [
        TraceMessage(role="user", content="when?"),
        TraceMessage(role="assistant", tool_call=asked),
        TraceMessage(role="tool", tool_call=held),
        TraceMessage(role="user", content="thanks"),
    ]
    placer = ToolPlacer([])
    placer.pending = [(asked, "10:00"), (held, "Monday")]
    placer.insert_results(messages)
    assert _shape(messages) == [
        ("user", None, "when?"),
        ("assistant", None, "c1"),
        ("tool", None, "c2"),
        ("tool", "c1", "10:00"),
        ("tool", "c2", "Monday"),
        ("user", None, "thanks"),
    ]
    assert len(placer.produced) == 2


def test_one_call_pending_again_and_again_at_the_end_gets_its_results_in_order() -> None:
    """The call ends the conversation: its results go after everything, still in pending order."""
    call = ToolCall(id="c1", name="get_time", arguments={})
    messages = [TraceMessage(role="user", content="when?"), TraceMessage(role="assistant", tool_call=call)]
    placer = ToolPlacer([])
    placer.pending = [(call, "first"), (call, "second"), (call, "third")]
    placer.insert_results(messages)
    assert _shape(messages) == [
        ("user", None, "when?"),
        ("assistant", None, "c1"),
        ("tool", "c1", "first"),
        ("tool", "c1", "second"),
        ("tool", "c1", "third"),
    ]


@pytest.mark.parametrize("role", ["user", "tool"])
def test_a_tool_span_never_matches_a_call_a_user_or_tool_message_holds(spans: Spans, role: str) -> None:
    """The input holds the call (same id, tool and arguments) in a non-assistant message: the span adds its own."""
    root = spans.start("invoke_agent a", agent(), 0)
    held = {"type": "tool_call", "id": "c1", "name": "get_time", "arguments": {"tz": "UTC"}}
    inputs = [{"role": role, "parts": [held]}, {"role": "user", "parts": [text("Time?")]}]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs}), 1, 2, root)
    spans.span("execute_tool get_time", tool("get_time", {"tz": "UTC"}, "11:00", "c1"), 3, 4, root)
    root.end(end_time=spans.finished()[-1].end_time + 1_000_000)
    for trace in (trace_from_spans(spans.finished()), trace_from_spans(spans.finished(), lazy=True)):
        messages = trace.messages
        assert _shape(messages) == [
            (role, None, "c1"),
            ("user", None, "Time?"),
            ("assistant", None, "c1"),
            ("tool", "c1", "11:00"),
        ]
        first, own = messages[0].tool_call, messages[2].tool_call
        assert first is not None and own is not None
        assert first.started_at is None and not first.from_tool_span  # untouched: not the call the span ran
        assert own.from_tool_span and own.started_at is not None
        assert [c.id for c in trace.tool_calls] == ["c1"] and trace.tool_calls[0] is own
        assert [r.content for r in trace.tool_results] == ["11:00"]
