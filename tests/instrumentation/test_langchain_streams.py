"""A streamed ``ChatOpenAI`` call recorded by the LangChain handler as ``instrument_openai()`` records the same stream.

Recorded Chat Completions and Responses streams re-served on 127.0.0.1 through the real openai client under the real
``ChatOpenAI`` (see langchain_stream_replay): time to first chunk, a stream the application leaves early, reasoning
first, and a ValueError that is not OpenAI's. Where it applies, the same body is read once more by the plain openai
client under ``instrument_openai()``, and the two spans are compared. Sections 1 and 2 (Responses streams that end
short) are in test_langchain_streams_responses.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_replay import AGENT, langchain_instrumented
from langchain_stream_replay import (
    PROMPT,
    chat_events,
    events_of,
    langchain_span,
    own_client,
    responses_events,
    served,
    sse,
    sync_model,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import ReplayServer, load_cassette

pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.usefixtures("provider", "capture")


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
        body, at, opening_chunks, kwargs = sse(chat_events(), named=False), 1, 1, {}
    elif api == "chat-tool-call":  # OpenInference's agent recording: get_weather named, then its arguments
        body, at, opening_chunks, kwargs = sse(events_of(load_cassette(AGENT)[0].body), named=False), 1, 1, {}
    else:  # response.created, .in_progress, .output_item.added, .content_part.added: two chunks in LangChain
        events = responses_events("completed")
        at = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
        body, opening_chunks, kwargs = sse(events, named=True), 2, {"use_responses_api": True}
    with _holding(body, at) as server, langchain_instrumented(), sync_model(server.url, **kwargs) as model:
        stream = model.stream(PROMPT)
        opening = [next(stream) for _ in range(opening_chunks)]
        time.sleep(PAUSE)
        released_ns = time.time_ns()
        server.release.set()
        rest = list(stream)
    assert not any(_shows_output(chunk) for chunk in opening)
    assert _shows_output(rest[0])
    span, attrs = langchain_span(exporter)
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
        with ReplayServer([served(events)]) as server:
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
        answer, kwargs = served(chat_events(), "/v1/chat/completions"), {}
    else:
        events = responses_events("completed")
        expected = _direct_closed(events, 2, exporter)
        assert (expected["evaltrace.stream.end_reason"], expected["evaltrace.stream.completed"]) == (
            "closed_early",
            False,
        )
        answer, kwargs = served(events), {"use_responses_api": True}
    with ReplayServer([answer]) as server, langchain_instrumented(restored=False):
        async with own_client(server.url, is_async, **kwargs) as model:
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
