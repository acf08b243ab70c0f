"""Serve the Anthropic fixtures (tests/fixtures/anthropic) to the real anthropic client over httpx2.MockTransport.

Each request gets the next reply in order; SSE bodies are streamed one event per network read, as on the wire.
The client never retries (``max_retries=0``), so an error reply is one request and one span.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "anthropic"
MODEL = "claude-sonnet-4-6"


@dataclass
class Reply:
    """One canned reply: a fixture file (``.json`` body or ``.sse`` stream) and its HTTP status."""

    name: str
    status: int = 200

    def response(self) -> httpx2.Response:
        text = (FIXTURES / self.name).read_text(encoding="utf-8")
        if self.name.endswith(".sse"):
            events = [e + "\n\n" for e in text.split("\n\n") if e.strip()]
            return httpx2.Response(self.status, headers={"content-type": "text/event-stream"}, stream=_Events(events))
        return httpx2.Response(
            self.status, headers={"content-type": "application/json", "request-id": "req_test"}, text=text
        )


class _Events(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[bytes]:
        for event in self.events:
            yield event.encode()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self.events:
            yield event.encode()


@dataclass
class Server:
    """The replies still to serve, and the JSON bodies of the requests seen."""

    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append({"path": request.url.path, **json.loads(request.content or b"{}")})
        assert self.replies, f"unexpected request {request.url.path}"
        return self.replies.pop(0).response()


def client(replies: list[Reply], is_async: bool = False) -> tuple[Any, Server]:
    """A real anthropic client (sync or async) answered by ``replies`` in order."""
    server = Server(list(replies))
    transport = httpx2.MockTransport(server.handle)
    if is_async:
        http = httpx2.AsyncClient(transport=transport, base_url="https://api.anthropic.com")
        return anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0), server
    return (
        anthropic.Anthropic(
            api_key="test",
            http_client=httpx2.Client(transport=transport, base_url="https://api.anthropic.com"),
            max_retries=0,
        ),
        server,
    )


def fixture_json(name: str) -> Any:
    """The parsed JSON of a fixture body."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def attrs_json(span: Any, key: str) -> Any:
    """A JSON-string attribute of ``span``, parsed."""
    return json.loads(span.attributes[key])


def message_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole Message cut into the events the API streams for it (for shapes no recording holds).

    Each block starts empty and its text, thinking, tool input (as two ``input_json_delta`` fragments) or
    compaction summary arrives in deltas; other blocks start whole. Usage: the input at the start, the output at
    the ``message_delta``.
    """
    usage = dict(message["usage"])
    start_usage = {**usage, "output_tokens": 1}
    start = {**message, "content": [], "stop_reason": None, "usage": start_usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            raw = json.dumps(block["input"])
            empty = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in (raw[: len(raw) // 2], raw[len(raw) // 2 :])
            ]
        elif kind == "text":
            empty = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        elif kind == "thinking":
            empty = {**block, "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}]
        elif kind == "compaction":
            empty = {**block, "content": None}
            deltas = [{"type": "compaction_delta", "content": block["content"], "encrypted_content": None}]
        else:
            empty = block
        events.append({"type": "content_block_start", "index": index, "content_block": empty})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return events


def inline_client(message: dict[str, Any], stream: bool) -> Any:
    """A real anthropic client answered with ``message``: whole, or streamed as :func:`message_events` cuts it."""
    if stream:
        return events_client(message_events(message))

    def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/json"}, text=json.dumps(message))

    http = httpx2.Client(transport=httpx2.MockTransport(handle), base_url="https://api.anthropic.com")
    return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)


def events_client(events: list[dict[str, Any]]) -> Any:
    """A real anthropic client whose every call is answered with ``events`` as a server-sent event stream."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        chunks = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Events(chunks))

    http = httpx2.Client(transport=httpx2.MockTransport(handle), base_url="https://api.anthropic.com")
    return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)
