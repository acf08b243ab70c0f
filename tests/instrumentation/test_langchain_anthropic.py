"""``ChatAnthropic`` under the LangChain handler, span for span against evaltrace's own ``instrument_anthropic()``.

The real langchain-anthropic model and the real anthropic client talk HTTP to a 127.0.0.1 server that replays the
Anthropic Messages fixtures (``tests/fixtures/anthropic``, see its README for provenance): whole answers, streams,
tool use, thinking (and redacted thinking), prompt-cache usage and every stop reason. The reference span is the one
``instrument_anthropic()`` records when the plain anthropic client sends the very request ChatAnthropic sent.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic_replay import FIXTURES, MODEL
from langchain_replay import langchain_instrumented
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import evaltrace
from cassettes import Recorded, ReplayServer

pytest.importorskip("langchain_anthropic")

pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:Received unexpected tool content block"),
]

SYSTEM = "You are a weather assistant. Answer in one sentence."
QUESTION = "What is the weather like in San Francisco?"

# What the two spans of one call must agree on (the server from ChatAnthropic's URL, its port checked apart: each
# call has a replay server of its own; the other transport-level ones, stream timings, and the OpenInference /
# Langfuse duplicates of the messages, are the SDK instrumentation's own).
SAME = (
    "server.address",
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.max_tokens",
    "gen_ai.response.id",
    "gen_ai.response.model",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
    "evaltrace.cost_usd",
)
# What langchain-anthropic does not hand LangChain from a stream: the ``message_start`` event (the message id, and
# the input and cache counts when the closing ``message_delta`` does not repeat them, as these recordings' do not).
NOT_STREAMED = (
    "gen_ai.response.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "evaltrace.cost_usd",
)


def _recorded(name: str) -> Recorded:
    content_type = "text/event-stream" if name.endswith(".sse") else "application/json"
    headers = [("content-type", content_type), ("request-id", "req_test")]
    return Recorded("POST", "/v1/messages", b"", 200, "OK", headers, (FIXTURES / name).read_bytes())


@pytest.fixture
def llm_spans(exporter: InMemorySpanExporter) -> Iterator[Any]:
    def spans() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("evaltrace.span.kind") == "llm"]

    yield spans


def _get_weather() -> Any:
    from langchain_core.tools import tool

    @tool
    def get_weather(location: str) -> str:
        """Get the current weather in a given location."""
        return "sunny"

    return get_weather


MESSAGES = [("system", SYSTEM), ("human", QUESTION)]


def _model(fixture: str, server: ReplayServer, **options: Any) -> Any:
    from langchain_anthropic import ChatAnthropic

    model: Any = ChatAnthropic(
        model=MODEL,
        base_url=server.url,
        api_key="test",
        max_retries=0,
        max_tokens=1024,
        streaming=fixture.endswith(".sse"),
        **options,
    )
    return model.bind_tools([_get_weather()]) if "tool" in fixture else model


def _chat_anthropic(fixture: str, **call: Any) -> tuple[dict[str, Any], int]:
    """ChatAnthropic asked the system prompt and question (``call``: its options); the request body it sent and the
    port of the server it sent it to."""
    constructor = ("effort", "thinking", "temperature", "top_k", "top_p", "stop_sequences")
    options = {k: call.pop(k) for k in list(call) if k in constructor}
    with ReplayServer([_recorded(fixture)]) as server:
        model = _model(fixture, server, **options)
        model.invoke(MESSAGES, **call)
        return dict(server.received[0].json()), int(server.url.rsplit(":", 1)[1])


def _native(fixture: str, request: dict[str, Any]) -> None:
    """The same request sent by the plain anthropic client under ``instrument_anthropic()``."""
    import anthropic

    # Sampling parameters anthropic 2 no longer names (temperature, top_p, top_k) go in ``extra_body``, as
    # langchain-anthropic sends them.
    named = set(inspect.signature(anthropic.resources.messages.Messages.create).parameters)
    kwargs = {k: v for k, v in request.items() if k in named}
    extra = {k: v for k, v in request.items() if k not in named}
    evaltrace.instrument_anthropic()
    try:
        with ReplayServer([_recorded(fixture)]) as server:
            client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
            reply = client.messages.create(**kwargs, **({"extra_body": extra} if extra else {}))
            if request.get("stream"):
                for _ in reply:
                    pass
    finally:
        evaltrace.uninstrument_anthropic()


def _attrs(span: ReadableSpan, keys: tuple[str, ...]) -> dict[str, Any]:
    attrs = span.attributes or {}
    return {k: list(v) if isinstance(v, tuple) else v for k in keys if (v := attrs.get(k)) is not None}


def _handler_and_native(fixture: str, llm_spans: Any, **call: Any) -> tuple[ReadableSpan, ReadableSpan]:
    with langchain_instrumented():
        request, port = _chat_anthropic(fixture, **call)
    _native(fixture, request)
    handler, native = llm_spans()
    assert handler.name == native.name == f"chat {MODEL}"
    assert (handler.attributes or {}).get("server.port") == port
    assert type((native.attributes or {}).get("server.port")) is int
    return handler, native


WHOLE = ["text.json", "tool_use.json", "thinking.json", "thinking_tokens.json", "cache.json", "max_tokens.json"]


@pytest.mark.parametrize("fixture", [*WHOLE, "refusal.json"])
def test_a_whole_answer_is_recorded_as_instrument_anthropic_records_it(fixture: str, llm_spans: Any) -> None:
    """Attribute by attribute: the system prompt apart from the messages, tool calls with parsed arguments, thinking
    and redacted thinking as reasoning parts, every stop reason verbatim and mapped, input tokens with the prompt
    cache (its writes too, which langchain-anthropic splits by lifetime), reasoning tokens, the cost."""
    handler, native = _handler_and_native(fixture, llm_spans)
    assert _attrs(handler, SAME) == _attrs(native, SAME)
    attrs = handler.attributes or {}
    assert json.loads(str(attrs["gen_ai.system_instructions"])) == [{"type": "text", "content": SYSTEM}]
    assert [m["role"] for m in json.loads(str(attrs["gen_ai.input.messages"]))] == ["user"]
    assert "gen_ai.response.id" in attrs and "gen_ai.usage.input_tokens" in attrs


@pytest.mark.parametrize(
    ("fixture", "call", "recorded"),
    [
        (
            "text.json",
            {"temperature": 0.3, "top_k": 5, "stop": ["END"]},
            {"gen_ai.request.temperature": 0.3, "gen_ai.request.top_k": 5, "gen_ai.request.stop_sequences": ["END"]},
        ),
        ("text.json", {"top_p": 0.9}, {"gen_ai.request.top_p": 0.9}),
        # Given to the constructor: sent with every call, and no invocation param repeats it.
        ("text.json", {"stop_sequences": ["END", "STOP"]}, {"gen_ai.request.stop_sequences": ["END", "STOP"]}),
        # Both: the call's are sent (langchain-anthropic's ``stop or self.stop_sequences``), and recorded.
        ("text.json", {"stop_sequences": ["CTOR"], "stop": ["END"]}, {"gen_ai.request.stop_sequences": ["END"]}),
        (
            "thinking.json",
            {"thinking": {"type": "adaptive"}, "effort": "high"},
            {"gen_ai.request.reasoning.level": "high"},
        ),
    ],
    ids=["sampling-and-stop", "top-p", "constructor-stop", "call-stop-over-constructor-stop", "effort"],
)
def test_request_parameters_are_recorded_as_instrument_anthropic_records_them(
    fixture: str, call: dict[str, Any], recorded: dict[str, Any], llm_spans: Any
) -> None:
    """Sampling parameters (``top_k`` an int, as the SDK instrumentation has it), stop sequences given to the call
    or to the constructor (``ChatAnthropic(stop_sequences=...)``), and the reasoning effort
    (``output_config.effort``, in Anthropic's own levels) agree with the SDK
    instrumentation's reading of the same request."""
    handler, native = _handler_and_native(fixture, llm_spans, **call)
    keys = (*SAME, *recorded)
    assert _attrs(handler, keys) == _attrs(native, keys)
    assert _attrs(handler, tuple(recorded)) == recorded
    assert all(type(v) is type(recorded[k]) for k, v in _attrs(handler, tuple(recorded)).items())


def test_structured_output_asks_for_json_as_instrument_anthropic_reads_it(llm_spans: Any) -> None:
    """``with_structured_output(method="json_schema")`` sends Anthropic's ``output_config.format``: the output type
    is ``json``, as the SDK instrumentation reads the same request (the answer is the docs' contact extraction)."""
    from pydantic import BaseModel

    class Contact(BaseModel):
        name: str
        email: str

    with ReplayServer([_recorded("parse.json")]) as server, langchain_instrumented():
        contact = _model("parse.json", server).with_structured_output(Contact, method="json_schema").invoke(MESSAGES)
        request = server.received[0].json()
    assert contact.email == "john.smith@example.com"
    assert request["output_config"]["format"]["type"] == "json_schema"
    _native("parse.json", request)
    handler, native = llm_spans()
    keys = (*SAME, "gen_ai.output.type")
    assert _attrs(handler, keys) == _attrs(native, keys)
    assert (handler.attributes or {})["gen_ai.output.type"] == "json"


async def test_an_async_call_is_recorded_as_a_sync_one(llm_spans: Any) -> None:
    with ReplayServer([_recorded("cache.json")]) as server, langchain_instrumented(restored=False):
        model = _model("cache.json", server)
        await model.ainvoke(MESSAGES)
        await model._async_client.close()
        request = server.received[0].json()
    _native("cache.json", request)
    handler, native = llm_spans()
    assert _attrs(handler, SAME) == _attrs(native, SAME)
    assert (handler.attributes or {})["gen_ai.usage.cache_creation.input_tokens"] == 1024


@pytest.mark.parametrize(
    "fixture", ["stream_text.sse", "stream_tool.sse", "stream_thinking.sse", "stream_thinking_tokens.sse"]
)
def test_a_streamed_answer_is_recorded_as_instrument_anthropic_records_it(fixture: str, llm_spans: Any) -> None:
    """The same, streamed: the answer, its stop reason and its output tokens agree. langchain-anthropic drops the
    stream's ``message_start`` event, so its id and input count are not recorded, and no 0 stands for them."""
    handler, native = _handler_and_native(fixture, llm_spans)
    kept = tuple(k for k in SAME if k not in NOT_STREAMED)
    assert _attrs(handler, kept) == _attrs(native, kept)
    attrs = handler.attributes or {}
    assert attrs["gen_ai.request.stream"] is True and attrs["evaltrace.stream.chunks"] > 0
    # How the stream ended, as the SDK instrumentation says it of the same stream; its last chunk's time.
    ended = ("evaltrace.stream.completed", "evaltrace.stream.end_reason")
    assert _attrs(handler, ended) == _attrs(native, ended) == {ended[0]: True, ended[1]: "exhausted"}
    assert attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]
    # Langfuse's time to first token, stamped as the SDK instrumentation stamps it: the first chunk's wall time.
    first = dt.datetime.fromisoformat(str(attrs["langfuse.observation.completion_start_time"]))
    theirs = dt.datetime.fromisoformat(str((native.attributes or {})["langfuse.observation.completion_start_time"]))
    assert first.tzinfo == theirs.tzinfo == dt.UTC
    assert (handler.start_time or 0) <= first.timestamp() * 1e9 <= (handler.end_time or 0)
    assert not _attrs(handler, ("gen_ai.response.id", "gen_ai.usage.input_tokens", "evaltrace.cost_usd"))


