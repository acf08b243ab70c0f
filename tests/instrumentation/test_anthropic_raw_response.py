"""``messages.with_raw_response`` under ``instrument_anthropic()``: the span has the answer, the user the same body.

anthropic 2 returns an ``APIResponse`` (``AsyncAPIResponse``) from ``with_raw_response``, as from
``with_streaming_response``; only the ``X-Stainless-Raw-Response`` request header tells them apart. The real anthropic
client talks HTTP to a 127.0.0.1 server replaying the Anthropic fixtures (``tests/fixtures/anthropic``, see its README
for provenance). Each traced call is compared with the same call made without evaltrace: what the user parses, and the
events they read, must be equal.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import FIXTURES, MODEL, attrs_json  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402

REQUEST: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "Hello"}]}
STREAM_ANSWER = "Hello! How can I help you today?"


@pytest.fixture
def instrumentor(provider: TracerProvider, capture: None) -> Iterator[AnthropicInstrumentor]:
    """Not instrumented yet: each test makes its reference call first, without evaltrace."""
    instrumentor = AnthropicInstrumentor()
    yield instrumentor
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def _recorded(name: str) -> Recorded:
    content_type = "text/event-stream" if name.endswith(".sse") else "application/json"
    headers = [("content-type", content_type), ("request-id", "req_test")]
    return Recorded("POST", "/v1/messages", b"", 200, "OK", headers, (FIXTURES / name).read_bytes())


def _client(server: ReplayServer, is_async: bool) -> Any:
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return cls(api_key="test", base_url=server.url, max_retries=0)


async def _close(client: Any, is_async: bool) -> None:
    if is_async:
        await client.close()
    else:
        client.close()


@contextlib.asynccontextmanager
async def _replayed(fixture: str, is_async: bool) -> AsyncIterator[Any]:
    """A client of a replay server of ``fixture``, closed when the block ends (then the server stops)."""
    with ReplayServer([_recorded(fixture)]) as server:
        client = _client(server, is_async)
        yield client
        await _close(client, is_async)


async def _raw(client: Any, is_async: bool, **kwargs: Any) -> Any:
    raw = client.messages.with_raw_response.create(**REQUEST, **kwargs)
    return await raw if is_async else raw


async def _parse(raw: Any, is_async: bool) -> Any:
    parsed = raw.parse()
    return await parsed if is_async else parsed


async def _events(stream: Any, is_async: bool) -> list[Any]:
    if is_async:
        return [event async for event in stream]
    return list(stream)


async def _parsed_without_us(fixture: str, is_async: bool) -> Any:
    """What ``with_raw_response`` + ``parse()`` give without evaltrace: the Message, or the streamed events."""
    async with _replayed(fixture, is_async) as client:
        stream = fixture.endswith(".sse")
        parsed = await _parse(await _raw(client, is_async, **({"stream": True} if stream else {})), is_async)
        if stream:
            parsed = [event.model_dump() for event in await _events(parsed, is_async)]
    return parsed


def _only_span(exporter: InMemorySpanExporter) -> Any:
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {MODEL}"]  # ended exactly once
    return spans[0]


def _output_text(span: Any) -> str:
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    return "".join(p["content"] for p in parts if p["type"] == "text")


async def test_a_raw_response_is_recorded_whole_before_the_user_parses_it(
    is_async: bool, instrumentor: AnthropicInstrumentor, exporter: InMemorySpanExporter
) -> None:
    expected = await _parsed_without_us("text.json", is_async)
    instrumentor.instrument()
    async with _replayed("text.json", is_async) as client:
        raw = await _raw(client, is_async)
        # Never parsed yet: the SDK read the body, so the span is already complete.
        span = _only_span(exporter)
        a = span.attributes or {}
        assert a["gen_ai.response.id"] == "msg_013Zva2CMHLNnXjNJJKqJ2EF"
        assert a["gen_ai.response.model"] == MODEL
        assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 12)
        assert a["evaltrace.cost_usd"] > 0
        assert _output_text(span) == "Hi! My name is Claude."
        assert span.status.status_code is StatusCode.UNSET
        # The raw response is still the user's: its headers and status, then the body parsed as without us.
        assert isinstance(raw, anthropic.AsyncAPIResponse if is_async else anthropic.APIResponse)
        assert (raw.status_code, raw.headers["request-id"], raw.request_id) == (200, "req_test", "req_test")
        message = await _parse(raw, is_async)
        assert type(message) is anthropic.types.Message
        assert message == expected and message._request_id == "req_test"
        assert await _parse(raw, is_async) is message  # parse() still caches: one object
        assert (await raw.json() if is_async else raw.json())["id"] == message.id  # the body is still readable
    assert len(exporter.get_finished_spans()) == 1


async def test_a_streamed_raw_response_is_followed_like_a_stream(
    is_async: bool, instrumentor: AnthropicInstrumentor, exporter: InMemorySpanExporter
) -> None:
    expected = await _parsed_without_us("stream_text.sse", is_async)
    instrumentor.instrument()
    async with _replayed("stream_text.sse", is_async) as client:
        raw = await _raw(client, is_async, stream=True)
        assert raw.headers["request-id"] == "req_test"
        assert not exporter.get_finished_spans()  # open while the stream is
        stream = await _parse(raw, is_async)
        assert isinstance(stream, anthropic.AsyncStream if is_async else anthropic.Stream)  # the proxy keeps the type
        assert await _parse(raw, is_async) is stream
        events = await _events(stream, is_async)
        assert [event.model_dump() for event in events] == expected
    span = _only_span(exporter)
    a = span.attributes or {}
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted" and a["evaltrace.stream.completed"] is True
    assert a["evaltrace.stream.chunks"] == len(events)
    assert a["gen_ai.response.id"] == "msg_01StreamText00000001"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (25, 15)
    assert a["evaltrace.cost_usd"] > 0
    assert _output_text(span) == STREAM_ANSWER


async def test_a_streamed_raw_response_never_parsed_ends_its_span_when_collected(
    is_async: bool, instrumentor: AnthropicInstrumentor, exporter: InMemorySpanExporter
) -> None:
    instrumentor.instrument()
    async with _replayed("stream_text.sse", is_async) as client:
        raw = await _raw(client, is_async, stream=True)
        assert not exporter.get_finished_spans()
        await raw.close() if is_async else raw.close()  # the user's own clean-up, as without us
        del raw
        gc.collect()
    a = _only_span(exporter).attributes or {}
    assert a["evaltrace.stream.end_reason"] == "garbage_collected"
    assert (a["evaltrace.stream.completed"], a["evaltrace.stream.chunks"]) == (False, 0)
    assert a["gen_ai.request.max_tokens"] == 1024  # what is known: the request


async def test_with_streaming_response_still_leaves_the_body_to_the_user(
    is_async: bool, instrumentor: AnthropicInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """The body is on the wire, the user's to read as they choose: the span has the request and the timing only."""
    expected = await _parsed_without_us("text.json", is_async)
    instrumentor.instrument()
    async with _replayed("text.json", is_async) as client:
        manager = client.messages.with_streaming_response.create(**REQUEST)
        if is_async:
            async with manager as response:
                assert not response.is_closed  # unread when the span ended: we read nothing
                message = await response.parse()
        else:
            with manager as response:
                assert not response.is_closed
                message = response.parse()
    assert message == expected
    a = _only_span(exporter).attributes or {}
    assert a["gen_ai.request.max_tokens"] == 1024
    assert "gen_ai.response.id" not in a and "gen_ai.usage.input_tokens" not in a


