"""The report page's tool table: each call beside its own result, however the trace's ids and views came.

Traces as an adapter or a store gives them to the page (``render_html``): views set by the adapter, messages with
or without the results, call ids reused across steps or absent.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from typing import Any

from evaltrace.report import ReportData, render_html
from evaltrace.schema import ToolCall, ToolResult, Trace, TraceMessage, TraceOutput

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _table(**fields: Any) -> list[tuple[str, str]]:
    """The (tool, result) rows of the page rendered for a trace with ``fields``."""
    trace = Trace(
        run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0, output=TraceOutput(), **fields
    )
    data = ReportData(
        trace_id="t", root_name="root", service="s", started_ns=0, duration_ms=1.0, spans=[], scores=[], trace=trace
    )
    page = render_html(data)
    table = page[page.index("<th>Tool</th>") :]
    rows = re.findall(r"<tr><td><b>(.*?)</b></td><td><pre>.*?</pre></td><td><pre>(.*?)</pre></td></tr>", table, re.S)
    return [(html.unescape(name), html.unescape(result)) for name, result in rows]


def test_a_result_view_without_an_id_is_shown_beside_its_tools_call_with_one() -> None:
    """An adapter set the views itself: its results name the tool, its calls have ids."""
    calls = [ToolCall(id="c1", name="weather"), ToolCall(id="c2", name="time")]
    results = [ToolResult(name="time", content="11:00"), ToolResult(name="weather", content="sunny")]
    assert _table(tool_calls=calls, tool_results=results) == [("weather", "sunny"), ("time", "11:00")]


def test_a_result_sent_under_an_id_its_call_lacked_is_shown_beside_that_call() -> None:
    """The model's call was recorded without an id; the tool message answering it carries one."""
    call = ToolCall(name="weather", arguments={"city": "Paris"})
    messages = [
        TraceMessage(role="user", content="Paris?"),
        TraceMessage(role="assistant", tool_call=call),
        TraceMessage(role="tool", name="weather", tool_call_id="fc-1", content="sunny"),
    ]
    assert _table(messages=messages) == [("weather", "sunny")]


def test_a_call_its_messages_leave_unanswered_shows_no_later_calls_result_under_its_id() -> None:
    """Step 1's call_0 got no result (the user asked again); step 2's call_0 got one: it is step 2's only."""
    first, second = ToolCall(id="call_0", name="time"), ToolCall(id="call_0", name="time", arguments={"tz": "UTC"})
    messages = [
        TraceMessage(role="user", content="Time?"),
        TraceMessage(role="assistant", tool_call=first),
        TraceMessage(role="user", content="In UTC?"),
        TraceMessage(role="assistant", tool_call=second),
        TraceMessage(role="tool", name="time", tool_call_id="call_0", content="11:00"),
    ]
    assert _table(messages=messages) == [("time", ""), ("time", "11:00")]


def test_results_naming_neither_call_nor_tool_are_shown_beside_the_calls_they_answer() -> None:
    """Ollama-style: calls without ids, results the model is sent without id or tool name, in the calls' order."""
    weather, clock = ToolCall(name="weather", arguments={"city": "Paris"}), ToolCall(name="time")
    messages = [
        TraceMessage(role="user", content="Weather and time?"),
        TraceMessage(role="assistant", tool_call=weather),
        TraceMessage(role="assistant", tool_call=clock),
        TraceMessage(role="tool", content="sunny"),
        TraceMessage(role="tool", content="11:00"),
    ]
    assert _table(messages=messages) == [("weather", "sunny"), ("time", "11:00")]


def test_a_failed_calls_row_shows_its_error_result_not_the_text_the_model_was_sent() -> None:
    """The views the mapping gives: a failed call's result is an error, its message the text the model was sent."""
    weather, clock = ToolCall(name="weather"), ToolCall(name="time")
    messages = [
        TraceMessage(role="user", content="Weather and time?"),
        TraceMessage(role="assistant", tool_call=weather),
        TraceMessage(role="assistant", tool_call=clock),
        TraceMessage(role="tool", content="sunny"),
        TraceMessage(role="tool", content="Please retry: no clock"),
    ]
    results = [ToolResult(name="", content="sunny"), ToolResult(name="", content={"error": "no clock"})]
    rows = _table(messages=messages, tool_calls=[weather, clock], tool_results=results)
    assert [(name, result.replace(" ", "").replace("\n", "")) for name, result in rows] == [
        ("weather", "sunny"),
        ("time", '{"error":"noclock"}'),
    ]


def test_a_turns_anonymous_result_is_not_the_earlier_turns_under_the_same_tool() -> None:
    """The turn's views hold its own call and result; its messages repeat turn 1's call of the same tool first."""
    earlier, now = ToolCall(name="time"), ToolCall(name="time")
    messages = [
        TraceMessage(role="user", content="Time?"),
        TraceMessage(role="assistant", tool_call=earlier),
        TraceMessage(role="tool", content="10:00"),
        TraceMessage(role="assistant", content="10."),
        TraceMessage(role="user", content="And now?"),
        TraceMessage(role="assistant", tool_call=now),
        TraceMessage(role="tool", content="11:00"),
    ]
    views = {"tool_calls": [now], "tool_results": [ToolResult(name="", content="11:00")]}
    assert _table(messages=messages, **views) == [("time", "11:00")]