@pytest.mark.parametrize("fixture", ["tool_use.json", "stream_thinking.sse"])
async def test_with_instrument_anthropic_on_the_sdk_span_is_the_calls_one_span_with_its_whole_response(
    fixture: str, is_async: bool, llm_spans: Any
) -> None:
    """langchain-anthropic reads its responses through ``with_raw_response`` (an ``APIResponse`` on anthropic 2,
    parsed by a coroutine on the async client, a raw stream when streamed): instrument_anthropic() reads it, so the
    SDK's span is the call's one span, and it has what the plain client's call records, the response id, the input
    tokens and the cost included (which a stream's LangChain chunks do not carry)."""
    evaltrace.instrument_anthropic()
    try:
        with ReplayServer([_recorded(fixture)]) as server, langchain_instrumented(restored=not is_async):
            model = _model(fixture, server)
            if is_async:
                await model.ainvoke(MESSAGES)
                await model._async_client.close()
            else:
                model.invoke(MESSAGES)
            request = server.received[0].json()
    finally:
        evaltrace.uninstrument_anthropic()
    (span,) = llm_spans()
    _native(fixture, request)
    sdk, native = llm_spans()
    assert sdk is span and native.name == sdk.name == f"chat {MODEL}"
    assert _attrs(sdk, SAME) == _attrs(native, SAME)
    attrs = sdk.attributes or {}
    assert attrs["server.address"] == "127.0.0.1"  # the SDK call's span, not the handler's
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_use" if "tool" in fixture else "end_turn",)
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["parts"]
    assert attrs["gen_ai.response.id"].startswith("msg_")
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["evaltrace.cost_usd"] > 0
    if fixture.endswith(".sse"):
        assert attrs["evaltrace.stream.completed"] is True
        assert attrs["evaltrace.stream.chunks"] == (native.attributes or {})["evaltrace.stream.chunks"]


