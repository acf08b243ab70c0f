"""Calls a model call made though it recorded no output ("silent"): the next model call's input shows them first.

A model call whose span recorded no output messages (capture cut, an instrumentation that records inputs only)
still made its calls: the next model call is sent them with their results. They are this trace's calls, counted
once: merged with the call of a tool span that ran since, never with a tool the application ran before, and never
an earlier turn's call that the input repeats. Spans made with the real OpenTelemetry SDK, mapped eagerly and
lazily.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.evaluators import ToolCalled, ToolErrorRate
from evaltrace.schema import EvalCase
from test_mapping import T0_NS, Spans, agent, llm, spans, tool
from test_mapping_tool_pairing_echo import asked, both, call_messages, call_part, chat, named, said, user

__all__ = ["spans"]  # the fixture, used by name

ID_STYLES = pytest.mark.parametrize("call_id", ["call_0", None], ids=["ids_per_response", "no_ids"])


def _must_call(*tools: str) -> EvalCase:
    return EvalCase(id="c", expected={"must_call_tools": list(tools)})


@ID_STYLES
def test_a_silent_steps_call_with_no_tool_span_counts_once(spans: Spans, call_id: str | None) -> None:
    """No tool span: the call and its result are known only from the next model call's input."""
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q")], None, 1, root)
    sent = [user("q"), asked(call_part("search", {"q": "a"}, call_id)), named("search", "A", call_id)]
    chat(spans, sent, [said("A.")], 3, root)
    root.end(end_time=T0_NS + 5_000_000)
    for trace in both(spans):
        assert [(c.id, c.name, c.arguments, c.from_tool_span) for c in trace.tool_calls] == [
            (call_id, "search", {"q": "a"}, False)
        ]
        assert [r.content for r in trace.tool_results] == ["A"]
        assert ToolCalled().evaluate(trace, _must_call("search")).passed


@ID_STYLES
def test_a_silent_steps_call_its_tool_span_ran_counts_once(spans: Spans, call_id: str | None) -> None:
    """The span ran the call; the next input holds it with the result as the model was sent it (Gemini's shape)."""
    root = spans.start("invoke_agent a", agent(), 0)
    chat(spans, [user("q")], None, 1, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A", call_id), 2, 3, root)
    sent = [user("q"), asked(call_part("search", {"q": "a"}, call_id)), named("search", {"result": "A"}, call_id)]
    chat(spans, sent, [said("A.")], 4, root)
    root.end(end_time=T0_NS + 6_000_000)
    for trace in both(spans):
        assert [(c.arguments, c.started_at is not None, c.from_tool_span) for c in trace.tool_calls] == [
            ({"q": "a"}, True, False)
        ]
        assert call_messages(trace) == [("search", {"q": "a"})]  # the call once, where the model was sent it
        assert [r.content for r in trace.tool_results] == [{"result": "A"}]


@pytest.mark.parametrize("input_recorded", [True, False], ids=["input_recorded", "nothing_recorded"])
def test_an_earlier_turns_calls_the_input_repeats_are_not_the_silent_steps(spans: Spans, input_recorded: bool) -> None:
    """A follow-up turn: the silent call's input (if recorded) repeats turn 1's call; only the new call counts."""
    root = spans.start("invoke_agent a", agent(), 0)
    earlier = [user("Time?"), asked(call_part("get_time", {})), named("get_time", "10:00"), said("10.")]
    question = [*earlier, user("Weather?")]
    if input_recorded:
        chat(spans, question, None, 1, root)
    else:  # content capture off for that span: no messages at all
        spans.span("chat m", llm(), 1, 2, root)
    sent = [*question, asked(call_part("weather", {"city": "Paris"})), named("weather", "sunny")]
    chat(spans, sent, [said("Sunny.")], 3, root)
    root.end(end_time=T0_NS + 5_000_000)
    for trace in both(spans):
        assert [c.name for c in trace.tool_calls] == ["weather"]
        assert [r.content for r in trace.tool_results] == ["sunny"]
        assert not ToolCalled().evaluate(trace, _must_call("get_time")).passed  # turn 1's call is not this turn's


@ID_STYLES
def test_only_tool_spans_run_since_the_silent_call_are_its_calls(spans: Spans, call_id: str | None) -> None:
    """The app ran a lookup itself first; the model, not recording its output, asked the same lookup (cached)."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool lookup", tool("lookup", {"k": "x"}, "X", call_id), 1, 2, root)  # the app's own
    chat(spans, [user("q")], None, 3, root)  # not sent the app's lookup
    sent = [user("q"), asked(call_part("lookup", {"k": "x"}, call_id)), named("lookup", "X (cached)", call_id)]
    chat(spans, sent, [said("X.")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    for trace in both(spans):
        # two calls: the app's (its span's alone) and the model's, which no span since ran
        assert [(c.name, c.from_tool_span) for c in trace.tool_calls] == [("lookup", True), ("lookup", False)]
        assert [r.content for r in trace.tool_results] == ["X", "X (cached)"]


@ID_STYLES
def test_a_silent_loop_counts_each_steps_calls_once(spans: Spans, call_id: str | None) -> None:
    """Three steps, none recording output (ids numbered per response, or none): each step's call and result once."""
    root = spans.start("invoke_agent a", agent(), 0)
    history: list[dict[str, Any]] = [user("q")]
    for step, query in enumerate(("a", "b")):
        chat(spans, history, None, 10 * step + 1, root)
        spans.span(
            "execute_tool search", tool("search", {"q": query}, query, call_id), 10 * step + 3, 10 * step + 4, root
        )
        history = [*history, asked(call_part("search", {"q": query}, call_id)), named("search", query.upper(), call_id)]
    # step 3's call: no span ran it (the model was sent a cached result)
    history = [*history, asked(call_part("search", {"q": "c"}, call_id)), named("search", "C", call_id)]
    chat(spans, history, [said("A, B, C.")], 30, root)
    root.end(end_time=T0_NS + 40_000_000)
    for trace in both(spans):
        assert [(c.arguments["q"], c.started_at is not None) for c in trace.tool_calls] == [
            ("a", True),
            ("b", True),
            ("c", False),
        ]
        assert [r.content for r in trace.tool_results] == ["A", "B", "C"]  # as the model was sent them
        assert len(call_messages(trace)) == 3
        assert ToolErrorRate().evaluate(trace).score == 0.0


@ID_STYLES
def test_a_span_after_a_silent_call_runs_its_call_not_the_historys_unanswered_one(
    spans: Spans, call_id: str | None
) -> None:
    """The history asked the time and got no result; the silent call asked again, its span ran; the next input."""
    root = spans.start("invoke_agent a", agent(), 0)
    question = [user("Time?"), asked(call_part("get_time", {}, call_id)), user("The time, please.")]
    chat(spans, question, None, 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00", call_id), 3, 4, root)
    sent = [*question, asked(call_part("get_time", {}, call_id)), named("get_time", "11:00", call_id)]
    chat(spans, sent, [said("11.")], 5, root)
    root.end(end_time=T0_NS + 7_000_000)
    for trace in both(spans):
        assert [(c.id, c.started_at is not None) for c in trace.tool_calls] == [(call_id, True)]
        assert [r.content for r in trace.tool_results] == ["11:00"]
        roles = [m.role for m in trace.messages]
        assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]  # the result once, its call's
