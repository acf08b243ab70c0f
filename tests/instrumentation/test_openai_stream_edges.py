"""Streams that end short of their terminal signal, Responses streams that end in an error, Azure's filter chunk.

Every body is a recorded stream (tests/fixtures/openai-cassettes) re-served through the real openai client,
cut or extended the way servers do it: the recording's own events, minus the ones a server never sent.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
from openai_replay import Interaction, client, drain, load
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests_paths import cassette

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")

CHAT_STREAM = "test_chat_completion_streaming.yaml"  # gpt-4-0613, "This is a test.", a usage chunk
CHAT_N2_STREAM = "test_chat_completion_multiple_choices_streaming.yaml"  # n=2: two interleaved choices
RESPONSES_STREAM = "test_responses_create_streaming[content_mode0].yaml"


def _sse(events: list[dict[str, Any]], *, done: bool, named: bool = False) -> str:
    """An SSE body as servers write it: chat ends with ``data: [DONE]`` (unless cut), Responses names events."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event, separators=(',', ':'))}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


def _serve(recorded: Interaction, events: list[dict[str, Any]], *, done: bool, named: bool = False) -> Interaction:
    headers = [("content-type", "text/event-stream; charset=utf-8")]
    return Interaction(recorded.path, recorded.request, 200, headers, _sse(events, done=done, named=named))


async def _consume(item: Interaction, is_async: bool) -> list[Any]:
    api, _ = client([item], is_async)
    method = api.responses.create if item.path.endswith("/responses") else api.chat.completions.create
    result = method(**item.request)
    return await drain(await result if is_async else result, is_async)


