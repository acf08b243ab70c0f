"""``instrument_cohere()``: v2 ``chat`` / ``chat_stream`` through the real ``cohere`` client, sync and async.

Non-streamed responses replay tests/fixtures/cohere-cassettes (pydantic-ai's recordings). No recording of
``chat_stream``, of an HTTP error or of an ``ERROR`` finish exists: those tests serve bodies built from the SDK's
types (cohere_replay.py says how), through the same replay server.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import cohere
import httpx
import pytest
from cohere_replay import (
    async_client_of,
    client_of,
    cohere_interactions,
    read_events,
    stream_interaction,
    text_stream_events,
    tool_stream_events,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import Recorded, ReplayServer
from evaltrace import pricing
from evaltrace.instrumentation.cohere import CohereInstrumentor

MODEL = "command-r7b-12-2024"
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[CohereInstrumentor]:
    instrumentor = CohereInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")


def _only_span(exporter: InMemorySpanExporter, model: str = MODEL) -> Any:
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {model}"]
    return spans[0]


def _json(span: Any, key: str) -> Any:
    return json.loads(span.attributes[key])


async def _chat(url: str, is_async: bool, **kwargs: Any) -> Any:
    params = {"model": MODEL, "messages": USER, **kwargs}
    if is_async:
        async with async_client_of(url) as client:
            return await client.chat(**params)
    with client_of(url) as client:
        return client.chat(**params)


async def test_chat_span_follows_genai_conventions(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(cohere_interactions("test_request_usage_with_cached_tokens.yaml")) as server:
        response = await _chat(server.url, is_async, temperature=0.3, p=0.9, k=5, max_tokens=100, seed=1)
        port = int(server.url.rsplit(":", 1)[1])
        sent = server.received[0].json()
    assert response.message.content[0].text == "Hello!"
    assert sent["temperature"] == 0.3 and sent["model"] == MODEL  # the call went through unchanged

    span = _only_span(exporter)
    a = span.attributes
    assert a["gen_ai.provider.name"] == "cohere"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == MODEL
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.request.temperature"] == 0.3
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.top_k"] == 5
    assert a["gen_ai.request.max_tokens"] == 100
    assert a["gen_ai.request.seed"] == 1
    assert a["gen_ai.response.id"] == "0bf8e1a5-2af6-4014-a539-c12363a043a3"
    assert a["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (2406, 2)  # billed
    assert "gen_ai.usage.cache_read.input_tokens" not in a  # 2928 cached: a share of the model's tokens only
    assert (a["cohere.usage.billed_units.input_tokens"], a["cohere.usage.billed_units.output_tokens"]) == (2406, 2)
    assert (a["cohere.usage.tokens.input_tokens"], a["cohere.usage.tokens.output_tokens"]) == (2935, 4)
    assert a["cohere.usage.cached_tokens"] == 2928
    assert _json(span, "gen_ai.input.messages") == [{"role": "user", "parts": [{"type": "text", "content": "hello"}]}]
    assert _json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}], "finish_reason": "stop"}
    ]
    price = pricing.price_of(MODEL, "cohere")
    assert price is not None  # genai-prices knows Cohere's models
    assert a["evaltrace.cost_usd"] == pytest.approx(
        pricing.cost_at(price, input_tokens=2406, output_tokens=2).total_usd  # type: ignore[union-attr]
    )
    assert span.status.status_code is StatusCode.UNSET


def test_client_v2_attribute_makes_one_span(exporter: InMemorySpanExporter) -> None:
    with ReplayServer(cohere_interactions("test_request_simple_success_with_vcr.yaml")) as server:
        with httpx.Client() as http:
            client = cohere.Client(api_key="test", base_url=server.url, httpx_client=http)
            client.v2.chat(model=MODEL, messages=USER)
    assert _only_span(exporter).attributes["gen_ai.response.finish_reasons"] == ("COMPLETE",)


async def test_raw_response_chat_is_traced_once(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(cohere_interactions("test_request_simple_success_with_vcr.yaml")) as server:
        if is_async:
            async with async_client_of(server.url) as aclient:
                raw = await aclient.with_raw_response.chat(model=MODEL, messages=USER)
        else:
            with client_of(server.url) as client:
                raw = client.with_raw_response.chat(model=MODEL, messages=USER)
    assert raw.data.finish_reason == "COMPLETE"
    span = _only_span(exporter)
    assert span.attributes["gen_ai.response.id"] == raw.data.id
    assert isinstance(span.attributes["gen_ai.usage.input_tokens"], int)


async def test_thinking_is_reasoning_never_the_answer(is_async: bool, exporter: InMemorySpanExporter) -> None:
    model = "command-a-reasoning-08-2025"
    with ReplayServer(cohere_interactions("test_cohere_model_thinking_part.yaml")) as server:
        await _chat(server.url, is_async, model=model)
    span = _only_span(exporter, model)
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[0]["content"].startswith("Okay, the user is asking")
    assert parts[1]["content"].startswith("Crossing a river safely")
    assert "Okay, the user is asking" not in parts[1]["content"]


async def test_tool_call_answer_and_tool_results(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """A made body (no recording of a Cohere tool call exists), shaped as the SDK's ``V2ChatResponse``."""
    body = {"id": "tool-1", "finish_reason": "TOOL_CALL",
            "message": {"role": "assistant", "tool_plan": "I will check the weather.",
                        "tool_calls": [{"id": "get_weather_1", "type": "function",
                                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            "usage": {"billed_units": {"input_tokens": 30, "output_tokens": 12},
                      "tokens": {"input_tokens": 800, "output_tokens": 40}}}  # fmt: skip
    reply = Recorded("POST", "https://api.cohere.com/v2/chat", b"", 200, "OK",
                     [("content-type", "application/json")], json.dumps(body).encode())  # fmt: skip
    history = [
        *USER,
        {"role": "assistant", "tool_calls": [{"id": "c0", "type": "function",
                                              "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": [{"type": "text", "text": "noon"}]},
    ]  # fmt: skip
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with ReplayServer([reply]) as server:
        response = await _chat(server.url, is_async, messages=history, tools=tools)
    assert response.message.tool_calls[0].function.name == "get_weather"
    span = _only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("TOOL_CALL",)
    assert _json(span, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "I will check the weather."},
                {"type": "tool_call", "id": "get_weather_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    inputs = _json(span, "gen_ai.input.messages")
    assert inputs[1]["parts"] == [{"type": "tool_call", "id": "c0", "name": "get_time", "arguments": {}}]
    assert inputs[2] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c0", "response": "noon"}]}
    assert _json(span, "gen_ai.tool.definitions") == [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    ]


async def test_content_capture_off_keeps_parameters_and_usage(is_async: bool, exporter: InMemorySpanExporter) -> None:
    from evaltrace._internal import settings

    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer(cohere_interactions("test_cohere_model_instructions.yaml")) as server:
            await _chat(server.url, is_async)
    finally:
        settings.replace(previous)
    a = _only_span(exporter).attributes
    assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a
    assert a["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert isinstance(a["gen_ai.usage.input_tokens"], int)


async def _stream(url: str, is_async: bool, limit: int | None = None) -> list[Any]:
    params = {"model": MODEL, "messages": USER}
    if is_async:
        async with async_client_of(url) as client:
            return await read_events(client.chat_stream(**params), limit)
    with client_of(url) as client:
        return await read_events(client.chat_stream(**params), limit)


async def test_stream_read_to_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    events = text_stream_events(["Hel", "lo"], thinking=["Let me ", "think"])
    with ReplayServer([stream_interaction(events)]) as server:
        received = await _stream(server.url, is_async)
    assert [e.type for e in received] == [e["type"] for e in events]
    span = _only_span(exporter)
    a = span.attributes
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["evaltrace.stream.chunks"] == len(events)
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert a["gen_ai.response.id"] == "stream-id-1"
    assert a["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (5, 7)  # billed
    assert (a["cohere.usage.billed_units.input_tokens"], a["cohere.usage.billed_units.output_tokens"]) == (5, 7)
    assert (a["cohere.usage.tokens.input_tokens"], a["cohere.usage.tokens.output_tokens"]) == (71, 9)
    assert _json(span, "gen_ai.output.messages")[0]["parts"] == [
        {"type": "reasoning", "content": "Let me think"},
        {"type": "text", "content": "Hello"},
    ]


async def test_streamed_tool_call(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([stream_interaction(tool_stream_events())]) as server:
        await _stream(server.url, is_async)
    span = _only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("TOOL_CALL",)
    message = _json(span, "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "tool_call"
    assert message["parts"][-1] == {
        "type": "tool_call", "id": "get_weather_abc", "name": "get_weather", "arguments": {"city": "Paris"}
    }  # fmt: skip


async def test_stream_left_early_is_closed_early(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([stream_interaction(text_stream_events(["a", "b", "c"]))]) as server:
        await _stream(server.url, is_async, limit=2)
        gc.collect()  # the abandoned generator is closed when collected, whichever comes first
    a = _only_span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] in ("closed_early", "garbage_collected")
    assert a["evaltrace.stream.completed"] is False


def test_stream_never_iterated_ends_when_collected(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([]) as server, client_of(server.url) as client:
        stream = client.chat_stream(model=MODEL, messages=USER)
        del stream
        gc.collect()
        assert server.received == []  # a generator sends nothing until iterated
    assert _only_span(exporter).attributes["evaltrace.stream.end_reason"] == "garbage_collected"


async def test_stream_without_message_end_is_truncated(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([stream_interaction(text_stream_events(["a"])[:-1])]) as server:
        await _stream(server.url, is_async)
    span = _only_span(exporter)
    assert span.attributes["evaltrace.stream.end_reason"] == "truncated"
    assert span.status.status_code is StatusCode.UNSET


async def test_http_error_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    body = json.dumps({"message": "You are using a Trial key, which is limited"}).encode()
    reply = Recorded("POST", "https://api.cohere.com/v2/chat", b"", 429, "Too Many Requests",
                     [("content-type", "application/json")], body)  # fmt: skip
    with ReplayServer([reply]) as server:
        with pytest.raises(cohere.errors.TooManyRequestsError) as raised:
            await _chat(server.url, is_async, request_options={"max_retries": 0})
    span = _only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"]
    assert [e.name for e in span.events] == ["exception"]
    assert span.events[0].attributes["exception.type"].endswith("TooManyRequestsError")
    assert raised.value.status_code == 429


async def test_error_finish_fails_the_span_but_returns_the_response(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    body = {"id": "err-1", "finish_reason": "ERROR", "message": {"role": "assistant", "content": []},
            "usage": {"billed_units": {"input_tokens": 3, "output_tokens": 0}}}  # fmt: skip
    reply = Recorded("POST", "https://api.cohere.com/v2/chat", b"", 200, "OK",
                     [("content-type", "application/json")], json.dumps(body).encode())  # fmt: skip
    with ReplayServer([reply]) as server:
        response = await _chat(server.url, is_async)
    assert response.finish_reason == "ERROR"
    span = _only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ERROR"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("ERROR",)


def test_stream_metrics(provider: TracerProvider) -> None:
    reader = InMemoryMetricReader()
    CohereInstrumentor().uninstrument()
    CohereInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    with ReplayServer([stream_interaction(text_stream_events(["a", "b", "c"]))]) as server:
        with client_of(server.url) as client:
            list(client.chat_stream(model=MODEL, messages=USER))
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (first,) = metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points
    assert first.attributes["gen_ai.provider.name"] == "cohere"
    (tokens_in, *_) = metrics["gen_ai.client.token.usage"].data.data_points
    assert tokens_in.attributes["gen_ai.operation.name"] == "chat"


def test_uninstrument_restores_the_client(exporter: InMemorySpanExporter) -> None:
    CohereInstrumentor().uninstrument()
    with ReplayServer(cohere_interactions("test_request_simple_success_with_vcr.yaml")) as server:
        with client_of(server.url) as client:
            client.chat(model=MODEL, messages=USER)
    assert exporter.get_finished_spans() == ()


def _token_sums(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    points = metrics["gen_ai.client.token.usage"].data.data_points
    return {p.attributes["gen_ai.token.type"]: int(p.sum) for p in points}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_token_metric_and_cost_are_the_billed_units(
    streamed: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """5000 tokens read (the template included), 12 billed: the metric reports the 12 and the cost prices them."""
    usage = {"billed_units": {"input_tokens": 12, "output_tokens": 7},
             "tokens": {"input_tokens": 5000, "output_tokens": 9}}  # fmt: skip
    model = "command-r-08-2024"
    if streamed:
        events = text_stream_events(["t"])
        events[-1]["delta"]["usage"] = usage
        reply = stream_interaction(events)
    else:
        body = {"id": "c1", "finish_reason": "COMPLETE", "usage": usage,
                "message": {"role": "assistant", "content": [{"type": "text", "text": "t"}]}}  # fmt: skip
        reply = Recorded("POST", "https://api.cohere.com/v2/chat", b"", 200, "OK",
                         [("content-type", "application/json")], json.dumps(body).encode())  # fmt: skip
    reader = InMemoryMetricReader()
    CohereInstrumentor().uninstrument()
    CohereInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    with ReplayServer([reply]) as server, client_of(server.url) as client:
        if streamed:
            list(client.chat_stream(model=model, messages=USER))
        else:
            client.chat(model=model, messages=USER)
    assert _token_sums(reader) == {"input": 12, "output": 7}
    a = _only_span(exporter, model).attributes
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 7)
    assert (a["cohere.usage.tokens.input_tokens"], a["cohere.usage.tokens.output_tokens"]) == (5000, 9)
    price = pricing.price_of(model, "cohere")
    assert price is not None
    billed = pricing.cost_at(price, input_tokens=12, output_tokens=7)
    assert billed is not None and a["evaltrace.cost_usd"] == pytest.approx(billed.total_usd)


def test_a_zero_bill_is_reported_and_priced_as_zero(exporter: InMemorySpanExporter) -> None:
    """Cohere billing 0 tokens of 5000 read is a real 0: not the model's 5000, not priced as them."""
    usage = {"billed_units": {"input_tokens": 0, "output_tokens": 0},
             "tokens": {"input_tokens": 5000, "output_tokens": 9}}  # fmt: skip
    model = "command-r-08-2024"
    body = {"id": "c1", "finish_reason": "COMPLETE", "usage": usage,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "t"}]}}  # fmt: skip
    reply = Recorded("POST", "https://api.cohere.com/v2/chat", b"", 200, "OK",
                     [("content-type", "application/json")], json.dumps(body).encode())  # fmt: skip
    with ReplayServer([reply]) as server, client_of(server.url) as client:
        client.chat(model=model, messages=USER)
    a = _only_span(exporter, model).attributes
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (0, 0)
    assert (a["cohere.usage.tokens.input_tokens"], a["cohere.usage.tokens.output_tokens"]) == (5000, 9)
    assert a["evaltrace.cost_usd"] == 0.0


def test_a_document_is_its_data_as_written_and_a_key_json_has_not_does_not_fail(
    exporter: InMemorySpanExporter,
) -> None:
    """A tool result's document data keeps "café" as written; a key JSON cannot have (a tuple) is its ``str``."""
    data: Any = {"dish": "café", ("a", 1): "tuple key"}
    messages: Any = [
        {"role": "user", "content": "Menu?"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "menu", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "document", "document": {"data": data}}]},
    ]
    with ReplayServer(cohere_interactions("test_request_usage_with_cached_tokens.yaml")) as server:
        try:
            with client_of(server.url) as client:
                client.chat(model=MODEL, messages=messages)
        except TypeError:
            pass  # the SDK's own JSON encoding of the request may refuse the key: the span has the input all the same
    span = _only_span(exporter)
    tool = _json(span, "gen_ai.input.messages")[2]
    (part,) = tool["parts"]
    assert part["response"] == [
        {"type": "text", "content": '{"dish": "café", "(\'a\', 1)": "tuple key"}', "document": True}
    ]
