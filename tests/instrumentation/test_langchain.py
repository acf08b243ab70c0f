"""LangChain chains replayed through the real framework and the real ``ChatOpenAI`` against recorded traffic.

Each test runs a real chain (prompt | ChatOpenAI | parser, a RAG chain over a local retriever) with
``evaltrace.instrument_langchain()`` and checks the spans, their parenting, and the Trace evaluators see.
The recordings: tests/fixtures/langchain-cassettes (README there).
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_replay import (
    CHAT,
    CHAT_401,
    STREAM,
    TOKENS,
    chat_openai,
    kind,
    langchain_instrumented,
    one,
    parent_of,
    replay,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cassettes import Recorded, ReplayServer
from evaltrace import pricing
from evaltrace.mapping import trace_from_spans

QUESTION = "What is the capital of France?"

# The real OTel SDK (in-memory exporter) and content capture, from tests/conftest.py and this folder's conftest.
pytestmark = pytest.mark.usefixtures("provider", "capture")


def _france_chain(server: Any) -> Any:
    """The recorded request's model and parameters, through a prompt and a parser."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("system", "You are a helpful assistant!"), ("user", "{question}")])
    model = chat_openai(
        server,
        model="gpt-3.5-turbo",
        temperature=0.1,
        top_p=0.9,
        frequency_penalty=0.5,
        presence_penalty=0.5,
        seed=100,
        max_completion_tokens=100,
        stop=["\n", "Human:", "AI:"],
    )
    return prompt | model | StrOutputParser()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_simple_chain_records_chain_prompt_model_and_parser_spans(
    exporter: InMemorySpanExporter, is_async: bool
) -> None:
    from opentelemetry import trace as otel_trace

    from evaltrace._internal.tracing import get_tracer

    with replay(CHAT) as server, langchain_instrumented(restored=not is_async):
        chain = _france_chain(server)
        inputs = {"question": QUESTION}
        answer = await chain.ainvoke(inputs) if is_async else chain.invoke(inputs)
        await chain.steps[1].root_async_client.close()
        # Whatever the run left current here, a span started after it is a root again, as it was before.
        assert not otel_trace.get_current_span().get_span_context().is_valid
        get_tracer().start_span("after").end()
    assert answer == "The capital of France is Paris."
    spans = [s for s in exporter.get_finished_spans() if s.name != "after"]
    assert one(exporter.get_finished_spans(), "after").parent is None
    root = one(spans, "RunnableSequence")
    chat = one(spans, "chat gpt-3.5-turbo")
    prompt = one(spans, "ChatPromptTemplate")
    parser = one(spans, "StrOutputParser")
    assert root.parent is None and kind(root) == "task"
    assert all(parent_of(spans, s) is root for s in (chat, prompt, parser))
    assert (kind(prompt), kind(parser), kind(chat)) == ("task", "task", "llm")
    assert chat.kind is SpanKind.CLIENT and chat.status.status_code is StatusCode.UNSET
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-3.5-turbo"
    assert attrs["gen_ai.request.temperature"] == 0.1 and attrs["gen_ai.request.top_p"] == 0.9
    assert attrs["gen_ai.request.frequency_penalty"] == 0.5 and attrs["gen_ai.request.presence_penalty"] == 0.5
    assert attrs["gen_ai.request.seed"] == 100 and attrs["gen_ai.request.max_tokens"] == 100
    assert list(attrs["gen_ai.request.stop_sequences"]) == ["\n", "Human:", "AI:"]
    assert attrs["gen_ai.response.model"] == "gpt-3.5-turbo-0125"
    assert attrs["gen_ai.response.id"] == "chatcmpl-DB5VKnX0DBvthDkYqZDgfZVAqhZUk"
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["stop"]
    sent = server.received[0].json()
    assert sent["model"] == "gpt-3.5-turbo" and sent["seed"] == 100  # what the SDK really sent
    assert attrs["gen_ai.usage.input_tokens"] == 24 and attrs["gen_ai.usage.output_tokens"] == 7  # recorded usage
    cost = pricing.cost_of("gpt-3.5-turbo-0125", input_tokens=24, output_tokens=7)
    assert cost is not None and attrs["evaltrace.cost_usd"] == pytest.approx(cost.total_usd) and cost.total_usd > 0
    assert json.loads(str(attrs["gen_ai.input.messages"])) == [
        {"role": "system", "parts": [{"type": "text", "content": "You are a helpful assistant!"}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
    ]
    assert json.loads(str(attrs["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "The capital of France is Paris."}],
            "finish_reason": "stop",
        }
    ]
    trace = trace_from_spans(spans)
    assert trace.input == {"question": QUESTION}
    assert trace.output.final_answer == "The capital of France is Paris."
    assert trace.metrics.token_input == 24 and trace.metrics.cost_usd == pytest.approx(cost.total_usd)
    assert [m.role for m in trace.messages] == ["system", "user", "assistant"]


def test_usage_details_from_usage_metadata(exporter: InMemorySpanExporter) -> None:
    """Cached and reasoning tokens come from the AIMessage's usage_metadata (the recording reports both)."""
    from langchain_core.messages import HumanMessage, SystemMessage

    with replay(TOKENS) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.7)
        reply = model.invoke([SystemMessage("Translate the following from English into Italian"), HumanMessage("hi!")])
    assert reply.content == "Ciao!"
    attrs = dict(one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {})
    assert attrs["gen_ai.usage.input_tokens"] == 20 and attrs["gen_ai.usage.output_tokens"] == 4
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 3
    assert attrs["openai.response.system_fingerprint"] == "fp_b376dfbbd5"


@pytest.mark.parametrize("configured", ["base_url", "OPENAI_BASE_URL"])
def test_the_model_span_names_the_server_the_model_calls(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, configured: str
) -> None:
    """``server.address`` / ``server.port`` of the API ChatOpenAI sends to, as instrument_openai() records them from
    the client: its ``base_url``, else the openai client's own default, which ``OPENAI_BASE_URL`` sets (ChatOpenAI
    does not copy it into its arguments)."""
    from langchain_openai import ChatOpenAI

    with replay(TOKENS) as server, langchain_instrumented():
        if configured == "base_url":
            model = chat_openai(server, model="gpt-4o-mini", temperature=0.7)
        else:
            monkeypatch.delenv("OPENAI_API_BASE", raising=False)
            monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
            model = ChatOpenAI(model="gpt-4o-mini", temperature=0.7, api_key="x", max_retries=0)
        model.invoke("hi!")
        port = int(server.url.rsplit(":", 1)[1])
    attrs = one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {}
    assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", port)


def test_streamed_chain_records_first_chunk_and_chunks(exporter: InMemorySpanExporter) -> None:
    from langchain_core.output_parsers import StrOutputParser

    with replay(STREAM) as server, langchain_instrumented():
        chain = chat_openai(server, model="gpt-3.5-turbo", temperature=0.7, stream_usage=True) | StrOutputParser()
        pieces = list(chain.stream("Tell me a funny joke, a one-liner."))
    text = "".join(pieces)
    assert text.startswith("Why couldn't the bicycle stand up by itself?") and len(pieces) > 5
    spans = exporter.get_finished_spans()
    chat = one(spans, "chat gpt-3.5-turbo")
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.request.stream"] is True
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] <= (chat.end_time - chat.start_time) / 1e9
    assert attrs["evaltrace.stream.chunks"] >= len(pieces)
    # Read to its end (its choice's finish reason came): completed, as instrument_openai() records a whole stream;
    # the last chunk after the first, and the output rate over the time between them.
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("exhausted", True)
    last = attrs["evaltrace.stream.time_to_last_chunk"]
    assert attrs["gen_ai.response.time_to_first_chunk"] < last <= (chat.end_time - chat.start_time) / 1e9
    rate = attrs["gen_ai.usage.output_tokens"] / (last - attrs["gen_ai.response.time_to_first_chunk"])
    assert attrs["evaltrace.stream.output_tokens_per_second"] == pytest.approx(rate, rel=1e-3)
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["stop"]
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["parts"] == [{"type": "text", "content": text}]
    assert parent_of(spans, chat) is one(spans, "RunnableSequence")
    assert trace_from_spans(spans).output.final_answer == text


def test_stream_left_early_ends_every_span_once(exporter: InMemorySpanExporter) -> None:
    """A consumer that stops after two chunks: the generator's close ends the runs; nothing stays open.

    The inner runs end where the close reaches them (the copied contexts LangChain steps a stream in, gone after);
    the caller's own context is restored."""
    from langchain_core.output_parsers import StrOutputParser
    from opentelemetry import trace as otel_trace

    with replay(STREAM) as server, langchain_instrumented(restored=False) as handler:
        chain = chat_openai(server, model="gpt-3.5-turbo", temperature=0.7) | StrOutputParser()
        stream = chain.stream("Tell me a funny joke, a one-liner.")
        first = [next(stream), next(stream)]
        assert otel_trace.get_current_span().get_span_context().is_valid  # the chain's span, while it streams
        stream.close()
        assert otel_trace.get_current_span() is otel_trace.INVALID_SPAN
        assert "RunnableSequence" not in [r.span and r.span.name for r in handler._contexts.runs()]
    assert "".join(first).startswith("Why")
    spans = exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == sorted(set(names)), names  # each span ended (and was exported) once
    assert {"RunnableSequence", "chat gpt-3.5-turbo"} <= set(names)


def test_a_model_stream_left_early_says_so_with_the_timings_of_the_chunks_that_came(
    exporter: InMemorySpanExporter,
) -> None:
    """``model.stream()`` closed after two chunks (LangChain reports the close as the run's error): the span says the
    stream was left early, as instrument_openai() says it of a stream closed before its end, not completed."""
    with replay(STREAM) as server, langchain_instrumented(restored=False):
        stream = chat_openai(server, model="gpt-3.5-turbo", temperature=0.7).stream("Tell me a funny joke.")
        next(stream), next(stream)
        stream.close()
    attrs = one(exporter.get_finished_spans(), "chat gpt-3.5-turbo").attributes or {}
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("closed_early", False)
    assert attrs["evaltrace.stream.chunks"] == 2
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]
    assert "evaltrace.stream.output_tokens_per_second" not in attrs  # no usage came: no rate


