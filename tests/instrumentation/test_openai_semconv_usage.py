"""Usage attributes the recordings do not contain, checked against conventions.md's exact names and values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai_langfuse_usage import langfuse_usage
from openai_replay import client, json_interaction
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace import pricing

pytestmark = pytest.mark.usefixtures("instrumented")

_CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}],
    # conventions.md 6.1's example usage, with some prompt tokens written to the cache.
    "usage": {
        "prompt_tokens": 1270,
        "completion_tokens": 155,
        "total_tokens": 1425,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 200},
        "completion_tokens_details": {"reasoning_tokens": 64},
    },
}

_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-4o-2024-08-06",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    # conventions.md 6.3's example usage, with some input tokens written to the cache.
    "usage": {
        "input_tokens": 1270,
        "input_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 200},
        "output_tokens": 155,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 1425,
    },
}


# Each test runs on Chat Completions and on Responses (the latter skipped on clients without it).
_BOTH_APIS = pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", _CHAT),
        pytest.param("/v1/responses", _RESPONSE, marks=pytest.mark.openai_api("responses")),
    ],
    ids=["chat", "responses"],
)


async def _call(path: str, body: dict[str, Any], is_async: bool) -> None:
    api, _ = client([json_interaction(path, body)], is_async)
    if path.endswith("/responses"):
        result = api.responses.create(model="gpt-4o", input="Hello")
    else:
        result = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hello"}])
    if is_async:
        await result


@_BOTH_APIS
async def test_cache_writes_are_reported_as_cache_creation_tokens(
    path: str, body: dict[str, Any], is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """conventions.md 6.1: ``cache_write_tokens`` -> ``gen_ai.usage.cache_creation.input_tokens`` (v1.41 name).

    Langfuse's usage details then follow its own normalisation (4.2): ``input`` excludes cache reads and writes,
    the writes are ``input_cache_creation``.
    """
    await _call(path, body, is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert attrs["gen_ai.usage.input_tokens"] == 1270
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 200
    assert attrs["gen_ai.usage.output_tokens"] == 155
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 64
    assert "gen_ai.usage.cache_write.input_tokens" not in attrs
    assert "langfuse.observation.usage_details" not in attrs  # Langfuse derives it from the counts, as below
    assert langfuse_usage(attrs) == {
        "input": 70,
        "input_cached_tokens": 1000,
        "input_cache_creation": 200,
        "output": 91,
        "output_reasoning_tokens": 64,
    }


@_BOTH_APIS
async def test_cache_writes_are_priced_at_their_own_rate(
    path: str, body: dict[str, Any], is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Cost details are keyed like the usage details, so the cache writes are costed apart from plain input."""
    pricing.set_model_price("gpt-4o", input=2.0, output=8.0, cached_input=0.5, cache_write=2.5)
    try:
        await _call(path, body, is_async)
        (span,) = exporter.get_finished_spans()
        attrs = dict(span.attributes or {})  # read (and so priced) while the override is in force
    finally:
        pricing.clear_model_prices()
    # Per 1M tokens: 70 x 2.0 + 1000 x 0.5 + 200 x 2.5 + 155 x 8.0 (64 of them reasoning) = 2380.
    assert attrs["evaltrace.cost_usd"] == pytest.approx(2380 / 1e6)
    assert attrs["evaltrace.cost_thinking_usd"] == pytest.approx(512 / 1e6)
    details = json.loads(str(attrs["langfuse.observation.cost_details"]))
    assert details == pytest.approx(
        {
            "input": 140 / 1e6,
            "input_cached_tokens": 500 / 1e6,
            "input_cache_creation": 500 / 1e6,
            "output": 728 / 1e6,
            "output_reasoning_tokens": 512 / 1e6,
            "total": 2380 / 1e6,
        }
    )
