"""A streamed ``ChatOpenAI`` call recorded by the LangChain handler as ``instrument_openai()`` records the same stream.

Every body is a real recording re-served on 127.0.0.1 through the real openai client under the real
``ChatOpenAI``: the Responses stream ``test_responses_create_streaming[content_mode0].yaml``
(tests/fixtures/openai-cassettes) with its ``response.completed`` event replaced the way the API ends a stream
short (``response.incomplete`` at ``max_output_tokens``, ``response.failed``, a ``failed`` / ``cancelled`` status),
as tests/instrumentation/test_openai_stream_edges.py does, and the Chat Completions stream of
tests/fixtures/langchain-cassettes (a role-only first chunk, then the text). Where it applies, the same body is
read once more by the plain openai client under ``instrument_openai()``, and the two spans are compared.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_replay import AGENT, STREAM, langchain_instrumented, one
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette

pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.usefixtures("provider", "capture")

RESPONSES_STREAM = (
    FIXTURES / "openai-cassettes" / "otel-contrib" / "test_responses_create_streaming[content_mode0].yaml"
)
PROMPT = "Say this is a test"
# What instrument_openai() records of how a stream ended, compared key by key.
ENDING = (
    "gen_ai.response.finish_reasons",
    "evaltrace.stream.end_reason",
    "evaltrace.stream.completed",
    "error.type",
)


def _sse(events: list[dict[str, Any]], *, named: bool) -> bytes:
    """An SSE body as servers write it (Responses events named, as the recording has them)."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def _events(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in body.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _responses_events(ending: str) -> list[dict[str, Any]]:
    """The recorded Responses stream with its ``response.completed`` event replaced (``ending``) or kept."""
    events = _events(load_cassette(RESPONSES_STREAM)[0].body)
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


def _served(events: list[dict[str, Any]], path: str = "/v1/responses") -> Recorded:
    named = path.endswith("/responses")
    headers = [("content-type", "text/event-stream; charset=utf-8")]
    return Recorded("POST", path, b"", 200, "OK", headers, _sse(events, named=named))


def _chat_events() -> list[dict[str, Any]]:
    """The recorded Chat Completions stream: a role-only first chunk, the joke, its finish reason, usage."""
    return _events(load_cassette(STREAM)[0].body)


def _model(url: str, **kwargs: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, model="gpt-4o-mini", **kwargs)


@asynccontextmanager
async def _own_client(url: str, is_async: bool, **kwargs: Any) -> AsyncIterator[Any]:
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
        with _sync_model(url, **kwargs) as model:
            yield model


@contextmanager
def _sync_model(url: str, **kwargs: Any) -> Iterator[Any]:
    """A model on a sync httpx client of its own, closed at the end (its pooled connection with it)."""
    import httpx

    with httpx.Client() as http:
        yield _model(url, http_client=http, **kwargs)