def _chunk(content: str) -> str:
    """One SSE event of a Chat Completions stream (the openai SDK's own chunk type), with no finish reason."""
    from openai.types.chat import ChatCompletionChunk

    body = {"id": "chatcmpl-made", "object": "chat.completion.chunk", "created": 1_700_000_000}
    choice = {"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}
    data = ChatCompletionChunk.model_validate({**body, "model": "gpt-3.5-turbo", "choices": [choice]})
    return f"data: {data.model_dump_json()}\n\n"


def _broken_stream() -> Any:
    """A Chat Completions stream that sends two content chunks, then an error."""
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": "server_error"}}
    sse = _chunk("Why") + _chunk(" did") + f"data: {json.dumps(error)}\n\n"
    headers = [("content-type", "text/event-stream")]
    return Recorded("POST", "/v1/chat/completions", b"", 200, "OK", headers, sse.encode())


def test_a_model_stream_broken_by_an_error_says_so_with_the_timings_of_the_chunks_that_came(
    exporter: InMemorySpanExporter,
) -> None:
    import openai

    with ReplayServer([_broken_stream()]) as server, langchain_instrumented():
        stream = chat_openai(server, model="gpt-3.5-turbo").stream("Tell me a funny joke.")
        with pytest.raises(openai.APIError, match="The server had an error"):
            list(stream)
    chat = one(exporter.get_finished_spans(), "chat gpt-3.5-turbo")
    attrs = chat.attributes or {}
    assert chat.status.status_code is StatusCode.ERROR
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("error", False)
    assert attrs["evaltrace.stream.chunks"] >= 2
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]


