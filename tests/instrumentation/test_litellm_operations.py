"""``litellm.embedding`` / ``aembedding`` and ``litellm.text_completion`` / ``atext_completion`` through the real LiteLLM.

No LiteLLM recording exists in any fixture set. LiteLLM is pointed (``api_base``) at the replay server on 127.0.0.1
serving OpenAI's recorded traffic (tests/fixtures/openai-cassettes): its embeddings recordings, and its chat
recordings for a text completion of a chat model (LiteLLM sends those as chat completions). No recording of
OpenAI's legacy ``/v1/completions`` exists: the bodies served for it here are written in this file, in the shape
OpenAI's API reference gives for a completion (``object: "text_completion"``, ``choices[i].text``) and its stream.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import LITELLM_WARNINGS, OPENAI, close_clients, complete_text, drain, responses_item  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace.instrumentation.litellm import LiteLLMInstrumentor  # noqa: E402

EMBED_MODEL = "openai/text-embedding-3-small"


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None, reader: InMemoryMetricReader) -> Iterator[None]:
    instrumentor = LiteLLMInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    yield
    instrumentor.uninstrument()


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """Close and drop LiteLLM's cached clients here, not in a later test (``litellm_replay.close_clients``)."""
    yield
    await close_clients()


pytestmark = [
    pytest.mark.usefixtures("instrumented"),
    *LITELLM_WARNINGS,
]


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _token_sums(reader: InMemoryMetricReader) -> dict[str, int]:
    """The token usage histogram's sums by ``gen_ai.token.type``."""
    data = reader.get_metrics_data()
    sums: dict[str, int] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "gen_ai.client.token.usage":
                    for point in metric.data.data_points:
                        kind = str(point.attributes["gen_ai.token.type"])
                        sums[kind] = sums.get(kind, 0) + int(point.sum)
    return sums


async def _embed(is_async: bool, *args: Any, **kwargs: Any) -> Any:
    params = {"api_key": "test", "num_retries": 0, **kwargs}
    if is_async:
        return await litellm.aembedding(*args, **params)
    return litellm.embedding(*args, **params)


# --- embeddings ------------------------------------------------------------------------------------------


