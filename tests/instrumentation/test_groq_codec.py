"""The Groq codec on what the real ``groq`` client returns for recorded traffic (no span machinery).

Responses are replayed from tests/fixtures/groq-cassettes to ``Groq(base_url=...)``; the codec's outcome and
stream accumulator are checked on the SDK's own objects.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

groq = pytest.importorskip("groq")

from groq_replay import (  # noqa: E402
    NATIVE_OUTPUT,
    NOT_FOUND,
    THINKING_RAW_PARSED,
    THINKING_STREAM,
    TOOL_USE_FAILED,
    TOOL_USE_FAILED_STREAM,
    WEB_SEARCH,
    WEB_SEARCH_STREAM,
    call_kwargs,
    groq_client,
    interactions,
    server,
)

from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace._internal.openai import build  # noqa: E402
from evaltrace._internal.openai.registry import EndpointKind  # noqa: E402
from evaltrace.instrumentation.groq import codec, request, response, stream  # noqa: E402


def _completions(name: str) -> list[Any]:
    """Each recorded call's result (the exception for a failed one)."""
    out: list[Any] = []
    with server(name) as srv, groq_client(srv.url) as client:
        for item in interactions(name):
            try:
                out.append(client.chat.completions.create(**call_kwargs(item)))
            except groq.APIError as error:
                out.append(error)
    return out


def _streams(name: str) -> list[tuple[stream.GroqStreamAccumulator, BaseException | None]]:
    out = []
    with server(name) as srv, groq_client(srv.url) as client:
        for item in interactions(name):
            acc = stream.GroqStreamAccumulator()
            error = None
            try:
                for chunk in client.chat.completions.create(**call_kwargs(item)):
                    acc.add(chunk)
            except groq.APIError as exc:
                error = exc
            out.append((acc, error))
    return out


def _attrs(outcome: Any, model: str) -> dict[str, Any]:
    return build.outcome_attributes_of(outcome, None, True, 1_000_000, model, "groq")


