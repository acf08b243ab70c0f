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
    # The model's own quotes make the text JSON, which Langfuse would show as the bare string it parses to: the
    # list value is the assistant message then (it was the text, marked text/plain, before issue 24).
    assert span.attributes["output.value"] == span.attributes["gen_ai.output.messages"]
    assert span.attributes["output.mime_type"] == "application/json"
    assert json.loads(span.attributes["output.value"])[0]["parts"][0]["content"] == '"This is a test."'
    assert trace_from_spans([span]).output.final_answer == '"This is a test."'


async def test_tool_turns_show_the_whole_exchange(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """Issue 24: a tool-calls-only answer shows its tool calls, a turn ending in tool results its whole history.

    Before, the first turn had no output.value (Langfuse showed an empty output) and both turns' input.value was
    the user's question alone (a conversation cut to one line).
    """
    await _replay("test_chat_completion_tool_calls_with_content.yaml", is_async)
    asks, answers = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    for span in (asks, answers):
        assert span.attributes["input.value"] == span.attributes["gen_ai.input.messages"]
        assert span.attributes["input.mime_type"] == "application/json"
    calls = json.loads(asks.attributes["output.value"])[0]["parts"]
    assert asks.attributes["output.mime_type"] == "application/json"
    assert [(c["type"], c["arguments"]) for c in calls] == [
        ("tool_call", {"location": "Seattle, WA"}),
        ("tool_call", {"location": "San Francisco, CA"}),
    ]
    history = json.loads(answers.attributes["input.value"])
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "tool"]
    assert "Seattle" in answers.attributes["output.value"]  # a plain text answer stays plain text
    assert "output.mime_type" not in answers.attributes


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
    # The system prompt is part of the input: first, as a system message (as Langfuse shows system instructions).
    assert json.loads(span.attributes["input.value"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Hello, Claude"}]},
    ]
    assert span.attributes["input.mime_type"] == "application/json"
    assert span.attributes["output.value"] == "Hi! My name is Claude."
    assert trace_from_spans([span]).input == {"input": "Hello, Claude"}  # the question evaluators read


async def test_a_json_looking_answer_is_parsed_once_per_call(
    is_async: bool, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the application's thread: deciding that the answer reads as JSON parses it; nothing parses it again.
    answer, parsed, loads = '"This is a test."', [], json.loads

    def counting_loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        if text == answer:
            parsed.append(text)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    await _replay("test_chat_completion_streaming.yaml", is_async)
    monkeypatch.undo()
    (span,) = exporter.get_finished_spans()
    assert span.attributes["output.value"] == span.attributes["gen_ai.output.messages"]
    assert span.attributes["output.mime_type"] == "application/json"
    assert len(parsed) == 1
