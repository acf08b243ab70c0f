"""Foreign GenAI conventions, one synthetic span at a time: OpenInference, OpenLLMetry, Vercel AI SDK, GenAI events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace.mapping import trace_from_spans
from evaltrace.mapping.conventions import span_kind
from evaltrace.schema import Trace

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
_next_id = iter(range(0x100, 0x10000))


def span(name: str, attributes: dict[str, Any], *, parent: ReadableSpan | None = None,
         events: list[Event] | None = None, start: int = 0) -> ReadableSpan:  # fmt: skip
    ctx = SpanContext(TRACE_ID, next(_next_id), False, TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(
        name=name,
        context=ctx,
        parent=parent.context if parent is not None else None,
        attributes=attributes,
        events=events or [],
        start_time=1_700_000_000_000_000_000 + start,
        end_time=1_700_000_001_000_000_000 + start,
    )


def summary(trace: Trace) -> list[tuple[Any, ...]]:
    return [
        (m.role, m.content, m.tool_call and (m.tool_call.id, m.tool_call.name, m.tool_call.arguments), m.tool_call_id)
        for m in trace.messages
    ]


TOOL_CONVERSATION = [
    ("system", "Be brief.", None, None),
    ("user", "Weather in Paris?", None, None),
    ("assistant", None, ("call_1", "get_weather", {"city": "Paris"}), None),
    ("tool", "rainy", None, "call_1"),
    ("assistant", "It is rainy.", None, None),
]

OPENINFERENCE = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "gpt-4o-mini",
    "llm.provider": "openai",
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": "Be brief.",
    "llm.input_messages.1.message.role": "user",
    # multi-part content: the text parts, in order
    "llm.input_messages.1.message.contents.0.message_content.type": "text",
    "llm.input_messages.1.message.contents.0.message_content.text": "Weather in Paris?",
    "llm.input_messages.2.message.role": "assistant",
    "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call_1",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "get_weather",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
    "llm.input_messages.3.message.role": "tool",
    "llm.input_messages.3.message.tool_call_id": "call_1",
    "llm.input_messages.3.message.content": "rainy",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "It is rainy.",
    "llm.token_count.prompt": 40,
    "llm.token_count.completion": 7,
    "llm.token_count.total": 47,
    "llm.token_count.completion_details.reasoning": 3,
    "llm.token_count.prompt_details.cache_read": 10,
    "llm.cost.total": 0.0001,
    "input.value": '{"messages": []}',
    "input.mime_type": "application/json",
}

OPENLLMETRY = {
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.prompt.0.role": "system",
    "gen_ai.prompt.0.content": "Be brief.",
    "gen_ai.prompt.1.role": "user",
    "gen_ai.prompt.1.content": json.dumps([{"type": "text", "text": "Weather in Paris?"}]),
    "gen_ai.prompt.2.role": "assistant",
    "gen_ai.prompt.2.tool_calls.0.id": "call_1",
    "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
    "gen_ai.prompt.2.tool_calls.0.arguments": '{"city": "Paris"}',
    "gen_ai.prompt.3.role": "tool",
    "gen_ai.prompt.3.tool_call_id": "call_1",
    "gen_ai.prompt.3.content": "rainy",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": "It is rainy.",
    "gen_ai.completion.0.finish_reason": "stop",
    "gen_ai.usage.prompt_tokens": 40,
    "gen_ai.usage.completion_tokens": 7,
    "llm.usage.total_tokens": 47,
}

VERCEL = {
    "ai.operationId": "ai.generateText.doGenerate",
    "ai.model.id": "gpt-4o-mini",
    "ai.prompt.messages": json.dumps(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "toolCallId": "call_1", "toolName": "get_weather", "args": {"city": "Paris"}}
                ],
            },  # fmt: skip
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call_1",
                        "toolName": "get_weather",
                        "output": {"type": "text", "value": "rainy"},
                    }
                ],
            },  # fmt: skip
        ]
    ),
    "ai.response.text": "It is rainy.",
    "ai.usage.promptTokens": 40,
    "ai.usage.completionTokens": 7,
}


def _event(name: str, body: dict[str, Any], *, flat: bool = False) -> Event:
    if flat:
        return Event(name, {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()})
    return Event(name, {"gen_ai.event.content": json.dumps(body)})


def genai_events(flat: bool) -> list[Event]:
    return [
        _event("gen_ai.system.message", {"content": "Be brief."}, flat=flat),
        _event("gen_ai.user.message", {"content": "Weather in Paris?"}, flat=flat),
        _event(
            "gen_ai.assistant.message",
            {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            },  # fmt: skip
            flat=flat,
        ),
        _event("gen_ai.tool.message", {"content": "rainy", "id": "call_1"}, flat=flat),
        _event(
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "It is rainy."}},
            flat=flat,
        ),  # fmt: skip
    ]


EVENT_SPAN = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 7}


@pytest.mark.parametrize(
    ("attributes", "events", "tokens"),
    [
        pytest.param(OPENINFERENCE, [], (40, 7, 3), id="openinference"),
        pytest.param(OPENLLMETRY, [], (40, 7, None), id="openllmetry"),
        pytest.param(VERCEL, [], (40, 7, None), id="vercel-ai"),
        pytest.param(EVENT_SPAN, genai_events(flat=False), (40, 7, None), id="genai-events-json-body"),
        pytest.param(EVENT_SPAN, genai_events(flat=True), (40, 7, None), id="genai-events-flat-body"),
    ],
)
def test_each_convention_maps_the_same_tool_conversation(
    attributes: dict[str, Any], events: list[Event], tokens: tuple[int | None, ...]
) -> None:
    root = span("agent", {})
    trace = trace_from_spans([root, span("llm", attributes, parent=root, events=events)])
    assert summary(trace) == TOOL_CONVERSATION
    assert trace.messages[3].name == "get_weather"  # the tool result names its call's tool
    assert trace.output.final_answer == "It is rainy."
    assert (trace.metrics.token_input, trace.metrics.token_output, trace.metrics.token_thinking) == tokens
    assert "enrichment_errors" not in trace.extra


def test_openinference_cost_and_output_tool_calls() -> None:
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Weather in Paris and Rome?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "a",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
        "llm.output_messages.0.message.tool_calls.1.tool_call.id": "b",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": "not json",
        "llm.cost.total": 0.25,
    }
    trace = trace_from_spans([span("ChatCompletion", attributes)])
    assert [(c.id, c.arguments) for c in trace.tool_calls] == [("a", {"city": "Paris"}), ("b", {"_raw": "not json"})]
    assert trace.metrics.cost_usd == 0.25


def test_openinference_agent_with_tool_and_retriever_spans() -> None:
    agent = span("agent", {"openinference.span.kind": "AGENT", "input.value": "Weather?", "input.mime_type": "text/plain",
                           "output.value": "Sunny.", "output.mime_type": "text/plain"})  # fmt: skip
    retriever = span(
        "retrieve",
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "weather",
            "retrieval.documents.0.document.content": "Paris is sunny.",
            "retrieval.documents.1.document.content": "Rome is rainy.",
        },
        parent=agent,
        start=1,
    )
    tool = span(
        "get_weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.parameters": '{"type": "object"}',
            "input.value": '{"city": "Paris"}',
            "output.value": "sunny",
        },  # fmt: skip
        parent=agent,
        start=2,
    )
    trace = trace_from_spans([agent, retriever, tool])
    assert trace.input == {"input": "Weather?"}
    assert trace.output.final_answer == "Sunny."
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [
        ("retrieve", {"query": "weather"}),
        ("get_weather", {"city": "Paris"}),  # input.value, not tool.parameters (the schema)
    ]
    assert [r.content for r in trace.tool_results] == [{"documents": ["Paris is sunny.", "Rome is rainy."]}, "sunny"]


def test_openllmetry_workflow_and_tool_entities() -> None:
    workflow = span("run.workflow", {"traceloop.span.kind": "workflow", "traceloop.entity.name": "run",
                                     "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"q": "hi"}}),
                                     "traceloop.entity.output": json.dumps("done")})  # fmt: skip
    tool = span("lookup.tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup",
                                "traceloop.entity.input": json.dumps({"args": ["x"], "kwargs": {"k": 1}}),
                                "traceloop.entity.output": json.dumps({"found": True})}, parent=workflow, start=1)  # fmt: skip
    trace = trace_from_spans([workflow, tool])
    assert trace.input == {"args": [], "kwargs": {"q": "hi"}}
    assert trace.output.final_answer == "done"
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("lookup", {"args": ["x"], "k": 1})]
    assert [r.content for r in trace.tool_results] == [{"found": True}]


def test_vercel_outer_span_is_not_a_model_call_and_tool_spans_match_calls() -> None:
    outer = span("ai.generateText", {"ai.operationId": "ai.generateText", "ai.usage.promptTokens": 99,
                                     "ai.response.text": "It is rainy."})  # fmt: skip
    step = span(
        "ai.generateText.doGenerate",
        {
            "ai.operationId": "ai.generateText.doGenerate",
            "ai.prompt.messages": json.dumps([{"role": "user", "content": "Weather?"}]),
            "ai.response.toolCalls": json.dumps(
                [{"toolCallId": "c1", "toolName": "weather", "input": {"city": "Paris"}}]
            ),
            "ai.usage.inputTokens": 12,
            "ai.usage.outputTokens": 4,
        },  # fmt: skip
        parent=outer,
        start=1,
    )
    tool = span("ai.toolCall", {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "weather", "ai.toolCall.id": "c1",
                                "ai.toolCall.input": '{"city": "Paris"}', "ai.toolCall.output": '"rainy"'},
                parent=outer, start=2)  # fmt: skip
    trace = trace_from_spans([outer, step, tool])
    assert trace.metrics.token_input == 12  # the outer span repeats the usage: counted once
    assert summary(trace) == [
        ("user", "Weather?", None, None),
        ("assistant", None, ("c1", "weather", {"city": "Paris"}), None),
        ("tool", "rainy", None, "c1"),
    ]


def test_own_attributes_win_over_foreign_ones() -> None:
    attributes = {
        **OPENINFERENCE,
        "evaltrace.span.kind": "llm",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "own"}]}]),
        "gen_ai.usage.input_tokens": 5,
    }
    trace = trace_from_spans([span("llm", attributes)])
    assert summary(trace) == [("user", "own", None, None)]
    assert trace.metrics.token_input == 5
    assert trace.metrics.token_output == 7  # no own key: the alias fills in


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"evaltrace.span.kind": "task", "openinference.span.kind": "LLM"}, "task"),
        ({"openinference.span.kind": "LLM"}, "llm"),
        ({"openinference.span.kind": "tool"}, "tool"),
        ({"openinference.span.kind": "AGENT"}, "agent"),
        ({"openinference.span.kind": "CHAIN"}, "workflow"),
        ({"openinference.span.kind": "RETRIEVER"}, "retriever"),
        ({"openinference.span.kind": "EMBEDDING"}, "embedding"),
        ({"openinference.span.kind": "RERANKER"}, "reranker"),
        ({"openinference.span.kind": "GUARDRAIL"}, "guardrail"),
        ({"openinference.span.kind": "EVALUATOR"}, "evaluation"),
        ({"openinference.span.kind": "UNKNOWN"}, None),
        ({"traceloop.span.kind": "workflow"}, "workflow"),
        ({"traceloop.span.kind": "task"}, "task"),
        ({"traceloop.span.kind": "agent"}, "agent"),
        ({"traceloop.span.kind": "tool"}, "tool"),
        ({"llm.request.type": "chat"}, "llm"),
        ({"llm.request.type": "embedding"}, "embedding"),
        ({"ai.operationId": "ai.streamText.doStream"}, "llm"),
        ({"ai.operationId": "ai.toolCall"}, "tool"),
        ({"ai.operationId": "ai.streamText"}, "workflow"),
        ({"gen_ai.operation.name": "chat"}, "llm"),
        ({"gen_ai.operation.name": "text_completion"}, "llm"),
        ({"gen_ai.operation.name": "execute_tool"}, "tool"),
        ({"gen_ai.operation.name": "invoke_agent"}, "agent"),
        ({"gen_ai.operation.name": "embeddings"}, "embedding"),
        ({"gen_ai.prompt.name": "template"}, None),
        ({}, None),
    ],
)
def test_span_kind_for_evaluator_filters(attributes: dict[str, Any], kind: str | None) -> None:
    assert span_kind(attributes) == kind


@pytest.mark.parametrize(
    "attributes",
    [
        {"openinference.span.kind": "LLM", "llm.input_messages.x.message.role": "user"},  # no index
        {"openinference.span.kind": "LLM", "llm.input_messages.0": "flat"},  # a leaf where a message belongs
        {"openinference.span.kind": "LLM", "llm.output_messages.0.message.tool_calls.0.tool_call": 3},
        {"llm.request.type": "chat", "gen_ai.prompt.0.content": "[not json", "gen_ai.completion.0.content": None},
        {"ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": "{broken"},
        {"gen_ai.operation.name": "chat", "x": 1},
    ],
)
def test_malformed_foreign_attributes_never_raise(attributes: dict[str, Any]) -> None:
    events = [Event("gen_ai.choice", {"message": "[1, 2]"}), Event("gen_ai.user.message", {"body": "{"})]
    trace = trace_from_spans([span("llm", attributes, events=events)])
    assert isinstance(trace.messages, list)


def test_old_prompt_and_completion_content_events() -> None:
    events = [
        Event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps([{"role": "user", "content": "Hi"}])}),
        Event(
            "gen_ai.content.completion", {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "Hello"}])}
        ),
    ]
    trace = trace_from_spans([span("chat gpt", {"gen_ai.operation.name": "chat"}, events=events)])
    assert summary(trace) == [("user", "Hi", None, None), ("assistant", "Hello", None, None)]