def _parts(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    (message,) = json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
    return list(message["parts"])


def test_raw_think_tags_and_parsed_reasoning_both_become_reasoning_parts() -> None:
    raw, parsed = _completions(THINKING_RAW_PARSED)
    raw_parts = _parts(_attrs(response.completion_outcome(raw), "deepseek-r1-distill-llama-70b"))
    parsed_parts = _parts(_attrs(response.completion_outcome(parsed), "deepseek-r1-distill-llama-70b"))
    for parts in (raw_parts, parsed_parts):
        assert [p["type"] for p in parts] == ["reasoning", "text"]
        assert "<think>" not in parts[1]["content"]
    assert raw_parts[0]["content"].startswith("Okay, so I want to make Uruguayan alfajores.")
    assert parsed.choices[0].message.reasoning.startswith(parsed_parts[0]["content"][:40])


def test_streamed_reasoning_field_and_x_groq_usage() -> None:
    (raw, _), (parsed, _) = _streams(THINKING_STREAM)
    for acc in (raw, parsed):
        assert acc.end_reason() == sc.STREAM_END_EXHAUSTED
        assert [p["type"] for p in _parts(_attrs(acc.outcome(), "m"))] == ["reasoning", "text"]
    attrs = _attrs(parsed.outcome(), "deepseek-r1-distill-llama-70b")
    # The chunks' own ``usage`` is empty: the counts come from ``x_groq.usage`` on the last chunk.
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (573, 1509)
    assert attrs[sc.EVALTRACE_COST_USD] > 0
    assert parsed.summary()[1:] == (573, 1509)


def test_reasoning_tokens_cached_tokens_and_tool_calls() -> None:
    failed, call, answer = _completions(TOOL_USE_FAILED)
    assert isinstance(failed, groq.BadRequestError)
    assert codec.error_type(failed) == "tool_use_failed"
    attrs = _attrs(response.completion_outcome(call), "openai/gpt-oss-120b")
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    parts = _parts(attrs)
    assert [p["type"] for p in parts] == ["reasoning", "tool_call"]
    assert parts[1]["name"] == "get_something_by_name" and parts[1]["arguments"] == {"name": "test"}
    assert attrs[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 22
    assert attrs[sc.EVALTRACE_COST_THINKING_USD] > 0
    attrs = _attrs(response.completion_outcome(answer), "openai/gpt-oss-120b")
    assert attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 256


def test_error_inside_a_stream_keeps_what_arrived() -> None:
    (first, error), (second, none), _ = _streams(TOOL_USE_FAILED_STREAM)
    assert isinstance(error, groq.APIError) and none is None
    assert codec.error_type(error) == "tool_use_failed"  # the code of the error event's body
    assert first.end_reason() == sc.STREAM_END_TRUNCATED
    assert _parts(_attrs(first.outcome(), "m"))[0]["type"] == "reasoning"
    assert second.end_reason() == sc.STREAM_END_EXHAUSTED
    attrs = _attrs(second.outcome(), "openai/gpt-oss-120b")
    assert attrs[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 23
    assert [p["type"] for p in _parts(attrs)] == ["reasoning", "tool_call"]


def test_not_found_error_type_is_the_api_code() -> None:
    (error,) = _completions(NOT_FOUND)
    assert isinstance(error, groq.NotFoundError)
    assert codec.error_type(error) == "model_not_found"


def test_built_in_tools_groq_ran_are_server_tool_call_parts() -> None:
    (result,) = _completions(WEB_SEARCH)
    parts = _parts(_attrs(response.completion_outcome(result), "groq/compound"))
    searches = [p for p in parts if p["type"] == "server_tool_call"]
    assert searches and searches[0]["name"] == "search"
    assert searches[0]["server_tool_call"]["arguments"] == {"query": "What is the weather in San Francisco today?"}
    ((acc, _),) = _streams(WEB_SEARCH_STREAM)
    assert any(p["type"] == "server_tool_call" for p in _parts(_attrs(acc.outcome(), "groq/compound")))


def test_request_attributes_drop_sentinels_and_read_reasoning_format() -> None:
    from groq import NOT_GIVEN

    kwargs = {
        "model": "qwen/qwen3-32b",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": NOT_GIVEN,
        "max_completion_tokens": 99,
        "reasoning_format": "parsed",
        "reasoning_effort": "default",
    }
    attrs = request.request_attributes(kwargs, True, 10_000)
    assert sc.GEN_AI_REQUEST_TEMPERATURE not in attrs
    assert attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 99
    assert attrs[sc.GROQ_REQUEST_REASONING_FORMAT] == "parsed"
    assert attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] == "default"
    assert json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    ]


def test_structured_output_request_and_answer() -> None:
    item = interactions(NATIVE_OUTPUT)[0]
    attrs = request.request_attributes(call_kwargs(item), True, 100_000)
    assert attrs[sc.GEN_AI_OUTPUT_TYPE] == "json"
    (result,) = _completions(NATIVE_OUTPUT)
    parts = _parts(_attrs(response.completion_outcome(result), "openai/gpt-oss-120b"))
    assert parts[-1]["type"] == "text" and json.loads(parts[-1]["content"]) == {
        "city": "Mexico City",
        "country": "Mexico",
    }


def test_hardware_cache_counts_are_kept_apart_from_billed_cache_reads() -> None:
    """No recording has ``x_groq.usage``: the recorded completion with the SDK's ``XGroqUsage`` fields added."""
    from groq.types.chat import ChatCompletion

    body = interactions(NATIVE_OUTPUT)[0].response_json()
    body["x_groq"] = {"id": "req_1", "usage": {"dram_cached_tokens": 64, "sram_cached_tokens": 32}}
    attrs = _attrs(response.completion_outcome(ChatCompletion.model_validate(body)), "openai/gpt-oss-120b")
    assert attrs[sc.GROQ_USAGE_DRAM_CACHED_TOKENS] == 64 and attrs[sc.GROQ_USAGE_SRAM_CACHED_TOKENS] == 32
    assert sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS not in attrs  # not what Groq bills as cached


def test_a_request_with_groq_fields_converts_its_messages_once_and_keeps_the_rest() -> None:
    """Messages with ``reasoning`` are converted by the Groq codec only; the OpenAI build still reads the rest."""
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.", "reasoning": "A greeting."},
        {"role": "user", "content": "Weather?"},
    ]
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
    params = {"model": "m", "messages": messages, "tools": tools, "temperature": 0.5}
    plain = build.request_attributes(EndpointKind.CHAT, params, True, 10_000)
    attrs = request.request_attributes(params, True, 10_000)
    assert set(attrs) == set(plain)
    given = json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES])
    assert given[1]["parts"][0] == {"type": "reasoning", "content": "A greeting."}
    assert attrs[sc.INPUT_VALUE] == attrs[sc.GEN_AI_INPUT_MESSAGES]
    assert {k: v for k, v in attrs.items() if k not in (sc.GEN_AI_INPUT_MESSAGES, sc.INPUT_VALUE)} == {
        k: v for k, v in plain.items() if k not in (sc.GEN_AI_INPUT_MESSAGES, sc.INPUT_VALUE)
    }
