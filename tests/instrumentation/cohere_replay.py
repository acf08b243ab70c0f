"""Cohere v2 chat replay helpers: the recorded cassettes, and the one stream the tests build themselves.

The recordings (tests/fixtures/cohere-cassettes, from pydantic-ai's Cohere tests) are non-streamed ``POST /v2/chat``
only. No recording of ``chat_stream`` exists anywhere in the fixture sets, so ``stream_interaction`` builds one SSE
body from the SDK's own event types (``V2ChatStreamResponse``: message-start, content-start/delta/end,
tool-plan-delta, tool-call-start/delta/end, message-end); it is served by the same replay server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import cohere
import httpx

from cassettes import FIXTURES, Recorded, load_cassette

SET = FIXTURES / "cohere-cassettes" / "pydantic-ai"


def cohere_interactions(name: str) -> list[Recorded]:
    """The Cohere interactions of a cassette (the thinking one also holds an OpenAI request, left out)."""
    return [i for i in load_cassette(SET / name) if "cohere" in i.uri]


def sse(events: list[dict[str, Any]]) -> bytes:
    """Events as Cohere sends them: ``event: <type>`` and ``data: <json>`` per event."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def stream_interaction(events: list[dict[str, Any]], status: int = 200) -> Recorded:
    """One streamed ``/v2/chat`` response (no recording exists: see the module docstring)."""
    return Recorded(
        method="POST",
        uri="https://api.cohere.com/v2/chat",
        request_body=b"",
        status=status,
        reason="OK",
        headers=[("content-type", "text/event-stream")],
        body=sse(events),
    )


def text_stream_events(text: list[str], thinking: list[str] | None = None) -> list[dict[str, Any]]:
    """A streamed answer: optional thinking content (index 0), then text content, then message-end."""
    events: list[dict[str, Any]] = [
        {"type": "message-start", "id": "stream-id-1", "delta": {"message": {"role": "assistant"}}}
    ]
    index = 0
    if thinking:
        events.append({"type": "content-start", "index": 0,
                       "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}}})  # fmt: skip
        events += [{"type": "content-delta", "index": 0, "delta": {"message": {"content": {"thinking": t}}}}
                   for t in thinking]  # fmt: skip
        events.append({"type": "content-end", "index": 0})
        index = 1
    events.append({"type": "content-start", "index": index,
                   "delta": {"message": {"content": {"type": "text", "text": ""}}}})  # fmt: skip
    events += [{"type": "content-delta", "index": index, "delta": {"message": {"content": {"text": t}}}}
               for t in text]  # fmt: skip
    events.append({"type": "content-end", "index": index})
    events.append(
        {
            "type": "message-end",
            "delta": {
                "finish_reason": "COMPLETE",
                "usage": {
                    "billed_units": {"input_tokens": 5, "output_tokens": 7},
                    "tokens": {"input_tokens": 71, "output_tokens": 9},
                },
            },
        }
    )
    return events


def tool_stream_events() -> list[dict[str, Any]]:
    """A streamed tool call: a tool plan, one call whose arguments come in two fragments, TOOL_CALL."""
    call = {"id": "get_weather_abc", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    return [
        {"type": "message-start", "id": "stream-id-2", "delta": {"message": {"role": "assistant"}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will look up "}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "the weather."}}},
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": call}}},
        {"type": "tool-call-delta", "index": 0,
         "delta": {"message": {"tool_calls": {"function": {"arguments": '{"city": '}}}}},  # fmt: skip
        {"type": "tool-call-delta", "index": 0,
         "delta": {"message": {"tool_calls": {"function": {"arguments": '"Paris"}'}}}}},  # fmt: skip
        {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL",
                                          "usage": {"billed_units": {"input_tokens": 20, "output_tokens": 15}}}},
    ]  # fmt: skip


def fixture_path(name: str) -> Path:
    """A cassette of the set."""
    return SET / name


@contextmanager
def client_of(url: str) -> Iterator[cohere.ClientV2]:
    """A real ``ClientV2`` on ``url`` whose connections are closed afterwards."""
    with httpx.Client() as http:
        yield cohere.ClientV2(api_key="test", base_url=url, httpx_client=http)


@asynccontextmanager
async def async_client_of(url: str) -> AsyncIterator[cohere.AsyncClientV2]:
    """A real ``AsyncClientV2`` on ``url`` whose connections are closed afterwards."""
    async with httpx.AsyncClient() as http:
        yield cohere.AsyncClientV2(api_key="test", base_url=url, httpx_client=http)


def made(path: str, body: Any, ndjson: bool = False) -> Recorded:
    """A response to ``path`` built from the SDK's own types (``body``: a model, or NDJSON events).

    No recording of ``/v2/embed``, ``/v2/rerank`` or the v1 ``/v1/chat`` exists anywhere in the fixture sets: the
    bodies are the SDK's response types (``EmbedByTypeResponse``, ``V2RerankResponse``, ``NonStreamedChatResponse``
    and ``StreamedChatResponse`` events), serialised as the SDK reads them.
    """

    def dumped(item: Any) -> Any:
        return item.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(item, "model_dump") else item

    if ndjson:
        payload = b"\n".join(json.dumps(dumped(event)).encode() for event in body)
        kind = "application/x-ndjson"
    else:
        payload = json.dumps(dumped(body)).encode()
        kind = "application/json"
    return Recorded("POST", f"https://api.cohere.com{path}", b"", 200, "OK", [("content-type", kind)], payload)


@contextmanager
def v1_client_of(url: str) -> Iterator[cohere.Client]:
    """A real v1 ``cohere.Client`` on ``url`` whose connections are closed afterwards."""
    with httpx.Client() as http:
        yield cohere.Client(api_key="test", base_url=url, httpx_client=http)


@asynccontextmanager
async def async_v1_client_of(url: str) -> AsyncIterator[cohere.AsyncClient]:
    """A real v1 ``cohere.AsyncClient`` on ``url`` whose connections are closed afterwards."""
    async with httpx.AsyncClient() as http:
        yield cohere.AsyncClient(api_key="test", base_url=url, httpx_client=http)


async def read_events(stream: Any, limit: int | None = None) -> list[Any]:
    """The events of a sync or async stream; with ``limit``, ``break`` out of the loop after that many."""
    events: list[Any] = []
    if hasattr(stream, "__aiter__"):
        async for event in stream:
            events.append(event)
            if limit is not None and len(events) >= limit:
                break
        return events
    for event in stream:
        events.append(event)
        if limit is not None and len(events) >= limit:
            break
    return events
