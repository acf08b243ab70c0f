"""Each tool result belongs to the call it answers, by position: call ids repeated across turns or steps, or absent.

Some servers number call ids per response (``call_0`` again in the next turn: Mistral, Ollama, Groq, LiteLLM
proxies); Gemini and Ollama calls often have no id. A turn's verdict must be about that turn: never the earlier
turn's call or result under the same id (or tool name). Spans made with the real OpenTelemetry SDK
(``test_mapping``'s helpers), mapped as the pipeline maps them, eagerly and lazily.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace.evaluators import ToolCalled, ToolErrorRate
from evaltrace.mapping import trace_from_spans
from evaltrace.report import report_from_spans
from evaltrace.schema import EvalCase, Trace
from test_mapping import T0_NS, Spans, agent, llm, spans, text, tool

__all__ = ["spans"]  # the fixture, used by name

ERROR = Status(StatusCode.ERROR)


def _call(call_id: str | None, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call", "name": name, "arguments": arguments}
    if call_id is not None:
        part["id"] = call_id
    return {"role": "assistant", "parts": [part]}


def _result(call_id: str | None, name: str, response: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response", "name": name, "response": response}
    if call_id is not None:
        part["id"] = call_id
    return {"role": "tool", "parts": [part]}


def _user(content: str) -> dict[str, Any]:
    return {"role": "user", "parts": [text(content)]}


def _said(content: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [text(content)]}


def _chat(spans: Spans, inputs: list[Any], outputs: list[Any] | None, start: int, root: Any) -> None:
    values: dict[str, Any] = {sc.GEN_AI_INPUT_MESSAGES: inputs}
    if outputs is not None:  # None: the model call recorded no output messages
        values[sc.GEN_AI_OUTPUT_MESSAGES] = outputs
    spans.span("chat m", llm(**values), start, start + 1, root)


def _both(spans: Spans) -> list[Trace]:
    """The trace mapped eagerly and lazily (the live pipeline's), each field read as an evaluator reads it."""
    return [trace_from_spans(spans.finished()), trace_from_spans(spans.finished(), lazy=True)]


ID_STYLES = pytest.mark.parametrize("call_id", ["call_0", None], ids=["ids_per_response", "no_ids"])


@ID_STYLES
@pytest.mark.parametrize("failed", [False, True], ids=["ok", "tool_failed"])
def test_a_follow_up_turn_does_not_see_the_earlier_turns_result_under_the_same_id(
    spans: Spans, call_id: str | None, failed: bool
) -> None:
    """Turn 2 calls the same tool with the same arguments; the server names its call as turn 1's was named."""
    root = spans.start("invoke_agent a", agent(), 0)
    earlier = [_user("Time?"), _call(call_id, "get_time", {}), _result(call_id, "get_time", "10:00"), _said("10.")]
    asked = [*earlier, _user("And now?")]
    _chat(spans, asked, [_call(call_id, "get_time", {})], 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00", call_id), 3, 4, root, ERROR if failed else None)
    _chat(
        spans, [*asked, _call(call_id, "get_time", {}), _result(call_id, "get_time", "11:00")], [_said("11.")], 5, root
    )
    root.end(end_time=T0_NS + 7_000_000)
    for trace in _both(spans):
        assert [(c.id, c.name) for c in trace.tool_calls] == [(call_id, "get_time")]
        assert trace.tool_calls[0].started_at is not None  # the call the span ran, not turn 1's
        assert not trace.tool_calls[0].from_tool_span  # the model's output recorded it
        assert [r.content for r in trace.tool_results] == [{"error": "11:00"} if failed else "11:00"]
        # what the model was sent stays as sent: turn 1's result, then this turn's
        assert [m.content for m in trace.messages if m.role == "tool"] == ["10:00", "11:00"]
        errors = ToolErrorRate().evaluate(trace)
        assert errors.score == (1.0 if failed else 0.0)  # one result judged: this turn's


@ID_STYLES
def test_an_agent_loop_pairs_each_steps_result_with_that_steps_call(spans: Spans, call_id: str | None) -> None:
    """Three steps of one run, each response numbering its call call_0 again (or giving none)."""
    root = spans.start("invoke_agent a", agent(), 0)
    history = [_user("q")]
    for step, query in enumerate(("a", "b")):
        _chat(spans, history, [_call(call_id, "search", {"q": query})], 10 * step + 1, root)
        spans.span(
            "execute_tool search",
            tool("search", {"q": query}, query.upper(), call_id),
            10 * step + 3,
            10 * step + 4,
            root,
        )
        history = [*history, _call(call_id, "search", {"q": query}), _result(call_id, "search", query.upper())]
    _chat(spans, history, [_said("A and B.")], 30, root)
    root.end(end_time=T0_NS + 40_000_000)
    for trace in _both(spans):
        assert [c.arguments for c in trace.tool_calls] == [{"q": "a"}, {"q": "b"}]
        assert [r.content for r in trace.tool_results] == ["A", "B"]


@ID_STYLES
def test_a_step_whose_model_call_recorded_no_output_still_counts_its_tool_spans_call(
    spans: Spans, call_id: str | None
) -> None:
    """The model calls recorded no output; each tool span is a call of its own with its result, none folded."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, [_user("q")], None, 1, root)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A", call_id), 3, 4, root)
    first = [_user("q"), _call(call_id, "search", {"q": "a"}), _result(call_id, "search", "A")]
    _chat(spans, first, None, 5, root)
    spans.span("execute_tool search", tool("search", {"q": "b"}, "B", call_id), 7, 8, root, ERROR)
    _chat(spans, [*first, _call(call_id, "search", {"q": "b"}), _result(call_id, "search", "B")], [_said("?")], 9, root)
    root.end(end_time=T0_NS + 20_000_000)
    for trace in _both(spans):
        assert [(c.arguments, c.started_at is not None) for c in trace.tool_calls] == [
            ({"q": "a"}, True),
            ({"q": "b"}, True),
        ]
        assert [r.content for r in trace.tool_results] == ["A", {"error": "B"}]
        # the next model call's input recorded each call: not known from its tool span only
        assert [c.from_tool_span for c in trace.tool_calls] == [False, False]
        assert ToolErrorRate().evaluate(trace).score == 0.5


def test_a_tool_span_alone_yields_its_call_when_nothing_else_was_captured(spans: Spans) -> None:
    """Content capture off: model calls without messages, tool spans with name and id only (one failed)."""
    root = spans.start("invoke_agent a", agent(), 0)
    bare = {sc.EVALTRACE_SPAN_KIND: sc.KIND_TOOL, sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL}
    for step in range(2):
        spans.span("chat m", llm(), 10 * step, 10 * step + 1, root)
        attrs = {**bare, sc.GEN_AI_TOOL_NAME: "search", sc.GEN_AI_TOOL_CALL_ID: "call_0"}
        spans.span("execute_tool search", attrs, 10 * step + 2, 10 * step + 3, root, ERROR if step else None)
    root.end(end_time=T0_NS + 30_000_000)
    for trace in _both(spans):
        assert [(c.id, c.name, c.from_tool_span) for c in trace.tool_calls] == [("call_0", "search", True)] * 2
        assert [r.content for r in trace.tool_results] == [{"error": "tool raised"}]  # the one that failed
        case = EvalCase(id="c", expected={"must_call_tools": ["search"]})
        assert ToolCalled().evaluate(trace, case).passed


def test_parallel_calls_of_one_tool_without_ids_are_answered_in_order(spans: Spans) -> None:
    """Gemini-style: two calls of one tool in one response, no ids; results name the tool, in the calls' order."""
    root = spans.start("invoke_agent a", agent(), 0)
    both = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "name": "weather", "arguments": {"city": "Paris"}},
            {"type": "tool_call", "name": "weather", "arguments": {"city": "Rome"}},
        ],
    }
    _chat(spans, [_user("Paris and Rome?")], [both], 1, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Paris"}, "sunny"), 3, 5, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Rome"}, "hot"), 4, 6, root, ERROR)
    sent = [_user("Paris and Rome?"), both, _result(None, "weather", "sunny"), _result(None, "weather", "hot")]
    _chat(spans, sent, [_said("Sunny; Rome failed.")], 7, root)
    root.end(end_time=T0_NS + 9_000_000)
    for trace in _both(spans):
        assert [c.arguments for c in trace.tool_calls] == [{"city": "Paris"}, {"city": "Rome"}]
        assert [r.content for r in trace.tool_results] == ["sunny", {"error": "hot"}]


