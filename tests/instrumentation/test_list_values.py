"""LLM spans carry the prompt and the answer as ``input.value`` / ``output.value`` (what trace lists show).

Recorded OpenAI traffic through the real openai client, and a canned Anthropic reply through the real anthropic
client; content capture off records neither, and the capture cap bounds both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai_replay import client, drain, load
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace._internal import settings
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace.mapping import trace_from_spans

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")


async def _replay(name: str, is_async: bool, **overrides: Any) -> None:
    interactions = load(cassette(name))
    api, _ = client(interactions, is_async)
    for item in interactions:
        result = api.chat.completions.create(**{**item.request, **overrides})
        if is_async:
            result = await result
        if item.request.get("stream"):
            await drain(result, is_async)


@pytest.fixture
def capture_settings(instrumented: object) -> Iterator[None]:
    """Lets a test replace the capture settings after ``instrumented`` installed its own; restores them."""
    previous = settings.current
    yield
    settings.replace(previous)


async def test_chat_prompt_and_answer(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_with_content.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert (a["input.value"], a["output.value"]) == ("Say this is a test", "This is a test.")
    # Plain text that cannot parse as JSON needs no mime type (OpenInference's default): one attribute less each.
    assert "input.mime_type" not in a and "output.mime_type" not in a
    trace = trace_from_spans([span])  # an LLM span as root: the Trace reads the same text
    assert trace.input == {"input": "Say this is a test"}
    assert trace.output.final_answer == "This is a test."


async def test_streamed_answer(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_streaming.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["output.value"] == '"This is a test."'  # the model's own quotes
    # Text that could parse as JSON is marked text, so the mapping keeps it as it is.
    assert span.attributes["output.mime_type"] == "text/plain"
    assert trace_from_spans([span]).output.final_answer == '"This is a test."'


async def test_tool_turns_show_the_question(is_async: bool, exporter: InMemorySpanExporter) -> None:
    await _replay("test_chat_completion_tool_calls_with_content.yaml", is_async)
    asks, answers = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    question = "What's the weather in Seattle and San Francisco today?"
    # The first turn only asks for tools: no answer text, so no output.value (not a JSON of tool-call ids).
    assert asks.attributes["input.value"] == question
    assert "output.value" not in asks.attributes
    # The second turn ends with tool results: the list still shows the user's question, then the answer.
    last_input = json.loads(answers.attributes["gen_ai.input.messages"])[-1]
    assert last_input["role"] == "tool"
    assert answers.attributes["input.value"] == question
    assert "Seattle" in answers.attributes["output.value"]


@pytest.mark.usefixtures("capture_settings")
async def test_nothing_without_content_capture(is_async: bool, exporter: InMemorySpanExporter) -> None:
    settings.replace(settings.CaptureSettings(capture_content=False))
    await _replay("test_chat_completion_with_content.yaml", is_async)
    (span,) = exporter.get_finished_spans()
    assert not {"input.value", "output.value", "input.mime_type", "output.mime_type"} & set(span.attributes)


@pytest.mark.usefixtures("capture_settings")
async def test_capped_like_every_captured_value(is_async: bool, exporter: InMemorySpanExporter) -> None:
    settings.replace(settings.CaptureSettings(max_attribute_length=200))
    long_prompt = "Say this is a test. " * 100
    await _replay(
        "test_chat_completion_with_content.yaml", is_async, messages=[{"role": "user", "content": long_prompt}]
    )
    (span,) = exporter.get_finished_spans()
    value = span.attributes["input.value"]
    assert isinstance(value, str) and len(value) <= 200
    # Cut: the truncation marker, labelled JSON so readers (and the mapping) recognise it.
    assert span.attributes["input.mime_type"] == "application/json"
    assert json.loads(value)[TRUNCATED_KEY] is True
    assert span.attributes["output.value"] == "This is a test."


def test_anthropic_prompt_and_answer(provider: TracerProvider, capture: None, exporter: InMemorySpanExporter) -> None:
    pytest.importorskip("anthropic")
    from anthropic_replay import MODEL, Reply
    from anthropic_replay import client as anthropic_client

    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    try:
        api, _ = anthropic_client([Reply("text.json")])
        api.messages.create(
            model=MODEL, max_tokens=64, system="Be brief.", messages=[{"role": "user", "content": "Hello, Claude"}]
        )
    finally:
        instrumentor.uninstrument()
    (span,) = exporter.get_finished_spans()
    assert span.attributes["input.value"] == "Hello, Claude"  # the system prompt is not the user's question
    assert span.attributes["output.value"] == "Hi! My name is Claude."