def _span(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    (span,) = exporter.get_finished_spans()
    return span, dict(span.attributes or {})


def _text(attrs: dict[str, Any]) -> list[str]:
    """The text of each output message."""
    messages = json.loads(attrs["gen_ai.output.messages"])
    return ["".join(p.get("content", "") for p in m["parts"] if p["type"] == "text") for m in messages]


# --- 1. a chat stream cut short --------------------------------------------------------------------------


def _chat_cut(name: str, keep: int | None) -> tuple[Interaction, list[dict[str, Any]]]:
    """The recording up to (not including) its first finish_reason chunk, or its first ``keep`` events; no [DONE]."""
    recorded = load(cassette(name))[0]
    events = recorded.sse_events()
    first_finish = next(i for i, e in enumerate(events) if any(c.get("finish_reason") for c in e["choices"]))
    kept = events[: first_finish if keep is None else keep]
    return _serve(recorded, kept, done=False), kept


@pytest.mark.parametrize("keep", [None, 3, 1, 0], ids=["before_finish", "mid_answer", "role_only", "no_chunk"])
async def test_chat_stream_cut_before_finish_reason_is_truncated_not_completed(
    keep: int | None, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    item, kept = _chat_cut(CHAT_STREAM, keep)
    chunks = await _consume(item, is_async)  # the SDK ends the iteration quietly: nothing tells the user
    assert len(chunks) == len(kept)
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.completed"] is False
    assert attrs["evaltrace.stream.end_reason"] == "truncated"
    assert attrs["evaltrace.stream.chunks"] == len(kept)
    # Nothing was raised and what arrived is kept: no error status, no error.type, no finish reason invented.
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs
    assert "gen_ai.response.finish_reasons" not in attrs
    expected = "".join(c["delta"].get("content") or "" for e in kept for c in e["choices"])
    assert _text(attrs) == ([expected] if kept else [])


async def test_chat_stream_cut_after_one_of_two_choices_finished_is_truncated(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    recorded = load(cassette(CHAT_N2_STREAM))[0]
    events = recorded.sse_events()
    finish0 = next(i for i, e in enumerate(events) if any(c.get("finish_reason") for c in e["choices"]))
    await _consume(_serve(recorded, events[: finish0 + 1], done=False), is_async)
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.end_reason"] == "truncated"
    assert attrs["evaltrace.stream.completed"] is False
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)  # choice 0's, as received


@pytest.mark.parametrize("done", [True, False], ids=["with_done", "without_done"])
async def test_chat_stream_with_every_finish_reason_is_completed(
    done: bool, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The finish_reason is what counts: a server that omits ``[DONE]`` after it still finished the answer."""
    recorded = load(cassette(CHAT_N2_STREAM))[0]
    await _consume(_serve(recorded, recorded.sse_events(), done=done), is_async)
    _, attrs = _span(exporter)
    assert attrs["evaltrace.stream.end_reason"] == "exhausted"
    assert attrs["evaltrace.stream.completed"] is True


# --- 2. Responses streams without response.completed -----------------------------------------------------


def _responses(mutate: str) -> Interaction:
    """The recorded Responses stream with its ``response.completed`` event dropped or replaced."""
    recorded = load(cassette(RESPONSES_STREAM))[0]
    events = recorded.sse_events()
    final = events.pop()
    assert final["type"] == "response.completed"
    seq = final["sequence_number"]
    response = final["response"]
    if mutate == "error_event":  # the documented shape of ResponseErrorEvent
        error = {"code": "server_error", "message": "The server had an error.", "param": None}
        events.append({"type": "error", **error, "sequence_number": seq})
    elif mutate == "failed":
        response.update(status="failed", error={"code": "server_error", "message": "The server had an error."})
        events.append({"type": "response.failed", "response": response, "sequence_number": seq})
    elif mutate == "incomplete":
        response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        events.append({"type": "response.incomplete", "response": response, "sequence_number": seq})
    else:
        assert mutate == "dropped"
    return _serve(recorded, events, done=False, named=True)


@pytest.mark.openai_api("responses")
async def test_responses_stream_without_terminal_event_is_truncated(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    events = await _consume(_responses("dropped"), is_async)
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.completed"] is False
    assert attrs["evaltrace.stream.end_reason"] == "truncated"
    assert attrs["evaltrace.stream.chunks"] == len(events)
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs
    assert _text(attrs) == ["This is a test."]  # the deltas that arrived


@pytest.mark.openai_api("responses")
@pytest.mark.parametrize("mutate", ["error_event", "failed"])
async def test_responses_stream_ending_in_error_is_failed(
    mutate: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    await _consume(_responses(mutate), is_async)  # the SDK raises for neither
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.completed"] is False
    assert attrs["evaltrace.stream.end_reason"] == "error"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "server_error: The server had an error."
    assert attrs["error.type"] == "server_error"
    assert not span.events  # nothing was raised: no exception event
    assert _text(attrs) == ["This is a test."]  # the deltas, or the failed response's output


@pytest.mark.openai_api("responses")
async def test_responses_error_event_without_code_is_other(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item = _responses("dropped")
    error = {"type": "error", "code": None, "message": "Oops", "param": None, "sequence_number": 99}
    item.body += _sse([error], done=False, named=True)
    await _consume(item, is_async)
    span, attrs = _span(exporter)
    assert attrs["error.type"] == "_OTHER"
    assert span.status.description == "_OTHER: Oops"


@pytest.mark.openai_api("responses")
async def test_responses_error_with_nested_error_body_raises_and_is_failed(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """An ``error`` event that carries the HTTP error body (``{"error": {...}}``): the SDK raises ``APIError``."""
    item = _responses("dropped")
    nested = {"type": "error", "error": {"code": "server_error", "message": "Boom"}, "sequence_number": 99}
    item.body += _sse([nested], done=False, named=True)
    with pytest.raises(openai.APIError):
        await _consume(item, is_async)
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.end_reason"] == "error"
    assert attrs["evaltrace.stream.completed"] is False
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.openai_api("responses")
async def test_responses_stream_ending_incomplete_is_not_completed_nor_failed(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``response.incomplete`` (a token limit, a content filter) is an answer cut by the API, not an error."""
    await _consume(_responses("incomplete"), is_async)
    span, attrs = _span(exporter)
    assert attrs["evaltrace.stream.completed"] is False
    assert attrs["evaltrace.stream.end_reason"] == "incomplete"
    assert attrs["gen_ai.response.finish_reasons"] == ("max_output_tokens",)
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs


# --- 3. Azure OpenAI's first chunk: prompt filter results, no id, no model, no choices --------------------

# Azure's documented first chunk (content filtering on, streaming): everything empty but the filter verdicts.
AZURE_FIRST_CHUNK = {
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": [
        {
            "prompt_index": 0,
            "content_filter_results": {
                "hate": {"filtered": False, "severity": "safe"},
                "self_harm": {"filtered": False, "severity": "safe"},
                "sexual": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": False, "severity": "safe"},
            },
        }
    ],
}


class _Stamped:
    """SSE events served one read each; notes the wall clock just before serving the first content event.

    The clock is read after a pause that follows the filter chunk's delivery, so a first-chunk stamp taken at
    the filter chunk is before it and a stamp taken at the first content chunk is after it, by event order alone.
    """

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.before_content_ns = 0

    def _step(self, index: int) -> None:
        if index == 1:
            time.sleep(0.01)  # the filter chunk has been handed to the user; the stamp below must come later
            self.before_content_ns = time.time_ns()

    def sync(self) -> Iterator[bytes]:
        for index, event in enumerate(self.events):
            self._step(index)
            yield event

    async def asynchronous(self) -> AsyncIterator[bytes]:
        for index, event in enumerate(self.events):
            self._step(index)
            yield event


async def test_azure_filter_chunk_neither_names_the_response_nor_starts_the_clock(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    recorded = load(cassette(CHAT_STREAM))[0]
    events = [AZURE_FIRST_CHUNK, *recorded.sse_events()]
    body = _sse(events, done=True)
    stamped = _Stamped([(e + "\n\n").encode() for e in body.split("\n\n") if e.strip()])

    def handler(request: httpx.Request) -> httpx.Response:
        content = stamped.asynchronous() if is_async else stamped.sync()
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    transport = httpx.MockTransport(handler)
    base = "https://my-resource.openai.azure.com/openai/deployments/gpt-4"
    api: Any = (
        openai.AsyncOpenAI(api_key="k", base_url=base, http_client=httpx.AsyncClient(transport=transport))
        if is_async
        else openai.OpenAI(api_key="k", base_url=base, http_client=httpx.Client(transport=transport))
    )
    result = api.chat.completions.create(**recorded.request)
    chunks = await drain(await result if is_async else result, is_async)
    assert chunks[0].id == "" and chunks[0].choices == []  # the client hands the filter chunk over as it came

    span, attrs = _span(exporter)
    first = events[1]
    assert attrs["gen_ai.response.id"] == first["id"]
    assert attrs["gen_ai.response.model"] == "gpt-4-0613"
    assert attrs["evaltrace.stream.chunks"] == len(events)
    assert attrs["evaltrace.stream.completed"] is True
    started = dt.datetime.fromisoformat(attrs["langfuse.observation.completion_start_time"])
    before_content = dt.datetime.fromtimestamp(stamped.before_content_ns / 1e9, tz=dt.UTC)
    # Microsecond rounding of both stamps: 1 ms of slack, against the 10 ms pause the filter chunk would show.
    assert started >= before_content - dt.timedelta(milliseconds=1)
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]


# --- 4. the time to first chunk, on the span's own clock ------------------------------------------------------


class _PreemptedClock:
    """``time`` for the call module: its ``perf_counter`` reads a second early, as when the calling thread is
    preempted for a second between the call's own stamp and the span's start (seen under load)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def perf_counter() -> float:
        return time.perf_counter() - 1.0


async def test_time_to_first_chunk_never_exceeds_the_span_duration(
    is_async: bool, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaltrace._internal.openai import call as call_module

    monkeypatch.setattr(call_module, "time", _PreemptedClock())
    recorded = load(cassette(CHAT_STREAM))[0]
    for _ in range(3):
        await _consume(_serve(recorded, recorded.sse_events(), done=True), is_async)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        a = span.attributes or {}
        duration = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
        ttfc = a["gen_ai.response.time_to_first_chunk"]
        assert 0 <= ttfc <= duration and ttfc <= a["evaltrace.stream.time_to_last_chunk"]
