"""``with_raw_response`` through the engine's Stainless helper: the SDK's parse error stays the user's.

The engine reads a raw response's ``parse()`` to record the answer. When the SDK cannot parse the body, that error
is the SDK's, not ours: the call must return the raw response, and the user's own later ``parse()`` must behave
exactly as without evaltrace. The raw responses are the real openai client's (``LegacyAPIResponse``, which no
engine provider's installed SDK has today), fetched from a real HTTP server on 127.0.0.1 serving a body that is not
JSON; no recording exists of such a body, it is made here. The span is the engine's real ``Call`` (the Groq codec,
OpenAI-shaped) on the real OTel SDK. The same holds for anthropic 2's raw response (an ``APIResponse``), through the
real instrumented client, sync and async (where the engine runs the async ``parse()`` to its error on the spot).
Last, the one path no real SDK takes: an async ``parse()`` that would wait for I/O.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.stainless import Stainless
from evaltrace.instrumentation.groq.codec import CODEC

_NOT_JSON = Recorded(
    "POST",
    "https://api.openai.com/v1/chat/completions",
    b"",
    200,
    "OK",
    [("content-type", "application/json")],
    b'{"id": "chatcmpl-1", "choices": [',  # cut off: the SDK's parse() raises
)


def _raw_responses(count: int) -> list[Any]:
    """``count`` raw responses of the real openai client to the same unparsable body (nothing traces them)."""
    with ReplayServer([_NOT_JSON] * count) as server:
        client = openai.OpenAI(api_key="x", base_url=f"{server.url}/v1", max_retries=0)
        try:
            return [
                client.chat.completions.with_raw_response.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
                )
                for _ in range(count)
            ]
        finally:
            client.close()


def _parse_error(raw: Any) -> BaseException:
    with pytest.raises(Exception) as caught:
        raw.parse()
    return caught.value


def test_a_raw_response_whose_body_does_not_parse_is_returned_and_parse_fails_as_without_us(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # Our suite runs with EVALTRACE_RAISE_INTERNAL_ERRORS=1: had the engine treated the SDK's error as its own, the
    # call below would raise it.
    traced, untouched = _raw_responses(2)
    call = Call.for_codec(CODEC)(provider.get_tracer("t"), sc.OP_CHAT, {"model": "gpt-4o-mini"}, (None, None), None)
    assert Stainless("openai").finish_special(CODEC, call, sc.OP_CHAT, traced) is traced
    (span,) = exporter.get_finished_spans()  # ended once, with the request only
    assert span.status.status_code is StatusCode.UNSET
    assert sc.GEN_AI_RESPONSE_ID not in (span.attributes or {})
    expected = _parse_error(untouched)
    assert isinstance(expected, json.JSONDecodeError)
    for _ in range(2):  # each parse() of the user fails as it does without evaltrace, every time
        error = _parse_error(traced)
        assert type(error) is type(expected) and str(error) == str(expected)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_an_anthropic_raw_response_whose_body_does_not_parse_fails_at_the_users_parse_as_without_us(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """anthropic 2's ``with_raw_response`` is an ``APIResponse`` the engine parses too: the same boundary holds.

    Async, the engine runs the ``parse()`` coroutine on the spot (``_run_now``): the SDK's error is raised from
    inside that coroutine, must end the span with the request only, and must leave the user's own ``await parse()``
    to raise it again.
    """
    anthropic = pytest.importorskip("anthropic")
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor

    cut = Recorded("POST", "/v1/messages", b"", 200, "OK", [("content-type", "application/json")], b'{"id": "msg_1",')
    request = {"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    instrumentor = AnthropicInstrumentor()

    async def raw_response(url: str) -> Any:
        if not is_async:
            with anthropic.Anthropic(api_key="x", base_url=url, max_retries=0) as client:
                return client.messages.with_raw_response.create(**request)
        async with anthropic.AsyncAnthropic(api_key="x", base_url=url, max_retries=0) as client:
            return await client.messages.with_raw_response.create(**request)

    async def parse_error(raw: Any) -> BaseException:
        with pytest.raises(Exception) as caught:
            await raw.parse() if is_async else raw.parse()
        return caught.value

    with ReplayServer([cut, cut]) as server:
        expected = await parse_error(await raw_response(server.url))  # before instrument()
        instrumentor.instrument()
        try:
            # A new client: a client keeps the unwrapped create() bound in its cached with_raw_response.
            traced = await raw_response(server.url)
        finally:
            instrumentor.uninstrument()
    assert isinstance(traced, anthropic.AsyncAPIResponse if is_async else anthropic.APIResponse)
    (span,) = exporter.get_finished_spans()  # ended once, with the request only
    assert span.status.status_code is StatusCode.UNSET
    assert sc.GEN_AI_RESPONSE_ID not in (span.attributes or {})
    assert (span.attributes or {})[sc.GEN_AI_REQUEST_MAX_TOKENS] == 16
    assert isinstance(expected, json.JSONDecodeError)
    for _ in range(2):
        error = await parse_error(traced)
        assert type(error) is type(expected) and str(error) == str(expected)


def test_an_async_parse_that_would_wait_for_io_is_closed_unrun_and_the_body_left_unread() -> None:
    """The engine runs an async raw response's ``parse()`` on the spot only because it awaits no I/O; were an SDK
    to read there after all, the coroutine is closed at its first suspension, not left pending or half-run."""
    from evaltrace._internal.engine import stainless

    steps: list[str] = []

    async def parse() -> str:
        steps.append("started")
        try:
            await asyncio.sleep(0)  # suspends once, as a read on the wire would
            steps.append("resumed")
            return "parsed"
        finally:
            steps.append("closed")

    assert stainless._run_now(parse) is stainless._UNREAD
    assert steps == ["started", "closed"]
