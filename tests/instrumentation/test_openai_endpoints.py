"""parse(), with_streaming_response, transport failures, conversation ids, stream metrics, abandoned spans."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion
from openai_replay import (
    attribute,
    client,
    drain,
    json_interaction,
    load,
    skip_unless_accepts,
    skip_unless_api,
    sse_interaction,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from tests_paths import cassette

from evaltrace._internal.openai.call import LLMCall
from evaltrace.instrumentation.openai import OpenAIInstrumentor

CHAT = "/v1/chat/completions"


class Weather(BaseModel):
    city: str
    temp: int


def _completion(content: str) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-parse",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        }
    )


async def _maybe(result: Any, is_async: bool) -> Any:
    return await result if is_async else result


# parse() lived under client.beta until it moved to client.chat.completions; users call whichever their openai has.
@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("resource", ["chat.completions", "beta.chat.completions"])
async def test_chat_parse_is_one_span_with_json_output(
    resource: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    skip_unless_api(f"{resource}.parse")
    api, _ = client([json_interaction(CHAT, _completion('{"city":"Paris","temp":20}'))], is_async)
    parse = attribute(api, f"{resource}.parse")
    parsed = await _maybe(
        parse(model="gpt-4o", messages=[{"role": "user", "content": "w?"}], response_format=Weather), is_async
    )
    assert parsed.choices[0].message.parsed == Weather(city="Paris", temp=20)
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat gpt-4o"
    assert span.attributes["gen_ai.output.type"] == "json"
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-parse"
    assert json.loads(span.attributes["langfuse.observation.model.parameters"]) == {"response_format": "json_schema"}


@pytest.mark.usefixtures("instrumented", "cassettes")
async def test_responses_parse_is_one_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    skip_unless_accepts("responses.parse", "text_format", "conversation")
    item = load(cassette("test_responses_create_basic[content_mode0].yaml"))[0]
    body = item.json
    body["output"][0]["content"][0]["text"] = '{"city":"Paris","temp":20}'
    api, _ = client([json_interaction("/v1/responses", body)], is_async)
    parsed = await _maybe(
        api.responses.parse(model="gpt-4o-mini", input="w?", text_format=Weather, conversation="conv_123"), is_async
    )
    assert parsed.output_parsed == Weather(city="Paris", temp=20)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.output.type"] == "json"
    assert span.attributes["gen_ai.conversation.id"] == "conv_123"
    assert json.loads(span.attributes["langfuse.observation.model.parameters"]) == {"response_format": "json_schema"}
    assert span.attributes["gen_ai.response.id"] == body["id"]


@pytest.mark.usefixtures("instrumented")
async def test_with_streaming_response_leaves_the_body_to_the_user(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    api, _ = client([json_interaction(CHAT, _completion("hi"))], is_async)
    manager = api.chat.completions.with_streaming_response.create(model="gpt-4o", messages=[])
    if is_async:
        async with manager as response:
            completion = await response.parse()
    else:
        with manager as response:
            completion = response.parse()
    assert completion.id == "chatcmpl-parse"
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes["gen_ai.request.model"] == "gpt-4o"


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(
    ("failure", "expected"),
    [(httpx.ReadTimeout, openai.APITimeoutError), (httpx.ConnectError, openai.APIConnectionError)],
)
async def test_transport_failures_are_errors(
    failure: type[Exception], expected: type[Exception], is_async: bool, exporter: InMemorySpanExporter
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise failure("network", request=request)  # type: ignore[call-arg]

    transport = httpx.MockTransport(handler)
    if is_async:
        api: Any = openai.AsyncOpenAI(api_key="k", max_retries=0, http_client=httpx.AsyncClient(transport=transport))
    else:
        api = openai.OpenAI(api_key="k", max_retries=0, http_client=httpx.Client(transport=transport))
    with pytest.raises(expected):
        await _maybe(api.chat.completions.create(model="gpt-4o", messages=[]), is_async)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == expected.__qualname__
    assert [e.name for e in span.events] == ["exception"]


async def test_stream_metrics(is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    from openai.types.chat import ChatCompletionChunk

    chunks = [
        ChatCompletionChunk.model_validate(
            {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
        )
        for choice in [
            {"index": 0, "delta": {"content": "a"}, "finish_reason": None},
            {"index": 0, "delta": {"content": "b"}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "stop"},
        ]
    ]
    reader = InMemoryMetricReader()
    OpenAIInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        api, _ = client([sse_interaction(CHAT, chunks)], is_async)
        await drain(await _maybe(api.chat.completions.create(model="m", messages=[], stream=True), is_async), is_async)
    finally:
        OpenAIInstrumentor().uninstrument()
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (first,) = metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points
    (per_chunk,) = metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points
    # conventions.md 1.7: time_per_output_chunk is "recorded once per chunk after the first" ("b", then the finish)
    assert first.count == 1 and per_chunk.count == 2
    assert first.attributes["gen_ai.operation.name"] == "chat"


@pytest.mark.usefixtures("instrumented")
async def test_span_is_closed_when_our_response_code_fails(
    is_async: bool, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: LLMCall, *args: Any) -> None:
        raise RuntimeError("bug in evaltrace")

    monkeypatch.setattr(LLMCall, "finish", broken)
    monkeypatch.setattr(LLMCall, "finish_result", broken)  # a parsed body's path
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")
    api, _ = client([json_interaction(CHAT, _completion("hi"))], is_async)
    completion = await _maybe(api.chat.completions.create(model="gpt-4o", messages=[]), is_async)
    assert completion.id == "chatcmpl-parse"
    (span,) = exporter.get_finished_spans()
    attributes = span.attributes or {}
    assert "gen_ai.response.id" not in attributes
    assert attributes["gen_ai.input.messages"] == "[]"  # the request is still recorded


@pytest.mark.openai_api("beta.responses")
@pytest.mark.usefixtures("instrumented", "cassettes")
async def test_beta_responses_create_is_traced(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item = load(cassette("test_responses_create_basic[content_mode0].yaml"))[0]
    api, server = client([item], is_async)
    response = await _maybe(api.beta.responses.create(**item.request), is_async)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["openai.api.type"] == "responses"
    assert span.attributes["gen_ai.response.id"] == response.id == item.json["id"]
