"""Mistral conversations (``beta.conversations``): built-in tool runs streamed or whole, and the agent version.

Bodies are made in the API's shape (no recording of a streamed tool run exists), parsed by the real ``mistralai``
client's own types (``ConversationResponse``, ``ConversationEvents``) from the replay server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mistralai")

from mistralai.client import Mistral
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc

URI = "https://api.mistral.ai/v1/conversations"
MODEL = "mistral-medium-2505"
USAGE = {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}


@pytest.fixture(autouse=True)
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_mistral()
    yield
    evaltrace.uninstrument_mistral()


def _served(body: str, uri: str, content_type: str) -> Recorded:
    return Recorded("POST", uri, b"", 200, "OK", [("content-type", content_type)], body.encode())


WHOLE = {"object": "conversation.response", "conversation_id": "conv_1", "usage": USAGE, "outputs": [
    {"object": "entry", "type": "tool.execution", "id": "te1", "name": "web_search",
     "arguments": '{"query": "paris weather"}', "info": {}, "model": MODEL},
    {"object": "entry", "type": "message.output", "id": "mo1", "role": "assistant", "model": MODEL,
     "content": "It rains."},
]}  # fmt: skip
STREAMED = [
    {"type": "conversation.response.started", "conversation_id": "conv_1"},
    {"type": "tool.execution.started", "id": "te1", "name": "web_search", "arguments": '{"query": ', "model": MODEL},
    {"type": "tool.execution.delta", "id": "te1", "name": "web_search", "arguments": '"paris '},
    {"type": "tool.execution.delta", "id": "te1", "name": "web_search", "arguments": 'weather"}'},
    {"type": "tool.execution.done", "id": "te1", "name": "web_search", "info": {}},
    {"type": "message.output.delta", "id": "mo1", "model": MODEL, "content": "It rains."},
    {"type": "conversation.response.done", "usage": USAGE},
]


def _output(exporter: InMemorySpanExporter) -> Any:
    (span,) = exporter.get_finished_spans()
    return json.loads(str((span.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES]))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_streamed_built_in_tool_run_records_its_arguments_as_a_whole_response_does(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in STREAMED)
    replies = [_served(json.dumps(WHOLE), URI, "application/json"), _served(body, URI + "#s", "text/event-stream")]
    with ReplayServer(replies) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if is_async:
                await client.beta.conversations.start_async(agent_id="ag_1", inputs="weather?")
                whole = _output(exporter)
                exporter.clear()
                stream = await client.beta.conversations.start_stream_async(agent_id="ag_1", inputs="weather?")
                events = [e async for e in stream]
            else:
                client.beta.conversations.start(agent_id="ag_1", inputs="weather?")
                whole = _output(exporter)
                exporter.clear()
                events = list(client.beta.conversations.start_stream(agent_id="ag_1", inputs="weather?"))
    assert [e.event for e in events] == [e["type"] for e in STREAMED]
    assert whole[0]["parts"][0] == {
        "type": "server_tool_call", "id": "te1", "name": "web_search",
        "server_tool_call": {"type": "web_search", "arguments": '{"query": "paris weather"}'},
    }  # fmt: skip
    assert _output(exporter) == whole


def test_a_tool_run_streamed_without_its_start_still_records_the_done_event(exporter: InMemorySpanExporter) -> None:
    events = [e for e in STREAMED if e["type"] not in ("tool.execution.started", "tool.execution.delta")]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    with ReplayServer([_served(body, URI + "#s", "text/event-stream")]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            list(client.beta.conversations.start_stream(agent_id="ag_1", inputs="weather?"))
    assert _output(exporter)[0]["parts"][0] == {
        "type": "server_tool_call", "id": "te1", "name": "web_search", "server_tool_call": {"type": "web_search"}
    }  # fmt: skip


@pytest.mark.parametrize(("version", "recorded"), [(3, "3"), ("v2-beta", "v2-beta")])
@pytest.mark.parametrize("method", ["start", "start_stream", "restart"])
def test_agent_version_is_the_gen_ai_agent_version(
    method: str, version: int | str, recorded: str, exporter: InMemorySpanExporter
) -> None:
    """``agent_version`` (a number or a string) names the agent's version the call runs; capture off too."""
    from evaltrace._internal import settings

    streamed = method.endswith("stream")
    body = (
        "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in STREAMED) if streamed else json.dumps(WHOLE)
    )
    uri = URI + ("/conv_1/restart" if method == "restart" else "") + ("#s" if streamed else "")
    reply = _served(body, uri, "text/event-stream" if streamed else "application/json")
    kwargs: dict[str, Any] = {"agent_version": version, "inputs": "weather?"}
    kwargs.update(
        {"conversation_id": "conv_1", "from_entry_id": "mo0"} if method == "restart" else {"agent_id": "ag_1"}
    )
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([reply]) as srv, Mistral(api_key="x", server_url=srv.url) as client:
            result = getattr(client.beta.conversations, method)(**kwargs)
            if streamed:
                list(result)
            sent = srv.received[0].json()
    finally:
        settings.replace(previous)
    assert sent["agent_version"] == version
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})[sc.GEN_AI_AGENT_VERSION] == recorded