def _langchain_span(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    span = one(exporter.get_finished_spans(), "chat gpt-4o-mini")
    return span, dict(span.attributes or {})


async def _read(model: Any, is_async: bool) -> list[Any]:
    if is_async:
        return [chunk async for chunk in model.astream(PROMPT)]
    return list(model.stream(PROMPT))


def _direct(events: list[dict[str, Any]], exporter: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    """The span ``instrument_openai()`` records of the same body read by the plain openai client."""
    import openai

    import evaltrace

    evaltrace.instrument_openai()
    try:
        with ReplayServer([_served(events)]) as server:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
                list(client.responses.create(model="gpt-4o-mini", input=PROMPT, stream=True))
    finally:
        evaltrace.uninstrument_openai()
    (span,) = exporter.get_finished_spans()
    exporter.clear()
    return span, dict(span.attributes or {})


def _ending(attrs: dict[str, Any]) -> dict[str, Any]:
    return {key: attrs.get(key) for key in ENDING}


# --- 1. a Responses stream cut at max_output_tokens -------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_an_incomplete_responses_stream_records_what_instrument_openai_records(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``response.incomplete`` (max_output_tokens): finish reason ``max_output_tokens``, end reason ``incomplete``,
    not completed, no error: the answer was cut by the API, as instrument_openai() says of the same stream."""
    events = _responses_events("incomplete")
    direct, expected = _direct(events, exporter)
    with ReplayServer([_served(events)]) as server, langchain_instrumented(restored=False):
        async with _own_client(server.url, is_async, use_responses_api=True) as model:
            chunks = await _read(model, is_async)
    assert "".join(c.text for c in chunks) == "This is a test."
    span, attrs = _langchain_span(exporter)
    assert _ending(attrs) == _ending(expected)
    assert _ending(attrs) == {
        "gen_ai.response.finish_reasons": ("max_output_tokens",),
        "evaltrace.stream.end_reason": "incomplete",
        "evaltrace.stream.completed": False,
        "error.type": None,
    }
    assert span.status.status_code is direct.status.status_code is StatusCode.UNSET


def test_a_completed_responses_stream_is_still_exhausted(exporter: InMemorySpanExporter) -> None:
    events = _responses_events("completed")
    _, expected = _direct(events, exporter)
    with ReplayServer([_served(events)]) as server, langchain_instrumented():
        with _sync_model(server.url, use_responses_api=True) as model:
            list(model.stream(PROMPT))
    _, attrs = _langchain_span(exporter)
    assert _ending(attrs) == _ending(expected)
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("exhausted", True)


# --- 2. a failed (or cancelled) Responses stream ------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_response_failed_stream_is_failed_as_instrument_openai_fails_it(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """langchain-openai raises a ``ValueError`` carrying the response's error for ``response.failed``: the span
    names the API's failure (its code, ``"{code}: {message}"``), not the ValueError, and the stream ended in error."""
    events = _responses_events("failed")
    direct, expected = _direct(events, exporter)
    with ReplayServer([_served(events)]) as server, langchain_instrumented(restored=False):
        async with _own_client(server.url, is_async, use_responses_api=True) as model:
            with pytest.raises(ValueError, match="server_error"):  # the integration's error reaches the app unchanged
                await _read(model, is_async)
    span, attrs = _langchain_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == direct.status.description == "server_error: The server had an error."
    assert attrs["error.type"] == expected["error.type"] == "server_error"
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("error", False)
    assert (expected["evaltrace.stream.end_reason"], expected["evaltrace.stream.completed"]) == ("error", False)


@pytest.mark.parametrize(("status", "failed"), [("failed", True), ("cancelled", False)], ids=["failed", "cancelled"])
def test_a_responses_answer_ending_failed_or_cancelled_in_on_llm_end(
    status: str, failed: bool, exporter: InMemorySpanExporter
) -> None:
    """A terminal response whose status is ``failed`` that the integration hands back (no error object, so it does
    not raise: the run reaches ``on_llm_end``) fails the span as ``responses_failure`` names it; ``cancelled`` is
    stopped, not failed: no error, as instrument_openai() records the same body."""
    events = _responses_events(f"status:{status}")
    direct, expected = _direct(events, exporter)
    with ReplayServer([_served(events)]) as server, langchain_instrumented():
        with _sync_model(server.url, use_responses_api=True) as model:
            list(model.stream(PROMPT))
    span, attrs = _langchain_span(exporter)
    assert span.status.status_code is direct.status.status_code
    assert span.status.description == direct.status.description
    assert attrs.get("error.type") == expected.get("error.type")
    assert attrs["gen_ai.response.finish_reasons"] == expected["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs["evaltrace.stream.completed"] is False if failed else True
    if failed:
        assert span.status.status_code is StatusCode.ERROR
        assert (span.status.description, attrs["error.type"]) == ("_OTHER", "_OTHER")
        assert attrs["evaltrace.stream.end_reason"] == "error"
        assert not [e for e in span.events if e.name == "exception"]  # nothing was raised
    else:
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in attrs


# --- 3. time to first chunk: the first chunk with output ----------------------------------------------------


class _HoldingServer(ThreadingHTTPServer):
    """Serves one SSE body event by event, holding event ``at`` and the rest until the test releases them."""

    daemon_threads = True

    def __init__(self, body: bytes, at: int) -> None:
        super().__init__(("127.0.0.1", 0), _HoldingHandler)
        self.events = [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]
        self.at = at
        self.release = threading.Event()
        host, port = self.server_address[:2]
        self.url = f"http://{host!s}:{port}"


class _HoldingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HoldingServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index, event in enumerate(self.server.events):
            if index == self.server.at:
                self.server.release.wait(10.0)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


@contextmanager
def _holding(body: bytes, at: int) -> Iterator[_HoldingServer]:
    server = _HoldingServer(body, at)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


PAUSE = 0.2


def _shows_output(chunk: Any) -> bool:
    return bool(chunk.text) or any(call.get("args") for call in chunk.tool_call_chunks)


@pytest.mark.parametrize("api", ["chat", "chat-tool-call", "responses"])
def test_time_to_first_chunk_is_the_first_chunk_carrying_output(api: str, exporter: InMemorySpanExporter) -> None:
    """The opening chunks (Chat Completions' role-only delta, or the one naming a tool call with no arguments yet; a
    Responses stream's ``response.created`` and ``output_item.added``) reach the app, and only then does the server
    send the first text (or argument fragment): time to first chunk is that output chunk's."""
    if api == "chat":
        body, at, opening_chunks, kwargs = _sse(_chat_events(), named=False), 1, 1, {}
    elif api == "chat-tool-call":  # OpenInference's agent recording: get_weather named, then its arguments
        body, at, opening_chunks, kwargs = _sse(_events(load_cassette(AGENT)[0].body), named=False), 1, 1, {}
    else:  # response.created, .in_progress, .output_item.added, .content_part.added: two chunks in LangChain
        events = _responses_events("completed")
        at = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
        body, opening_chunks, kwargs = _sse(events, named=True), 2, {"use_responses_api": True}
    with _holding(body, at) as server, langchain_instrumented(), _sync_model(server.url, **kwargs) as model:
        stream = model.stream(PROMPT)
        opening = [next(stream) for _ in range(opening_chunks)]
        time.sleep(PAUSE)
        released_ns = time.time_ns()
        server.release.set()
        rest = list(stream)
    assert not any(_shows_output(chunk) for chunk in opening)
    assert _shows_output(rest[0])
    span, attrs = _langchain_span(exporter)
    first_ns = span.start_time + attrs["gen_ai.response.time_to_first_chunk"] * 1e9  # type: ignore[operator]
    assert first_ns >= released_ns  # the output chunk's time, not the opening chunk's (PAUSE earlier at least)
    assert attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]
    assert attrs["evaltrace.stream.chunks"] == opening_chunks + len(rest)  # every chunk counts, output or not


# --- 4. a stream the application leaves early ---------------------------------------------------------------


def _direct_closed(events: list[dict[str, Any]], read: int, exporter: InMemorySpanExporter) -> dict[str, Any]:
    """``instrument_openai()``'s span of a Responses stream closed after ``read`` events."""
    import openai

    import evaltrace

    evaltrace.instrument_openai()
    try:
        with ReplayServer([_served(events)]) as server:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
                stream = client.responses.create(model="gpt-4o-mini", input=PROMPT, stream=True)
                for _ in range(read):
                    next(stream)
                stream.close()
    finally:
        evaltrace.uninstrument_openai()
    (span,) = exporter.get_finished_spans()
    exporter.clear()
    assert span.status.status_code is StatusCode.UNSET
    return dict(span.attributes or {})


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("api", "read", "output"),
    [("chat", 1, False), ("chat", 3, True), ("responses", 1, False), ("responses", 4, True)],
    ids=["chat-before-output", "chat-mid-answer", "responses-before-output", "responses-mid-answer"],
)
async def test_a_stream_the_app_closes_early_ends_once_unset_and_closed_early(
    api: str, read: int, output: bool, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``close()`` / ``aclose()`` (LangChain reports the ``GeneratorExit`` as the run's error) after ``read`` chunks,
    before any output or mid-answer: the span ends once, status UNSET, no error, ``closed_early``, not completed,
    as instrument_openai() ends a stream the app closed; a time to first chunk only once output came."""
    if api == "chat":
        served, kwargs = _served(_chat_events(), "/v1/chat/completions"), {}
    else:
        events = _responses_events("completed")
        expected = _direct_closed(events, 2, exporter)
        assert (expected["evaltrace.stream.end_reason"], expected["evaltrace.stream.completed"]) == (
            "closed_early",
            False,
        )
        served, kwargs = _served(events), {"use_responses_api": True}
    with ReplayServer([served]) as server, langchain_instrumented(restored=False):
        async with _own_client(server.url, is_async, **kwargs) as model:
            if is_async:
                agen = model.astream(PROMPT)
                taken = [await agen.__anext__() for _ in range(read)]
                await agen.aclose()
            else:
                gen = model.stream(PROMPT)
                taken = [next(gen) for _ in range(read)]
                gen.close()
    assert bool("".join(c.text for c in taken)) is output
    spans = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o-mini"]
    assert len(spans) == 1  # ended once
    span, attrs = spans[0], dict(spans[0].attributes or {})
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs and not [e for e in span.events if e.name == "exception"]
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("closed_early", False)
    assert attrs["evaltrace.stream.chunks"] == read
    assert ("gen_ai.response.time_to_first_chunk" in attrs) is output


# --- 5. reasoning first, and a ValueError that is not OpenAI's ------------------------------------------------


def _scripted(chunks: list[Any], pause_before: int, sent_ns: list[int], raises: BaseException | None = None) -> Any:
    """A LangChain chat model (no provider SDK: LangChain's own streaming and callbacks) yielding ``chunks``.

    It pauses before chunk ``pause_before`` and writes down when each chunk was handed over; then raises ``raises``.
    """
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGenerationChunk, ChatResult

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
            raise NotImplementedError  # streamed only

        def _stream(
            self, messages: Any, stop: Any = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
        ) -> Iterator[ChatGenerationChunk]:
            for index, message in enumerate(chunks):
                if index == pause_before:
                    time.sleep(PAUSE)
                chunk = ChatGenerationChunk(message=message)
                sent_ns.append(time.time_ns())
                if run_manager is not None:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk
            if raises is not None:
                raise raises

    return Scripted()


def _reasoning_chunk(shape: str) -> Any:
    """A chunk carrying only reasoning, as the integrations stream it."""
    from langchain_core.messages import AIMessageChunk

    summary = [{"index": 0, "type": "summary_text", "text": "The user wants a test."}]
    if shape == "reasoning_content":  # DeepSeek-style integrations (ChatDeepSeek, ChatXAI...)
        return AIMessageChunk(content="", additional_kwargs={"reasoning_content": "The user wants a test."})
    if shape == "responses-summary":  # langchain-openai's response.reasoning_summary_text.delta
        return AIMessageChunk(content=[{"summary": summary, "index": 0, "type": "reasoning"}])
    assert shape == "responses-v0"  # the same, in langchain-openai's output_version="v0"
    return AIMessageChunk(content="", additional_kwargs={"reasoning": {"summary": summary, "type": "reasoning"}})


@pytest.mark.parametrize("shape", ["reasoning_content", "responses-summary", "responses-v0"])
def test_time_to_first_chunk_starts_at_a_reasoning_only_chunk(shape: str, exporter: InMemorySpanExporter) -> None:
    """Reasoning is output (the model is answering): the clock stops at the first reasoning chunk, not PAUSE later
    at the first text, and not at the role-only opening chunk before it."""
    from langchain_core.messages import AIMessageChunk

    sent_ns: list[int] = []
    chunks = [AIMessageChunk(content=""), _reasoning_chunk(shape), AIMessageChunk(content="This is a test.")]
    with langchain_instrumented():
        list(_scripted(chunks, 2, sent_ns).stream(PROMPT))
    (span,) = exporter.get_finished_spans()
    first_ns = span.start_time + dict(span.attributes or {})["gen_ai.response.time_to_first_chunk"] * 1e9  # type: ignore[operator]
    assert sent_ns[1] - 1e6 <= first_ns < sent_ns[2]  # the reasoning chunk's time (1 ms of float rounding)


def test_a_value_error_of_another_provider_is_not_read_as_openais_failure(exporter: InMemorySpanExporter) -> None:
    """A ValueError whose text looks like openai's ``ResponseError`` (``code='..' message='..'``) from a model that
    is not OpenAI's is the user's (or that integration's) error: the span names the ValueError, as raised."""
    from langchain_core.messages import AIMessageChunk

    error = ValueError("code='server_error' message='The server had an error.'")
    with langchain_instrumented(), pytest.raises(ValueError) as raised:
        list(_scripted([AIMessageChunk(content="This")], -1, [], raises=error).stream(PROMPT))
    assert raised.value is error
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == f"ValueError: {error}"
    assert dict(span.attributes or {})["error.type"] == "ValueError"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "code='server_error' message='The server had an error.'",
            ("server_error", "server_error: The server had an error."),
        ),
        (
            'code="rate_limit_exceeded" message="Slow down: it\'s busy."',
            ("rate_limit_exceeded", "rate_limit_exceeded: Slow down: it's busy."),
        ),
        ("code='server_error'", None),  # no message: not a ResponseError's text
        ("server_error: The server had an error.", None),
    ],
    ids=["single-quoted", "double-quoted", "no-message", "other-text"],
)
def test_raised_failure_reads_a_response_errors_plain_text(text: str, expected: tuple[str, str] | None) -> None:
    """pydantic's ``str`` of openai's ``ResponseError`` (``code='..' message='..'``), as langchain-openai raises it."""
    from evaltrace.instrumentation.langchain._streams import raised_failure

    assert raised_failure(ValueError(text)) == expected
    assert raised_failure(RuntimeError(text)) is None  # only the integration's ValueError
