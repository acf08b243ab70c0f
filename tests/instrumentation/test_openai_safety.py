"""Patching safety, suppression, capture switch, error isolation, providers, metrics and secrets."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from openai_replay import client, has_api, json_interaction
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import settings, tracing
from evaltrace._internal.openai import registry
from evaltrace._internal.openai.call import LLMCall
from evaltrace._internal.openai.provider import provider_for_host
from evaltrace._internal.openai.registry import ENDPOINTS, Endpoint, EndpointKind
from evaltrace._internal.openai.wrappers import Telemetry, make_wrapper
from evaltrace.instrumentation.openai import OpenAIInstrumentor, instrument_openai, uninstrument_openai

CHAT = "/v1/chat/completions"
COMPLETION = ChatCompletion.model_validate(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)


# The registry rows this openai has (older clients lack Responses and chat parse(); see registry.resolve_class).
PRESENT = [e for e in ENDPOINTS if registry.resolve_class(e) is not None]


def _client_path(endpoint: Endpoint) -> str:
    """Where users reach a registry row: ``Completions.parse`` -> ``chat.completions.parse``."""
    resource = {"Completions": "chat.completions", "Responses": "responses", "Embeddings": "embeddings"}
    beta = "beta." if ".beta." in endpoint.module else ""
    return f"{beta}{resource[endpoint.cls.removeprefix('Async')]}.{endpoint.method}"


def _originals() -> dict[Endpoint, Any]:
    return {e: registry.resolve_class(e).__dict__[e.method] for e in PRESENT}  # type: ignore[union-attr]


async def _chat(is_async: bool, base_url: str = "https://api.openai.com/v1", **kwargs: Any) -> Any:
    api, server = client([json_interaction(CHAT, COMPLETION)], is_async, base_url=base_url)
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], **kwargs}
    result = api.chat.completions.create(**request)
    return (await result if is_async else result), server


def test_nothing_is_patched_at_import_and_uninstrument_restores_identity(provider: TracerProvider) -> None:
    before = _originals()
    available = {e for e in ENDPOINTS if has_api(_client_path(e))}
    # Every method the client has is wrapped, but for a beta parse() that delegates to the (wrapped) create().
    assert set(PRESENT) <= available
    assert all(e.own_request_only for e in available - set(PRESENT))
    instrument_openai()
    instrument_openai()  # second call is a no-op
    patched = _originals()
    assert all(patched[e] is not before[e] for e in PRESENT)
    assert all(patched[e].__wrapped__ is before[e] for e in PRESENT)  # wrapped once, not twice
    uninstrument_openai()
    assert _originals() == before
    assert all(_originals()[e] is before[e] for e in PRESENT)
    uninstrument_openai()  # idempotent


async def test_double_instrument_still_one_span(
    is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    OpenAIInstrumentor().instrument()
    await _chat(is_async)
    assert len(exporter.get_finished_spans()) == 1


@pytest.mark.parametrize("suppress", [tracing.suppress_instrumentation, tracing.suppress_llm_instrumentation])
async def test_suppressed_calls_make_no_span(
    suppress: Any, is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    with suppress():
        result, _ = await _chat(is_async)
    assert result.id == "chatcmpl-1"
    assert exporter.get_finished_spans() == ()


@pytest.fixture
def no_content() -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    yield
    settings.replace(previous)


async def test_capture_off_keeps_metadata_but_no_content(
    is_async: bool, instrumented: OpenAIInstrumentor, no_content: None, exporter: InMemorySpanExporter
) -> None:
    await _chat(is_async, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    (span,) = exporter.get_finished_spans()
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions"}
    assert content_keys.isdisjoint(span.attributes or {})
    assert span.attributes["gen_ai.usage.input_tokens"] == 3
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_secrets_and_images_are_not_recorded(
    is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    image = "data:image/png;base64," + "A" * 1000
    content = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": image}}]
    api, server = client([json_interaction(CHAT, COMPLETION)], is_async)
    api.api_key = "sk-very-secret"
    result = api.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": content}], extra_headers={"X-Api-Key": "hdr-secret"}
    )
    if is_async:
        await result
    (span,) = exporter.get_finished_spans()
    dumped = json.dumps(dict(span.attributes or {}))
    assert "sk-very-secret" not in dumped and "hdr-secret" not in dumped and "AAAA" not in dumped
    assert server.requests[0].headers["authorization"] == "Bearer sk-very-secret"
    (message,) = json.loads(span.attributes["gen_ai.input.messages"])
    assert message["parts"][1] == {
        "type": "uri",
        "modality": "image",
        "uri": "data:image/png;base64,<omitted 1000 bytes>",
        "mime_type": "image/png",
    }


@pytest.mark.parametrize(
    ("base_url", "provider_name", "port"),
    [
        ("https://my-res.openai.azure.com/openai/v1", "azure.ai.openai", 443),
        ("https://api.deepseek.com", "deepseek", 443),
        ("https://api.x.ai/v1", "x_ai", 443),
        ("https://api.mistral.ai/v1", "mistral_ai", 443),
        ("https://api.perplexity.ai", "perplexity", 443),
        ("http://localhost:8000/v1", "openai", 8000),
    ],
)
async def test_provider_and_server_come_from_the_base_url(
    base_url: str, provider_name: str, port: int, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    await _chat(False, base_url=base_url)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.provider.name"] == provider_name
    assert span.attributes["server.address"] == openai.OpenAI(api_key="x", base_url=base_url).base_url.host
    assert span.attributes["server.port"] == port


def test_provider_for_unknown_hosts_is_openai() -> None:
    assert provider_for_host(None) == "openai"
    assert provider_for_host("vllm.internal") == "openai"
    assert provider_for_host("evilgroq.com") == "openai"
    assert provider_for_host("api.groq.com") == "groq"


async def test_our_errors_never_reach_the_user(
    is_async: bool,
    instrumented: OpenAIInstrumentor,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("bug in evaltrace")

    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")  # our suite re-raises our errors; act as production
    monkeypatch.setattr(LLMCall, "__init__", broken)
    result, _ = await _chat(is_async)
    assert result.choices[0].message.content == "ok"
    monkeypatch.undo()
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")
    monkeypatch.setattr(LLMCall, "finish", broken)
    monkeypatch.setattr(LLMCall, "finish_result", broken)  # a parsed body's path
    result, _ = await _chat(is_async)
    assert result.id == "chatcmpl-1"


class UserError(Exception):
    pass


@pytest.mark.parametrize("is_async_endpoint", [False, True])
async def test_user_exception_is_the_same_object(
    is_async_endpoint: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    error = UserError("from the user's call")
    endpoint = Endpoint("m", "C", "create", EndpointKind.CHAT, is_async_endpoint)
    wrapper = make_wrapper(endpoint, Telemetry(None, None))

    def sync_call(**kwargs: Any) -> Any:
        raise error

    async def async_call(**kwargs: Any) -> Any:
        raise error

    with pytest.raises(UserError) as caught:
        result = wrapper(async_call if is_async_endpoint else sync_call, None, (), {"model": "m"})
        if is_async_endpoint:
            await result
    assert caught.value is error
    (span,) = exporter.get_finished_spans()
    assert span.attributes["error.type"] == "UserError"


async def test_metrics_follow_semconv(is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    OpenAIInstrumentor().instrument(meter_provider=meters)
    try:
        await _chat(is_async)
    finally:
        OpenAIInstrumentor().uninstrument()
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    duration = metrics["gen_ai.client.operation.duration"]
    (point,) = duration.data.data_points
    assert point.explicit_bounds[:3] == (0.01, 0.02, 0.04)
    assert point.attributes["gen_ai.operation.name"] == "chat"
    assert point.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in metrics["gen_ai.client.token.usage"].data.data_points}
    assert tokens == {"input": 3, "output": 1}


async def test_sentinels_and_none_are_not_request_parameters(
    is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    omit = getattr(openai, "omit", openai.NOT_GIVEN)  # ``omit`` came after NOT_GIVEN; older clients have only that
    await _chat(is_async, temperature=openai.NOT_GIVEN, seed=omit, max_tokens=None, stop=omit, n=1)
    (span,) = exporter.get_finished_spans()
    request_keys = {k for k in span.attributes or {} if k.startswith("gen_ai.request.")}
    assert request_keys == {"gen_ai.request.model"}
    assert json.loads(span.attributes["langfuse.observation.model.parameters"]) == {"n": 1}  # the one given


async def test_explicit_tracer_provider_receives_the_spans(is_async: bool, exporter: InMemorySpanExporter) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    own = InMemorySpanExporter()
    explicit = TracerProvider()
    explicit.add_span_processor(SimpleSpanProcessor(own))
    OpenAIInstrumentor().instrument(tracer_provider=explicit)
    try:
        await _chat(is_async)
    finally:
        OpenAIInstrumentor().uninstrument()
    assert len(own.get_finished_spans()) == 1
    assert exporter.get_finished_spans() == ()


def test_instrumentor_is_public() -> None:
    import evaltrace.instrumentation as inst

    assert inst.OpenAIInstrumentor is OpenAIInstrumentor
    # Every provider on the engine, each with its instrumentor and instrument/uninstrument functions.
    providers = ["anthropic", "bedrock", "cohere", "google_genai", "groq", "litellm", "mistral", "ollama", "openai"]
    assert inst.__all__ == sorted(inst.__all__)
    for provider in providers:
        assert f"instrument_{provider}" in inst.__all__ and f"uninstrument_{provider}" in inst.__all__
    # Framework instrumentors (the entry point `opentelemetry-instrument` loads); their instrument_<name>() is
    # evaltrace's own (evaltrace.instrument_langchain), not this package's.
    frameworks = ["LangChainInstrumentor"]
    assert set(frameworks) <= set(inst.__all__)
    assert len(inst.__all__) == 3 * len(providers) + len(frameworks)
    for name in inst.__all__:
        module = importlib.import_module(f"evaltrace.instrumentation.{inst._HOMES[name]}")
        assert getattr(inst, name) is getattr(module, name)