def test_a_model_stream_whose_chunks_carry_no_finish_reason_claims_no_end_reason(
    exporter: InMemorySpanExporter,
) -> None:
    """A stream that ends (``[DONE]``) without its choice's finish reason (a server or integration that drops it):
    whether it was cut is not known, so no end reason and no ``completed`` are claimed; its timings are recorded."""
    sse = _chunk("Why") + _chunk(" did") + "data: [DONE]\n\n"
    made = Recorded(
        "POST", "/v1/chat/completions", b"", 200, "OK", [("content-type", "text/event-stream")], sse.encode()
    )
    with ReplayServer([made]) as server, langchain_instrumented():
        pieces = [chunk.content for chunk in chat_openai(server, model="gpt-3.5-turbo").stream("Tell me a joke.")]
    assert "".join(str(piece) for piece in pieces) == "Why did"
    attrs = one(exporter.get_finished_spans(), "chat gpt-3.5-turbo").attributes or {}
    assert "gen_ai.response.finish_reasons" not in attrs
    assert "evaltrace.stream.end_reason" not in attrs and "evaltrace.stream.completed" not in attrs
    assert attrs["evaltrace.stream.chunks"] >= 2
    assert 0 < attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]


class _StallingHandler(BaseHTTPRequestHandler):
    """Sends one chunk of a Chat Completions stream, then nothing until the test releases it."""

    protocol_version = "HTTP/1.1"
    server: _StallingServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        event = _chunk("Why").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()
        self.server.release.wait(10.0)