def test_a_model_step_evaluated_alone_judges_its_own_call_not_the_history_under_its_id(spans: Spans) -> None:
    """The step-level view: one model span (its subtree) evaluated alone, its input holding turn 1 under call_0."""
    earlier = [_user("Time?"), _call("call_0", "get_time", {}), _result("call_0", "get_time", "10:00"), _said("10.")]
    step = spans.span(
        "chat m",
        llm(
            **{
                sc.GEN_AI_INPUT_MESSAGES: [*earlier, _user("Weather?")],
                sc.GEN_AI_OUTPUT_MESSAGES: [_call("call_0", "weather", {})],
            }
        ),
        1,
        2,
    )
    for trace in (
        trace_from_spans(spans.finished(), root=step.get_span_context().span_id, lazy=lazy) for lazy in (False, True)
    ):
        assert [c.name for c in trace.tool_calls] == ["weather"]
        assert trace.tool_results == []  # turn 1's result under call_0 answers turn 1's call


def test_the_report_pairs_each_call_with_its_own_result_under_a_reused_id(spans: Spans) -> None:
    """The page's tool table: an agent loop's two call_0 steps each show their own result, not the last one."""
    root = spans.start("invoke_agent a", agent(), 0)
    history = [_user("q")]
    for step, query in enumerate(("alpha", "beta")):
        _chat(spans, history, [_call("call_0", "search", {"q": query})], 10 * step + 1, root)
        found = f"found {query.upper()}"
        spans.span(
            "execute_tool search", tool("search", {"q": query}, found, "call_0"), 10 * step + 3, 10 * step + 4, root
        )
        history = [*history, _call("call_0", "search", {"q": query}), _result("call_0", "search", found)]
    _chat(spans, history, [_said("Both found.")], 30, root)
    root.end(end_time=T0_NS + 40_000_000)
    page = report_from_spans(spans.finished())
    table = page[page.index("<th>Tool</th>") :]
    rows = re.findall(r"<tr><td><b>search</b></td><td><pre>(.*?)</pre></td><td><pre>(.*?)</pre></td></tr>", table, re.S)
    assert [(json.loads(html.unescape(a))["q"], html.unescape(r)) for a, r in rows] == [
        ("alpha", "found ALPHA"),
        ("beta", "found BETA"),
    ]


