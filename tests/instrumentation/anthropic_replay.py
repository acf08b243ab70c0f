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
