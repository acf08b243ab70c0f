"""The trace report's header (session, user, tags, evaluation badge), span tokens and cost, and LLM chats.

Traces are recorded through the real pipeline into a real local store (``report_trace``, ``outcome_trace``);
foreign-convention and hostile spans are built as the OTel SDK's ``ReadableSpan``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace import config
from evaltrace.exporters import LocalTraceStore
from evaltrace.report import build_report, report_from_spans
from evaltrace.report.chat import chat_messages
from evaltrace.report.model import ScoreRow, trace_verdict
from evaltrace.report.text import money
from evaltrace.schema import ToolCall, TraceMessage
from outcome_trace import ALL_SKIPPED, MIXED, judge, record_trace, relevance
from report_trace import FIRST_COST, SCRIPT, SESSION, USER_ID, build_demo_trace


def _shutdown() -> None:
    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()


@pytest.fixture
def demo(tmp_path: Path) -> list[ReadableSpan]:
    try:
        trace_id = build_demo_trace(tmp_path / "store")
    finally:
        _shutdown()
    return LocalTraceStore(tmp_path / "store").spans(trace_id)


def _header(page: str) -> str:
    match = re.search(r"<header>(.*?)</header>", page, re.S)
    assert match is not None
    return match.group(1)


def _span_html(page: str, span_id: str) -> str:
    match = re.search(
        rf'<details class="span" id="span-{span_id}".*?</details>(?=<details class="span"|</section>)', page, re.S
    )
    assert match is not None, span_id
    return match.group(0)


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (4.185e-05, "$0.000042"),
        (0.0123, "$0.0123"),
        (0.5, "$0.50"),
        (0.0, "$0.00"),
        (2, "$2.00"),
        (1234.567, "$1,234.57"),
        (1e-9, "<$0.000001"),
        (-0.25, "-$0.25"),
        (float("nan"), ""),
    ],
)
def test_money_is_never_in_exponent_form(usd: float, shown: str) -> None:
    assert money(usd) == shown


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        ((), "not_evaluated"),
        (("not_evaluated", None), "not_evaluated"),  # skips and label-only results are no verdict
        (("pass", "not_evaluated"), "pass"),
        (("pass", "error"), "error"),  # the errored evaluator might have failed it
        (("error", "fail", "pass"), "fail"),
        (("pass", "pending"), "pending"),
    ],
)
def test_trace_verdict(outcomes: tuple[str | None, ...], verdict: str) -> None:
    rows = [ScoreRow("s", "span", f"e{i}", outcome=o) for i, o in enumerate(outcomes)]
    assert trace_verdict(rows) == verdict


def test_header_shows_session_user_tags_verdict_tokens_and_cost(demo: list[ReadableSpan]) -> None:
    data = build_report(demo, None)
    assert (data.session_id, data.user_id, data.tags) == (SESSION, USER_ID, ["beta", "<i>vip</i>"])
    assert data.verdict == "fail"  # concise failed, mentions_city passed
    assert (data.usage.input_tokens, data.usage.output_tokens, data.usage.cost_usd) == (149, 43, FIRST_COST)
    header = _header(report_from_spans(demo))
    assert '<span class="badge verdict fail" data-verdict="fail">fail</span>' in header
    assert f'<code data-field="session">{SESSION}</code>' in header
    assert f'<code data-field="user">{USER_ID}</code>' in header
    assert '<span class="tag">beta</span><span class="tag">&lt;i&gt;vip&lt;/i&gt;</span>' in header
    assert '<span data-field="tokens">149 in / 43 out</span>' in header
    assert '<span data-field="cost">$0.000042</span>' in header
    assert "e-05" not in header


@pytest.mark.parametrize(
    ("evaluators", "css", "verdict", "text"),
    [
        ((relevance,), "pass", "pass", "pass"),
        (MIXED, "fail", "fail", "fail"),
        ((relevance, judge), "error", "error", "error"),
        (ALL_SKIPPED, "neutral", "not_evaluated", "not evaluated"),
        ((), "neutral", "not_evaluated", "not evaluated"),
    ],
)
def test_evaluation_badge_never_shows_an_error_or_a_skip_as_pass_or_fail(
    tmp_path: Path, evaluators: tuple[object, ...], css: str, verdict: str, text: str
) -> None:
    try:
        trace_id = record_trace(tmp_path / "store", evaluators)
    finally:
        _shutdown()
    header = _header(report_from_spans(LocalTraceStore(tmp_path / "store").spans(trace_id)))
    assert re.search(rf'<span class="badge verdict {css}" data-verdict="{verdict}"[^>]*>{text}</span>', header)
    assert "tokens" not in header and "cost" not in header  # nothing recorded: nothing claimed


def test_waterfall_rows_show_tokens_and_cost_of_each_span(demo: list[ReadableSpan]) -> None:
    page = report_from_spans(demo)
    data = build_report(demo, None)
    first, second = [row for row in data.spans if row.kind == "llm"]
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.cost_usd) == (52, 31, FIRST_COST)
    assert second.usage.cost_usd is None  # not recorded, and never guessed
    first_html, second_html = _span_html(page, first.span_id), _span_html(page, second.span_id)
    assert '<div class="num tokens" title="input &rarr; output tokens">52 &rarr; 31</div>' in first_html
    assert '<div class="num cost">$0.000042</div>' in first_html
    assert "tokens <b>52 in / 31 out</b> &middot; cost <b>$0.000042</b>" in first_html
    assert '<div class="num cost"></div>' in second_html
    assert 'class="waterfall"' in page  # some span has usage: the columns are shown


def test_a_trace_without_usage_hides_the_token_and_cost_columns(tmp_path: Path) -> None:
    try:
        trace_id = record_trace(tmp_path / "store", (relevance,))
    finally:
        _shutdown()
    assert 'class="waterfall no-usage"' in report_from_spans(LocalTraceStore(tmp_path / "store").spans(trace_id))


def test_llm_span_details_are_a_chat_with_reasoning_folded_and_raw_attributes_kept(demo: list[ReadableSpan]) -> None:
    data = build_report(demo, None)
    first, second = [row for row in data.spans if row.kind == "llm"]
    assert first.chat is not None and second.chat is not None
    assert [m.role for m in first.chat.inputs] == ["system", "user"]
    (answer,) = first.chat.outputs
    assert answer.thinking == "The user wants the weather; call get_weather."
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert [m.role for m in second.chat.inputs] == ["system", "user", "assistant", "tool"]
    assert second.chat.inputs[3].name == "get_weather"  # the result names its tool, from the call id

    page = report_from_spans(demo)
    html = _span_html(page, first.span_id)
    assert re.findall(r'data-role="(\w+)"', html) == ["system", "user", "assistant"]
    assert '<div class="bubble assistant out" data-role="assistant">' in html
    assert '<details class="thinking"><summary>Reasoning</summary><pre>The user wants' in html  # closed
    assert '<div class="toolcall" data-tool="get_weather">' in html and "&quot;city&quot;: &quot;Paris&quot;" in html
    assert '<details class="raw"><summary>Raw attributes (' in html  # closed, still there
    assert "<h3>Attributes</h3>" not in html
    assert " open" not in html.split(">", 1)[1]  # nothing inside the span starts unfolded
    # The conversation section folds reasoning too.
    assert '<details class="thinking" open' not in page


def test_tool_spans_show_their_input_and_output(demo: list[ReadableSpan]) -> None:
    data = build_report(demo, None)
    tool = next(row for row in data.spans if row.name == "execute_tool get_weather")
    html = _span_html(report_from_spans(demo), tool.span_id)
    assert "<h3>Input</h3>" in html and "Paris" in html
    assert '<h3>Output</h3><pre class="io">sunny, 24C</pre>' in html  # the JSON string, unquoted


def test_recorded_text_is_never_markup(demo: list[ReadableSpan]) -> None:
    page = report_from_spans(demo)
    assert page.count("<script") == 1  # ours, at the end; the prompt's is text
    assert SCRIPT.replace("<", "&lt;").replace(">", "&gt;") in page


def _span(attributes: dict[str, object], name: str = "chat", span_id: int = 0x2F) -> ReadableSpan:
    context = SpanContext(0x1F, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(name=name, context=context, attributes=attributes, start_time=1, end_time=2)  # type: ignore[arg-type]


def test_hostile_values_everywhere_stay_text() -> None:
    evil = '"><script>window.__pwned=1</script><img src=x onerror=alert(1)>'
    messages = [{"role": "user", "parts": [{"type": "text", "content": evil}]}]
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": evil},
                {"type": "tool_call", "id": evil, "name": evil, "arguments": {evil: evil}},
            ],
        }
    ]
    span = _span(
        {
            "evaltrace.span.kind": "llm",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(output),
            "session.id": evil,
            "user.id": evil,
            "langfuse.trace.tags": [evil],
            "gen_ai.request.model": evil,
            evil: evil,
            "gen_ai.usage.input_tokens": 3,
            "evaltrace.cost_usd": 1.5e-7,
        },
        name=evil,
    )
    page = report_from_spans([span])
    assert page.count("<script") == 1 and "<img" not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "<$0.000001" not in page and "&lt;$0.000001" in page  # tiny but not zero, and escaped


def test_a_foreign_convention_span_reads_as_a_chat() -> None:
    span = _span(
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Be brief.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Hi",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Hello!",
            "llm.token_count.prompt": 7,
            "llm.token_count.completion": 2,
            "llm.cost.total": 0.00021,
        }
    )
    (row,) = build_report([span], None).spans
    assert row.chat is not None
    assert [(m.role, m.content) for m in row.chat.inputs + row.chat.outputs] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
    ]
    assert (row.usage.input_tokens, row.usage.output_tokens, row.usage.cost_usd) == (7, 2, 0.00021)
    assert "$0.00021" in report_from_spans([span])


def test_an_llm_span_without_captured_content_has_no_chat() -> None:
    span = _span({"evaltrace.span.kind": "llm", "gen_ai.usage.input_tokens": 3})
    (row,) = build_report([span], None).spans
    assert row.chat is None
    assert "Raw attributes (2)" in report_from_spans([span])


def test_malformed_messages_are_noted_not_raised() -> None:
    span = _span({"evaltrace.span.kind": "llm", "gen_ai.input.messages": '{"not": "a list"}'})
    (row,) = build_report([span], None).spans
    assert row.chat is not None and row.chat.notes and "is not a JSON array" in row.chat.notes[0]


def test_an_assistant_turn_with_several_tool_calls_is_one_bubble() -> None:
    calls = [ToolCall(id=f"c{i}", name=f"t{i}", arguments={"i": i}) for i in range(3)]
    messages = [
        TraceMessage(role="user", content="go"),
        TraceMessage(role="assistant", content="calling", thinking="plan", tool_call=calls[0]),
        TraceMessage(role="assistant", tool_call=calls[1]),
        TraceMessage(role="assistant", tool_call=calls[2]),
        TraceMessage(role="tool", name="t0", tool_call_id="c0", content="r0"),
        TraceMessage(role="assistant", tool_call=calls[0]),  # a new turn after a tool result: its own bubble
    ]
    bubbles = chat_messages(messages)
    assert [(b.role, [c.name for c in b.tool_calls]) for b in bubbles] == [
        ("user", []),
        ("assistant", ["t0", "t1", "t2"]),
        ("tool", []),
        ("assistant", ["t0"]),
    ]
    assert bubbles[1].content == "calling" and bubbles[1].thinking == "plan"
