"""What a LiteLLM span records against what the provider sent.

The real ``litellm`` is pointed (``api_base``) at the replay server on 127.0.0.1 serving the Anthropic fixtures
(tests/fixtures/anthropic) and the recorded OpenAI traffic (tests/fixtures/openai-cassettes), as in
test_litellm_spans.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import CLAUDE, LITELLM_WARNINGS, OPENAI, USER, anthropic_reply, close_clients, complete, drain  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace.instrumentation.litellm import LiteLLMInstrumentor  # noqa: E402


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """Close and drop LiteLLM's cached clients here, not in a later test (``litellm_replay.close_clients``)."""
    yield
    await close_clients()


pytestmark = [
    pytest.mark.usefixtures("litellm_instrumented"),
    *LITELLM_WARNINGS,
]


def _usage(span: Any) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("gen_ai.usage.")}


async def test_a_stream_without_include_usage_records_the_usage_the_provider_sent(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM takes the usage chunk out of a stream the caller did not ask usage of, but keeps it on its last chunk.

    The Anthropic stream reports its tokens (``message_start`` / ``message_delta``); LiteLLM puts their total in
    the final chunk's ``_hidden_params["usage"]``. The span's usage is the same as with ``include_usage``.
    """
    spans = []
    for options in ({}, {"stream_options": {"include_usage": True}}):
        with ReplayServer([anthropic_reply("stream_thinking_tokens.sse")]) as server:
            stream = await complete(is_async, model=CLAUDE, api_base=server.url, max_tokens=1024, stream=True,
                                    **options)  # fmt: skip
            chunks = await drain(stream, is_async)
        if not options:
            assert all(getattr(c, "usage", None) is None for c in chunks)  # the user's chunks carry none
        (span,) = exporter.get_finished_spans()
        exporter.clear()
        spans.append(span)
    usage = _usage(spans[0])
    assert usage["gen_ai.usage.input_tokens"] == 32 + 1200  # includes the cache read, as OTel says
    assert usage["gen_ai.usage.cache_read.input_tokens"] == 1200
    assert usage["gen_ai.usage.output_tokens"] == 190
    assert usage["gen_ai.usage.reasoning.output_tokens"] == 121
    assert usage == _usage(spans[1])
    assert spans[0].attributes is not None and spans[0].attributes["evaltrace.cost_usd"] > 0


async def test_a_stream_without_include_usage_records_a_usage_chunk_sent_after_the_finish(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """OpenAI's recorded stream ends with a usage chunk after the finish chunk; LiteLLM yields it to nobody."""
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_streaming.yaml")) as server:
        stream = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", stream=True)
        chunks = await drain(stream, is_async)
    assert all(c.choices and getattr(c, "usage", None) is None for c in chunks)
    (span,) = exporter.get_finished_spans()
    usage = _usage(span)
    assert (usage["gen_ai.usage.input_tokens"], usage["gen_ai.usage.output_tokens"]) == (12, 5)
    assert usage["gen_ai.usage.cache_read.input_tokens"] == 0


def _token_sums(reader: Any) -> dict[str, int]:
    """The ``gen_ai.client.token.usage`` histogram's sums by ``gen_ai.token.type``."""
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


@pytest.mark.parametrize("sampled", [True, False])
@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("name", ["stream_thinking_tokens.sse", "openai"])
async def test_a_streams_token_metrics_are_the_usage_the_provider_sent(
    name: str,
    include_usage: bool,
    sampled: bool,
    litellm_instrumented: LiteLLMInstrumentor,
    is_async: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """The token usage metric of a stream counts what its span records, with or without ``include_usage``.

    The metric reads the stream's summary, not its outcome: without ``include_usage`` both must take the usage
    LiteLLM kept from the caller (Anthropic's, reported at the message's start and end; OpenAI's last chunk). A span
    the sampler drops records nothing, and its outcome is never built: the metric still counts the tokens.
    """
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    reader = InMemoryMetricReader()
    litellm_instrumented.uninstrument()
    tracing = provider if sampled else TracerProvider(sampler=ALWAYS_OFF)
    LiteLLMInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracing)
    options: dict[str, Any] = {"stream_options": {"include_usage": True}} if include_usage else {}
    if name == "openai":
        replies, model, base = (
            load_cassette(OPENAI / "test_chat_completion_streaming.yaml"),
            "openai/gpt-4o-mini",
            "/v1",
        )
    else:
        replies, model, base = [anthropic_reply(name)], CLAUDE, ""
    try:
        with ReplayServer(replies) as server:
            stream = await complete(is_async, model=model, api_base=server.url + base, max_tokens=1024, stream=True,
                                    **options)  # fmt: skip
            await drain(stream, is_async)
    finally:
        LiteLLMInstrumentor().uninstrument()
    expected = (32 + 1200, 190) if name != "openai" else (12, 5)
    if sampled:
        (span,) = exporter.get_finished_spans()
        usage = _usage(span)
        assert (usage["gen_ai.usage.input_tokens"], usage["gen_ai.usage.output_tokens"]) == expected
    else:
        assert exporter.get_finished_spans() == ()
    assert _token_sums(reader) == {"input": expected[0], "output": expected[1]}


async def test_a_stream_whose_provider_sent_no_usage_records_none(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM marks a total it could not read (``UnreportedUsage``, all zeros): no usage, not a usage of 0."""
    item = load_cassette(OPENAI / "test_chat_completion_streaming.yaml")[0]
    events = [e for e in item.body.split(b"\n\n") if e.strip()]
    kept = [e for e in events if e.startswith(b"data: [DONE]") or json.loads(e[len(b"data: ") :])["choices"]]
    assert len(kept) == len(events) - 1  # the recording's usage chunk, left out
    edited = Recorded(item.method, item.uri, item.request_body, item.status, item.reason, item.headers,
                      b"\n\n".join(kept) + b"\n\n")  # fmt: skip
    with ReplayServer([edited]) as server:
        stream = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", stream=True)
        await drain(stream, is_async)
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert _usage(span) == {}
    assert "evaltrace.cost_usd" not in span.attributes


async def test_litellm_status_code_is_not_taken_for_the_provider_error_code(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM's ``RateLimitError`` sets ``code="429"`` itself: ``error.type`` is its class, as for ``NotFoundError``."""
    with ReplayServer([anthropic_reply("error_429.json", status=429)]) as server:
        with pytest.raises(litellm.RateLimitError) as raised:
            await complete(is_async, model=CLAUDE, api_base=server.url, max_tokens=16)
    assert raised.value.code == "429"  # LiteLLM's, not Anthropic's (``rate_limit_error``, in the message only)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RateLimitError"
    assert span.attributes["http.response.status_code"] == 429


async def test_top_k_is_recorded(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([anthropic_reply("text.json")]) as server:
        await complete(is_async, model=CLAUDE, api_base=server.url, max_tokens=64, top_k=5)
        assert server.received[0].json()["top_k"] == 5  # LiteLLM sent it to the provider
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["gen_ai.request.top_k"] == 5


@pytest.mark.parametrize(("given", "recorded"), [(5.0, 5), (2.5, 2.5), (True, None)])
async def test_a_float_top_k_is_recorded_as_an_int_when_whole(
    given: float, recorded: float | None, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``gen_ai.request.top_k`` is an int (conventions' main): a whole float is one; any other is kept as sent.

    A bool is no count of tokens (``True == 1`` in Python): not recorded.
    """
    with ReplayServer([anthropic_reply("text.json")]) as server:
        await complete(is_async, model=CLAUDE, api_base=server.url, max_tokens=64, top_k=given)
        assert server.received[0].json()["top_k"] == given  # LiteLLM sent it as given
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    value = span.attributes.get("gen_ai.request.top_k")
    assert value == recorded
    assert type(value) is type(recorded)


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", CLAUDE])
async def test_one_span_with_the_provider_sdk_instrumented_too(
    model: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM's built-in OpenAI and Anthropic handlers, with both SDK instrumentations on: LiteLLM's span only."""
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument()
    AnthropicInstrumentor().instrument()
    try:
        if model.startswith("openai/"):
            replies, base = load_cassette(OPENAI / "test_chat_completion_with_content.yaml"), "/v1"
        else:
            replies, base = [anthropic_reply("text.json")], ""
        with ReplayServer(replies) as server:
            await complete(is_async, model=model, api_base=server.url + base, max_tokens=64)
            assert len(server.received) == 1
    finally:
        OpenAIInstrumentor().uninstrument()
        AnthropicInstrumentor().uninstrument()
    (span,) = exporter.get_finished_spans()
    assert span.name == f"chat {model}"
    assert span.parent is None
    assert span.attributes is not None
    assert span.attributes["gen_ai.provider.name"] == model.split("/")[0]


@pytest.mark.parametrize(
    ("model", "provider", "server"),
    [
        ("text-completion-openai/gpt-3.5-turbo-instruct", "openai", ("api.openai.com", 443)),
        ("anthropic_text/claude-2.1", "anthropic", ("api.anthropic.com", 443)),
        ("azure_text/my-deployment", "azure.ai.openai", (None, None)),
        ("watsonx_text/ibm/granite-13b-chat-v2", "ibm.watsonx.ai", (None, None)),
    ],
)
def test_litellm_text_providers_are_named_as_their_chat_providers(
    model: str, provider: str, server: tuple[str | None, int | None]
) -> None:
    """LiteLLM's text-completion handlers of OpenAI, Anthropic, Azure OpenAI and watsonx (``get_llm_provider``)."""
    from evaltrace.instrumentation.litellm.providers import resolve

    assert litellm.get_llm_provider(model=model)[1] == model.split("/")[0]  # LiteLLM's own name for it
    assert resolve({"model": model}) == (provider, server)


def test_an_azure_text_call_span_names_azure_openai(exporter: InMemorySpanExporter) -> None:
    """Through the real call (refused on 127.0.0.1: no request leaves the machine), the span has the OTel name."""
    with pytest.raises(litellm.APIConnectionError):
        litellm.completion(model="azure_text/my-deployment", api_base="http://127.0.0.1:9", api_key="test",
                           api_version="2024-02-01", messages=USER, num_retries=0)  # fmt: skip
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["gen_ai.provider.name"] == "azure.ai.openai"
    assert (span.attributes["server.address"], span.attributes["server.port"]) == ("127.0.0.1", 9)


REDACTED = {"type": "reasoning", "content": "", "redacted": True}


@pytest.mark.parametrize("name", ["thinking.json", "stream_thinking.sse"])
async def test_a_redacted_thinking_block_is_an_empty_redacted_reasoning_part(
    name: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Anthropic's ``redacted_thinking`` (in LiteLLM's ``thinking_blocks`` only): marked, as the Anthropic span has it.

    Whole or streamed, the thinking LiteLLM gives as ``reasoning_content`` comes first, then one redacted part per
    redacted block, then the answer.
    """
    stream = name.endswith(".sse")
    with ReplayServer([anthropic_reply(name)]) as server:
        response = await complete(is_async, model=CLAUDE, api_base=server.url, max_tokens=1024, stream=stream)
        chunks = await drain(response, is_async) if stream else None
    if chunks is None:
        blocks = response.choices[0].message.thinking_blocks
        reasoning, answer = response.choices[0].message.reasoning_content, response.choices[0].message.content
    else:
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        blocks = [b for d in deltas for b in getattr(d, "thinking_blocks", None) or ()]
        reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
        answer = "".join(d.content or "" for d in deltas)
    assert [b["type"] for b in blocks].count("redacted_thinking") == 1  # what LiteLLM gives the caller
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    parts = json.loads(str(span.attributes["gen_ai.output.messages"]))[0]["parts"]
    assert parts == [{"type": "reasoning", "content": reasoning}, REDACTED, {"type": "text", "content": answer}]


def test_a_status_code_gives_way_to_the_providers_error_type_in_the_body() -> None:
    from evaltrace.instrumentation.litellm.codec import error_type

    error = litellm.RateLimitError("slow down", llm_provider="anthropic", model=CLAUDE)
    error.code = "429"  # type: ignore[attr-defined]
    error.body = {"error": {"type": "rate_limit_error"}}  # type: ignore[attr-defined]
    assert error_type(error) == "rate_limit_error"
    error.body = None  # type: ignore[attr-defined]
    assert error_type(error) == "RateLimitError"


def test_a_usage_total_that_fails_leaves_no_usage_rather_than_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from evaltrace.instrumentation.litellm import extras

    def broken(**_: object) -> object:
        raise TypeError("a changed signature")

    monkeypatch.setattr(extras, "_total_usage", lambda: broken)
    stream = SimpleNamespace(chunks=[SimpleNamespace(usage=object())])
    assert extras.reported_usage(stream) is None


async def test_an_n_2_stream_whose_finish_litellm_dropped_still_ended(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """LiteLLM yields choice 0's finish chunk only: the stream still ended; choice 1's finish is not invented."""
    item = load_cassette(OPENAI / "test_chat_completion_multiple_choices_streaming.yaml")[0]
    request = item.request_json()
    with ReplayServer([item]) as server:
        stream = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", n=2, stream=True,
                                messages=request["messages"], stream_options={"include_usage": True})  # fmt: skip
        chunks = await drain(stream, is_async)
    finishes = [(c.index, c.finish_reason) for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert finishes == [(0, "stop")]  # the recording finishes both choices; LiteLLM yields one
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a is not None
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)  # choice 1's: unknown, not invented
    texts = ["".join(c.delta.content or "" for chunk in chunks for c in chunk.choices if c.index == i) for i in (0, 1)]
    messages = json.loads(str(a["gen_ai.output.messages"]))
    assert [m["parts"] for m in messages] == [[{"type": "text", "content": t}] for t in texts]
    # Choice 1's finish is unknown: no ``error`` (a cut stream's), which the ``exhausted`` end would contradict.
    assert messages[0]["finish_reason"] == "stop"
    assert "finish_reason" not in messages[1]
    assert span.status.status_code is StatusCode.UNSET
