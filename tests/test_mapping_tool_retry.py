"""A tool the application ran again with the same arguments, and which copy of a span-only call an input holds.

Without a call id (Gemini, Ollama), a tool span is told from another run of the same call only by the model
input: one copy of the call there, answered once, while two spans ran it (a retry after a failure, or a
second attempt the app made) is one call, whose last run's result the model was sent. Two copies are two calls,
each with its own run. Spans made with the real OpenTelemetry SDK (``test_mapping``'s helpers), mapped eagerly
and lazily.
"""

from __future__ import annotations

import datetime as dt

import pytest

from evaltrace.evaluators import ToolErrorRate
from test_mapping import T0_NS, Spans, agent, spans, tool
from test_mapping_tool_pairing_echo import ERROR, asked, both, call_messages, call_part, chat, named, said, user

__all__ = ["spans"]  # the fixture, used by name


def at(ms: int) -> dt.datetime:
    """The time of a span started ``ms`` after ``T0_NS`` (``Spans.span``'s ``start``)."""
    return dt.datetime.fromtimestamp(T0_NS / 1e9, dt.UTC) + dt.timedelta(milliseconds=ms)


RUNS = pytest.mark.parametrize(
    ("first_failed", "last_result"),
    [(True, "A"), (False, {"error": "boom"})],
    ids=["failed_then_succeeded", "succeeded_then_failed"],
)


@RUNS
def test_an_id_less_call_the_app_ran_twice_before_the_model_saw_it_is_one_call(
    spans: Spans, first_failed: bool, last_result: object
) -> None:
    """Both runs before any model call (a resumed run); the input holds the call once, with the last run's text."""
    first, last = ("boom", "A") if first_failed else ("A", "boom")
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool search", tool("search", {"q": "a"}, first), 1, 2, root, ERROR if first_failed else None)
    spans.span("execute_tool search", tool("search", {"q": "a"}, last), 3, 4, root, None if first_failed else ERROR)
    chat(spans, [user("q"), asked(call_part("search", {"q": "a"})), named("search", last)], [said("ok")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    for trace in both(spans):
        assert [(c.name, c.from_tool_span) for c in trace.tool_calls] == [("search", False)]
        assert trace.tool_calls[0].started_at == at(1)  # where the call first ran
        assert [r.content for r in trace.tool_results] == [last_result]
        assert call_messages(trace) == [("search", {"q": "a"})]
        assert ToolErrorRate().evaluate(trace).score == (0.0 if first_failed else 1.0)


@RUNS
def test_a_recorded_id_less_call_run_twice_is_one_call(spans: Spans, first_failed: bool, last_result: object) -> None:
    """The model's output recorded the call once; the app ran it twice before the next model call."""
    first, last = ("boom", "A") if first_failed else ("A", "boom")
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q")], [asked(call_part("search", {"q": "a"}))], 1, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, first), 3, 4, root, ERROR if first_failed else None)
    spans.span("execute_tool search", tool("search", {"q": "a"}, last), 5, 6, root, None if first_failed else ERROR)
    chat(spans, [user("q"), asked(call_part("search", {"q": "a"})), named("search", last)], [said("ok")], 7, root)
    root.end(end_time=T0_NS + 9_000_000)
    for trace in both(spans):
        assert [(c.name, c.from_tool_span) for c in trace.tool_calls] == [("search", False)]
        assert [r.content for r in trace.tool_results] == [last_result]
        assert call_messages(trace) == [("search", {"q": "a"})]


def test_two_equal_span_only_calls_the_input_holds_twice_stay_two_calls_in_order(spans: Spans) -> None:
    """Two runs, two copies in the input: each span's call takes its own copy, the earliest first (no ids)."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A1"), 1, 2, root, ERROR)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A2"), 3, 4, root)
    call = asked(call_part("search", {"q": "a"}))
    sent = [user("q"), call, named("search", "A1"), call, named("search", "A2")]
    chat(spans, sent, [said("ok")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    for trace in both(spans):
        starts = [c.started_at for c in trace.tool_calls]
        assert starts == [at(1), at(3)]  # each copy its own span's run
        assert [r.content for r in trace.tool_results] == [{"error": "A1"}, "A2"]
        assert ToolErrorRate().evaluate(trace).score == 0.5


@pytest.mark.parametrize("call_id", ["call_0", None], ids=["ids_per_response", "no_ids"])
def test_a_failed_span_after_a_silent_call_keeps_its_error_on_the_silent_calls_copy(
    spans: Spans, call_id: str | None
) -> None:
    """The span first matched the history's unanswered equal call; moved to the silent call's copy, still failed."""
    root = spans.start("invoke_agent a", agent(), 0)
    question = [user("Time?"), asked(call_part("get_time", {}, call_id)), user("The time, please.")]
    chat(spans, question, None, 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "no clock", call_id), 3, 4, root, ERROR)
    sent = [*question, asked(call_part("get_time", {}, call_id)), named("get_time", "no clock", call_id)]
    chat(spans, sent, [said("No time.")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    for trace in both(spans):
        assert [r.content for r in trace.tool_results] == [{"error": "no clock"}]
        assert ToolErrorRate().evaluate(trace).score == 1.0


def test_a_second_turns_span_only_call_is_the_copy_after_its_user_message(spans: Spans) -> None:
    """Turn 2 in the same trace: the app runs the approved call, then the model is sent it after the new message.

    Turn 1's equal call (the model's, counted) came before that user message: it does not account for the copy.
    """
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q1")], [asked(call_part("search", {"q": "a"}))], 1, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A1"), 2, 3, root)
    first = [user("q1"), asked(call_part("search", {"q": "a"})), named("search", "A1")]
    chat(spans, first, [said("A1.")], 4, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A2"), 6, 7, root)
    second = [*first, said("A1."), user("again"), asked(call_part("search", {"q": "a"})), named("search", "A2")]
    chat(spans, second, [said("A2.")], 8, root)
    root.end(end_time=T0_NS + 10_000_000)
    for trace in both(spans):
        roles = [m.role for m in trace.messages]
        assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
        assert [(c.from_tool_span, c.started_at) for c in trace.tool_calls] == [(False, at(2)), (False, at(6))]
        assert [r.content for r in trace.tool_results] == ["A1", "A2"]