@ID_STYLES
def test_a_follow_up_turns_tool_span_is_not_matched_to_the_earlier_turns_answered_call(
    spans: Spans, call_id: str | None
) -> None:
    """The turn's model call recorded no output; its tool span's call equals turn 1's (id, tool, arguments)."""
    root = spans.start("invoke_agent a", agent(), 0)
    earlier = [_user("Time?"), _call(call_id, "get_time", {}), _result(call_id, "get_time", "10:00"), _said("10.")]
    asked = [*earlier, _user("And now?")]
    _chat(spans, asked, None, 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00", call_id), 3, 4, root)
    _chat(
        spans, [*asked, _call(call_id, "get_time", {}), _result(call_id, "get_time", "11:00")], [_said("11.")], 5, root
    )
    root.end(end_time=T0_NS + 7_000_000)
    for trace in _both(spans):
        assert [(c.id, c.started_at is not None) for c in trace.tool_calls] == [(call_id, True)]
        assert [r.content for r in trace.tool_results] == ["11:00"]


def _tool_messages(trace: Trace) -> list[Any]:
    return [m.content for m in trace.messages if m.role == "tool"]


@ID_STYLES
def test_a_call_the_history_left_unanswered_is_not_the_one_a_tool_span_ran(spans: Spans, call_id: str | None) -> None:
    """The user asked again without the earlier call's result; the turn's call (equal to it) ran and was answered."""
    root = spans.start("invoke_agent a", agent(), 0)
    asked = [_user("Time?"), _call(call_id, "get_time", {}), _user("Never mind that; the time now?")]
    _chat(spans, asked, [_call(call_id, "get_time", {})], 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00", call_id), 3, 4, root)
    _chat(
        spans, [*asked, _call(call_id, "get_time", {}), _result(call_id, "get_time", "11:00")], [_said("11.")], 5, root
    )
    root.end(end_time=T0_NS + 7_000_000)
    for trace in _both(spans):
        assert [r.content for r in trace.tool_results] == ["11:00"]
        assert _tool_messages(trace) == ["11:00"]  # once, after the turn's call: not given to the history's too
        assert [(c.id, c.started_at is not None) for c in trace.tool_calls] == [(call_id, True)]


def test_a_result_sent_after_a_user_note_answers_the_call_it_follows(spans: Spans) -> None:
    """The application put a user message between the call and its result: the result is still that call's."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, [_user("q")], [_call("c1", "lookup", {})], 1, root)
    spans.span("execute_tool lookup", tool("lookup", {}, "X", "c1"), 2, 3, root)
    sent = [_user("q"), _call("c1", "lookup", {}), _user("(be brief)"), _result("c1", "lookup", "X")]
    _chat(spans, sent, [_said("X.")], 4, root)
    root.end(end_time=T0_NS + 6_000_000)
    for trace in _both(spans):
        assert [r.content for r in trace.tool_results] == ["X"]
        assert _tool_messages(trace) == ["X"]


def test_a_result_with_an_id_its_call_lacked_answers_the_call_of_its_tool(spans: Spans) -> None:
    """The model's output recorded the call without an id; the result the model was sent names one."""
    root = spans.start("invoke_agent a", agent(), 0)
    _chat(spans, [_user("q")], [_call(None, "weather", {"city": "Paris"})], 1, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Paris"}, "sunny"), 2, 3, root, ERROR)
    sent = [_user("q"), _call(None, "weather", {"city": "Paris"}), _result("fc-1", "weather", "sunny")]
    _chat(spans, sent, [_said("Sunny.")], 4, root)
    root.end(end_time=T0_NS + 6_000_000)
    for trace in _both(spans):
        assert [r.content for r in trace.tool_results] == [{"error": "sunny"}]  # the failed call's, once
        assert _tool_messages(trace) == ["sunny"]


def test_a_system_note_between_parallel_calls_and_their_results_keeps_them_waiting(spans: Spans) -> None:
    """Only a user message closes the calls before it: a system note in between leaves them to their results."""
    root = spans.start("invoke_agent a", agent(), 0)
    both = [_call(None, "weather", {"city": "Paris"}), _call(None, "weather", {"city": "Rome"})]
    _chat(spans, [_user("Paris and Rome?")], both, 1, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Paris"}, "sunny"), 3, 5, root)
    spans.span("execute_tool weather", tool("weather", {"city": "Rome"}, "hot"), 4, 6, root, ERROR)
    note = {"role": "system", "parts": [text("Answer in one line.")]}
    results = [_result(None, "weather", "sunny"), _result(None, "weather", "hot")]
    _chat(spans, [_user("Paris and Rome?"), *both, note, *results], [_said("Sunny; Rome failed.")], 7, root)
    root.end(end_time=T0_NS + 9_000_000)
    for trace in _both(spans):
        assert [c.arguments for c in trace.tool_calls] == [{"city": "Paris"}, {"city": "Rome"}]
        assert [r.content for r in trace.tool_results] == ["sunny", {"error": "hot"}]
        assert _tool_messages(trace) == ["sunny", "hot"]


def test_a_tool_span_with_no_call_waiting_runs_the_latest_unanswered_one(spans: Spans) -> None:
    """The history asked twice with no result; the turn's model call recorded no output: its span ran the latest."""
    root = spans.start("invoke_agent a", agent(), 0)
    asked = [_user("Time?"), _call("call_0", "get_time", {}), _user("Well?"), _call("call_0", "get_time", {})]
    asked = [*asked, _user("The time, please.")]
    _chat(spans, asked, None, 1, root)
    spans.span("execute_tool get_time", tool("get_time", {}, "11:00", "call_0"), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    for trace in _both(spans):
        steps = [(m.role, m.content) for m in trace.messages if m.role != "user"]
        assert steps == [("assistant", None), ("assistant", None), ("tool", "11:00")]  # after the latest call
        assert [r.content for r in trace.tool_results] == ["11:00"]
