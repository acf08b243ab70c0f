"""Groq fields the OpenAI readers do not know, through the real ``groq`` client on 127.0.0.1.

The responses are recorded ones (tests/fixtures/groq-cassettes) where a recording has the field; the requests are
typed with the SDK's own param types, so a field the SDK does not declare would fail the type check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")

from groq.types.chat import (  # noqa: E402
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartParam,
    ChatCompletionMessageParam,
)
from groq_replay import PLAIN, WEB_SEARCH, WEB_SEARCH_STREAM, call_kwargs, groq_client, interactions, served, server  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import ReplayServer  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_groq()
    yield
    evaltrace.uninstrument_groq()


pytestmark = pytest.mark.usefixtures("instrumented")


def _attribute_json(span: ReadableSpan, key: str) -> Any:
    return json.loads(str((span.attributes or {})[key]))


async def _sent(messages: list[ChatCompletionMessageParam], is_async: bool) -> Any:
    """Create a chat completion of ``messages`` (the recorded plain answer replayed); the request body sent."""
    with server(PLAIN) as srv:
        client = groq_client(srv.url, is_async)
        result = client.chat.completions.create(model="llama-3.3-70b-versatile", messages=messages)
        if is_async:
            await result
            await client.close()
        else:
            client.close()
        return srv.received[0].json()


async def test_reasoning_sent_back_in_an_assistant_turn_is_a_reasoning_part(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``reasoning`` is a field of groq's assistant message param (a previous turn's, sent back)."""
    earlier: ChatCompletionAssistantMessageParam = {
        "role": "assistant",
        "content": "Paris.",
        "reasoning": "The capital of France is Paris.",
    }
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Capital of France?"},
        earlier,
        {"role": "user", "content": "And of Italy?"},
    ]
    sent = await _sent(messages, is_async)
    assert sent["messages"][1]["reasoning"] == "The capital of France is Paris."  # the call went out unchanged
    (span,) = exporter.get_finished_spans()
    given = _attribute_json(span, sc.GEN_AI_INPUT_MESSAGES)
    assert given[1] == {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "The capital of France is Paris."},
            {"type": "text", "content": "Paris."},
        ],
    }
    assert [m["parts"] for m in given[::2]] == [
        [{"type": "text", "content": "Capital of France?"}],
        [{"type": "text", "content": "And of Italy?"}],
    ]
    assert _attribute_json(span, sc.INPUT_VALUE) == given


@pytest.mark.parametrize("name", [WEB_SEARCH, WEB_SEARCH_STREAM])
def test_a_built_in_tool_groq_ran_is_its_call_then_its_result(name: str, exporter: InMemorySpanExporter) -> None:
    """``executed_tools``: the search's arguments and its ``output`` (what the model read), whole and streamed.

    The stream sends the tool twice (arguments, then arguments and output): the span has it once, with its result.
    """
    (item,) = interactions(name)
    with server(name) as srv, groq_client(srv.url, False) as client:
        result = client.chat.completions.create(**call_kwargs(item))
        if name == WEB_SEARCH_STREAM:
            tools = [t for chunk in result for c in chunk.choices for t in c.delta.executed_tools or ()]
            assert [t.output is None for t in tools] == [True, False]
            ran = tools[-1]
        else:
            (ran,) = result.choices[0].message.executed_tools or ()
    assert ran.output and ran.output.startswith("Title: Weather in San Francisco")
    (span,) = exporter.get_finished_spans()
    parts = _attribute_json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text", "server_tool_call", "server_tool_call_response"]
    call, response = parts[2:]
    assert call["server_tool_call"] == {
        "type": "search",
        "arguments": {"query": "What is the weather in San Francisco today?"},
    }
    assert response == {
        "type": "server_tool_call_response",
        "id": None,
        "server_tool_call_response": {"type": "search", "output": ran.output},
    }


async def test_a_document_content_part_is_its_data_as_text(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """groq's user ``document`` part (``data`` and ``id``) is read as the Cohere reader reads the same shape."""
    document: ChatCompletionContentPartParam = {
        "type": "document",
        "document": {"id": "menu", "data": {"dish": "ratatouille", "price": 12}},
    }
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": [{"type": "text", "text": "What does it cost?"}, document]},
    ]
    sent = await _sent(messages, is_async)
    assert sent["messages"][0]["content"][1] == document
    (span,) = exporter.get_finished_spans()
    assert _attribute_json(span, sc.GEN_AI_INPUT_MESSAGES) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "What does it cost?"},
                # Marked a document (the RAG evaluators' context), its id kept as Groq's ``documents`` ids are.
                {"type": "text", "content": '{"dish": "ratatouille", "price": 12}', "document": True, "id": "menu"},
            ],
        }
    ]


def _sent_and_span(messages: list[ChatCompletionMessageParam], exporter: InMemorySpanExporter) -> ReadableSpan:
    """One sync chat call of ``messages`` through the real client; its span."""
    with server(PLAIN) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model="llama-3.3-70b-versatile", messages=messages)
    (span,) = exporter.get_finished_spans()
    return span


