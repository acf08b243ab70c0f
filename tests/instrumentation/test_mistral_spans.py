"""``instrument_mistral()``: recorded Mistral traffic replayed through the real ``mistralai`` client makes GenAI spans.

The client talks HTTP to ``cassettes.ReplayServer`` on 127.0.0.1 (``server_url``); spans go to the real OTel SDK's
in-memory exporter. Recordings: tests/fixtures/mistral-cassettes (see its README).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mistralai")

from mistral_replay import (
    ASYNC_STREAM,
    MISTRAL,
    PROMPT_CACHE,
    STREAM,
    THINKING,
    THINKING_STREAM,
    TOOL_STREAM,
    call_kwargs,
    fixture_paths,
    interactions,
    server,
)
from mistralai.client import Mistral, errors
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace.instrumentation.mistral import MistralInstrumentor

CHAT_URI = "https://api.mistral.ai/v1/chat/completions"


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[MistralInstrumentor]:
    instrumentor = evaltrace.instrument_mistral()
    yield instrumentor
    evaltrace.uninstrument_mistral()


def _span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def _output(span: ReadableSpan) -> list[dict[str, Any]]:
    return list(json.loads(str((span.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES])))


def _recorded(status: int, body: dict[str, Any], uri: str = CHAT_URI) -> Recorded:
    headers = [("content-type", "application/json")]
    return Recorded("POST", uri, b"", status, "Error" if status >= 400 else "OK", headers, json.dumps(body).encode())


@pytest.mark.usefixtures("instrumented")
def test_complete_makes_one_chat_span_with_thinking_usage_and_cost(exporter: InMemorySpanExporter) -> None:
    with server(THINKING) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        result = client.chat.complete(**call_kwargs(interactions(THINKING)[0]))
    span = _span(exporter)
    attrs = span.attributes or {}
    assert span.name == "chat magistral-medium-latest" and span.kind is SpanKind.CLIENT
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert attrs[sc.SERVER_ADDRESS] == "127.0.0.1" and attrs[sc.SERVER_PORT] == int(srv.url.rsplit(":", 1)[1])
    assert attrs[sc.GEN_AI_RESPONSE_ID] == result.id == "9abe8b736bff46af8e979b52334a57cd"
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (664, 747)
    assert attrs[sc.EVALTRACE_COST_USD] > 0
    (message,) = _output(span)
    assert [p["type"] for p in message["parts"]] == ["reasoning", "text"]
    assert json.loads(str(attrs[sc.GEN_AI_INPUT_MESSAGES]))[-1]["role"] == "user"


@pytest.mark.usefixtures("instrumented")
async def test_complete_async_reads_the_prompt_cache_hit(exporter: InMemorySpanExporter) -> None:
    items = interactions(PROMPT_CACHE)
    with server(PROMPT_CACHE) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            for item in items:
                await client.chat.complete_async(**call_kwargs(item))
    first, second = exporter.get_finished_spans()
    assert (first.attributes or {})[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    attrs = second.attributes or {}
    assert attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 224
    assert json.loads(str(attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS]))["input_cached_tokens"] > 0


@pytest.mark.usefixtures("instrumented")
def test_stream_span_ends_with_the_stream_and_keeps_the_tool_call(exporter: InMemorySpanExporter) -> None:
    with server(TOOL_STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        with client.chat.stream(**call_kwargs(interactions(TOOL_STREAM)[0])) as events:
            assert exporter.get_finished_spans() == ()  # open while the stream is read
            names = [c.function.name for e in events for c in e.data.choices[0].delta.tool_calls or ()]
    assert names == ["get_weather"]
    span = _span(exporter)
    attrs = span.attributes or {}
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert attrs[sc.EVALTRACE_STREAM_COMPLETED] is True
    assert attrs[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_EXHAUSTED
    assert span.end_time is not None and span.start_time is not None
    assert 0 <= attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] <= (span.end_time - span.start_time) / 1e9
    (message,) = _output(span)
    assert message["finish_reason"] == "tool_call"
    assert message["parts"] == [
        {"type": "tool_call", "id": "EscTeQY62", "name": "get_weather", "arguments": {"city": "San Francisco"}}
    ]


@pytest.mark.usefixtures("instrumented")
def test_streamed_thinking_is_a_reasoning_part(exporter: InMemorySpanExporter) -> None:
    with server(THINKING_STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        for _ in client.chat.stream(**call_kwargs(interactions(THINKING_STREAM)[0])):
            pass
    span = _span(exporter)
    (message,) = _output(span)
    assert [p["type"] for p in message["parts"]] == ["reasoning", "text"]
    assert (span.attributes or {})[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 232


@pytest.mark.usefixtures("instrumented")
async def test_stream_async_is_traced(exporter: InMemorySpanExporter) -> None:
    with server(ASYNC_STREAM) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            events = await client.chat.stream_async(**call_kwargs(interactions(ASYNC_STREAM)[0]))
            async with events:
                text = "".join([e.data.choices[0].delta.content async for e in events if e.data.choices])
    assert text == "France won"
    span = _span(exporter)
    assert _output(span)[0]["parts"] == [{"type": "text", "content": "France won"}]
    assert (span.attributes or {})[sc.EVALTRACE_STREAM_COMPLETED] is True
    assert (span.attributes or {})[sc.GEN_AI_REQUEST_STREAM] is True


@pytest.mark.usefixtures("instrumented")
def test_a_stream_left_early_ends_its_span_once_as_closed_early(exporter: InMemorySpanExporter) -> None:
    with server(STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        with client.chat.stream(**call_kwargs(interactions(STREAM)[0])) as events:
            for _ in events:
                break
    attrs = _span(exporter).attributes or {}
    assert attrs[sc.EVALTRACE_STREAM_COMPLETED] is False
    assert attrs[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_CLOSED


@pytest.mark.usefixtures("instrumented")
async def test_api_error_is_reraised_unchanged_and_recorded(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """No Mistral error was recorded: the server answers with the API's documented error object."""
    body = {"object": "error", "message": "Invalid model: nope", "type": "invalid_model", "param": None, "code": "1500"}
    kwargs: dict[str, Any] = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
    with ReplayServer([_recorded(400, body)]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            with pytest.raises(errors.SDKError) as raised:
                if is_async:
                    await client.chat.complete_async(**kwargs)
                else:
                    client.chat.complete(**kwargs)
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})[sc.ERROR_TYPE] == "invalid_model"
    (event,) = [e for e in span.events if e.name == "exception"]
    assert (event.attributes or {})["exception.type"].endswith("SDKError")
    assert raised.value.status_code == 400


