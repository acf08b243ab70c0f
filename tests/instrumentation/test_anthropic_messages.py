"""``messages.create`` (not streamed) through the real anthropic client, replayed from tests/fixtures/anthropic."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, Reply, attrs_json, client, fixture_json  # noqa: E402
from openai_langfuse_usage import langfuse_usage  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from evaltrace import pricing  # noqa: E402
from evaltrace.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402

USER = [{"role": "user", "content": "Hello, Claude"}]


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[AnthropicInstrumentor]:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")


async def _create(api: Any, is_async: bool, **kwargs: Any) -> Any:
    result = api.messages.create(**{"model": MODEL, "max_tokens": 1024, "messages": USER, **kwargs})
    return await result if is_async else result


def _sampling(values: dict[str, Any]) -> dict[str, Any]:
    """Sampling keywords as this SDK takes them: named in anthropic < 2.x, in ``extra_body`` where they are gone."""
    named = inspect.signature(anthropic.resources.messages.Messages.create).parameters
    return values if "temperature" in named else {"extra_body": values}


def _only_span(exporter: InMemorySpanExporter) -> Any:
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {MODEL}"]
    return spans[0]


async def test_plain_text_call_follows_genai_conventions(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, server = client([Reply("text.json")], is_async)
    sampling = {"temperature": 0.5, "top_p": 0.9, "top_k": 40}
    message = await _create(api, is_async, system="Be brief.", stop_sequences=["\n\nHuman:"], **_sampling(sampling))
    assert message.content[0].text == "Hi! My name is Claude."
    assert server.requests[0]["system"] == "Be brief."  # the call went through unchanged

    span = _only_span(exporter)
    a = span.attributes
    assert span.kind.name == "CLIENT"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.operation.name"] == "chat"
    assert (a["server.address"], a["server.port"]) == ("api.anthropic.com", 443)
    assert a["gen_ai.request.max_tokens"] == 1024
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.top_k"] == 40
    assert a["gen_ai.request.stop_sequences"] == ("\n\nHuman:",)
    assert "gen_ai.request.stream" not in a
    assert a["gen_ai.response.id"] == "msg_013Zva2CMHLNnXjNJJKqJ2EF"
    assert a["gen_ai.response.model"] == MODEL
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)  # provider value verbatim (conventions.md 1.3)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 12)
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello, Claude"}]}
    ]
    assert attrs_json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hi! My name is Claude."}], "finish_reason": "stop"}
    ]
    assert span.status.status_code is StatusCode.UNSET
    assert a["evaltrace.cost_usd"] == pytest.approx((10 * 3 + 12 * 15) / 1e6)


async def test_tool_use_round_trip_records_calls_and_results(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("tool_use.json"), Reply("tool_final.json")], is_async)
    tools = [
        {
            "name": "get_weather",
            "description": "Get the current weather in a given location",
            "input_schema": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        }
    ]
    first = await _create(api, is_async, tools=tools, messages=[{"role": "user", "content": "Weather in SF?"}])
    tool_use = first.content[1]
    history = [
        {"role": "user", "content": "Weather in SF?"},
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "15 degrees, partly cloudy"}],
        },
    ]
    await _create(api, is_async, tools=tools, messages=history)

    first_span, second_span = exporter.get_finished_spans()
    call = {
        "type": "tool_call",
        "id": "toolu_01A09q90qw90lq917835lq9",
        "name": "get_weather",
        "arguments": {"location": "San Francisco, CA", "unit": "celsius"},
    }
    assert first_span.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    output = attrs_json(first_span, "gen_ai.output.messages")[0]
    assert output["finish_reason"] == "tool_call"
    assert output["parts"][1] == call
    assert attrs_json(first_span, "gen_ai.tool.definitions") == [
        {
            "type": "function",
            **{k: v for k, v in tools[0].items() if k != "input_schema"},
            "parameters": tools[0]["input_schema"],
        }
    ]
    inputs = attrs_json(second_span, "gen_ai.input.messages")
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    assert inputs[1]["parts"][1] == call
    assert inputs[2]["parts"] == [
        {"type": "tool_call_response", "id": "toolu_01A09q90qw90lq917835lq9", "response": "15 degrees, partly cloudy"}
    ]


async def test_thinking_is_reasoning_never_answer_text(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("thinking.json")], is_async)
    await _create(api, is_async, thinking={"type": "adaptive"})
    parts = attrs_json(_only_span(exporter), "gen_ai.output.messages")[0]["parts"]
    body = fixture_json("thinking.json")["content"]
    assert parts == [
        {"type": "reasoning", "content": body[0]["thinking"]},
        {"type": "reasoning", "content": "", "redacted": True},
        {"type": "text", "content": body[2]["text"]},
    ]


async def test_thinking_token_count_is_the_reasoning_count(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("thinking_tokens.json")], is_async)
    await _create(api, is_async, thinking={"type": "adaptive"})
    a = _only_span(exporter).attributes
    assert a["gen_ai.usage.output_tokens"] == 412  # thinking included, as the API counts it
    assert a["gen_ai.usage.reasoning.output_tokens"] == 298
    assert a["evaltrace.cost_thinking_usd"] > 0


async def test_cache_tokens_are_inside_input_and_priced_at_cache_rates(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    api, _ = client([Reply("cache.json")], is_async)
    await _create(api, is_async)
    a = _only_span(exporter).attributes
    assert a["gen_ai.usage.input_tokens"] == 21 + 188086 + 1024  # OTel input includes cache reads and writes
    assert a["gen_ai.usage.cache_read.input_tokens"] == 188086
    assert a["gen_ai.usage.cache_creation.input_tokens"] == 1024
    assert "gen_ai.usage.reasoning.output_tokens" not in a  # Anthropic reports no thinking token count
    assert "langfuse.observation.usage_details" not in a  # Langfuse derives it from the counts (conventions 4.2)
    assert langfuse_usage(a) == {
        "input": 21,
        "input_cached_tokens": 188086,
        "input_cache_creation": 1024,
        "output": 393,
    }
    price = pricing.price_of(MODEL, "anthropic")
    assert price is not None and price.cache_write is not None and price.cached_input is not None
    expected = (21 * price.input + 188086 * price.cached_input + 1024 * price.cache_write + 393 * price.output) / 1e6
    assert a["evaltrace.cost_usd"] == pytest.approx(expected)
    details = attrs_json(_only_span(exporter), "langfuse.observation.cost_details")
    assert details["input_cached_tokens"] == pytest.approx(188086 * price.cached_input / 1e6)
    assert details["input_cache_creation"] == pytest.approx(1024 * price.cache_write / 1e6)


@pytest.mark.parametrize(
    ("fixture", "stop_reason", "finish_reason"),
    [("max_tokens.json", "max_tokens", "length"), ("refusal.json", "refusal", "content_filter")],
)
async def test_stop_reasons_map_to_genai_finish_reasons(
    is_async: bool, exporter: InMemorySpanExporter, fixture: str, stop_reason: str, finish_reason: str
) -> None:
    api, _ = client([Reply(fixture)], is_async)
    await _create(api, is_async)
    span = _only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == (stop_reason,)
    assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == finish_reason


@pytest.mark.parametrize(
    ("fixture", "status", "exception", "error_type"),
    [
        ("error_400.json", 400, "BadRequestError", "invalid_request_error"),
        ("error_429.json", 429, "RateLimitError", "rate_limit_error"),
        ("error_529.json", 529, "OverloadedError", "overloaded_error"),
    ],
)
async def test_api_errors_fail_the_span_with_the_provider_error_type(
    is_async: bool, exporter: InMemorySpanExporter, fixture: str, status: int, exception: str, error_type: str
) -> None:
    api, _ = client([Reply(fixture, status)], is_async)
    with pytest.raises(anthropic.APIStatusError) as raised:
        await _create(api, is_async)
    assert type(raised.value).__name__ == exception
    span = _only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == error_type
    assert span.attributes["http.response.status_code"] == status
    assert [e.name for e in span.events] == ["exception"]
    assert attrs_json(span, "gen_ai.input.messages")  # the request is still recorded


async def test_image_blocks_are_placeholders_without_payload(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("text.json")], is_async)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 100}}
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    await _create(
        api, is_async, messages=[{"role": "user", "content": [image, url, {"type": "text", "text": "What?"}]}]
    )
    parts = attrs_json(_only_span(exporter), "gen_ai.input.messages")[0]["parts"]
    assert parts == [
        {
            "type": "uri",
            "modality": "image",
            "uri": "data:image/png;base64,<omitted 1100 bytes>",
            "mime_type": "image/png",
        },
        {"type": "uri", "modality": "image", "uri": "https://example.com/cat.png"},
        {"type": "text", "content": "What?"},
    ]


async def test_count_tokens_is_not_traced(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, server = client([Reply("count_tokens.json")], is_async)
    result = api.messages.count_tokens(model=MODEL, messages=USER)
    counted = await result if is_async else result
    assert counted.input_tokens == 14
    assert server.requests[0]["path"] == "/v1/messages/count_tokens"
    assert exporter.get_finished_spans() == ()


async def test_beta_messages_create_is_traced(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("text.json")], is_async)
    result = api.beta.messages.create(model=MODEL, max_tokens=64, messages=USER)
    message = await result if is_async else result
    assert message.id == "msg_013Zva2CMHLNnXjNJJKqJ2EF"
    assert _only_span(exporter).attributes["gen_ai.response.id"] == message.id


async def test_one_call_makes_one_span_even_with_the_sdks_own_tracing(
    is_async: bool, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """anthropic >= 2 traces calls itself; given our provider, it would add a second ``chat`` span per call."""
    api, _ = client([Reply("text.json")], is_async)
    if not hasattr(api, "_lazy_tracer"):
        pytest.skip("this anthropic has no tracing of its own")
    api._set_open_telemetry({"tracer_provider": provider})
    await _create(api, is_async)
    _only_span(exporter)


async def test_silencing_the_sdks_span_never_leaves_a_call_without_one(
    is_async: bool, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """After a traced call, a call we do not trace (count_tokens) on the same client keeps the SDK's own span,
    and ``parse`` has ours."""
    replies = [Reply("text.json"), Reply("parse.json"), Reply("count_tokens.json"), Reply("text.json")]
    api, _ = client(replies, is_async)
    if not hasattr(api, "_lazy_tracer") or not hasattr(api.messages, "parse"):
        pytest.skip("this anthropic has no tracing of its own, or no parse")
    api._set_open_telemetry({"tracer_provider": provider})
    await _create(api, is_async)
    parsed = api.messages.parse(model=MODEL, max_tokens=64, messages=USER)
    await parsed if is_async else parsed
    counted = api.messages.count_tokens(model=MODEL, messages=USER)
    assert (await counted if is_async else counted).input_tokens > 0
    await _create(api, is_async)
    spans = exporter.get_finished_spans()
    ours = [s for s in spans if s.instrumentation_scope.name.startswith("evaltrace")]
    theirs = [s for s in spans if s not in ours]
    assert [s.attributes["gen_ai.response.id"] for s in ours] == [  # one span each: ours, the SDK's silenced
        "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "msg_01StructuredOut000001",
        "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    ]
    assert [s.name for s in theirs] == ["anthropic.messages.count_tokens"]  # the SDK's own, kept


def test_uninstrument_restores_the_methods(exporter: InMemorySpanExporter) -> None:
    AnthropicInstrumentor().uninstrument()
    api, _ = client([Reply("text.json")])
    api.messages.create(model=MODEL, max_tokens=64, messages=USER)
    assert exporter.get_finished_spans() == ()
    AnthropicInstrumentor().instrument()