@pytest.mark.parametrize(
    ("fixture", "status", "code"),
    [("error_400.json", 400, "invalid_request_error"), ("error_429.json", 429, "rate_limit_error"),
     ("error_529.json", 529, "overloaded_error")],
)  # fmt: skip
def test_an_api_error_is_recorded_as_instrument_anthropic_records_it(
    fixture: str, status: int, code: str, llm_spans: Any
) -> None:
    """langchain-anthropic raises its own subclass of the anthropic error (the application gets it unchanged): the
    span names the API's error type and the HTTP status, as the SDK instrumentation does for the same reply."""
    import anthropic

    error = dataclasses.replace(_recorded(fixture), status=status)
    with ReplayServer([error]) as server, langchain_instrumented():
        with pytest.raises(anthropic.APIStatusError) as raised:
            _model(fixture, server).invoke(MESSAGES)
        request = server.received[0].json()
    assert type(raised.value).__module__ == "langchain_anthropic.chat_models"
    evaltrace.instrument_anthropic()
    try:
        with ReplayServer([error]) as server, pytest.raises(anthropic.APIStatusError):
            anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0).messages.create(**request)
    finally:
        evaltrace.uninstrument_anthropic()
    handler, native = llm_spans()
    keys = ("error.type", "http.response.status_code")
    assert _attrs(handler, keys) == _attrs(native, keys) == {"error.type": code, "http.response.status_code": status}
    assert handler.status.status_code is native.status.status_code is StatusCode.ERROR
