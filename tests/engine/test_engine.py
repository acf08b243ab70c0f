"""The instrumentation engine over a toy SDK: every endpoint and stream shape a provider codec can declare.

The toy SDK (``toy_sdk``) and its codec (``toy_codec``) stand in for providers whose SDKs are not OpenAI-shaped:
module functions with positional arguments (ollama, litellm), class methods, sync and async, generators and
async generators as streams (google-genai, cohere), an iterator that is a context manager (mistral), and a
botocore-like method whose operation is an argument and whose stream sits inside the response dict (Bedrock).
The engine itself (spans, errors, streams, metrics) is real: the OTel SDK with in-memory exporters.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest
import toy_codec
import toy_sdk
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from evaltrace._internal import settings


@pytest.fixture
def traced(provider: TracerProvider) -> Iterator[InMemoryMetricReader]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    reader = InMemoryMetricReader()
    instrumentor = toy_codec.ToyInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        yield reader
    finally:
        instrumentor.uninstrument()
        settings.replace(previous)


def _only(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def test_module_function_with_positional_arguments(traced: Any, exporter: InMemorySpanExporter) -> None:
    result = toy_sdk.complete("toy-1", "hello")
    span = _only(exporter)
    a = dict(span.attributes or {})
    assert result["text"] == "echo: hello"
    assert span.name == "chat toy-1" and span.kind is SpanKind.CLIENT
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "toy"
    assert a["gen_ai.request.model"] == "toy-1" and a["evaltrace.span.kind"] == "llm"
    assert a["gen_ai.response.id"] == "resp-1" and a["gen_ai.response.model"] == "toy-1-001"
    assert a["gen_ai.response.finish_reasons"] == ("end",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (3, 2)
    assert '"content":"hello"' in a["gen_ai.input.messages"].replace(" ", "")
    assert '"content":"echo: hello"' in a["gen_ai.output.messages"].replace('": "', '":"')
    assert "server.address" not in a


def test_class_method_server_and_parameters(traced: Any, exporter: InMemorySpanExporter) -> None:
    toy_sdk.Client("llm.internal", 9000).chat(model="m", prompt="p", temperature=0.25)
    a = dict(_only(exporter).attributes or {})
    assert (a["server.address"], a["server.port"]) == ("llm.internal", 9000)
    assert a["gen_ai.request.temperature"] == 0.25


def test_error_is_recorded_and_reraised_unchanged(traced: Any, exporter: InMemorySpanExporter) -> None:
    with pytest.raises(toy_sdk.ToyError) as raised:
        toy_sdk.complete("broken", "p")
    span = _only(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "model_not_found"
    assert (span.attributes or {})["http.response.status_code"] == 404  # the codec's status_code hook
    assert [e.name for e in span.events] == ["exception"]
    assert raised.value.code == "model_not_found"


def test_generator_stream_read_to_its_end(traced: Any, exporter: InMemorySpanExporter) -> None:
    chunks = list(toy_sdk.complete("m", "hi", stream=True))
    assert len(chunks) == 4
    a = dict(_only(exporter).attributes or {})
    assert a["evaltrace.stream.end_reason"] == "exhausted" and a["evaltrace.stream.completed"] is True
    assert a["evaltrace.stream.chunks"] == 4
    assert a["gen_ai.response.id"] == "resp-2" and a["gen_ai.usage.output_tokens"] == 2
    assert "echo: hi" in a["gen_ai.output.messages"]
    assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]


def test_stream_without_its_terminal_chunk_is_truncated(traced: Any, exporter: InMemorySpanExporter) -> None:
    list(toy_sdk.complete("m", "hi", stream=True, finish=False))
    a = dict(_only(exporter).attributes or {})
    assert a["evaltrace.stream.end_reason"] == "truncated" and a["evaltrace.stream.completed"] is False


def test_generator_abandoned_mid_stream_ends_once_on_gc(traced: Any, exporter: InMemorySpanExporter) -> None:
    stream = toy_sdk.complete("m", "hi", stream=True)
    next(stream)
    assert exporter.get_finished_spans() == ()
    del stream
    gc.collect()
    a = dict(_only(exporter).attributes or {})
    assert a["evaltrace.stream.end_reason"] == "garbage_collected" and a["evaltrace.stream.chunks"] == 1


def test_context_manager_stream_break_ends_once(traced: Any, exporter: InMemorySpanExporter) -> None:
    with toy_sdk.Client().chat(model="m", prompt="hi", stream=True) as stream:
        assert isinstance(stream, toy_sdk.EventStream)
        for _ in stream:
            break
    gc.collect()
    a = dict(_only(exporter).attributes or {})
    assert a["evaltrace.stream.end_reason"] == "closed_early"


def test_async_method_plain_stream_and_error(traced: Any, exporter: InMemorySpanExporter) -> None:
    async def run() -> list[Any]:
        client = toy_sdk.Client()
        plain = await client.achat(model="m", prompt="a")
        stream = await client.achat(model="m", prompt="b", stream=True)
        chunks = [chunk async for chunk in stream]
        with pytest.raises(toy_sdk.ToyError):
            await client.achat(model="broken", prompt="c")
        return [plain, chunks]

    plain, chunks = asyncio.run(run())
    assert plain["id"] == "resp-1" and len(chunks) == 4
    spans = exporter.get_finished_spans()
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET, StatusCode.UNSET, StatusCode.ERROR]
    assert (spans[1].attributes or {})["evaltrace.stream.end_reason"] == "exhausted"


def test_async_generator_aclose_ends_the_span(traced: Any, exporter: InMemorySpanExporter) -> None:
    async def run() -> None:
        stream = await toy_sdk.Client().achat(model="m", prompt="b", stream=True)
        await stream.__anext__()
        await stream.aclose()

    asyncio.run(run())
    assert (_only(exporter).attributes or {})["evaltrace.stream.end_reason"] == "closed_early"


def test_route_skips_other_operations_and_finds_the_stream_in_a_dict(
    traced: Any, exporter: InMemorySpanExporter
) -> None:
    client = toy_sdk.Client()
    assert client.api_call("ListModels", {}) == {"models": ["a", "b"]}
    assert exporter.get_finished_spans() == ()
    client.api_call("Converse", {"modelId": "titan", "prompt": "p"})
    response = client.api_call("ConverseStream", {"modelId": "titan", "prompt": "q"})
    assert len(list(response["stream"])) == 4
    first, second = exporter.get_finished_spans()
    assert first.name == second.name == "chat titan"
    assert (second.attributes or {})["evaltrace.stream.end_reason"] == "exhausted"


def test_metrics_and_uninstrument(traced: InMemoryMetricReader, exporter: InMemorySpanExporter) -> None:
    toy_sdk.complete("m", "p")
    data = traced.get_metrics_data()
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= names
    toy_codec.ToyInstrumentor().uninstrument()
    toy_sdk.complete("m", "p")
    assert len(exporter.get_finished_spans()) == 1


def test_provider_named_from_the_request_model(traced: Any, exporter: InMemorySpanExporter) -> None:
    toy_sdk.complete("groq/llama-3", "p")
    toy_sdk.complete("plain", "p")
    providers = [(s.attributes or {})["gen_ai.provider.name"] for s in exporter.get_finished_spans()]
    assert providers == ["groq", "toy"]


def test_server_from_the_routed_call(traced: Any, exporter: InMemorySpanExporter) -> None:
    toy_sdk.complete("m", "p", api_base="http://10.0.0.7:4000/v1")
    a = dict(_only(exporter).attributes or {})
    assert (a["server.address"], a["server.port"]) == ("10.0.0.7", 4000)


def test_a_stream_both_sync_and_async_is_read_as_its_endpoint_says(traced: Any, exporter: InMemorySpanExporter) -> None:
    stream = toy_sdk.Client().dual(model="m", prompt="hi")
    assert isinstance(stream, toy_sdk.DualStream)
    assert len(list(stream)) == 4
    assert (_only(exporter).attributes or {})["evaltrace.stream.end_reason"] == "exhausted"


def test_a_codec_without_route_or_prepare_gets_wrappers_that_do_not_test_for_them() -> None:
    """The hot path of OpenAI-like codecs carries no route/prepare checks; a codec with either keeps its hooks.

    Behaviour through both paths is the rest of this file (the toy codec routes) and the OpenAI and Anthropic
    replay tests (anthropic has ``prepare``); this pins that the per-call checks stay off the direct path.
    """
    from evaltrace._internal.anthropic.registry import ENDPOINTS as ANTHROPIC
    from evaltrace._internal.engine.call import Call
    from evaltrace._internal.engine.wrappers import Telemetry, make_wrapper
    from evaltrace._internal.openai.call import LLMCall
    from evaltrace._internal.openai.registry import ENDPOINTS as OPENAI
    from evaltrace.instrumentation.anthropic.codec import CODEC as ANTHROPIC_CODEC

    telemetry = Telemetry(TracerProvider(), None)
    for endpoint in (e for e in OPENAI if not e.deferred):
        hooks = set(make_wrapper(endpoint, telemetry, LLMCall).__code__.co_freevars)
        assert not hooks & {"route", "prepare"}, (endpoint, hooks)
    anthropic = Call.for_codec(ANTHROPIC_CODEC)
    for endpoint in (e for e in ANTHROPIC if not e.deferred):
        assert "prepare" in make_wrapper(endpoint, telemetry, anthropic).__code__.co_freevars, endpoint
