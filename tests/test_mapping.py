from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Status, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import (
    ToolCall,
    ToolResult,
    Trace,
    TraceError,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
    derive_tool_views,
)

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)
T0_NS = int(T0.timestamp()) * 1_000_000_000


def at(ms: int) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


class Spans:
    """Creates spans with the real SDK at fixed times (milliseconds after T0)."""

    def __init__(self, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
        self.tracer = provider.get_tracer("tests")
        self.exporter = exporter

    def span(
        self,
        name: str,
        attrs: dict[str, Any],
        start: int,
        end: int,
        parent: Span | None = None,
        status: Status | None = None,
        exception: BaseException | None = None,
    ) -> Span:
        ctx = trace_api.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=ctx, start_time=T0_NS + start * 1_000_000, attributes=attrs)
        if exception is not None:
            span.record_exception(exception)
        if status is not None:
            span.set_status(status)
        span.end(end_time=T0_NS + end * 1_000_000)
        return span

    def start(self, name: str, attrs: dict[str, Any], start: int) -> Span:
        return self.tracer.start_span(name, start_time=T0_NS + start * 1_000_000, attributes=attrs)

    def finished(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({sc.SERVICE_NAME: "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Spans(provider, exporter)
    provider.shutdown()


def js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def text(content: str) -> dict[str, str]:
    return {"type": "text", "content": content}


def llm(**extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM, sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
    for key, value in extra.items():
        attrs[key] = value if isinstance(value, str | int | float | tuple) else js(value)
    return attrs


def agent(input_value: Any = None, output_value: Any = None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {sc.EVALTRACE_SPAN_KIND: sc.KIND_AGENT, **extra}
    if input_value is not None:
        attrs[sc.INPUT_VALUE] = js(input_value)
    if output_value is not None:
        attrs[sc.OUTPUT_VALUE] = js(output_value)
    return attrs


def tool(name: str, arguments: Any, result: Any = None, call_id: str | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        sc.EVALTRACE_SPAN_KIND: sc.KIND_TOOL,
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: js(arguments),
    }
    if result is not None:
        attrs[sc.GEN_AI_TOOL_CALL_RESULT] = js(result)
    if call_id is not None:
        attrs[sc.GEN_AI_TOOL_CALL_ID] = call_id
    return attrs


SYSTEM = [text("Be brief.")]
USER = {"role": "user", "parts": [text("Weather in Paris?")]}
CALL = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
ASSISTANT_CALL = {"role": "assistant", "parts": [CALL]}
RESULT = {"sky": "rainy", "temp_f": 57}
TOOL_MSG = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": RESULT}]}


def two_call_conversation(spans: Spans) -> Span:
    root = spans.start(
        "invoke_agent support", agent({"question": "Weather in Paris?"}, "It is rainy in Paris."), start=0
    )
    spans.span(
        "chat gpt-4o",
        llm(
            **{
                sc.GEN_AI_SYSTEM_INSTRUCTIONS: SYSTEM,
                sc.GEN_AI_INPUT_MESSAGES: [USER],
                sc.GEN_AI_OUTPUT_MESSAGES: [
                    {
                        "role": "assistant",
                        "parts": [{"type": "reasoning", "content": "Need the weather."}, CALL],
                        "finish_reason": "tool_call",
                    }
                ],
                sc.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_calls",),
                sc.GEN_AI_USAGE_INPUT_TOKENS: 100,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 20,
                sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 8,
                sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 50,
                sc.EVALTRACE_COST_USD: 0.001,
                sc.EVALTRACE_COST_THINKING_USD: 0.0002,
            }
        ),
        start=10,
        end=500,
        parent=root,
    )
    spans.span(
        "execute_tool get_weather", tool("get_weather", {"city": "Paris"}, RESULT, "call_1"), 510, 600, parent=root
    )
    spans.span(
        "chat gpt-4o",
        llm(
            **{
                sc.GEN_AI_SYSTEM_INSTRUCTIONS: SYSTEM,
                sc.GEN_AI_INPUT_MESSAGES: [USER, ASSISTANT_CALL, TOOL_MSG],
                sc.GEN_AI_OUTPUT_MESSAGES: [
                    {
                        "role": "assistant",
                        "parts": [{"type": "reasoning", "content": "Rainy it is."}, text("It is rainy in Paris.")],
                        "finish_reason": "stop",
                    }
                ],
                sc.GEN_AI_USAGE_INPUT_TOKENS: 150,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 10,
                sc.EVALTRACE_COST_USD: 0.002,
            }
        ),
        start=610,
        end=900,
        parent=root,
    )
    root.end(end_time=T0_NS + 1_000_500_000)
    return root


def ids(span: Span) -> tuple[str, str]:
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def test_two_call_tool_conversation(spans: Spans) -> None:
    root = two_call_conversation(spans)
    trace_id, span_id = ids(root)
    result = trace_from_spans(spans.finished())

    expected_call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}, started_at=at(510))
    assert result.messages == [
        TraceMessage(role="system", content="Be brief."),
        TraceMessage(role="user", content="Weather in Paris?"),
        TraceMessage(role="assistant", thinking="Need the weather.", tool_call=expected_call),
        TraceMessage(role="tool", name="get_weather", tool_call_id="call_1", content=RESULT),
        TraceMessage(role="assistant", content="It is rainy in Paris.", thinking="Rainy it is."),
    ]
    assert result.tool_calls == [expected_call]
    assert result.tool_results == [ToolResult(tool_call_id="call_1", name="get_weather", content=RESULT)]
    assert result.input == {"question": "Weather in Paris?"}
    assert result.output == TraceOutput(
        final_answer="It is rainy in Paris.", thinking="Need the weather.\n\nRainy it is.", structured=None
    )
    assert result.metrics.model_dump(exclude={"cost_usd"}) == TraceMetrics(
        token_input=250, token_output=30, token_thinking=8, cost_thinking_usd=0.0002
    ).model_dump(exclude={"cost_usd"})
    assert result.metrics.cost_usd == pytest.approx(0.003)
    assert (result.run_id, result.case_id, result.variant_name) == ("live", trace_id, "support-bot")
    assert (result.started_at, result.finished_at, result.latency_ms) == (
        T0,
        at(1000) + dt.timedelta(microseconds=500),
        1000,
    )
    assert result.error is None
    assert result.extra == {"trace_id": trace_id, "span_id": span_id}
    assert Trace.model_validate_json(result.model_dump_json()) == result


def test_spans_given_in_any_order_and_other_traces_ignored(spans: Spans) -> None:
    two_call_conversation(spans)
    first = list(spans.finished())
    spans.exporter.clear()
    spans.span("other", agent({"x": 1}), 0, 5)
    mixed = [*reversed(first), *spans.finished()]
    assert trace_from_spans(mixed, root=first[-1]).messages == trace_from_spans(first).messages


def test_run_identity_from_root_attributes(spans: Spans) -> None:
    ident = {sc.EVALTRACE_RUN_ID: "2026-05-03T10-30-00_eval", sc.EVALTRACE_CASE_ID: "c7", sc.EVALTRACE_VARIANT: "v2"}
    spans.span("task", agent({"q": 1}, None, **ident), 0, 10)
    result = trace_from_spans(spans.finished())
    assert (result.run_id, result.case_id, result.variant_name) == ("2026-05-03T10-30-00_eval", "c7", "v2")
    assert result.output == TraceOutput()


def test_streamed_calls_and_structured_output(spans: Spans) -> None:
    root = spans.start("task", agent({"topic": "x"}, {"summary": "short", "n": 2}), 0)
    stream = {
        sc.GEN_AI_INPUT_MESSAGES: [{"role": "user", "parts": [text("Summarise x")]}],
        sc.GEN_AI_OUTPUT_MESSAGES: [{"role": "assistant", "parts": [text("short")], "finish_reason": "stop"}],
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.412,
        sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK: 1.2346,
        sc.EVALTRACE_STREAM_CHUNKS: 42,
        sc.EVALTRACE_STREAM_COMPLETED: True,
        sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND: 35.5,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: 40,
    }
    spans.span("chat gpt-4o", llm(**stream), 1, 1300, parent=root)
    second = {
        **stream,
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.1,
        sc.EVALTRACE_STREAM_CHUNKS: 10,
        sc.EVALTRACE_STREAM_COMPLETED: False,
        sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND: 20.0,
    }
    spans.span("chat gpt-4o", llm(**second), 1400, 1500, parent=root)
    spans.span("chat gpt-4o", llm(**{sc.GEN_AI_USAGE_OUTPUT_TOKENS: 5}), 1600, 1700, parent=root)  # not streamed
    root.end(end_time=T0_NS + 2_000_000_000)
    result = trace_from_spans(spans.finished())
    assert result.metrics == TraceMetrics(
        token_output=85,
        latency_first_token_ms=412,
        latency_last_token_ms=1235,
        tokens_per_second=27.75,
        stream_chunks=52,
        stream_completed=False,
    )
    assert result.output == TraceOutput(final_answer="short", structured={"summary": "short", "n": 2})
    # The retried call repeats the same input: nothing is duplicated, both answers are kept.
    assert [m.role for m in result.messages] == ["user", "assistant", "assistant"]


def raise_boom() -> None:
    raise ValueError("boom")


@pytest.mark.parametrize("description", ["ValueError: boom", None])
def test_error_root_with_exception_event(spans: Spans, description: str | None) -> None:
    try:
        raise_boom()
    except ValueError as exc:
        error = exc
    spans.span(
        "invoke_agent a",
        agent({"q": "x"}),
        0,
        20,
        status=Status(StatusCode.ERROR, description),
        exception=error,
    )
    result = trace_from_spans(spans.finished())
    assert result.error is not None
    assert (result.error.type, result.error.message) == ("exception", "ValueError: boom")
    assert result.error.stack is not None and "raise_boom" in result.error.stack
    assert result.latency_ms == 20
    assert result.output.final_answer is None


def test_error_without_event_and_ok_root(spans: Spans) -> None:
    spans.span("a", agent(), 0, 1, status=Status(StatusCode.ERROR))
    assert trace_from_spans(spans.finished()).error == TraceError(type="exception", message="error")
    spans.exporter.clear()
    spans.span("a", agent(), 0, 1, status=Status(StatusCode.OK))
    assert trace_from_spans(spans.finished()).error is None


def test_subtree_root(spans: Spans) -> None:
    workflow = spans.start("invoke_workflow w", {sc.EVALTRACE_SPAN_KIND: sc.KIND_WORKFLOW}, 0)
    agents = []
    for n in (1, 2):
        ctx = trace_api.set_span_in_context(workflow)
        child = spans.tracer.start_span(
            f"invoke_agent a{n}", context=ctx, start_time=T0_NS + n * 100_000_000, attributes=agent({"n": n})
        )
        out = {"role": "assistant", "parts": [text(f"answer {n}")], "finish_reason": "stop"}
        attrs = {sc.GEN_AI_OUTPUT_MESSAGES: [out], sc.GEN_AI_USAGE_INPUT_TOKENS: n}
        spans.span("chat m", llm(**attrs), n * 100 + 1, n * 100 + 50, parent=child)
        child.end(end_time=T0_NS + (n * 100 + 60) * 1_000_000)
        agents.append(child)
    workflow.end(end_time=T0_NS + 500_000_000)
    trace_id, span_id = ids(agents[1])

    for root in (span_id, agents[1].get_span_context().span_id):
        result = trace_from_spans(spans.finished(), root=root)
        # The agent's input is the user's turn its model call did not record (as an offline case's would be).
        assert result.messages == [
            TraceMessage(role="user", content="2"),
            TraceMessage(role="assistant", content="answer 2"),
        ]
        assert result.input == {"n": 2}
        assert result.metrics.token_input == 2
        assert (result.started_at, result.latency_ms) == (at(200), 60)
        assert (result.case_id, result.extra["span_id"]) == (trace_id, span_id)

    whole = trace_from_spans(spans.finished())
    assert [m.content for m in whole.messages] == ["answer 1", "answer 2"]
    assert whole.metrics.token_input == 3
    with pytest.raises(ValueError, match="not among"):
        trace_from_spans(spans.finished(), root="00000000000000ff")
    with pytest.raises(ValueError, match="at least one span"):
        trace_from_spans([])


def test_truncated_values_are_kept_and_noted(spans: Spans) -> None:
    big_input = capped_json({"document": "x" * 500}, max_length=120)
    big_result = capped_json({"rows": list(range(200))}, max_length=100)
    big_output = capped_json([{"role": "assistant", "parts": [text("y" * 500)]}], max_length=150)
    root = spans.start("task", {sc.EVALTRACE_SPAN_KIND: sc.KIND_TASK, sc.INPUT_VALUE: big_input}, 0)
    spans.span("chat m", llm(**{sc.GEN_AI_OUTPUT_MESSAGES: big_output}), 1, 2, parent=root)
    spans.span("execute_tool q", {**tool("q", {"a": 1}), sc.GEN_AI_TOOL_CALL_RESULT: big_result}, 3, 4, parent=root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())

    assert result.input == json.loads(big_input)
    assert result.input["evaltrace.truncated"] is True
    assert result.messages[0] == TraceMessage(role="assistant", content=json.loads(big_output))
    assert result.tool_results == [ToolResult(name="q", content=json.loads(big_result))]
    errors = result.extra["enrichment_errors"]
    assert len(errors) == 3
    assert all(e["enricher"] == "evaltrace.mapping" and "truncated at capture" in e["error"] for e in errors)
    assert any(
        e["error"].startswith("input.value of span 'task'")
        and f"original length {len(js({'document': 'x' * 500}))}" in e["error"]
        for e in errors
    )


def test_foreign_and_malformed_spans_do_not_crash(spans: Spans) -> None:
    root = spans.start(
        "openinference llm",
        {
            sc.OPENINFERENCE_SPAN_KIND: "CHAIN",
            sc.INPUT_VALUE: "hello there",
            sc.OUTPUT_VALUE: "42",
            sc.OUTPUT_MIME_TYPE: sc.MIME_TEXT,
            "llm.input_messages.0.message.role": "user",
        },
        0,
    )
    spans.span(
        "garbage", {sc.GEN_AI_INPUT_MESSAGES: "not json", sc.GEN_AI_OUTPUT_MESSAGES: '{"role": "x"}'}, 1, 2, root
    )
    spans.span("odd parts", {sc.GEN_AI_INPUT_MESSAGES: js([7, {"role": "wizard", "parts": "nope"}])}, 3, 4, root)
    spans.span(
        "legacy shape",
        {sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_OUTPUT_MESSAGES: js([{"role": "assistant", "content": "hi"}])},
        5,
        6,
        root,
    )
    spans.span("bare", {}, 7, 8, root)
    spans.span("bad numbers", llm(**{sc.GEN_AI_USAGE_INPUT_TOKENS: "many"}), 9, 10, root)
    root.end(end_time=T0_NS + 11_000_000)
    result = trace_from_spans(spans.finished())

    assert result.input == {"input": "hello there"}
    assert result.output == TraceOutput(final_answer="42")  # text/plain output is not parsed as JSON
    # The root's input is the user's turn no model call recorded; the answer it ends with is there already.
    assert result.messages == [
        TraceMessage(role="user", content="hello there"),
        TraceMessage(role="assistant", content="hi"),
    ]
    assert result.metrics.token_input is None
    errors = result.extra["enrichment_errors"]
    assert len(errors) == 3
    assert {e["enricher"] for e in errors} == {"evaltrace.mapping"}
    assert errors[0]["error"].startswith("gen_ai.input.messages of span 'garbage' (")
    assert errors[0]["error"].endswith(") is not a JSON array of messages; ignored")
    assert errors[1]["error"].startswith("gen_ai.output.messages of span 'garbage' (")
    assert errors[2]["error"].endswith("has a message that is not an object: '7'; ignored")


def test_pure_decorator_trace_builds_messages_from_tool_spans(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent({"city": "Paris"}, {"weather": "rainy"}), 0)
    spans.span("execute_tool geocode", tool("geocode", {"city": "Paris"}, [48.85, 2.35], "c1"), 1, 2, root)
    spans.span("execute_tool forecast", tool("forecast", {"lat": 48.85}, "rainy"), 3, 4, root)
    spans.span(
        "execute_tool alert",
        {**tool("alert", "raw text args")},
        5,
        6,
        root,
        status=Status(StatusCode.ERROR, "RuntimeError: down"),
    )
    root.end(end_time=T0_NS + 7_000_000)
    result = trace_from_spans(spans.finished())

    # No model call asked for them: each is known from its tool span only, and marked so.
    assert result.tool_calls == [
        ToolCall(id="c1", name="geocode", arguments={"city": "Paris"}, started_at=at(1), from_tool_span=True),
        ToolCall(name="forecast", arguments={"lat": 48.85}, started_at=at(3), from_tool_span=True),
        ToolCall(name="alert", arguments={"_raw": "raw text args"}, started_at=at(5), from_tool_span=True),
    ]
    assert result.tool_results == [
        ToolResult(tool_call_id="c1", name="geocode", content="[48.85,2.35]"),
        ToolResult(name="forecast", content="rainy"),
        ToolResult(name="alert", content={"error": "RuntimeError: down"}),
    ]
    # The user's turn is the agent's input; no answer (its output is an object), so no final assistant message.
    assert [(m.role, m.content) for m in result.messages[:1]] == [("user", "Paris")]
    assert [m.role for m in result.messages[1:]] == ["assistant", "tool"] * 3
    assert result.output == TraceOutput(final_answer=None, structured={"weather": "rainy"})
    assert result.error is None  # only the root's status counts


def test_repeated_identical_tool_spans_stay_separate_calls(spans: Spans) -> None:
    # A looping agent repeats the same call: each span is a call of its own, never matched to an earlier one.
    root = spans.start("invoke_agent a", agent({"q": 1}), 0)
    for i in range(3):
        spans.span("execute_tool search", tool("search", {"q": "x"}, f"r{i}"), 1 + 2 * i, 2 + 2 * i, root)
    root.end(end_time=T0_NS + 9_000_000)
    result = trace_from_spans(spans.finished())

    assert [(c.name, c.started_at) for c in result.tool_calls] == [
        ("search", at(1)),
        ("search", at(3)),
        ("search", at(5)),
    ]
    assert [r.content for r in result.tool_results] == ["r0", "r1", "r2"]


def test_parallel_calls_matching_by_name_and_missing_result_inserted(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent({"q": 1}), 0)
    calls = [
        {"type": "tool_call", "name": "lookup", "arguments": {"k": "a"}},
        {"type": "tool_call", "id": "c2", "name": "lookup", "arguments": '{"k": "b"}'},
        {"type": "tool_call", "id": "c3", "name": "shout", "arguments": "not json"},
    ]
    out = [{"role": "assistant", "parts": [text("Looking up."), *calls], "finish_reason": "tool_call"}]
    spans.span("chat m", llm(**{sc.GEN_AI_OUTPUT_MESSAGES: out}), 1, 2, root)
    spans.span("execute_tool lookup", tool("lookup", {"k": "a"}, "A"), 3, 4, root)
    spans.span("execute_tool lookup", tool("lookup", {"k": "b"}, "B", "c2"), 5, 6, root)
    spans.span("execute_tool other", tool("other", {}, "O", "zz"), 7, 8, root)
    root.end(end_time=T0_NS + 9_000_000)
    result = trace_from_spans(spans.finished())

    assert result.messages == [
        TraceMessage(role="user", content="1"),  # the agent's input: the model call recorded no input messages
        TraceMessage(
            role="assistant",
            content="Looking up.",
            tool_call=ToolCall(name="lookup", arguments={"k": "a"}, started_at=at(3)),
        ),
        TraceMessage(role="tool", name="lookup", content="A"),
        TraceMessage(
            role="assistant", tool_call=ToolCall(id="c2", name="lookup", arguments={"k": "b"}, started_at=at(5))
        ),
        TraceMessage(role="tool", name="lookup", tool_call_id="c2", content="B"),
        TraceMessage(role="assistant", tool_call=ToolCall(id="c3", name="shout", arguments={"_raw": "not json"})),
        TraceMessage(  # no model call asked for it: the tool span's own call
            role="assistant",
            tool_call=ToolCall(id="zz", name="other", arguments={}, started_at=at(7), from_tool_span=True),
        ),
        TraceMessage(role="tool", name="other", tool_call_id="zz", content="O"),
    ]
    assert result.output.final_answer == "Looking up."


def test_sliding_window_and_new_conversation(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent(), 0)
    sys_msg = {"role": "system", "parts": [text("S")]}
    u1 = {"role": "user", "parts": [text("one")]}
    a1 = {"role": "assistant", "parts": [text("first")]}
    u2 = {"role": "user", "parts": [text("two")]}
    a2 = {"role": "assistant", "parts": [text("second")]}
    u3 = {"role": "user", "parts": [text("one")]}  # same text as u1, a genuinely new message
    spans.span("c1", llm(**{sc.GEN_AI_INPUT_MESSAGES: [sys_msg, u1], sc.GEN_AI_OUTPUT_MESSAGES: [a1]}), 1, 2, root)
    window = [sys_msg, a1, u2]  # the context window dropped u1
    spans.span("c2", llm(**{sc.GEN_AI_INPUT_MESSAGES: window, sc.GEN_AI_OUTPUT_MESSAGES: [a2]}), 3, 4, root)
    spans.span("c3", llm(**{sc.GEN_AI_INPUT_MESSAGES: [sys_msg, u1, a1, u2, a2, u3]}), 5, 6, root)
    sub = [{"role": "system", "parts": [text("Sub-agent")]}, u2]
    spans.span("c4", llm(**{sc.GEN_AI_INPUT_MESSAGES: sub}), 7, 8, root)
    root.end(end_time=T0_NS + 9_000_000)
    result = trace_from_spans(spans.finished())
    assert [(m.role, m.content) for m in result.messages] == [
        ("system", "S"),
        ("user", "one"),
        ("assistant", "first"),
        ("user", "two"),
        ("assistant", "second"),
        ("user", "one"),
        ("system", "Sub-agent"),
        ("user", "two"),
    ]


def test_media_parts_roles_and_tool_names(spans: Spans) -> None:
    image = {"type": "uri", "modality": "image", "uri": "https://x/cat.png", "mime_type": "image/png"}
    blob = {"type": "blob", "modality": "audio", "content": "QUJDRA=="}
    messages = [
        {"role": "developer", "parts": [text("Rules.")]},
        {"role": "user", "parts": [text("What is this?"), image, blob]},
        {"role": "tool", "parts": [text("plain tool text")], "name": "legacy_tool"},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "unknown", "response": 3}]},
    ]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: messages}), 0, 1)
    result = trace_from_spans(spans.finished())
    assert result.messages == [
        TraceMessage(role="system", content="Rules."),
        TraceMessage(
            role="user",
            content={
                "parts": [
                    text("What is this?"),
                    image,
                    {"type": "blob", "modality": "audio", "content": "<8 base64 characters>"},
                ]
            },
        ),
        TraceMessage(role="tool", name="legacy_tool", content="plain tool text"),
        TraceMessage(role="tool", tool_call_id="unknown", content="3"),
    ]
    assert result.input == {}
    assert result.output == TraceOutput()


