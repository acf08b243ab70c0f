"""``instrument_groq()``: recorded Groq traffic replayed through the real ``groq`` client makes GenAI spans.

The client talks HTTP to ``cassettes.ReplayServer`` on 127.0.0.1 (``base_url``); spans go to the real OTel SDK's
in-memory exporter. Recordings: tests/fixtures/groq-cassettes (see its README), made with the async client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")

from groq_replay import (  # noqa: E402
    GROQ,
    NOT_FOUND,
    PLAIN,
    THINKING_STREAM,
    TOOL_USE_FAILED,
    TOOL_USE_FAILED_STREAM,
    WEB_SEARCH,
    call_kwargs,
    groq_client,
    interactions,
    server,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace.instrumentation.groq import GroqInstrumentor  # noqa: E402


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GroqInstrumentor]:
    instrumentor = evaltrace.instrument_groq()
    yield instrumentor
    evaltrace.uninstrument_groq()


async def _create(client: Any, is_async: bool, **kwargs: Any) -> Any:
    result = client.chat.completions.create(**kwargs)
    return await result if is_async else result


async def _drain(stream: Any, is_async: bool) -> list[Any]:
    if is_async:
        return [chunk async for chunk in stream]
    return list(stream)


async def _close(client: Any, is_async: bool) -> None:
    if is_async:
        await client.close()
    else:
        client.close()


def _output(span: ReadableSpan) -> list[dict[str, Any]]:
    return list(json.loads(str((span.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES])))


@pytest.mark.usefixtures("instrumented")
async def test_create_makes_one_chat_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with server(PLAIN) as srv:
        client = groq_client(srv.url, is_async)
        completion = await _create(client, is_async, **call_kwargs(interactions(PLAIN)[0]))
        await _close(client, is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert span.name == "chat llama-3.3-70b-versatile" and span.kind is SpanKind.CLIENT
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert attrs[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert attrs[sc.GEN_AI_RESPONSE_ID] == completion.id
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == "llama-3.3-70b-versatile"
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (48, 8)
    assert attrs[sc.EVALTRACE_COST_USD] > 0
    assert _output(span)[0]["parts"] == [{"type": "text", "content": "Hello! How can I assist you today?"}]


@pytest.mark.usefixtures("instrumented")
async def test_stream_reads_reasoning_and_the_x_groq_usage(is_async: bool, exporter: InMemorySpanExporter) -> None:
    items = interactions(THINKING_STREAM)
    with server(THINKING_STREAM) as srv:
        client = groq_client(srv.url, is_async)
        for index, item in enumerate(items):
            stream = await _create(client, is_async, **call_kwargs(item))
            assert len(exporter.get_finished_spans()) == index  # this stream's span is open while it is read
            await _drain(stream, is_async)
        await _close(client, is_async)
    raw, parsed = exporter.get_finished_spans()
    for span in (raw, parsed):
        attrs = span.attributes or {}
        assert [p["type"] for p in _output(span)[0]["parts"]] == ["reasoning", "text"]
        assert attrs[sc.EVALTRACE_STREAM_COMPLETED] is True
        assert span.end_time is not None and span.start_time is not None
        assert 0 <= attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] <= (span.end_time - span.start_time) / 1e9
    attrs = parsed.attributes or {}
    assert attrs[sc.GROQ_REQUEST_REASONING_FORMAT] == "parsed"
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (573, 1509)


@pytest.mark.usefixtures("instrumented")
async def test_http_error_keeps_groq_code_and_is_reraised(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with server(NOT_FOUND) as srv:
        client = groq_client(srv.url, is_async)
        with pytest.raises(groq.NotFoundError) as raised:
            await _create(client, is_async, **call_kwargs(interactions(NOT_FOUND)[0]))
        await _close(client, is_async)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    attrs = span.attributes or {}
    assert attrs[sc.ERROR_TYPE] == "model_not_found"
    assert attrs[sc.HTTP_RESPONSE_STATUS_CODE] == 404
    (event,) = [e for e in span.events if e.name == "exception"]
    assert str(raised.value) in str((event.attributes or {})["exception.message"])


@pytest.mark.usefixtures("instrumented")
async def test_error_inside_a_stream_fails_the_span_and_keeps_what_arrived(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    first, retry, answer = interactions(TOOL_USE_FAILED_STREAM)
    with server(TOOL_USE_FAILED_STREAM) as srv:
        client = groq_client(srv.url, is_async)
        stream = await _create(client, is_async, **call_kwargs(first))
        with pytest.raises(groq.APIError):
            await _drain(stream, is_async)
        for item in (retry, answer):
            await _drain(await _create(client, is_async, **call_kwargs(item)), is_async)
        await _close(client, is_async)
    failed, called, answered = exporter.get_finished_spans()
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})[sc.ERROR_TYPE] == "tool_use_failed"
    assert _output(failed)[0]["parts"][0]["type"] == "reasoning"
    assert (called.attributes or {})[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert [p["type"] for p in _output(called)[0]["parts"]] == ["reasoning", "tool_call"]
    assert (called.attributes or {})[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 23
    assert answered.status.status_code is StatusCode.UNSET


@pytest.mark.usefixtures("instrumented")
def test_tool_use_failed_then_tool_call_and_cached_tokens(exporter: InMemorySpanExporter) -> None:
    with server(TOOL_USE_FAILED) as srv, groq_client(srv.url, False) as client:
        for item in interactions(TOOL_USE_FAILED):
            try:
                client.chat.completions.create(**call_kwargs(item))
            except groq.BadRequestError:
                pass
    failed, called, answered = exporter.get_finished_spans()
    assert (failed.attributes or {})[sc.ERROR_TYPE] == "tool_use_failed"
    call = _output(called)[0]["parts"][-1]
    assert call == {
        "type": "tool_call",
        "id": "fc_311ba17b-89f9-48d3-8fd9-7e74a1264855",
        "name": "get_something_by_name",
        "arguments": {"name": "test"},
    }
    assert (answered.attributes or {})[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 256
    assert (answered.attributes or {})[sc.EVALTRACE_COST_THINKING_USD] > 0


@pytest.mark.usefixtures("instrumented")
def test_built_in_web_search_is_a_server_tool_call(exporter: InMemorySpanExporter) -> None:
    with server(WEB_SEARCH) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(**call_kwargs(interactions(WEB_SEARCH)[0]))
    (span,) = exporter.get_finished_spans()
    parts = _output(span)[0]["parts"]
    assert any(p["type"] == "server_tool_call" and p["name"] == "search" for p in parts)


@pytest.mark.usefixtures("instrumented")
async def test_raw_response_is_recorded_and_parses_to_the_same_completion(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """groq's ``with_raw_response`` is an ``APIResponse`` whose body the SDK has read: the span has the answer and
    usage before the user parses, and the user's ``parse()`` returns the completion the span was made from."""
    with server(PLAIN) as srv:
        client = groq_client(srv.url, is_async)
        raw = client.chat.completions.with_raw_response.create(**call_kwargs(interactions(PLAIN)[0]))
        raw = await raw if is_async else raw
        (span,) = exporter.get_finished_spans()
        completion = (await raw.parse()) if is_async else raw.parse()
        assert ((await raw.parse()) if is_async else raw.parse()) is completion
        await _close(client, is_async)
    assert completion.choices[0].message.content == "Hello! How can I assist you today?"
    assert span.name == "chat llama-3.3-70b-versatile"
    assert span.status.status_code is StatusCode.UNSET
    attrs = span.attributes or {}
    assert attrs[sc.GEN_AI_RESPONSE_ID] == completion.id
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (48, 8)
    assert attrs[sc.EVALTRACE_COST_USD] > 0
    assert _output(span)[0]["parts"] == [{"type": "text", "content": "Hello! How can I assist you today?"}]