def test_one_user_document_of_text_is_the_input_value_as_json(exporter: InMemorySpanExporter) -> None:
    """A lone document is no prompt: ``input.value`` is the messages, typed JSON (no plain text typed JSON either).

    It was the document's text as plain text, which made the document the question a RAG judge read; a document
    is marked (``"document": true``) and is the judges' context instead.
    """
    document: ChatCompletionContentPartParam = {"type": "document", "document": {"data": "The menu: soup, 5."}}
    span = _sent_and_span([{"role": "user", "content": [document]}], exporter)
    attrs = span.attributes or {}
    assert attrs[sc.INPUT_VALUE] == attrs[sc.GEN_AI_INPUT_MESSAGES]
    assert '"document":true' in str(attrs[sc.INPUT_VALUE])
    assert attrs[sc.INPUT_MIME_TYPE] == sc.MIME_JSON


def test_a_document_in_a_tool_message_keeps_its_tool_call_response(exporter: InMemorySpanExporter) -> None:
    """A tool message's content is one ``tool_call_response`` part: a document in it does not replace it."""
    document: ChatCompletionContentPartParam = {"type": "document", "document": {"data": {"temp": 21}}}
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [document]},
    ]
    span = _sent_and_span(messages, exporter)
    tool = _attribute_json(span, sc.GEN_AI_INPUT_MESSAGES)[2]
    assert [p["type"] for p in tool["parts"]] == ["tool_call_response"]
    assert tool["parts"][0]["id"] == "c1"


def test_reasoning_on_a_user_or_tool_message_is_not_a_reasoning_part(exporter: InMemorySpanExporter) -> None:
    """Only an assistant turn's ``reasoning`` is one (groq declares it there only); elsewhere it is not read."""
    messages: Any = [
        {"role": "user", "content": "Weather?", "reasoning": "not a model's"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "21C", "reasoning": "nor this"},
    ]
    span = _sent_and_span(messages, exporter)
    given = _attribute_json(span, sc.GEN_AI_INPUT_MESSAGES)
    assert [p["type"] for m in given for p in m["parts"]] == ["text", "tool_call", "tool_call_response"]


def test_a_document_is_its_data_as_written_and_a_key_json_has_not_does_not_fail(
    exporter: InMemorySpanExporter,
) -> None:
    """The data's text keeps "café" as written, and a key JSON cannot have (a tuple) is its ``str``."""
    data: Any = {"dish": "café", ("a", 1): "tuple key"}
    document: Any = {"type": "document", "document": {"data": data}}
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "Menu?"}, document]}]
    with server(PLAIN) as srv, groq_client(srv.url, False) as client:
        try:
            client.chat.completions.create(model="llama-3.3-70b-versatile", messages=messages)
        except TypeError:
            pass  # the SDK's own JSON encoding of the request may refuse the key: the span has the input all the same
    (span,) = exporter.get_finished_spans()
    given = _attribute_json(span, sc.GEN_AI_INPUT_MESSAGES)
    assert given[0]["parts"][1] == {
        "type": "text",
        "content": '{"dish": "café", "(\'a\', 1)": "tuple key"}',
        "document": True,
    }


_SEARCH = {"results": [{"title": "Weather", "url": "https://w.example", "content": "Sunny", "score": 0.9}]}


def test_a_built_in_tool_with_results_and_no_output_has_its_result(exporter: InMemorySpanExporter) -> None:
    """``search_results`` with no ``output``: the tool's result is its results, as JSON."""
    tool = {"index": 0, "type": "search", "arguments": '{"query": "weather"}', "search_results": _SEARCH}
    completion = {
        "id": "r1",
        "object": "chat.completion",
        "created": 1,
        "model": "compound",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Sunny.", "executed_tools": [tool]},
            }
        ],
    }
    with ReplayServer([served(json.dumps(completion).encode())]) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model="compound", messages=[{"role": "user", "content": "Weather?"}])
    (span,) = exporter.get_finished_spans()
    parts = _attribute_json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"]
    assert [p["type"] for p in parts] == ["text", "server_tool_call", "server_tool_call_response"]
    assert parts[2]["server_tool_call_response"] == {"type": "search", "search_results": _SEARCH}


def test_a_streamed_tool_sent_twice_is_one_call_with_its_arguments_and_results(
    exporter: InMemorySpanExporter,
) -> None:
    """The second copy (empty ``arguments``, ``code_results`` with a PNG) is merged into the first: no image kept."""
    first = {"index": 0, "type": "python", "arguments": '{"code": "1+1"}'}
    second = {"index": 0, "type": "python", "arguments": "", "code_results": [{"text": "2", "png": "iVBORw0KGgo="}]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "compound",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    events = [
        chunk({"role": "assistant", "executed_tools": [first]}),
        chunk({"executed_tools": [second]}),
        chunk({"content": "It is 2."}, "stop"),
    ]
    body = ("".join(events) + "data: [DONE]\n\n").encode()
    with ReplayServer([served(body, stream=True)]) as srv, groq_client(srv.url, False) as client:
        for _ in client.chat.completions.create(
            model="compound", messages=[{"role": "user", "content": "1+1?"}], stream=True
        ):
            pass
    (span,) = exporter.get_finished_spans()
    parts = _attribute_json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"]
    assert [p["type"] for p in parts] == ["text", "server_tool_call", "server_tool_call_response"]
    assert parts[1]["server_tool_call"] == {"type": "python", "arguments": {"code": "1+1"}}
    assert parts[2]["server_tool_call_response"] == {"type": "python", "code_results": [{"text": "2"}]}