def test_root_is_earliest_parentless_span(spans: Spans) -> None:
    spans.span("late", agent({"which": "late"}), 50, 60)
    spans.span("early", agent({"which": "early"}), 10, 20)
    assert trace_from_spans(spans.finished()).input == {"which": "early"}


def test_inline_think_blocks_move_to_thinking(spans: Spans) -> None:
    out = [{"role": "assistant", "parts": [text("<think>\nUser wants 4.\n</think>\n\nThe answer is 4.")]}]
    only_think = [{"role": "assistant", "parts": [text("<think>hmm</think>")]}]
    spans.span("chat m", llm(**{sc.GEN_AI_OUTPUT_MESSAGES: out}), 0, 1)
    spans.span("chat m", llm(**{sc.GEN_AI_OUTPUT_MESSAGES: only_think}), 0, 1)
    result = trace_from_spans(spans.finished(), root=spans.finished()[0])
    assert result.messages == [TraceMessage(role="assistant", content="The answer is 4.", thinking="User wants 4.")]
    assert result.output == TraceOutput(final_answer="The answer is 4.", thinking="User wants 4.")
    other = trace_from_spans(spans.finished(), root=spans.finished()[1])
    assert other.messages == [TraceMessage(role="assistant", thinking="hmm")]
    assert other.output == TraceOutput(thinking="hmm")