async def _streamed_without_us(read: str, is_async: bool) -> list[Any]:
    """What ``with_streaming_response.create(stream=True)`` gives without evaltrace, read as ``read`` says."""
    async with _replayed("stream_text.sse", is_async) as client:
        manager = client.messages.with_streaming_response.create(**REQUEST, stream=True)
        if is_async:
            async with manager as response:
                body = await _read_streamed(response, read, is_async)
        else:
            with manager as response:
                body = await _read_streamed(response, read, is_async)
    return body


async def _read_streamed(response: Any, read: str, is_async: bool) -> list[Any]:
    """The whole body of a ``with_streaming_response`` stream: its events through ``parse()``, or its lines."""
    if read == "parse":
        return [event.model_dump() for event in await _events(await _parse(response, is_async), is_async)]
    if is_async:
        return [line async for line in response.iter_lines()]
    return list(response.iter_lines())


@pytest.mark.parametrize("read", ["parse", "iter_lines"])
async def test_with_streaming_response_of_a_stream_leaves_the_events_to_the_user(
    read: str, is_async: bool, instrumentor: AnthropicInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """``stream=True`` under ``with_streaming_response``: ``parse()`` would build a ``Stream`` without reading, as for
    ``with_raw_response``; only the ``X-Stainless-Raw-Response: stream`` header says the body is not ours to follow.
    The span ends at the call with the request only, and the user reads every event or line as without us."""
    expected = await _streamed_without_us(read, is_async)
    instrumentor.instrument()
    async with _replayed("stream_text.sse", is_async) as client:
        manager = client.messages.with_streaming_response.create(**REQUEST, stream=True)
        if is_async:
            async with manager as response:
                spans_before_reading = len(exporter.get_finished_spans())
                assert not response.is_closed  # we read nothing
                body = await _read_streamed(response, read, is_async)
        else:
            with manager as response:
                spans_before_reading = len(exporter.get_finished_spans())
                assert not response.is_closed
                body = await _read_streamed(response, read, is_async)
    assert spans_before_reading == 1  # ended at the call, not held open for a stream we do not follow
    assert body == expected and len(body) > 1
    a = _only_span(exporter).attributes or {}
    assert a["gen_ai.request.max_tokens"] == 1024
    assert not [key for key in a if key.startswith("evaltrace.stream.")]  # no stream followed, none ended by us
    assert "gen_ai.response.id" not in a and "gen_ai.usage.input_tokens" not in a
    assert "gen_ai.output.messages" not in a