class _StallingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _StallingHandler)
        self.release = threading.Event()
        host, port = self.server_address[:2]
        self.url = f"http://{host!s}:{port}"


async def test_a_model_stream_whose_task_is_cancelled_says_it_was_left_early(exporter: InMemorySpanExporter) -> None:
    """The consumer's task is cancelled while the stream waits for its second chunk: LangChain reports the
    ``CancelledError`` as the run's error; the span says the stream was left early (not broken), with its timing."""
    server = _StallingServer()
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        with langchain_instrumented(restored=False):
            model = chat_openai(server, model="gpt-3.5-turbo")
            first = asyncio.Event()

            async def consume() -> None:
                async for _ in model.astream("Tell me a joke."):
                    first.set()

            task = asyncio.create_task(consume())
            await asyncio.wait_for(first.wait(), timeout=10.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await model.root_async_client.close()
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
    attrs = one(exporter.get_finished_spans(), "chat gpt-3.5-turbo").attributes or {}
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("closed_early", False)
    assert attrs["evaltrace.stream.chunks"] >= 1
    assert attrs["gen_ai.response.time_to_first_chunk"] > 0


def test_model_error_marks_model_and_chain_spans_and_passes_the_error_through(exporter: InMemorySpanExporter) -> None:
    import openai

    with replay(CHAT_401) as server, langchain_instrumented():
        chain = _france_chain(server)
        with pytest.raises(openai.AuthenticationError) as raised:
            chain.invoke({"question": QUESTION})
    spans = exporter.get_finished_spans()
    chat, root = one(spans, "chat gpt-3.5-turbo"), one(spans, "RunnableSequence")
    for span in (chat, root):
        assert span.status.status_code is StatusCode.ERROR
        assert [e.attributes["exception.message"] for e in span.events if e.name == "exception"] == [str(raised.value)]
    # The model call: the API's error code and HTTP status, as instrument_openai() records the same failure; the
    # chain: the error's class (langchain-openai raises its own subclass of openai's error), as any failed span.
    assert (chat.attributes or {})["error.type"] == "invalid_api_key"
    assert (chat.attributes or {})["http.response.status_code"] == 401
    cls = type(raised.value)
    assert (root.attributes or {})["error.type"] == f"{cls.__module__}.{cls.__qualname__}"
    assert parent_of(spans, chat) is root
    trace = trace_from_spans(spans)
    assert trace.error is not None and "AuthenticationError" in trace.error.message


class _UnreadableCodeError(RuntimeError):
    """An error whose ``code`` property itself raises (it reads a body the error does not have)."""

    @property
    def code(self) -> str:
        body: dict[str, str] = {}
        return body["code"]


def test_a_model_error_whose_code_cannot_be_read_still_marks_the_span_failed(exporter: InMemorySpanExporter) -> None:
    """The error's ``code`` raises while the handler names the failure: the span is still ERROR with the
    exception event, named by the error's class, and the user's error passes through unchanged."""
    from langchain_core.language_models.chat_models import BaseChatModel

    class Failing(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "failing"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            raise _UnreadableCodeError("the provider failed")

    with langchain_instrumented(), pytest.raises(_UnreadableCodeError, match="the provider failed"):
        Failing().invoke("hi")
    chat = one(exporter.get_finished_spans(), "chat model")
    assert chat.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.message"] for e in chat.events if e.name == "exception"] == ["the provider failed"]
    cls = _UnreadableCodeError
    assert (chat.attributes or {})["error.type"] == f"{cls.__module__}.{cls.__qualname__}"


def test_explicit_handler_without_global_registration(exporter: InMemorySpanExporter) -> None:
    from evaltrace import EvaltraceCallbackHandler

    handler = EvaltraceCallbackHandler()
    with replay(CHAT) as server:
        _france_chain(server).invoke({"question": QUESTION}, config={"callbacks": [handler]})
    assert {s.name for s in exporter.get_finished_spans()} >= {"RunnableSequence", "chat gpt-3.5-turbo"}
    assert not handler._runs


def test_explicit_handler_and_global_registration_make_one_span_per_run(exporter: InMemorySpanExporter) -> None:
    from evaltrace import EvaltraceCallbackHandler

    with replay(CHAT) as server, langchain_instrumented():
        _france_chain(server).invoke({"question": QUESTION}, config={"callbacks": [EvaltraceCallbackHandler()]})
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("RunnableSequence") == 1 and names.count("chat gpt-3.5-turbo") == 1


def test_uninstrument_stops_recording(exporter: InMemorySpanExporter) -> None:
    import evaltrace

    evaltrace.instrument_langchain()
    assert evaltrace.instrument_langchain() is evaltrace.instrument_langchain()  # idempotent
    evaltrace.uninstrument_langchain()
    with replay(CHAT) as server:
        _france_chain(server).invoke({"question": QUESTION})
    assert exporter.get_finished_spans() == ()


def test_batch_ends_runs_in_start_order_and_leaves_no_span_current(exporter: InMemorySpanExporter) -> None:
    """``batch`` starts both runs, then ends them first-to-last: each chain keeps its own model call as child,
    and afterwards the caller's context is what it was (no ended span of ours left current)."""
    from opentelemetry import trace as otel_trace

    from cassettes import ReplayServer, load_cassette

    before = otel_trace.get_current_span()
    with ReplayServer(load_cassette(CHAT) * 2) as server, langchain_instrumented():
        answers = _france_chain(server).batch([{"question": QUESTION}, {"question": QUESTION}])
        assert otel_trace.get_current_span() is before
    assert answers == ["The capital of France is Paris."] * 2
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.name == "RunnableSequence"]
    chats = [s for s in spans if s.name == "chat gpt-3.5-turbo"]
    assert len(roots) == 2 and all(r.parent is None for r in roots)
    assert sorted(id(parent_of(spans, c)) for c in chats) == sorted(id(r) for r in roots)


def test_our_failure_never_reaches_langchain_and_the_span_still_ends(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside tests, an error of ours is logged: the chain answers, and the span whose result we failed to read
    ends anyway (without what the result would have added)."""
    from uuid import uuid4

    from evaltrace import EvaltraceCallbackHandler
    from evaltrace.instrumentation.langchain import _handler

    def broken(run: Any, response: Any) -> Any:
        raise RuntimeError("codec bug")

    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS", raising=False)
    monkeypatch.setattr(_handler, "_model_result", broken)
    with replay(CHAT) as server, langchain_instrumented() as handler:
        assert handler.raise_error is False  # LangChain would not re-raise either
        answer = _france_chain(server).invoke({"question": QUESTION})
    assert answer == "The capital of France is Paris."
    chat = one(exporter.get_finished_spans(), "chat gpt-3.5-turbo")
    assert chat.end_time is not None and "gen_ai.response.id" not in (chat.attributes or {})
    assert "codec bug" in caplog.text

    # Events of runs the handler never saw (started before it was registered): nothing raised, nothing recorded.
    stray = EvaltraceCallbackHandler()
    stray.on_chain_end({}, run_id=uuid4())
    stray.on_llm_end(None, run_id=uuid4())
    stray.on_llm_new_token("x", run_id=uuid4())
    stray.on_tool_error(ValueError("x"), run_id=uuid4())
    stray.on_retriever_end([], run_id=uuid4())
    assert len(exporter.get_finished_spans()) == 4


async def test_async_stream_ends_every_span_and_leaves_later_spans_unparented(exporter: InMemorySpanExporter) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from opentelemetry import trace as otel_trace

    with replay(STREAM) as server, langchain_instrumented(restored=False):
        model = chat_openai(server, model="gpt-3.5-turbo", temperature=0.7)
        pieces = [piece async for piece in (model | StrOutputParser()).astream("Tell me a funny joke, a one-liner.")]
        await model.root_async_client.close()
        assert not otel_trace.get_current_span().get_span_context().is_valid
    assert "".join(pieces).startswith("Why couldn't the bicycle")
    spans = exporter.get_finished_spans()
    chat = one(spans, "chat gpt-3.5-turbo")
    assert parent_of(spans, chat) is one(spans, "RunnableSequence")
    assert (chat.attributes or {})["evaltrace.stream.chunks"] >= len(pieces)


def test_concurrent_runs_in_threads_keep_their_own_spans(exporter: InMemorySpanExporter) -> None:
    """Two threads run the chain at once through one handler: each model call nests under its own chain."""
    from concurrent.futures import ThreadPoolExecutor

    from cassettes import ReplayServer, load_cassette

    with ReplayServer(load_cassette(CHAT) * 4) as server, langchain_instrumented():
        chain = _france_chain(server)
        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = list(pool.map(lambda _: chain.invoke({"question": QUESTION}), range(4)))
    assert answers == ["The capital of France is Paris."] * 4
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.name == "RunnableSequence"]
    assert len(roots) == 4 and all(r.parent is None for r in roots)
    assert len({r.context.trace_id for r in roots}) == 4
    for chat in (s for s in spans if s.name == "chat gpt-3.5-turbo"):
        assert parent_of(spans, chat) in roots
    assert sorted(id(parent_of(spans, c)) for c in spans if c.name == "StrOutputParser") == sorted(id(r) for r in roots)


def test_without_langchain_core_the_names_resolve_and_using_them_names_the_extra() -> None:
    """In a process where langchain-core cannot be imported: ``import evaltrace`` and the public names work;
    instrumenting or creating a handler raises an ImportError naming the extra."""
    import subprocess
    import sys

    code = """
import sys
sys.modules["langchain_core"] = None  # as if not installed
import evaltrace
handler_class = evaltrace.EvaltraceCallbackHandler
for attempt in (evaltrace.instrument_langchain, handler_class):
    try:
        attempt()
    except ImportError as exc:
        print("ImportError:", exc)
evaltrace.uninstrument_langchain()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("pip install 'evaltrace[langchain]'" in line for line in lines), lines


def test_classic_agent_executor_callbacks(exporter: InMemorySpanExporter) -> None:
    """A classic ``AgentExecutor`` (from the ``langchain`` package, not installed here: its callbacks are driven
    with langchain_core's real AgentAction / AgentFinish): an agent span, each action an event, the answer."""
    from uuid import uuid4

    from langchain_core.agents import AgentAction, AgentFinish

    from evaltrace import EvaltraceCallbackHandler

    handler, run_id = EvaltraceCallbackHandler(), uuid4()
    serialized = {"id": ["langchain", "agents", "agent", "AgentExecutor"]}
    handler.on_chain_start(serialized, {"input": "weather?"}, run_id=run_id)
    handler.on_agent_action(AgentAction("get_weather", {"city": "Paris"}, "calling"), run_id=run_id)
    handler.on_agent_finish(AgentFinish({"output": "Sunny."}, "done"), run_id=run_id)
    handler.on_chain_end({"output": "Sunny."}, run_id=run_id)
    span = one(exporter.get_finished_spans(), "invoke_agent AgentExecutor")
    assert kind(span) == "agent" and (span.attributes or {})["gen_ai.agent.name"] == "AgentExecutor"
    (event,) = span.events
    assert event.name == "evaltrace.agent.action" and (event.attributes or {})["gen_ai.tool.name"] == "get_weather"
    assert json.loads(str((event.attributes or {})["gen_ai.tool.call.arguments"])) == {"city": "Paris"}
    assert trace_from_spans([span]).output.structured == {"output": "Sunny."}