@pytest.mark.usefixtures("instrumented")
async def test_embeddings_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """No embeddings response was recorded: this one has the SDK's ``EmbeddingResponse`` shape."""
    body = {
        "id": "emb-1",
        "object": "list",
        "model": "mistral-embed",
        "usage": {"prompt_tokens": 6, "completion_tokens": 0, "total_tokens": 6},
        "data": [{"object": "embedding", "embedding": [0.1, 0.2], "index": 0}],
    }
    with ReplayServer([_recorded(200, body, "https://api.mistral.ai/v1/embeddings")]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            kwargs: dict[str, Any] = {"model": "mistral-embed", "inputs": ["hello world"], "output_dimension": 2}
            if is_async:
                await client.embeddings.create_async(**kwargs)
            else:
                client.embeddings.create(**kwargs)
    span = _span(exporter)
    attrs = span.attributes or {}
    assert span.name == "embeddings mistral-embed"
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "embeddings"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 6
    assert attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 2
    assert json.loads(str(attrs[sc.INPUT_VALUE])) == ["hello world"]


def test_metrics_and_uninstrument(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    reader = InMemoryMetricReader()
    MistralInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        with server(STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
            for _ in client.chat.stream(**call_kwargs(interactions(STREAM)[0])):
                pass
    finally:
        MistralInstrumentor().uninstrument()
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (duration,) = metrics["gen_ai.client.operation.duration"].data.data_points
    assert duration.attributes[sc.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert sum(p.sum for p in metrics["gen_ai.client.token.usage"].data.data_points) == 26 + 4
    assert metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points[0].count == 1
    exporter.clear()
    with server(STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        for _ in client.chat.stream(**call_kwargs(interactions(STREAM)[0])):
            pass
    assert exporter.get_finished_spans() == ()  # uninstrumented: the original methods are back


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("path", fixture_paths(), ids=lambda p: p.name)
def test_every_recording_replays_to_one_span_per_call(path: Any, exporter: InMemorySpanExporter) -> None:
    name = path.relative_to(MISTRAL).as_posix()
    items = interactions(name)
    with server(name) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        for item in items:
            if item.request_json().get("stream"):
                for _ in client.chat.stream(**call_kwargs(item)):
                    pass
            else:
                client.chat.complete(**call_kwargs(item))
    spans = exporter.get_finished_spans()
    assert len(spans) == len(items)
    for span, item in zip(spans, items, strict=True):
        attrs = span.attributes or {}
        assert attrs[sc.GEN_AI_REQUEST_MODEL] == item.request_json()["model"]
        assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]
        assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0 and attrs[sc.GEN_AI_OUTPUT_MESSAGES]
        # chat.stream sends no ``stream`` argument, yet its span says so; chat.complete's never does (conventions.md).
        assert attrs.get(sc.GEN_AI_REQUEST_STREAM) is (True if item.request_json().get("stream") else None)
        if not item.request_json().get("stream"):
            assert attrs[sc.GEN_AI_RESPONSE_ID] == item.response_json()["id"]


@pytest.mark.parametrize(
    ("name", "cls"), [("evaltrace_mistral", "MistralInstrumentor"), ("evaltrace_groq", "GroqInstrumentor")]
)
def test_entry_points_name_the_instrumentors(name: str, cls: str) -> None:
    """``opentelemetry-instrument`` loads what pyproject declares: the targets exist and say what they need."""
    import importlib
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    module, _, attr = project["entry-points"]["opentelemetry_instrumentor"][name].partition(":")
    instrumentor = getattr(importlib.import_module(module), attr)
    assert instrumentor.__name__ == cls
    (requirement,) = instrumentor().instrumentation_dependencies()
    assert requirement.split()[0] in ("mistralai", "groq")


def test_content_stays_out_when_capture_is_off(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    from evaltrace._internal import settings

    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    evaltrace.instrument_mistral()
    try:
        with server(TOOL_STREAM) as srv, Mistral(api_key="x", server_url=srv.url) as client:
            for _ in client.chat.stream(**call_kwargs(interactions(TOOL_STREAM)[0])):
                pass
    finally:
        evaltrace.uninstrument_mistral()
        settings.replace(previous)
    attrs = _span(exporter).attributes or {}
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 23 and attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.7
    assert not {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_TOOL_DEFINITIONS} & set(attrs)


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(
    ("kwargs", "formats"),
    [({"output_dtype": "int8"}, ("int8",)), ({"encoding_format": "base64", "output_dtype": "binary"}, ("base64", "binary")),
     ({"encoding_format": "float", "output_dtype": "float"}, ("float",))],
)  # fmt: skip
def test_embeddings_output_dtype_is_an_encoding_format(
    kwargs: dict[str, Any], formats: tuple[str, ...], exporter: InMemorySpanExporter
) -> None:
    """``output_dtype`` is the format of each value, as Cohere's ``embedding_types``: a requested encoding format."""
    body = {"id": "emb-1", "object": "list", "model": "mistral-embed",
            "usage": {"prompt_tokens": 6, "completion_tokens": 0, "total_tokens": 6},
            "data": [{"object": "embedding", "embedding": [1, 2], "index": 0}]}  # fmt: skip
    with ReplayServer([_recorded(200, body, "https://api.mistral.ai/v1/embeddings")]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            client.embeddings.create(model="mistral-embed", inputs=["hello world"], **kwargs)
            sent = srv.received[0].json()
    assert all(sent[key] == value for key, value in kwargs.items())
    assert (_span(exporter).attributes or {})[sc.GEN_AI_REQUEST_ENCODING_FORMATS] == formats


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_prompt_mode_is_a_langfuse_model_parameter(stream: bool, exporter: InMemorySpanExporter) -> None:
    """``prompt_mode="reasoning"`` makes magistral answer under its reasoning system prompt: kept as a parameter."""
    name = THINKING_STREAM if stream else THINKING
    kwargs = {**call_kwargs(interactions(name)[0]), "prompt_mode": "reasoning"}
    with server(name) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        if stream:
            list(client.chat.stream(**kwargs))
        else:
            client.chat.complete(**kwargs)
        sent = srv.received[0].json()
    assert sent["prompt_mode"] == "reasoning"
    parameters = json.loads(str((_span(exporter).attributes or {})[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS]))
    assert parameters["prompt_mode"] == "reasoning"
