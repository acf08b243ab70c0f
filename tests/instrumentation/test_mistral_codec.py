"""The Mistral codec on what the real ``mistralai`` client returns for recorded traffic (no span machinery).

Responses are replayed from tests/fixtures/mistral-cassettes to ``Mistral(server_url=...)``; the codec's request
attributes, response outcome and stream accumulator are checked on the SDK's own objects.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("mistralai")

from mistral_replay import (
    ASYNC_STREAM,
    IMAGE_TOOL,
    PENALTIES,
    PROMPT_CACHE,
    STREAM,
    THINKING,
    THINKING_STREAM,
    TOOL_STREAM,
    call_kwargs,
    interactions,
    server,
)
from mistralai.client import Mistral

from evaltrace._internal import semconv as sc
from evaltrace._internal.openai import build
from evaltrace.instrumentation.mistral import request, response
from evaltrace.instrumentation.mistral.stream import MistralStreamAccumulator


def _complete(name: str, index: int = 0) -> Any:
    items = interactions(name)
    with server(name) as srv:
        client = Mistral(api_key="x", server_url=srv.url)
        result = None
        for item in items[: index + 1]:
            result = client.chat.complete(**call_kwargs(item))
    return result


def _stream(name: str) -> MistralStreamAccumulator:
    acc = MistralStreamAccumulator()
    with server(name) as srv:
        client = Mistral(api_key="x", server_url=srv.url)
        with client.chat.stream(**call_kwargs(interactions(name)[0])) as events:
            for event in events:
                acc.add(event)
    return acc


def _attrs(outcome: Any, model: str = "mistral-large-latest") -> dict[str, Any]:
    return build.outcome_attributes_of(outcome, None, True, 100_000, model, "mistral_ai")


def test_thinking_chunks_become_a_reasoning_part_before_the_answer() -> None:
    result = _complete(THINKING)
    attrs = _attrs(response.chat_outcome(result), "magistral-medium-latest")
    (message,) = json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
    assert [p["type"] for p in message["parts"]] == ["reasoning", "text"]
    assert message["parts"][0]["content"].startswith("**Analogizing crossing a river**")
    assert message["parts"][1]["content"].startswith("Crossing a river is quite different")
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "9abe8b736bff46af8e979b52334a57cd"
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (664, 747)
    assert attrs[sc.EVALTRACE_COST_USD] > 0  # magistral-medium is priced through genai-prices


def test_streamed_thinking_is_joined_into_one_reasoning_part() -> None:
    acc = _stream(THINKING_STREAM)
    assert acc.end_reason() == sc.STREAM_END_EXHAUSTED
    attrs = _attrs(acc.outcome(), "magistral-medium-latest")
    (message,) = json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
    assert [p["type"] for p in message["parts"]] == ["reasoning", "text"]
    assert message["parts"][0]["content"].startswith("Okay, the user is asking how to cross the street.")
    assert message["parts"][1]["content"].endswith("crossing.")
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (10, 232)


def test_prompt_cache_hit_is_read_from_the_usage_details_the_sdk_does_not_model() -> None:
    attrs = _attrs(response.chat_outcome(_complete(PROMPT_CACHE, index=1)))
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 268
    assert attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 224
    details = json.loads(attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS])
    assert details["input_cached_tokens"] > 0 and details["input"] > 0


def test_streamed_tool_call_keeps_its_id_arguments_and_verbatim_finish_reason() -> None:
    acc = _stream(TOOL_STREAM)
    attrs = _attrs(acc.outcome(), "mistral-small-latest")
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    (message,) = json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
    assert message["finish_reason"] == "tool_call"
    assert message["parts"] == [
        {"type": "tool_call", "id": "EscTeQY62", "name": "get_weather", "arguments": {"city": "San Francisco"}}
    ]


def test_async_stream_accumulates_like_the_sync_one() -> None:
    async def run() -> MistralStreamAccumulator:
        acc = MistralStreamAccumulator()
        with server(ASYNC_STREAM) as srv:
            client = Mistral(api_key="x", server_url=srv.url)
            events = await client.chat.stream_async(**call_kwargs(interactions(ASYNC_STREAM)[0]))
            async with events:
                async for event in events:
                    acc.add(event)
        return acc

    acc = asyncio.run(run())
    outcome = acc.outcome()
    assert acc.end_reason() == sc.STREAM_END_EXHAUSTED
    assert outcome.output_messages == [
        {"role": "assistant", "parts": [{"type": "text", "content": "France won"}], "finish_reason": "stop"}
    ]
    assert outcome.response_model == "mistral-small-latest"


def test_a_stream_cut_before_its_finish_reason_is_truncated() -> None:
    acc = MistralStreamAccumulator()
    with server(STREAM) as srv:
        client = Mistral(api_key="x", server_url=srv.url)
        with client.chat.stream(**call_kwargs(interactions(STREAM)[0])) as events:
            acc.add(next(iter(events)))
    assert acc.end_reason() == sc.STREAM_END_TRUNCATED


def test_request_parameters_use_the_genai_names() -> None:
    params = {
        "model": "mistral-large-latest",
        "messages": [{"role": "user", "content": "hi"}],
        "random_seed": 7,
        "max_tokens": 64,
        "stop": ["END"],
        "top_k": 40,
        "n": 2,
        "response_format": {"type": "json_object"},
        "temperature": None,
    }
    attrs = request.request_attributes(sc.OP_CHAT, params, False, 10_000)
    assert attrs[sc.GEN_AI_REQUEST_SEED] == 7
    assert attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] == ["END"]
    assert attrs[sc.GEN_AI_REQUEST_TOP_K] == 40.0
    assert attrs[sc.GEN_AI_REQUEST_CHOICE_COUNT] == 2
    assert attrs[sc.GEN_AI_OUTPUT_TYPE] == "json"
    assert sc.GEN_AI_REQUEST_TEMPERATURE not in attrs
    assert sc.GEN_AI_INPUT_MESSAGES not in attrs  # content off


def test_recorded_penalties_and_history_with_an_image_tool_result() -> None:
    attrs = request.request_attributes(sc.OP_CHAT, call_kwargs(interactions(PENALTIES)[0]), True, 100_000)
    assert (attrs[sc.GEN_AI_REQUEST_FREQUENCY_PENALTY], attrs[sc.GEN_AI_REQUEST_PRESENCE_PENALTY]) == (0.25, 0.5)
    second = call_kwargs(interactions(IMAGE_TOOL)[1])
    attrs = request.request_attributes(sc.OP_CHAT, second, True, 100_000)
    messages = json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[1]["parts"][0] == {"type": "tool_call", "id": "FI5qQGzDE", "name": "get_image", "arguments": {}}
    assert messages[2]["parts"][0]["type"] == "tool_call_response"
    assert messages[2]["parts"][0]["id"] == "FI5qQGzDE"
    image = messages[4]["parts"][-1]
    assert image["type"] == "uri" and image["modality"] == "image" and image["mime_type"] == "image/jpeg"
    assert "<omitted" in image["uri"]  # the base64 payload never reaches the span
    assert json.loads(attrs[sc.GEN_AI_TOOL_DEFINITIONS])[0]["name"] == "get_image"


def test_sdk_message_objects_and_chunks_convert_like_dicts() -> None:
    from mistralai.client import models

    messages = [
        models.SystemMessage(content="Be brief."),
        models.UserMessage(
            content=[
                models.TextChunk(text="Read"),
                models.DocumentURLChunk(document_url="https://example.com/a.pdf"),
                models.ImageURLChunk(image_url="https://example.com/a.png"),
            ]
        ),
        models.AssistantMessage(
            content=[models.ThinkChunk(thinking=[models.TextChunk(text="hmm")]), models.TextChunk(text="ok")],
            tool_calls=[models.ToolCall(function=models.FunctionCall(name="f", arguments={"a": 1}), id="c1")],
        ),
        models.ToolMessage(content="42", tool_call_id="c1"),
        models.AssistantMessage(content="plain"),  # tool_calls left UNSET (falsy, iterable as a model)
        models.ToolMessage(content="?"),  # tool_call_id UNSET
    ]
    converted = request.input_messages(messages)
    assert converted[0] == {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}
    assert converted[1]["parts"][1] == {"type": "uri", "modality": "document", "uri": "https://example.com/a.pdf"}
    assert converted[1]["parts"][2] == {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"}
    assert converted[2]["parts"] == [
        {"type": "reasoning", "content": "hmm"},
        {"type": "text", "content": "ok"},
        {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
    ]
    assert converted[3] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "42"}]}
    assert converted[4] == {"role": "assistant", "parts": [{"type": "text", "content": "plain"}]}
    assert converted[5]["parts"] == [{"type": "tool_call_response", "id": None, "response": "?"}]
    json.dumps(converted)  # plain data only: no SDK sentinel left in


def test_error_type_is_the_api_error_type() -> None:
    """No Mistral error is recorded: the body is the API's documented error object."""
    from mistralai.client import errors

    class _Response:
        status_code = 400
        text = '{"object":"error","message":"Invalid model: nope","type":"invalid_model","param":null,"code":"1500"}'
        headers: dict[str, str] = {}

    error = errors.SDKError("bad", _Response(), _Response.text)  # type: ignore[arg-type]
    assert response.error_type(error) == "invalid_model"
    assert response.error_type(ValueError("x")) == "ValueError"
