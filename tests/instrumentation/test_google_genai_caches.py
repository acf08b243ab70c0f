"""``caches.create`` through the real google-genai client, replaying OpenInference's recordings (sync and async).

tests/fixtures/google-genai-cassettes/openinference/test_cache_create_instrumentation: one ``POST cachedContents``
each, a story with a system instruction cached for ``gemini-2.5-flash``, answered with the cache's name, model
and ``usageMetadata.totalTokenCount``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, GENAI, replay
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import settings
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor

CACHES = GENAI / "openinference" / "test_cache_create_instrumentation"


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GoogleGenAIInstrumentor]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]

INSTRUCTION = (
    "You are an expert Agent, and your job is to answer the user query based on the Context you have access to."
)


async def _create(is_async: bool, story: str) -> types.CachedContent:
    path = CACHES / ("test_create_cache_async.yaml" if is_async else "test_create_cache.yaml")
    config = types.CreateCachedContentConfig(
        display_name="test story cache",
        system_instruction=INSTRUCTION,
        contents=[types.Content(role="user", parts=[types.Part(text=story)])],
        ttl="300s",
    )
    with replay(path) as (client, server):
        if is_async:
            cached = await client.aio.caches.create(model="gemini-2.5-flash", config=config)
            await client.aio.aclose()
        else:
            cached = client.caches.create(model="gemini-2.5-flash", config=config)
        assert server.received[0].path.endswith("/cachedContents")  # the recorded call, really sent
    return cached


async def test_caches_create_is_a_task_span_with_the_tokens_it_caches(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    cached = await _create(is_async, "In the early days of software development...")
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == "create_cache gemini-2.5-flash"
    assert a["gen_ai.operation.name"] == "create_cache"
    assert a["evaltrace.span.kind"] == "task"  # it answers nothing: not an LLM step for evaluators
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.request.model"] == "gemini-2.5-flash"
    assert a["gen_ai.response.id"] == cached.name and cached.name.startswith("cachedContents/")
    assert a["gen_ai.response.model"] == "models/gemini-2.5-flash"  # as the API names it
    tokens = cached.usage_metadata.total_token_count
    assert tokens and a["gen_ai.usage.input_tokens"] == tokens
    assert a["gen_ai.usage.cache_creation.input_tokens"] == tokens
    assert "evaltrace.cost_usd" not in a  # a cache is billed by tokens held over its TTL: no per-call price
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": INSTRUCTION}]
    messages = json.loads(a["gen_ai.input.messages"])
    assert messages == [
        {"role": "user", "parts": [{"type": "text", "content": "In the early days of software development..."}]}
    ]


async def test_caches_create_without_content_capture(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        await _create(False, "secret story")
    finally:
        settings.replace(previous)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.usage.input_tokens"] > 0
    assert not any(k in span.attributes for k in ("gen_ai.input.messages", "gen_ai.system_instructions", "input.value"))