@pytest.mark.usefixtures("instrumented")
async def test_embeddings_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """No Groq embeddings response was recorded: this one has the SDK's ``CreateEmbeddingResponse`` shape."""
    body = {
        "object": "list",
        "model": "nomic-embed-text-v1_5",
        "data": [{"object": "embedding", "embedding": [0.1, 0.2], "index": 0}],
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    recorded = Recorded(
        "POST",
        "https://api.groq.com/openai/v1/embeddings",
        b"",
        200,
        "OK",
        [("content-type", "application/json")],
        json.dumps(body).encode(),
    )
    with ReplayServer([recorded]) as srv:
        client = groq_client(srv.url, is_async)
        result = client.embeddings.create(model="nomic-embed-text-v1_5", input=["hello"], encoding_format="float")
        await result if is_async else None
        await _close(client, is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert span.name == "embeddings nomic-embed-text-v1_5"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "groq" and attrs[sc.GEN_AI_OPERATION_NAME] == "embeddings"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3
    assert attrs[sc.GEN_AI_REQUEST_ENCODING_FORMATS] == ("float",)
    assert json.loads(str(attrs[sc.INPUT_VALUE])) == ["hello"]


def test_stream_metrics_and_uninstrument(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    reader = InMemoryMetricReader()
    GroqInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    item = interactions(THINKING_STREAM)[0]
    try:
        with server(THINKING_STREAM) as srv, groq_client(srv.url, False) as client:
            list(client.chat.completions.create(**call_kwargs(item)))
    finally:
        GroqInstrumentor().uninstrument()
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (duration,) = metrics["gen_ai.client.operation.duration"].data.data_points
    assert duration.attributes[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert sum(p.sum for p in metrics["gen_ai.client.token.usage"].data.data_points) == 21 + 988
    assert metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points[0].count > 1
    exporter.clear()
    with server(THINKING_STREAM) as srv, groq_client(srv.url, False) as client:
        list(client.chat.completions.create(**call_kwargs(item)))
    assert exporter.get_finished_spans() == ()


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("name", sorted(p.name for p in GROQ.glob("*.yaml")))
async def test_every_recording_replays_to_one_span_per_call(
    name: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    items = interactions(name)
    with server(name) as srv:
        client = groq_client(srv.url, is_async)
        for item in items:
            try:
                result = await _create(client, is_async, **call_kwargs(item))
                if item.request_json().get("stream"):
                    await _drain(result, is_async)
            except groq.APIError:
                pass
        await _close(client, is_async)
    spans = exporter.get_finished_spans()
    assert len(spans) == len(items)
    for span, item in zip(spans, items, strict=True):
        attrs = span.attributes or {}
        assert attrs[sc.GEN_AI_REQUEST_MODEL] == item.request_json()["model"]
        if item.status >= 400:
            assert span.status.status_code is StatusCode.ERROR and attrs[sc.ERROR_TYPE]
        elif span.status.status_code is not StatusCode.ERROR:
            assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] and attrs[sc.GEN_AI_OUTPUT_MESSAGES]
            assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
            if not item.request_json().get("stream"):
                assert attrs[sc.GEN_AI_RESPONSE_ID] == item.response_json()["id"]