async def test_embedding_span_follows_the_genai_embeddings_conventions(
    is_async: bool, exporter: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_embeddings_with_dimensions.yaml")) as server:
        response = await _embed(is_async, model=EMBED_MODEL, input="This is a test for embeddings with dimensions",
                                dimensions=512, api_base=f"{server.url}/v1")  # fmt: skip
        assert server.received[0].path == "/v1/embeddings"
        port = int(server.url.rsplit(":", 1)[1])
    assert len(response.data[0]["embedding"]) == 512
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == f"embeddings {EMBED_MODEL}"
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["evaltrace.span.kind"] == "embedding"
    assert a["langfuse.observation.type"] == "embedding"
    assert a["gen_ai.provider.name"] == "openai"
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.request.model"] == EMBED_MODEL
    assert a["gen_ai.response.model"] == "text-embedding-3-small"
    assert a["gen_ai.embeddings.dimension.count"] == 512
    assert a["gen_ai.usage.input_tokens"] == 8
    assert "gen_ai.usage.output_tokens" not in a
    assert json.loads(a["input.value"]) == ["This is a test for embeddings with dimensions"]
    assert a["evaltrace.cost_usd"] > 0  # priced as OpenAI's model
    assert span.status.status_code is StatusCode.UNSET
    assert _token_sums(reader) == {"input": 8}


async def test_embedding_dimension_count_comes_from_the_vectors_when_not_requested(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The model's default size is known from its answer only (the Cohere and Ollama spans read it so)."""
    with ReplayServer(load_cassette(OPENAI / "test_embeddings_with_content.yaml")) as server:
        response = await _embed(is_async, EMBED_MODEL, "This is a test for embeddings", api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.embeddings.dimension.count"] == len(response.data[0]["embedding"]) == 1536
    assert a["gen_ai.request.model"] == EMBED_MODEL  # positional model and input named as LiteLLM names them
    assert json.loads(a["input.value"]) == ["This is a test for embeddings"]


# LiteLLM's own model declares the vector a list of floats and warns on serialising a base64 one (nothing of ours).
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
async def test_embedding_encoding_format_and_batch_input(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_embeddings_with_encoding_format.yaml")) as server:
        response = await _embed(is_async, model=EMBED_MODEL, input="This is a test for embeddings with encoding format",
                                encoding_format="base64", api_base=f"{server.url}/v1")  # fmt: skip
        assert server.received[0].json()["encoding_format"] == "base64"
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.request.encoding_formats"] == ("base64",)
    assert isinstance(response.data[0]["embedding"], str)
    assert "gen_ai.embeddings.dimension.count" not in a  # a base64 vector's size is not read
    exporter.clear()
    item = load_cassette(OPENAI / "test_embeddings_with_batch_input.yaml")[0]
    with ReplayServer([item]) as server:
        await _embed(is_async, model=EMBED_MODEL, input=item.request_json()["input"], api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    assert json.loads(_attrs(span)["input.value"]) == item.request_json()["input"]


async def test_embedding_input_is_not_captured_when_content_is_off(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer(load_cassette(OPENAI / "test_embeddings_with_content.yaml")) as server:
            await _embed(is_async, model=EMBED_MODEL, input="This is a test for embeddings",
                         api_base=f"{server.url}/v1")  # fmt: skip
    finally:
        settings.replace(previous)
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert "input.value" not in a
    assert a["gen_ai.usage.input_tokens"] > 0


async def test_embedding_error_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_embeddings_model_not_found.yaml")) as server:
        with pytest.raises(litellm.NotFoundError):
            await _embed(is_async, model="openai/not-a-model", input="x", api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "embeddings openai/not-a-model"
    assert span.status.status_code is StatusCode.ERROR
    assert a["error.type"] == "NotFoundError"  # LiteLLM carries no provider code here: its class, as for chat
    assert a["http.response.status_code"] == 404


# --- text completion ---------------------------------------------------------------------------------------


async def test_text_completion_of_a_chat_model(
    is_async: bool, exporter: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    """LiteLLM sends it as a chat completion and answers a ``TextCompletionResponse``: one text_completion span."""
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_with_content.yaml")) as server:
        response = await complete_text(is_async, "Say this is a test", "openai/gpt-4o-mini",
                                       api_base=f"{server.url}/v1", temperature=0.5, max_tokens=20)  # fmt: skip
        assert server.received[0].path == "/v1/chat/completions"
    assert response.choices[0].text == "This is a test."
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "text_completion openai/gpt-4o-mini"
    assert a["gen_ai.operation.name"] == "text_completion"
    assert a["evaltrace.span.kind"] == "llm"
    assert a["gen_ai.provider.name"] == "openai"
    assert (a["gen_ai.request.temperature"], a["gen_ai.request.max_tokens"]) == (0.5, 20)
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Say this is a test"}]}
    ]
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "This is a test."}], "finish_reason": "stop"}
    ]
    assert a["gen_ai.response.id"] == "chatcmpl-ASYMQRl3A3DXL9FWCK9tnGRcKIO7q"
    assert a["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 5)
    assert a["evaltrace.cost_usd"] > 0
    assert _token_sums(reader) == {"input": 12, "output": 5}


async def test_text_completion_stream(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """A ``TextCompletionStreamWrapper``: the span ends with the stream, with the text of its chunks."""
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_streaming.yaml")) as server:
        stream = await complete_text(is_async, prompt="Say this is a test", model="openai/gpt-4o-mini",
                                     api_base=f"{server.url}/v1", stream=True)  # fmt: skip
        from litellm.text_completions.streaming_iterator import TextCompletionStreamWrapper

        assert isinstance(stream, TextCompletionStreamWrapper)  # the proxy keeps the class
        assert not exporter.get_finished_spans()  # open while the stream is
        chunks = await drain(stream, is_async)
    text = "".join(c.choices[0].text or "" for c in chunks if c.choices)
    assert text
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "text_completion openai/gpt-4o-mini"
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["evaltrace.stream.chunks"] == len(chunks)
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]
    # No usage chunk was asked for (no ``include_usage``): the usage LiteLLM kept from the caller, sync and async.
    assert not any(c.usage for c in chunks)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 5)
    # The provider's model (the recording's), not the name LiteLLM writes into each chunk.
    assert {c.model for c in chunks} == {"gpt-4o-mini"}
    assert a["gen_ai.response.model"] == "gpt-4-0613"


def _completion_body(prompts: list[str]) -> bytes:
    """A ``/v1/completions`` answer to ``prompts`` in the API reference's shape (no recording of one exists)."""
    choices = [
        {"text": f" answer {i}", "index": i, "logprobs": None, "finish_reason": "length" if i else "stop"}
        for i in range(len(prompts))
    ]
    usage = {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16}
    body = {"id": "cmpl-test1", "object": "text_completion", "created": 1700000000,
            "model": "gpt-3.5-turbo-instruct", "choices": choices, "usage": usage}  # fmt: skip
    return json.dumps(body).encode()


# The model a ``/v1/completions`` stream names: a dated snapshot, so that the provider's model is told from the name
# LiteLLM writes into the chunks it yields (the request's).
SERVED_MODEL = "gpt-3.5-turbo-instruct-0914"


def _completion_stream() -> bytes:
    """A ``/v1/completions`` stream in the API reference's shape: text chunks, a finish, a usage chunk."""
    base = {"id": "cmpl-test2", "object": "text_completion", "created": 1700000000, "model": SERVED_MODEL}
    events = [
        {**base, "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}
        for text, finish in (("This", None), (" is", None), (" a test.", None), ("", "stop"))
    ]
    events.append({**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def _served(body: bytes, kind: str = "application/json") -> Recorded:
    return Recorded("POST", "https://api.openai.com/v1/completions", b"", 200, "OK", [("content-type", kind)], body)


async def test_text_completion_of_an_openai_completions_model(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """A non-chat OpenAI model goes to ``/v1/completions``; a list of prompts is one user message each."""
    prompts = ["Say one", "Say two"]
    with ReplayServer([_served(_completion_body(prompts))]) as server:
        response = await complete_text(is_async, prompt=prompts, model="openai/gpt-3.5-turbo-instruct",
                                       api_base=f"{server.url}/v1", stop=["\n"], seed=3)  # fmt: skip
        assert server.received[0].path == "/v1/completions"
        assert server.received[0].json()["prompt"] == prompts
    assert [c.text for c in response.choices] == [" answer 0", " answer 1"]
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "text_completion openai/gpt-3.5-turbo-instruct"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.stop_sequences"] == ("\n",)
    assert a["gen_ai.request.seed"] == 3
    assert [m["parts"] for m in json.loads(a["gen_ai.input.messages"])] == [
        [{"type": "text", "content": "Say one"}],
        [{"type": "text", "content": "Say two"}],
    ]
    output = json.loads(a["gen_ai.output.messages"])
    assert [(m["parts"][0]["content"], m["finish_reason"]) for m in output] == [(" answer 0", "stop"),
                                                                              (" answer 1", "length")]  # fmt: skip
    assert a["gen_ai.response.finish_reasons"] == ("stop", "length")
    assert a["gen_ai.response.id"] == "cmpl-test1"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (7, 9)


@pytest.mark.parametrize("include_usage", [True, False])
async def test_text_completion_stream_of_an_openai_completions_model(
    is_async: bool, include_usage: bool, exporter: InMemorySpanExporter
) -> None:
    """The provider's model and usage, read where LiteLLM's ``/v1/completions`` handler keeps them.

    Without ``include_usage`` LiteLLM yields no usage (the server sends its usage chunk all the same here): the
    span records the usage LiteLLM kept from the caller, as for a chat stream.
    """
    options = {"stream_options": {"include_usage": True}} if include_usage else {}
    with ReplayServer([_served(_completion_stream(), "text/event-stream")]) as server:
        stream = await complete_text(is_async, prompt="Say this is a test", model="openai/gpt-3.5-turbo-instruct",
                                     api_base=f"{server.url}/v1", stream=True, **options)  # fmt: skip
        chunks = await drain(stream, is_async)
        assert server.received[0].path == "/v1/completions"
    assert {c.model for c in chunks} == {"gpt-3.5-turbo-instruct"}  # LiteLLM's name, not the provider's
    assert any(c.usage for c in chunks) is include_usage
    text = "".join(c.choices[0].text or "" for c in chunks if c.choices)
    assert text == "This is a test."
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (5, 4)
    assert a["gen_ai.response.model"] == SERVED_MODEL


async def test_text_completion_error_sets_error_type_and_reraises(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_404.yaml")) as server:
        with pytest.raises(litellm.NotFoundError):
            await complete_text(is_async, prompt="hi", model="openai/gpt-4o-mini", api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    assert span.name == "text_completion openai/gpt-4o-mini"
    assert span.status.status_code is StatusCode.ERROR
    assert _attrs(span)["error.type"]


# --- Responses ---------------------------------------------------------------------------------------------


async def _respond(is_async: bool, **kwargs: Any) -> Any:
    params = {"api_key": "test", "num_retries": 0, **kwargs}
    if is_async:
        return await litellm.aresponses(**params)
    return litellm.responses(**params)


async def test_responses_span_reads_the_responses_shape(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item, request = responses_item("test_responses_create_basic")
    with ReplayServer([item]) as server:
        response = await _respond(is_async, **request, api_base=f"{server.url}/v1", max_output_tokens=50)
        assert server.received[0].path == "/v1/responses"
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "chat openai/gpt-4o-mini"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.max_tokens"] == 50
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": "You are a helpful assistant."}]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Say this is a test"}]}
    ]
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "This is a test."}], "finish_reason": "stop"}
    ]
    assert a["gen_ai.response.id"] == response.id  # LiteLLM's id, the one to pass back as previous_response_id
    assert a["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (22, 6)
    assert span.status.status_code is StatusCode.UNSET


async def test_responses_tool_call_is_a_tool_call_part(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item, request = responses_item("test_responses_create_captures_tool_call_content")
    with ReplayServer([item]) as server:
        await _respond(is_async, **request, api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    (message,) = json.loads(a["gen_ai.output.messages"])
    assert message["finish_reason"] == "tool_call"
    assert [(p["type"], p["name"]) for p in message["parts"]] == [("tool_call", "get_current_weather")]
    assert [t["name"] for t in json.loads(a["gen_ai.tool.definitions"])] == ["get_current_weather"]


# LiteLLM's own usage model warns on serialising the usage it put in a stream event (nothing of ours).
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
async def test_responses_stream(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item, request = responses_item("test_responses_create_streaming")
    with ReplayServer([item]) as server:
        stream = await _respond(is_async, **request, api_base=f"{server.url}/v1")
        assert not exporter.get_finished_spans()  # open while the stream is
        events = await drain(stream, is_async)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (22, 6)


async def test_responses_error_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item, request = responses_item("test_responses_create_api_error")
    with ReplayServer([item]) as server:
        with pytest.raises(litellm.NotFoundError):  # LiteLLM maps OpenAI's 400 model_not_found so
            await _respond(is_async, **request, api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat openai/this-model-does-not-exist"
    assert span.status.status_code is StatusCode.ERROR
    assert _attrs(span)["error.type"]


async def test_responses_of_a_chat_only_provider_is_one_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """LiteLLM bridges ``responses`` to Anthropic through its chat completion: one span, the Responses call's."""
    body = (FIXTURES / "anthropic" / "text.json").read_bytes()
    reply = Recorded("POST", "https://api.anthropic.com/v1/messages", b"", 200, "OK",
                     [("content-type", "application/json")], body)  # fmt: skip
    with ReplayServer([reply]) as server:
        response = await _respond(is_async, input="Say this is a test", model="anthropic/claude-sonnet-4-6",
                                  api_base=server.url, max_output_tokens=64)  # fmt: skip
        assert server.received[0].path == "/v1/messages"
    (span,) = exporter.get_finished_spans()
    a = _attrs(span)
    assert span.name == "chat anthropic/claude-sonnet-4-6"
    assert a["gen_ai.provider.name"] == "anthropic"
    answer = "".join(c.text for item in response.output if item.type == "message" for c in item.content)
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": answer}]
    assert a["gen_ai.usage.input_tokens"] > 0


# --- Router --------------------------------------------------------------------------------------------------


async def test_a_router_alias_keeps_the_deployment_model_and_names_the_alias(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``Router(model_list=[{"model_name": alias, ...}])``: the request model is the deployment's, the alias kept."""
    chat = load_cassette(OPENAI / "test_chat_completion_with_content.yaml")
    embed = load_cassette(OPENAI / "test_embeddings_with_content.yaml")
    with ReplayServer(chat + embed) as server:
        router = litellm.Router(model_list=[
            {"model_name": "my-chat", "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": f"{server.url}/v1",
                                                         "api_key": "test"}},
            {"model_name": "my-embed", "litellm_params": {"model": EMBED_MODEL, "api_base": f"{server.url}/v1",
                                                          "api_key": "test"}},
        ], num_retries=0)  # fmt: skip
        messages = [{"role": "user", "content": "Say this is a test"}]
        if is_async:
            await router.acompletion(model="my-chat", messages=messages)
            await router.aembedding(model="my-embed", input="This is a test for embeddings")
        else:
            router.completion(model="my-chat", messages=messages)
            router.embedding(model="my-embed", input="This is a test for embeddings")
    chat_span, embed_span = exporter.get_finished_spans()
    assert chat_span.name == "chat openai/gpt-4o-mini"
    assert _attrs(chat_span)["gen_ai.request.model"] == "openai/gpt-4o-mini"
    assert _attrs(chat_span)["litellm.router.model_group"] == "my-chat"
    assert embed_span.name == f"embeddings {EMBED_MODEL}"
    assert _attrs(embed_span)["litellm.router.model_group"] == "my-embed"
    exporter.clear()
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_with_content.yaml")) as server:
        litellm.completion(model="openai/gpt-4o-mini", messages=messages, api_base=f"{server.url}/v1", api_key="t")
    (span,) = exporter.get_finished_spans()
    assert "litellm.router.model_group" not in _attrs(span)  # no Router, no alias
