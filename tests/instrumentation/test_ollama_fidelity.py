"""Ollama message fields through the real ``ollama`` client on 127.0.0.1 (the recorded tool-call cassettes).

The history sent back is built from the SDK's own ``ollama.Message`` objects, as an application passes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import ollama
import pytest
from ollama_replay import MODEL, client_of, recorded
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import ReplayServer


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_ollama()
    yield
    evaltrace.uninstrument_ollama()


pytestmark = pytest.mark.usefixtures("instrumented")


def test_a_tool_result_keeps_the_tool_name(exporter: InMemorySpanExporter) -> None:
    """``Message.tool_name`` names the tool a ``tool`` message answers: the only link (Ollama has no call id)."""
    call = ollama.Message.ToolCall(function=ollama.Message.ToolCall.Function(name="add", arguments={"a": 2, "b": 3}))
    history = [
        ollama.Message(role="user", content="What is 2 + 3?"),
        ollama.Message(role="assistant", content="", tool_calls=[call]),
        ollama.Message(role="tool", content="5", tool_name="add"),
    ]
    with ReplayServer(recorded("test_chat_with_tool_call.yaml")) as server, client_of(server.url) as client:
        client.chat(MODEL, history)
        sent = server.received[0].json()
    assert sent["messages"][2] == {"role": "tool", "content": "5", "tool_name": "add"}  # sent as given
    (span,) = exporter.get_finished_spans()
    given = json.loads(str((span.attributes or {})["gen_ai.input.messages"]))
    assert given[1]["parts"] == [{"type": "tool_call", "id": None, "name": "add", "arguments": {"a": 2, "b": 3}}]
    assert given[2] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": None, "response": "5", "name": "add"}],
    }