def test_tool_names_resolved_from_history_in_first_input(spans: Spans) -> None:
    history = [USER, ASSISTANT_CALL, TOOL_MSG]
    out = [{"role": "assistant", "parts": [text("Rainy.")]}]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: history, sc.GEN_AI_OUTPUT_MESSAGES: out}), 0, 1)
    result = trace_from_spans(spans.finished())
    # The tool message names the tool its id answers, from the call in the same history.
    assert [(m.role, m.name, m.tool_call_id, m.content) for m in result.messages if m.role == "tool"] == [
        ("tool", "get_weather", "call_1", RESULT)
    ]
    assert derive_tool_views(result.messages) == (
        [ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})],
        [ToolResult(tool_call_id="call_1", name="get_weather", content=RESULT)],
    )
    # Both came in as history (the app ran the tool between two traced model calls): this call made neither.
    assert result.tool_calls == [] and result.tool_results == []
    assert result.output.final_answer == "Rainy."


def test_previous_response_id_inputs_hold_only_new_items(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent(), 0)
    hi = {"role": "user", "parts": [text("hi")]}
    first = {sc.GEN_AI_SYSTEM_INSTRUCTIONS: SYSTEM, sc.GEN_AI_INPUT_MESSAGES: [hi]}
    spans.span(
        "c1", llm(**first, **{sc.GEN_AI_OUTPUT_MESSAGES: [{"role": "assistant", "parts": [text("hello")]}]}), 1, 2, root
    )
    again = {**first, sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID: "resp_1"}  # the user says "hi" again
    spans.span(
        "c2",
        llm(**again, **{sc.GEN_AI_OUTPUT_MESSAGES: [{"role": "assistant", "parts": [text("again?")]}]}),
        3,
        4,
        root,
    )
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(m.role, m.content) for m in result.messages] == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "hi"),
        ("assistant", "again?"),
    ]


