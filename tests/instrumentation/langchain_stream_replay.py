"""Shared pieces of the LangChain stream tests: recorded streams re-served, models on clients of their own.

Every body is a real recording re-served on 127.0.0.1 through the real openai client under the real
``ChatOpenAI``: the Responses stream ``test_responses_create_streaming[content_mode0].yaml``
(tests/fixtures/openai-cassettes) with its ``response.completed`` event replaced the way the API ends a stream
short (``response.incomplete`` at ``max_output_tokens``, ``response.failed``, a ``failed`` / ``cancelled`` status),
as tests/instrumentation/test_openai_stream_edges.py does, and the Chat Completions stream of
tests/fixtures/langchain-cassettes (a role-only first chunk, then the text). Used by test_langchain_streams.py and
test_langchain_streams_responses.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_replay import STREAM, one
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import FIXTURES, Recorded, load_cassette

RESPONSES_STREAM = (
    FIXTURES / "openai-cassettes" / "otel-contrib" / "test_responses_create_streaming[content_mode0].yaml"
)
PROMPT = "Say this is a test"


def sse(events: list[dict[str, Any]], *, named: bool) -> bytes:
    """An SSE body as servers write it (Responses events named, as the recording has them)."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def events_of(body: bytes) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (its ``data:`` lines, ``[DONE]`` left out)."""
    return [
        json.loads(line[len("data: ") :])
        for line in body.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def responses_events(ending: str) -> list[dict[str, Any]]:
    """The recorded Responses stream with its ``response.completed`` event replaced (``ending``) or kept."""
    events = events_of(load_cassette(RESPONSES_STREAM)[0].body)
    final = events.pop()
    assert final["type"] == "response.completed"
    response, seq = final["response"], final["sequence_number"]
    if ending == "completed":
        events.append(final)
    elif ending == "incomplete":  # the API's cut at max_output_tokens
        response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        events.append({"type": "response.incomplete", "response": response, "sequence_number": seq})
    elif ending == "failed":
        response.update(status="failed", error={"code": "server_error", "message": "The server had an error."})
        events.append({"type": "response.failed", "response": response, "sequence_number": seq})
    else:  # a terminal response whose status is ``failed`` (no error object) or ``cancelled``, handed back whole
        assert ending.startswith("status:")
        response.update(status=ending.removeprefix("status:"))
        events.append({"type": "response.completed", "response": response, "sequence_number": seq})
    return events


def served(events: list[dict[str, Any]], path: str = "/v1/responses") -> Recorded:
    """``events`` as the replay server's answer to a POST to ``path`` (an SSE body)."""
    named = path.endswith("/responses")
    headers = [("content-type", "text/event-stream; charset=utf-8")]
    return Recorded("POST", path, b"", 200, "OK", headers, sse(events, named=named))


def chat_events() -> list[dict[str, Any]]:
    """The recorded Chat Completions stream: a role-only first chunk, the joke, its finish reason, usage."""
    return events_of(load_cassette(STREAM)[0].body)


def _model(url: str, **kwargs: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, model="gpt-4o-mini", **kwargs)


@asynccontextmanager
async def own_client(url: str, is_async: bool, **kwargs: Any) -> AsyncIterator[Any]:
    """A model on an httpx client of its own, closed before the server stops.

    A stream the app leaves (or that raises) mid-body leaves its connection open in langchain-openai's shared client
    (``aclose()`` does not reach the openai stream inside its generators): left to the collector, the unclosed
    socket's ResourceWarning would surface as an error in whichever test runs next.
    """
    import httpx

    if is_async:
        async with httpx.AsyncClient() as http_async:
            yield _model(url, http_async_client=http_async, **kwargs)
            await asyncio.sleep(0)  # let the closed generators' finalizers run before the client closes
    else:
        with sync_model(url, **kwargs) as model:
            yield model


@contextmanager
def sync_model(url: str, **kwargs: Any) -> Iterator[Any]:
    """A model on a sync httpx client of its own, closed at the end (its pooled connection with it)."""
    import httpx

    with httpx.Client() as http:
        yield _model(url, http_client=http, **kwargs)


def langchain_span(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    """The handler's one ``chat gpt-4o-mini`` span and its attributes."""
    span = one(exporter.get_finished_spans(), "chat gpt-4o-mini")
    return span, dict(span.attributes or {})
