"""A Gemini prompt the API blocks (``prompt_feedback.block_reason``), through the real google-genai client.

No blocked prompt was recorded in the fixture set (tests/fixtures/google-genai-cassettes): these bodies are the
SDK's own ``GenerateContentResponse`` type (a ``prompt_feedback`` with a ``block_reason`` and no candidate, as the
API documents a blocked prompt), serialised the way the API sends it (camelCase JSON; SSE ``data:`` events for the
stream), served by ``cassettes.ReplayServer`` on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, client_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import Recorded, ReplayServer
from evaltrace._internal import settings
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GoogleGenAIInstrumentor]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]

MODEL = "gemini-2.5-flash"


def _blocked(reason: types.BlockedReason) -> dict[str, Any]:
    response = types.GenerateContentResponse(
        prompt_feedback=types.GenerateContentResponsePromptFeedback(block_reason=reason),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=7, total_token_count=7),
        model_version=MODEL,
        response_id="blocked-1",
    )
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def _served(body: dict[str, Any], stream: bool) -> Recorded:
    if stream:
        return Recorded("POST", "/", b"", 200, "OK", [("Content-Type", "text/event-stream")],
                        f"data: {json.dumps(body)}\r\n\r\n".encode())  # fmt: skip
    return Recorded("POST", "/", b"", 200, "OK", [("Content-Type", "application/json")], json.dumps(body).encode())


async def _call(server: ReplayServer, is_async: bool, stream: bool) -> list[Any]:
    client = client_for(server)
    try:
        if stream and is_async:
            return [c async for c in await client.aio.models.generate_content_stream(model=MODEL, contents="x")]
        if stream:
            return list(client.models.generate_content_stream(model=MODEL, contents="x"))
        if is_async:
            return [await client.aio.models.generate_content(model=MODEL, contents="x")]
        return [client.models.generate_content(model=MODEL, contents="x")]
    finally:
        await client.aio.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_blocked_prompt_is_its_finish_reason_and_not_an_error(
    is_async: bool, stream: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_served(_blocked(types.BlockedReason.PROHIBITED_CONTENT), stream)]) as server:
        responses = await _call(server, is_async, stream)
    assert responses[-1].prompt_feedback.block_reason == types.BlockedReason.PROHIBITED_CONTENT  # what the app got
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.status.status_code is StatusCode.UNSET  # the call succeeded: the API answered, the SDK raised nothing
    assert "error.type" not in a
    assert a["gen_ai.response.finish_reasons"] == ("PROHIBITED_CONTENT",)  # verbatim, as every finish reason
    assert a["gcp.gemini.prompt_feedback.block_reason"] == "PROHIBITED_CONTENT"
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [], "finish_reason": "content_filter"}
    ]
    assert a["gen_ai.usage.input_tokens"] == 7
    assert a["gen_ai.response.id"] == "blocked-1"
    if stream:
        assert a["evaltrace.stream.end_reason"] == "exhausted"  # a blocked prompt's stream is complete


async def test_a_blocked_prompt_without_content_capture_keeps_its_reason(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([_served(_blocked(types.BlockedReason.SAFETY), False)]) as server:
            await _call(server, False, False)
    finally:
        settings.replace(previous)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.finish_reasons"] == ("SAFETY",)
    assert span.attributes["gcp.gemini.prompt_feedback.block_reason"] == "SAFETY"
    assert "gen_ai.output.messages" not in span.attributes