def test_input_that_skips_back_is_not_swallowed(spans: Spans) -> None:
    # A later call whose input matches old messages but does not catch up with the conversation is new
    # content, except for the prefix it shares with the conversation's beginning.
    root = spans.start("invoke_agent a", agent(), 0)
    u1, u2 = ({"role": "user", "parts": [text(t)]} for t in ("one", "two"))
    a1 = {"role": "assistant", "parts": [text("first")]}
    spans.span("c1", llm(**{sc.GEN_AI_INPUT_MESSAGES: [u1], sc.GEN_AI_OUTPUT_MESSAGES: [a1]}), 1, 2, root)
    spans.span("c2", llm(**{sc.GEN_AI_INPUT_MESSAGES: [u2, u1]}), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [m.content for m in result.messages] == ["one", "first", "two", "one"]


WEIRD_VALUES: list[Any] = [
    "",
    "null",
    "[]",
    "{}",
    "[null]",
    "not json {",
    '"just a string"',
    "1e999",
    "[NaN, Infinity]",
    "[" * 5000 + "]" * 5000,
    '{"a": ' * 300 + "1" + "}" * 300,
    '[{"role": null, "parts": [null, 5, "bare text", {"type": null}, {"type": "tool_call"}]}]',
    '[{"role": "tool", "parts": [{"type": "tool_call_response"}]}, {"role": "assistant", "parts": {}}]',
    '[{"role": "assistant", "parts": [{"type": "tool_call", "name": 5, "id": 7, "arguments": [1, 2]}]}]',
    '{"evaltrace.truncated": true}',
    7,
    True,
    2.5,
    ("a", "b"),
]
WEIRD_KEYS = [
    sc.GEN_AI_INPUT_MESSAGES,
    sc.GEN_AI_OUTPUT_MESSAGES,
    sc.GEN_AI_SYSTEM_INSTRUCTIONS,
    sc.GEN_AI_TOOL_CALL_ARGUMENTS,
    sc.GEN_AI_TOOL_CALL_RESULT,
    sc.GEN_AI_TOOL_NAME,
    sc.GEN_AI_TOOL_CALL_ID,
    sc.INPUT_VALUE,
    sc.OUTPUT_VALUE,
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.EVALTRACE_COST_USD,
    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    sc.EVALTRACE_STREAM_COMPLETED,
    sc.EVALTRACE_RUN_ID,
]


@pytest.mark.parametrize("key", WEIRD_KEYS)
def test_malformed_attribute_values_never_crash(spans: Spans, key: str) -> None:
    for value in WEIRD_VALUES:
        spans.exporter.clear()
        root = spans.start("root", {key: value}, 0)
        spans.span("chat m", {**llm(), key: value}, 1, 2, root)
        spans.span("execute_tool t", {**tool("t", {}), key: value}, 3, 4, root)
        root.end(end_time=T0_NS + 5_000_000)
        result = trace_from_spans(spans.finished())
        assert Trace.model_validate_json(result.model_dump_json()) == result


def test_a_call_run_again_under_its_id_is_one_call_with_the_last_result(spans: Spans) -> None:
    """A call that waited for approval (a span with no result) and ran on resume, or a retry, is one call."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span(
        "chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: [USER], sc.GEN_AI_OUTPUT_MESSAGES: [ASSISTANT_CALL]}), 1, 2, root
    )
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "Paris"}, None, "call_1"), 3, 4, root)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "Paris"}, RESULT, "call_1"), 5, 6, root)
    # A tool run no model call asked for, retried after an error: one call, its last result.
    spans.span("execute_tool lookup", tool("lookup", {"k": "a"}, {"error": "busy"}, "call_2"), 7, 8, root)
    spans.span("execute_tool lookup", tool("lookup", {"k": "a"}, "A", "call_2"), 9, 10, root)
    root.end(end_time=T0_NS + 11_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_1", "get_weather"), ("call_2", "lookup")]
    assert [(r.tool_call_id, r.content) for r in result.tool_results] == [("call_1", RESULT), ("call_2", "A")]


def test_a_tool_result_without_a_call_id_is_named_by_its_part(spans: Spans) -> None:
    """Ollama's tool calls have no id: the name on the result's part is what links it to the call."""
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    answer = {"role": "tool", "parts": [{"type": "tool_call_response", "name": "get_weather", "response": "rainy"}]}
    out = [{"role": "assistant", "parts": [text("Rainy.")]}]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: [USER, call, answer], sc.GEN_AI_OUTPUT_MESSAGES: out}), 0, 1)
    result = trace_from_spans(spans.finished())
    assert [(m.name, m.content) for m in result.messages if m.role == "tool"] == [("get_weather", "rainy")]


OLD_CALL = {"role": "assistant", "parts": [{**CALL, "id": "old_1"}]}
OLD_RESULT = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "old_1", "response": RESULT}]}
OLD_TURN = [USER, OLD_CALL, OLD_RESULT, {"role": "assistant", "parts": [text("Rainy.")]}]
FOLLOW_UP = {"role": "user", "parts": [text("And tomorrow?")]}
ANSWER = [{"role": "assistant", "parts": [text("Dry.")]}]


def test_a_tool_span_before_the_first_model_call_does_not_make_the_history_this_traces(spans: Spans) -> None:
    """Retrieval first (the usual RAG shape), then a model call sent the earlier turn with its tool call."""
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool retrieve", tool("retrieve", {"q": "tomorrow"}, ["doc"], "r1"), 1, 2, root)
    inputs = [*OLD_TURN, FOLLOW_UP]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs, sc.GEN_AI_OUTPUT_MESSAGES: ANSWER}), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.id, c.name) for c in result.tool_calls] == [("r1", "retrieve")]
    assert [r.tool_call_id for r in result.tool_results] == ["r1"]


def test_a_first_model_call_with_a_short_input_does_not_make_the_history_this_traces(spans: Spans) -> None:
    """A router call first (only the new question), then the main call sent the whole history."""
    root = spans.start("invoke_agent a", agent(), 0)
    route = [{"role": "assistant", "parts": [text("weather")]}]
    spans.span("chat r", llm(**{sc.GEN_AI_INPUT_MESSAGES: [FOLLOW_UP], sc.GEN_AI_OUTPUT_MESSAGES: route}), 1, 2, root)
    inputs = [*OLD_TURN, FOLLOW_UP]
    spans.span("chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: inputs, sc.GEN_AI_OUTPUT_MESSAGES: ANSWER}), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert result.tool_calls == [] and result.tool_results == []
    assert any(m.tool_call is not None and m.tool_call.id == "old_1" for m in result.messages)


def test_another_tool_under_a_reused_call_id_is_a_call_of_its_own(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span("execute_tool search", tool("search", {"q": "a"}, "A", "call_0"), 1, 2, root)
    spans.span("execute_tool fetch", tool("fetch", {"u": "b"}, "B", "call_0"), 3, 4, root)
    root.end(end_time=T0_NS + 5_000_000)
    result = trace_from_spans(spans.finished())
    assert [(c.name, r.content) for c, r in zip(result.tool_calls, result.tool_results, strict=True)] == [
        ("search", "A"),
        ("fetch", "B"),
    ]


def test_a_model_asked_call_retried_keeps_its_last_result(spans: Spans) -> None:
    root = spans.start("invoke_agent a", agent(), 0)
    spans.span(
        "chat m", llm(**{sc.GEN_AI_INPUT_MESSAGES: [USER], sc.GEN_AI_OUTPUT_MESSAGES: [ASSISTANT_CALL]}), 1, 2, root
    )
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "Paris"}, "busy", "call_1"), 3, 4, root)
    spans.span("execute_tool get_weather", tool("get_weather", {"city": "Paris"}, RESULT, "call_1"), 5, 6, root)
    root.end(end_time=T0_NS + 7_000_000)
    result = trace_from_spans(spans.finished())
    assert [c.id for c in result.tool_calls] == ["call_1"]
    assert [(r.tool_call_id, r.content) for r in result.tool_results] == [("call_1", RESULT)]
