"""The legacy ``function_call`` next to ``tool_calls`` (llama.cpp and other OpenAI-compatible servers).

Such servers send each call twice in one message; it is one call. ``function_call`` alone (the pre-tools API)
still is a call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai_replay import client, drain, json_interaction, sse_interaction
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

mapping = pytest.importorskip("evaltrace.mapping")

pytestmark = pytest.mark.usefixtures("instrumented")

CHAT = "/v1/chat/completions"
ARGUMENTS = '{ "city": "Paris" }'
TOOL_CALL = {
    "id": "call__0_get_weather_cmpl-x",
    "type": "function",
    "function": {"name": "get_weather", "arguments": ARGUMENTS},
}
# What llama.cpp's server returns for a forced tool call: the same call as tool_calls and as function_call.
LLAMA_CPP_FUNCTION_CALL = {"name": "get_weather:", "arguments": ARGUMENTS}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "smollm2",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    }


def _output_calls(span: Any) -> list[dict[str, Any]]:
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    return [part for part in message["parts"] if part["type"] == "tool_call"]


async def _chat(api: Any, is_async: bool, **kwargs: Any) -> Any:
    result = api.chat.completions.create(model="smollm2", **kwargs)
    return await result if is_async else result


async def test_function_call_repeating_tool_calls_is_one_call(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    body = _completion(
        {"content": None, "tool_calls": [TOOL_CALL], "function_call": LLAMA_CPP_FUNCTION_CALL}, "tool_calls"
    )
    api, _ = client([json_interaction(CHAT, body)], is_async)
    response = await _chat(api, is_async, messages=ASK)
    assert response.choices[0].message.function_call is not None  # the client hands both to the application

    (span,) = exporter.get_finished_spans()
    assert _output_calls(span) == [
        {"type": "tool_call", "id": "call__0_get_weather_cmpl-x", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    trace = mapping.trace_from_spans(exporter.get_finished_spans())
    assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [
        ("call__0_get_weather_cmpl-x", "get_weather", {"city": "Paris"})
    ]


async def test_history_message_with_both_is_one_call(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL], "function_call": LLAMA_CPP_FUNCTION_CALL},
        {"role": "tool", "tool_call_id": TOOL_CALL["id"], "content": "18 C"},
    ]
    api, _ = client([json_interaction(CHAT, _completion({"content": "18 C in Paris."}, "stop"))], is_async)
    await _chat(api, is_async, messages=history)

    (span,) = exporter.get_finished_spans()
    assistant = json.loads(span.attributes["gen_ai.input.messages"])[1]
    assert assistant["parts"] == [
        {"type": "tool_call", "id": "call__0_get_weather_cmpl-x", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]


async def test_streamed_function_call_repeating_tool_calls_is_one_call(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "smollm2",
            "choices": [choice],
        }

    chunks = [
        chunk(
            {"role": "assistant", "tool_calls": [{"index": 0, **TOOL_CALL}], "function_call": LLAMA_CPP_FUNCTION_CALL}
        ),
        chunk({}, "tool_calls"),
    ]
    api, _ = client([sse_interaction(CHAT, chunks)], is_async)
    await drain(await _chat(api, is_async, messages=ASK, stream=True), is_async)

    (span,) = exporter.get_finished_spans()
    assert _output_calls(span) == [
        {"type": "tool_call", "id": "call__0_get_weather_cmpl-x", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_legacy_function_call_alone_is_a_call(
    stream: bool, is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    call = {"name": "get_weather", "arguments": ARGUMENTS}
    if stream:
        choices = [
            {"index": 0, "delta": {"role": "assistant", "function_call": {"name": "get_weather", "arguments": ""}}},
            {"index": 0, "delta": {"function_call": {"arguments": ARGUMENTS}}, "finish_reason": "function_call"},
        ]
        chunks = [
            {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [c]} for c in choices
        ]
        api, _ = client([sse_interaction(CHAT, chunks)], is_async)
        await drain(await _chat(api, is_async, messages=ASK, stream=True), is_async)
    else:
        api, _ = client([json_interaction(CHAT, _completion({"function_call": call}, "function_call"))], is_async)
        await _chat(api, is_async, messages=ASK)

    (span,) = exporter.get_finished_spans()
    assert _output_calls(span) == [
        {"type": "tool_call", "id": None, "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
