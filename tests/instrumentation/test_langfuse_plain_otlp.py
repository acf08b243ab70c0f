"""Langfuse over plain OTLP shows the whole exchange of every recorded request (issue 24).

Spans can reach Langfuse without our overlay (a plain OTLP exporter, ``opentelemetry-instrument``, a collector).
Langfuse then picks a span's input and output with its own precedence, in which ``input.value`` /
``output.value`` come before the ``gen_ai.*`` messages. ``langfuse_shows`` models that precedence; each recorded
request (tests/fixtures/openai_tool_turns, tests/fixtures/anthropic) goes through the real client and the test
checks that what Langfuse would show holds every message, system instruction and tool call the span holds.
Before, a tool-call-only answer showed empty, a JSON answer a bare value, and a conversation one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai_replay import client, drain, load, method_for, resource_for, skip_unless_accepts
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.exporters.langfuse_view import for_langfuse
from evaltrace.instrumentation.openai import OpenAIInstrumentor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai_tool_turns"
CASSETTES = sorted(FIXTURES.glob("*.yaml"))


def langfuse_shows(attributes: dict[str, Any]) -> tuple[Any, Any]:
    """The (input, output) Langfuse shows for a span with these attributes and no events, parsed as its UI does.

    Langfuse's ``extractInputAndOutput`` (langfuse/langfuse packages/shared/src/server/otel/OtelIngestionProcessor.ts,
    summarised in docs/conventions.md 4.2) tries sources in order and takes the first where input *or* output is
    set, both from that source: ``langfuse.observation.input/output``; (framework scopes and span events, which our
    spans do not use); ``traceloop.entity.input/output``; ``input.value`` / ``output.value``; ``input`` /
    ``output``; flattened ``gen_ai.prompt.*`` / ``llm.input_messages.*``; then ``gen_ai.input.messages`` /
    ``gen_ai.output.messages``. The mime type is not read; a JSON string is shown as the value it parses to.
    """
    pairs = [
        ("langfuse.observation.input", "langfuse.observation.output"),
        ("traceloop.entity.input", "traceloop.entity.output"),
        ("input.value", "output.value"),
        ("input", "output"),
        ("gen_ai.input.messages", "gen_ai.output.messages"),
    ]
    for input_key, output_key in pairs:
        shown = attributes.get(input_key), attributes.get(output_key)
        if any(shown):
            shown_input = _parsed(shown[0])
            if input_key == "gen_ai.input.messages":
                shown_input = _with_system(shown_input, attributes.get("gen_ai.system_instructions"))
            return shown_input, _parsed(shown[1])
    return None, None


def _with_system(messages: Any, instructions: Any) -> Any:
    """Langfuse's ``prependSystemInstructions`` for text parts (OtelIngestionProcessor.systemInstructions.test.ts).

    The text parts of ``gen_ai.system_instructions`` joined by newlines, as a ``{"role": "system", "content"}``
    message before the input messages, unless they start with a system message already.
    """
    parts = _parsed(instructions) if instructions else []
    texts = [p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if not texts or not isinstance(messages, list) or (messages and messages[0].get("role") == "system"):
        return messages
    return [{"role": "system", "content": "\n".join(texts)}, *messages]


def _parsed(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _held(attributes: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """Everything the span holds: system instructions (as a system message) and input messages; output messages."""
    system = json.loads(attributes.get("gen_ai.system_instructions", "[]"))
    inputs = ([{"role": "system", "parts": system}] if system else []) + json.loads(attributes["gen_ai.input.messages"])
    return inputs, json.loads(attributes.get("gen_ai.output.messages", "[]"))


def _covers(shown: Any, messages: list[Any]) -> bool:
    """Whether ``shown`` holds ``messages``: all of them as JSON, or the text of the one message of one text part."""
    if isinstance(shown, str):
        return len(messages) == 1 and messages[0]["parts"] == [{"type": "text", "content": shown}]
    return isinstance(shown, list) and [_as_parts(m) for m in shown] == messages


def _as_parts(message: Any) -> Any:
    """A ``{"role", "content": text}`` message as the ``{"role", "parts"}`` message it shows."""
    if isinstance(message, dict) and isinstance(message.get("content"), str) and "parts" not in message:
        return {"role": message["role"], "parts": [{"type": "text", "content": message["content"]}]}
    return message


def _assert_whole_exchange(span: ReadableSpan) -> None:
    attributes = dict(span.attributes or {})
    inputs, outputs = _held(attributes)
    shown_input, shown_output = langfuse_shows(attributes)
    assert _covers(shown_input, inputs), (span.name, shown_input, inputs)
    if outputs:
        assert _covers(shown_output, outputs), (span.name, shown_output, outputs)
    # Our own Langfuse route still sends the messages alone (Langfuse renders them as a chat).
    own = dict(for_langfuse(span).attributes or {})
    assert "input.value" not in own and "output.value" not in own
    own_input, own_output = langfuse_shows(own)
    assert _covers(own_input, inputs) and own_output == (outputs or None)


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Any:
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.mark.parametrize("path", CASSETTES, ids=[p.stem for p in CASSETTES])
async def test_langfuse_shows_every_message_of_recorded_openai_requests(
    path: Path, is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    interactions = load(path)
    for item in interactions:  # Responses cassettes need client.responses; newer request fields, a client that has them
        skip_unless_accepts(f"{resource_for(item.path)}.create", *item.request)
    api, _ = client(interactions, is_async)
    for item in interactions:
        result = method_for(api, item.path)(**item.request)
        if is_async:
            result = await result
        if item.request.get("stream"):
            await drain(result, is_async)
    spans = exporter.get_finished_spans()
    assert len(spans) == len(interactions)
    for span in spans:
        _assert_whole_exchange(span)


def test_the_recorded_tool_turns_are_the_cases_of_the_issue(
    instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """The tool-call answer, the turn ending in tool results and the JSON answer each show in full."""
    api, _ = client(load(FIXTURES / "test_chat_completion_tool_calls_with_content.yaml"), is_async=False)
    for item in load(FIXTURES / "test_chat_completion_tool_calls_with_content.yaml"):
        api.chat.completions.create(**item.request)
    asked, answered = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    shown_input, shown_output = langfuse_shows(dict(asked.attributes or {}))
    assert [p["name"] for p in shown_output[0]["parts"]] == ["get_current_weather", "get_current_weather"]
    assert [m["role"] for m in shown_input] == ["system", "user"]
    shown_input, shown_output = langfuse_shows(dict(answered.attributes or {}))
    assert [m["role"] for m in shown_input] == ["system", "user", "assistant", "tool", "tool"]
    assert isinstance(shown_output, str) and "Seattle" in shown_output  # a text answer stays plain text


def test_langfuse_shows_every_message_of_anthropic_replies(
    provider: TracerProvider, capture: None, exporter: InMemorySpanExporter
) -> None:
    """Claude: a text and a tool call in one reply, the tool result sent back, system prompts."""
    pytest.importorskip("anthropic")
    from anthropic_replay import MODEL, Reply
    from anthropic_replay import client as anthropic_client

    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    try:
        api, _ = anthropic_client([Reply("tool_use.json"), Reply("tool_final.json"), Reply("text.json")])
        tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
        question = {"role": "user", "content": "Weather in SF?"}
        first = api.messages.create(model=MODEL, max_tokens=256, system="Be brief.", tools=tools, messages=[question])
        tool_use = next(block for block in first.content if block.type == "tool_use")
        history = [
            question,
            {"role": "assistant", "content": [block.model_dump() for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "15 C"}]},
        ]
        api.messages.create(model=MODEL, max_tokens=256, system="Be brief.", tools=tools, messages=history)
        api.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello, Claude"}])
    finally:
        instrumentor.uninstrument()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert len(spans) == 3
    for span in spans:
        _assert_whole_exchange(span)
    shown_input, shown_output = langfuse_shows(dict(spans[0].attributes or {}))
    assert {p["type"] for p in shown_output[0]["parts"]} == {"text", "tool_call"}  # the call is not hidden
    assert shown_input[0] == {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}
    assert langfuse_shows(dict(spans[2].attributes or {}))[0] == "Hello, Claude"  # one user text: plain


def test_langfuse_shows_every_message_of_manual_llm_calls(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``evaltrace.llm_call`` spans carry the same pair (Phoenix showed nothing for them); ``@llm`` keeps its own."""
    import evaltrace

    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rainy"},
    ]  # fmt: skip
    with evaltrace.llm_call(model="m", provider="custom", system="Be brief.") as call:
        call.record(messages=history, tool_calls=[{"id": "c2", "name": "weather", "arguments": {"city": "Rome"}}])
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(messages=[{"role": "user", "content": "Hi"}], output="Hello!")

    @evaltrace.llm
    def ask(question: str) -> str:
        evaltrace.current_llm_call().record(messages=[{"role": "user", "content": question}], output="Paris.")
        return "Paris."

    ask("Capital of France?")
    tools, plain, decorated = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    _assert_whole_exchange(tools)
    assert {"input.value", "output.value"} <= set(tools.attributes or {})  # what Phoenix's list shows
    shown_input, shown_output = langfuse_shows(dict(tools.attributes or {}))
    assert [m["role"] for m in shown_input] == ["system", "user", "assistant", "tool"]
    assert shown_output[0]["parts"][0]["name"] == "weather"
    assert langfuse_shows(dict(plain.attributes or {})) == ("Hi", "Hello!")
    # An @llm function's span shows its arguments and return value, as every decorated function's does.
    assert langfuse_shows(dict(decorated.attributes or {})) == ({"question": "Capital of France?"}, "Paris.")
