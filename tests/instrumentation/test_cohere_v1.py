"""``instrument_cohere()``: the v1 ``cohere.Client`` ``chat`` / ``chat_stream``, sync and async.

No recording of the v1 ``/v1/chat`` exists in the fixture sets: the responses are built from the SDK's own types
(``NonStreamedChatResponse``, ``StreamedChatResponse`` events as NDJSON, ``ApiMeta``; cohere_replay.made) and served
by the replay server on 127.0.0.1; the requests are what the SDK really sent.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cohere import types as t
from cohere_replay import async_v1_client_of, client_of, made, read_events, v1_client_of
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import ReplayServer
from evaltrace import pricing
from evaltrace.instrumentation.cohere import CohereInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[CohereInstrumentor]:
    instrumentor = CohereInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")

MODEL = "command-r-plus"
META = t.ApiMeta(
    billed_units=t.ApiMetaBilledUnits(input_tokens=10, output_tokens=6),
    tokens=t.ApiMetaTokens(input_tokens=75, output_tokens=6),
)
HISTORY = [
    {"role": "USER", "message": "Hi, I'm Ana."},
    {"role": "CHATBOT", "message": "Hello Ana!"},
]
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameter_definitions": {"city": {"description": "The city.", "type": "str", "required": True}},
    }
]


def _answer(text: str = "Sunny in Paris.", reason: str = "COMPLETE", calls: list[t.ToolCall] | None = None) -> Any:
    return t.NonStreamedChatResponse(text=text, generation_id="gen-1", response_id="resp-1", finish_reason=reason,
                                     tool_calls=calls, meta=META)  # fmt: skip


def _events(answer: Any, reason: str = "COMPLETE") -> list[Any]:
    return [
        t.StreamStartStreamedChatResponse(generation_id="gen-1"),
        t.TextGenerationStreamedChatResponse(text="Sunny "),
        t.TextGenerationStreamedChatResponse(text="in Paris."),
        t.StreamEndStreamedChatResponse(finish_reason=reason, response=answer),
    ]


async def _chat(url: str, is_async: bool, **kwargs: Any) -> Any:
    if is_async:
        async with async_v1_client_of(url) as client:
            return await client.chat(**kwargs)
    with v1_client_of(url) as client:
        return client.chat(**kwargs)


async def _stream(url: str, is_async: bool, limit: int | None = None, **kwargs: Any) -> list[Any]:
    if is_async:
        async with async_v1_client_of(url) as client:
            return await read_events(client.chat_stream(**kwargs), limit)
    with v1_client_of(url) as client:
        return await read_events(client.chat_stream(**kwargs), limit)


async def test_v1_chat_follows_genai_conventions(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v1/chat", _answer())]) as server:
        answer = await _chat(server.url, is_async, message="Weather in Paris?", model=MODEL, preamble="Be brief.",
                             chat_history=HISTORY, temperature=0.3, max_tokens=50)  # fmt: skip
        sent = server.received[0].json()
    assert answer.text == "Sunny in Paris."
    assert sent["message"] == "Weather in Paris?"
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == f"chat {MODEL}"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "cohere"
    assert a["gen_ai.request.temperature"] == 0.3
    assert a["gen_ai.request.max_tokens"] == 50
    assert a["gen_ai.response.id"] == "resp-1"
    assert a["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 6)  # meta.billed_units
    assert (a["cohere.usage.billed_units.input_tokens"], a["cohere.usage.billed_units.output_tokens"]) == (10, 6)
    assert (a["cohere.usage.tokens.input_tokens"], a["cohere.usage.tokens.output_tokens"]) == (75, 6)
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hi, I'm Ana."}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello Ana!"}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Sunny in Paris."}], "finish_reason": "stop"}
    ]


async def test_v1_tool_calls_tool_results_and_tools(exporter: InMemorySpanExporter) -> None:
    call = t.ToolCall(name="get_weather", parameters={"city": "Paris"})
    results = [{"call": {"name": "get_weather", "parameters": {"city": "Paris"}}, "outputs": [{"temp": 21}]}]
    with ReplayServer([made("/v1/chat", _answer("", "COMPLETE", [call])), made("/v1/chat", _answer())]) as server:
        first = await _chat(server.url, False, message="Weather in Paris?", model=MODEL, tools=TOOLS)
        await _chat(server.url, False, message="", model=MODEL, tools=TOOLS, tool_results=results,
                    chat_history=[{"role": "CHATBOT", "message": "", "tool_calls": [call.dict()]}])  # fmt: skip
    assert first.tool_calls[0].name == "get_weather"
    calling, answering = exporter.get_finished_spans()
    assert json.loads(calling.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "tool_call",
         "parts": [{"type": "tool_call", "id": None, "name": "get_weather", "arguments": {"city": "Paris"}}]}
    ]  # fmt: skip
    assert calling.attributes["gen_ai.response.finish_reasons"] == ("COMPLETE",)  # verbatim
    assert json.loads(calling.attributes["gen_ai.tool.definitions"]) == [
        {"type": "function", "name": "get_weather", "description": "The weather in a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "str", "description": "The city."}},
                        "required": ["city"]}}
    ]  # fmt: skip
    assert json.loads(answering.attributes["gen_ai.input.messages"]) == [
        {"role": "assistant",
         "parts": [{"type": "tool_call", "id": None, "name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": None, "response": [{"temp": 21}],
                                    "name": "get_weather"}]},
    ]  # fmt: skip


async def test_v1_error_finish_fails_the_span_without_raising(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v1/chat", _answer("", "ERROR_LIMIT"))]) as server:
        answer = await _chat(server.url, False, message="x", model=MODEL)
    assert answer.finish_reason == "ERROR_LIMIT"
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ERROR_LIMIT"


async def test_v1_stream_read_to_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v1/chat", _events(_answer()), ndjson=True)]) as server:
        events = await _stream(server.url, is_async, message="Weather in Paris?", model=MODEL)
        sent = server.received[0].json()
    assert [e.event_type for e in events] == ["stream-start", "text-generation", "text-generation", "stream-end"]
    assert sent["stream"] is True
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == f"chat {MODEL}"
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["gen_ai.response.id"] == "resp-1"
    assert a["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 6)  # meta.billed_units
    assert a["cohere.usage.tokens.input_tokens"] == 75
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "Sunny in Paris."}]
    assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= (span.end_time - span.start_time) / 1e9


async def test_v1_stream_left_early_ends_the_span_once_with_what_arrived(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([made("/v1/chat", _events(_answer()), ndjson=True)]) as server:
        await _stream(server.url, is_async, limit=2, message="x", model=MODEL)
        gc.collect()
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a["evaltrace.stream.end_reason"] in ("closed_early", "garbage_collected")
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "Sunny "}]
    assert a["gen_ai.response.id"] == "gen-1"  # no stream-end yet: the generation id


async def test_v1_stream_error_finish_fails_the_span(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v1/chat", _events(_answer("", "ERROR"), "ERROR"), ndjson=True)]) as server:
        await _stream(server.url, False, message="x", model=MODEL)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ERROR"
    assert span.attributes["evaltrace.stream.end_reason"] == "error"


async def test_a_v2_client_chat_stays_one_v2_span(exporter: InMemorySpanExporter) -> None:
    """``ClientV2`` subclasses the v1 ``Client``: its ``chat`` is the v2 one, wrapped once."""
    v2_answer = {"id": "v2-1", "finish_reason": "COMPLETE",
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
                 "usage": {"tokens": {"input_tokens": 3, "output_tokens": 2}}}  # fmt: skip
    with ReplayServer([made("/v2/chat", v2_answer)]) as server, client_of(server.url) as client:
        client.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.id"] == "v2-1"


async def test_a_client_made_before_instrumenting_is_traced_through_its_raw_client(
    instrumented: CohereInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """``cohere.Client`` binds ``self.chat`` when made; its raw client's ``chat`` is wrapped, so it is traced once."""
    instrumented.uninstrument()
    with ReplayServer([made("/v1/chat", _answer()), made("/v1/chat", _answer())]) as server:
        with v1_client_of(server.url) as client:  # made while uninstrumented
            instrumented.instrument()
            assert client.chat(message="x", model=MODEL).text == "Sunny in Paris."
            raw = client.with_raw_response.chat(message="x", model=MODEL)
    assert raw.data.response_id == "resp-1"
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {MODEL}"] * 2
    assert all(s.attributes["gen_ai.usage.input_tokens"] == 10 for s in spans)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_v1_token_metric_and_cost_are_the_billed_units(
    streamed: bool, instrumented: CohereInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """``meta.tokens`` 75 in, ``meta.billed_units`` 10: the metric reports the 10 and the cost prices them."""
    reader = InMemoryMetricReader()
    instrumented.uninstrument()
    instrumented.instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    model = "command-r-08-2024"
    reply = made("/v1/chat", _events(_answer()), ndjson=True) if streamed else made("/v1/chat", _answer())
    with ReplayServer([reply]) as server:
        if streamed:
            await _stream(server.url, False, message="x", model=model)
        else:
            await _chat(server.url, False, message="x", model=model)
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    points = metrics["gen_ai.client.token.usage"].data.data_points
    assert {p.attributes["gen_ai.token.type"]: int(p.sum) for p in points} == {"input": 10, "output": 6}
    (span,) = exporter.get_finished_spans()
    price = pricing.price_of(model, "cohere")
    billed = pricing.cost_at(price, input_tokens=10, output_tokens=6) if price is not None else None
    assert billed is not None and span.attributes["evaltrace.cost_usd"] == pytest.approx(billed.total_usd)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_v1_conversation_id_is_the_gen_ai_conversation_id(
    streamed: bool, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``conversation_id`` names a thread the API stores and continues: the span's conversation, capture or not."""
    from evaltrace._internal import settings

    reply = made("/v1/chat", _events(_answer()), ndjson=True) if streamed else made("/v1/chat", _answer())
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([reply]) as server:
            call = _stream if streamed else _chat
            await call(server.url, is_async, message="x", model=MODEL, conversation_id="user-conv-42")
            sent = server.received[0].json()
    finally:
        settings.replace(previous)
    assert sent["conversation_id"] == "user-conv-42"
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.conversation.id"] == "user-conv-42"
    assert "gen_ai.input.messages" not in span.attributes


async def test_v1_documents_are_a_user_message_of_marked_documents(exporter: InMemorySpanExporter) -> None:
    """v1's ``documents`` (maps of strings) are recorded as v2's: before, they were not recorded at all."""
    documents = [{"id": "w1", "title": "Forecast", "snippet": "Sunny in Paris."}, {"text": "Wind: light."}]
    with ReplayServer([made("/v1/chat", _answer())]) as server:
        await _chat(server.url, False, message="Weather in Paris?", model=MODEL, chat_history=HISTORY[:1],
                    documents=documents)  # fmt: skip
        assert server.received[0].json()["documents"] == documents
    (span,) = exporter.get_finished_spans()
    assert json.loads(str((span.attributes or {})["gen_ai.input.messages"])) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": json.dumps(documents[0]), "document": True, "id": "w1"},
                {"type": "text", "content": json.dumps(documents[1]), "document": True},
            ],
        },
        {"role": "user", "parts": [{"type": "text", "content": "Hi, I'm Ana."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
