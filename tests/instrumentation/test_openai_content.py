"""Exact content attributes (messages, tools, reasoning, usage details, cost) for chosen recordings."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai_langfuse_usage import langfuse_usage
from openai_replay import client, drain, load
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests_paths import cassette

from evaltrace.mapping import trace_from_spans

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")

WEATHER_TOOL = {
    "type": "function",
    "name": "get_current_weather",
    "description": "Get the current weather in a given location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. Boston, MA"}},
        "required": ["location"],
        "additionalProperties": False,
    },
}


async def _replay(name: str, is_async: bool, **overrides: Any) -> list[Any]:
    interactions = load(cassette(name))
    api, _ = client(interactions, is_async)
    results = []
    for item in interactions:
        path = item.path
        method = (
            api.chat.completions.create
            if path.endswith("/chat/completions")
            else api.responses.create
            if path.endswith("/responses")
            else api.embeddings.create
        )
        result = method(**{**item.request, **overrides})
        if is_async:
            result = await result
        if item.request.get("stream"):
            result = await drain(result, is_async)
        results.append(result)
    return results


def _json(span: Any, key: str) -> Any:
    return json.loads(span.attributes[key])


async def test_chat_with_content_records_exact_messages(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_with_content.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"Say this is a test"}]}]'
    )
    assert span.attributes["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":[{"type":"text","content":"This is a test."}],"finish_reason":"stop"}]'
    )
    assert "langfuse.observation.usage_details" not in span.attributes  # Langfuse derives it from the counts
    assert langfuse_usage(span.attributes) == {
        "input": 12,
        "input_cached_tokens": 0,
        "output": 5,
        "output_reasoning_tokens": 0,
    }
    # gpt-4o-mini: $0.15 / $0.60 per 1M tokens.
    assert span.attributes["evaltrace.cost_usd"] == pytest.approx((12 * 0.15 + 5 * 0.6) / 1e6)
    assert "evaltrace.cost_thinking_usd" not in span.attributes  # no reasoning tokens: absent, read as 0.0
    assert trace_from_spans([span]).metrics.cost_thinking_usd == 0.0
    assert _json(span, "langfuse.observation.cost_details")["total"] == pytest.approx(
        span.attributes["evaltrace.cost_usd"]
    )


async def test_chat_tool_call_round_trip(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_tool_calls_with_content.yaml", is_async)
    first, second = exporter.get_finished_spans()
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert _json(first, "gen_ai.tool.definitions") == [WEATHER_TOOL]
    system = {"role": "system", "parts": [{"type": "text", "content": "You're a helpful assistant."}]}
    user = {
        "role": "user",
        "parts": [{"type": "text", "content": "What's the weather in Seattle and San Francisco today?"}],
    }
    assert _json(first, "gen_ai.input.messages") == [system, user]
    calls = [
        {"type": "tool_call", "id": "call_JpNb8OiAkbIbHzDggfpdDHpi", "name": "get_current_weather"},
        {"type": "tool_call", "id": "call_vaFQc3zK6hHTRZKXRI5Eo2cJ", "name": "get_current_weather"},
    ]
    calls[0]["arguments"] = {"location": "Seattle, WA"}
    calls[1]["arguments"] = {"location": "San Francisco, CA"}
    assert _json(first, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": calls, "finish_reason": "tool_call"}
    ]
    results = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": c["id"], "response": r}]}
        for c, r in zip(calls, ["50 degrees and raining", "70 degrees and sunny"], strict=True)
    ]
    assert _json(second, "gen_ai.input.messages") == [system, user, {"role": "assistant", "parts": calls}, *results]
    answer = (
        "Today, the weather in Seattle is 50 degrees and raining, while in San Francisco, it's 70 degrees and sunny."
    )
    assert _json(second, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}
    ]


@pytest.mark.openai_api("responses")
async def test_responses_reasoning_tokens_and_cost(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_responses_create_reports_reasoning_tokens[content_mode0].yaml", is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes
    assert span.name == "chat gpt-5.4"
    assert attrs["openai.api.type"] == "responses"
    assert attrs["gen_ai.request.reasoning.level"] == "low"
    assert attrs["gen_ai.request.max_tokens"] == 300
    assert attrs["gen_ai.response.model"] == "gpt-5.4-2026-03-05"
    assert attrs["gen_ai.usage.input_tokens"] == 44
    assert attrs["gen_ai.usage.output_tokens"] == 288
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 9
    assert attrs["openai.response.service_tier"] == "default"
    assert langfuse_usage(attrs) == {
        "input": 44,
        "input_cached_tokens": 0,
        "output": 279,
        "output_reasoning_tokens": 9,
    }
    (message,) = _json(span, "gen_ai.output.messages")
    assert message["finish_reason"] == "stop"
    assert [p["type"] for p in message["parts"]] == ["text"]
    assert message["parts"][0]["content"].startswith("```bash\n#!/usr/bin/env bash")
    pytest.importorskip("genai_prices")  # gpt-5.4 is not in the fallback table
    # gpt-5.4 (genai-prices snapshot): $2.50 input, $15 output per 1M tokens below the 272k tier.
    assert attrs["evaltrace.cost_usd"] == pytest.approx((44 * 2.5 + 288 * 15) / 1e6)
    assert attrs["evaltrace.cost_thinking_usd"] == pytest.approx(9 * 15 / 1e6)


@pytest.mark.openai_api("responses")
async def test_responses_instructions_and_tool_call(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_responses_create_captures_content[content_mode0].yaml", is_async)
    await _replay("test_responses_create_captures_tool_call_content[content_mode0].yaml", is_async)
    content, tool = exporter.get_finished_spans()
    assert (
        content.attributes["gen_ai.system_instructions"] == '[{"type":"text","content":"You are a helpful assistant."}]'
    )
    assert content.attributes["gen_ai.output.type"] == "text"
    assert _json(content, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Say this is a test"}]}
    ]
    assert _json(tool, "gen_ai.tool.definitions") == [WEATHER_TOOL]
    assert _json(tool, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_90uO5LcGP5vTBTCrjyhYtWsA",
                    "name": "get_current_weather",
                    "arguments": {"location": "Seattle, WA"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]


async def test_streamed_parallel_tool_calls_are_accumulated(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_multiple_tools_streaming_with_content.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    (message,) = _json(span, "gen_ai.output.messages")
    assert message["finish_reason"] == "tool_call"
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    assert [c["arguments"] for c in calls] == [{"location": "Seattle, WA"}, {"location": "San Francisco, CA"}]
    assert all(c["id"].startswith("call_") and c["name"] == "get_current_weather" for c in calls)


async def test_streamed_choices_each_get_a_message(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_multiple_choices_streaming.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    messages = _json(span, "gen_ai.output.messages")
    assert len(messages) == 2 == span.attributes["gen_ai.request.choice.count"]
    assert all(m["parts"][0]["type"] == "text" and m["parts"][0]["content"] for m in messages)


async def test_api_error_is_recorded_and_reraised(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await _replay("test_chat_completion_404.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "model_not_found"
    (event,) = span.events
    assert event.attributes["exception.message"] == str(caught.value)


async def test_with_raw_response_produces_one_span_and_the_same_parsed_object(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    interactions = load(cassette("test_chat_completion_with_raw_response.yaml"))
    api, _ = client(interactions, is_async)
    raw = api.chat.completions.with_raw_response.create(**interactions[0].request)
    if is_async:
        raw = await raw
    completion = raw.parse()
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    assert raw.parse() is completion
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.id"] == completion.id
    assert span.attributes["gen_ai.usage.output_tokens"] == completion.usage.completion_tokens
    assert span.attributes["gen_ai.usage.input_tokens"] == completion.usage.prompt_tokens


async def test_with_raw_response_streaming_yields_the_traced_stream(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    interactions = load(cassette("test_chat_completion_with_raw_response_streaming.yaml"))
    api, _ = client(interactions, is_async)
    raw = api.chat.completions.with_raw_response.create(**interactions[0].request)
    if is_async:
        raw = await raw
    stream = raw.parse()
    assert isinstance(stream, openai.AsyncStream if is_async else openai.Stream)
    assert exporter.get_finished_spans() == ()
    chunks = await drain(stream, is_async)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == len(chunks)
    assert span.attributes["evaltrace.stream.completed"] is True
