"""``instrument_litellm()``: ``litellm.completion`` / ``acompletion`` through the real LiteLLM, plain and streamed.

No LiteLLM recording exists in any fixture set. LiteLLM is pointed (``api_base``) at the replay server serving
the recorded traffic of the providers behind it: OpenAI (tests/fixtures/openai-cassettes), Groq
(tests/fixtures/groq-cassettes, pydantic-ai's recordings) and the Anthropic fixtures (tests/fixtures/anthropic).
LiteLLM sends those requests itself (through the openai SDK for OpenAI and Groq, httpx for Anthropic).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import json
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import LITELLM_WARNINGS, OPENAI, USER, anthropic_reply, complete, drain  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace.instrumentation.litellm import LiteLLMInstrumentor  # noqa: E402
from evaltrace.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

GROQ = FIXTURES / "groq-cassettes" / "pydantic-ai"


pytestmark = [
    pytest.mark.usefixtures("litellm_instrumented"),
    *LITELLM_WARNINGS,
]


def _json(span: Any, key: str) -> Any:
    return json.loads(span.attributes[key])


async def test_openai_model_span_names_openai(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_with_content.yaml")) as server:
        response = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1",
                                  temperature=0.5)  # fmt: skip
        port = int(server.url.rsplit(":", 1)[1])
    assert response.choices[0].message.content == "This is a test."
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == "chat openai/gpt-4o-mini"
    assert a["gen_ai.provider.name"] == "openai"
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.response.id"] == "chatcmpl-ASYMQRl3A3DXL9FWCK9tnGRcKIO7q"
    assert a["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 5)
    assert a["output.value"] == "This is a test."
    assert a["evaltrace.cost_usd"] > 0  # priced as OpenAI's model
    assert span.status.status_code is StatusCode.UNSET


async def test_tool_calls_are_parts(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_tool_calls_with_content.yaml")) as server:
        await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    message = _json(span, "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "tool_call"
    assert [p["name"] for p in message["parts"]] == ["get_current_weather", "get_current_weather"]
    assert message["parts"][0]["arguments"] == {"location": "Seattle, WA"}


async def test_stream_sync_and_async(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_streaming.yaml")) as server:
        stream = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", stream=True,
                                stream_options={"include_usage": True})  # fmt: skip
        from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

        assert isinstance(stream, CustomStreamWrapper)  # the proxy keeps the class
        assert not exporter.get_finished_spans()  # open while the stream is
        chunks = await drain(stream, is_async)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert _json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": text}]
    # LiteLLM writes its own name of the model into every chunk; the span names the provider's, from the recorded
    # chunks (recorded for ``gpt-4``), as the same call unstreamed does.
    assert {c.model for c in chunks} == {"gpt-4o-mini"}
    assert a["gen_ai.response.model"] == "gpt-4-0613"


class _OpenAIHandler(litellm.CustomLLM):  # type: ignore[misc]
    """A LiteLLM custom provider that answers through the real openai client (as LiteLLM's own handlers once did).

    LiteLLM's built-in OpenAI handler posts with ``openai_client.post`` (no instrumented method), so this is how
    a call that goes through LiteLLM *and* an instrumented SDK method is made here.
    """

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self.base_url = base_url

    def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        import openai

        with openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0) as client:
            answer = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return litellm.ModelResponse(**answer.model_dump())

    async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        import openai

        async with openai.AsyncOpenAI(base_url=self.base_url, api_key="test", max_retries=0) as client:
            answer = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return litellm.ModelResponse(**answer.model_dump())


async def test_one_span_when_the_inner_sdk_is_instrumented_too(
    litellm_instrumented: LiteLLMInstrumentor, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    cassette = load_cassette(OPENAI / "test_chat_completion_with_content.yaml")
    previous = litellm.custom_provider_map
    OpenAIInstrumentor().instrument()
    try:
        with ReplayServer(cassette * 2) as server:
            litellm.custom_provider_map = [
                {"provider": "viaopenai", "custom_handler": _OpenAIHandler(f"{server.url}/v1")}
            ]
            await complete(is_async, model="viaopenai/gpt-4o-mini")
            (span,) = exporter.get_finished_spans()  # LiteLLM's: the openai client call inside it makes none
            assert span.name == "chat viaopenai/gpt-4o-mini"
            assert span.attributes["gen_ai.provider.name"] == "viaopenai"
            assert span.attributes["gen_ai.response.id"] == "chatcmpl-ASYMQRl3A3DXL9FWCK9tnGRcKIO7q"
            exporter.clear()
            litellm_instrumented.uninstrument()  # without LiteLLM's span, the openai client's own is there
            await complete(is_async, model="viaopenai/gpt-4o-mini")
            assert [s.name for s in exporter.get_finished_spans()] == ["chat gpt-4o-mini"]
    finally:
        OpenAIInstrumentor().uninstrument()
        litellm.custom_provider_map = previous


async def test_groq_model_names_groq_and_keeps_thinking_out_of_the_answer(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    interactions = load_cassette(GROQ / "test_groq_model_thinking_part_iter.yaml")[:1]
    with ReplayServer(interactions) as server:
        stream = await complete(is_async, model="groq/deepseek-r1-distill-llama-70b", api_base=server.url,
                                stream=True)  # fmt: skip
        await drain(stream, is_async)
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a["gen_ai.provider.name"] == "groq"
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert parts[0]["type"] == "reasoning"  # <think> moved out of the answer (or LiteLLM's reasoning_content)
    assert "<think>" not in a["output.value"]


async def test_anthropic_model_names_anthropic_with_thinking(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([anthropic_reply("thinking.json")]) as server:
        response = await complete(is_async, model="anthropic/claude-sonnet-4-6", api_base=server.url,
                                  max_tokens=1024)  # fmt: skip
    assert response.choices[0].message.reasoning_content
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.response.model"] == "claude-sonnet-4-6"
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert parts[0] == {"type": "reasoning", "content": response.choices[0].message.reasoning_content}


async def test_error_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_404.yaml")) as server:
        with pytest.raises(litellm.NotFoundError):
            await complete(is_async, model="openai/this-model-does-not-exist", api_base=f"{server.url}/v1")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"]
    assert span.attributes["gen_ai.provider.name"] == "openai"


def test_uninstrument_restores_litellm(
    litellm_instrumented: LiteLLMInstrumentor, exporter: InMemorySpanExporter
) -> None:
    litellm_instrumented.uninstrument()
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_with_content.yaml")) as server:
        litellm.completion(model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", api_key="t", messages=USER)
    assert exporter.get_finished_spans() == ()


async def test_async_stream_sync_close_closes_and_ends_the_span(exporter: InMemorySpanExporter) -> None:
    """``CustomStreamWrapper.close()`` is sync even for ``acompletion``: the proxy must not turn it into a coroutine."""
    with ReplayServer(load_cassette(OPENAI / "test_chat_completion_streaming.yaml")) as server:
        stream = await litellm.acompletion(model="openai/gpt-4o-mini", api_key="test", messages=USER, stream=True,
                                           api_base=f"{server.url}/v1", num_retries=0)  # fmt: skip
        async for _ in stream:
            break
        assert stream.close() is None  # forwarded now, as without evaltrace
        assert stream.completion_stream is None  # LiteLLM really closed its provider stream
        (span,) = exporter.get_finished_spans()  # ended by close(), not later by garbage collection
        assert span.attributes is not None
        assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
        stream.close()
        await stream.aclose()
    assert len(exporter.get_finished_spans()) == 1  # exactly once


async def test_a_first_chunk_whose_fold_fails_sets_no_time_to_first_chunk(
    is_async: bool, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk our fold fails on is not the first output, as with any provider whose ``add`` fails (logged, not raised).

    No recording has such a chunk: the recorded OpenAI stream is edited so that every choice index is a list, which
    LiteLLM passes through and the fold cannot use as a key.
    """
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS", raising=False)  # the deployed setting
    item = load_cassette(OPENAI / "test_chat_completion_streaming.yaml")[0]
    events = [e for e in item.body.split(b"\n\n") if e.strip()][:-1]  # the last is ``[DONE]``
    # The closing chunk is left out: LiteLLM builds its finish chunk itself, with an index of its own (0).
    bodies = [b for b in (json.loads(e[len(b"data: ") :]) for e in events) if not b["choices"] or
              b["choices"][0]["finish_reason"] is None]  # fmt: skip
    for body in bodies:
        for choice in body["choices"]:
            choice["index"] = [0]
    raw = b"".join(b"data: " + json.dumps(b).encode() + b"\n\n" for b in bodies) + b"data: [DONE]\n\n"
    edited = Recorded(item.method, item.uri, item.request_body, item.status, item.reason, item.headers, raw)
    with ReplayServer([edited]) as server:
        stream = await complete(is_async, model="openai/gpt-4o-mini", api_base=f"{server.url}/v1", stream=True,
                                stream_options={"include_usage": True})  # fmt: skip
        chunks: list[Any] = []
        # LiteLLM's own error for a stream with no finish (MidStreamFallbackError now; its class varies by version)
        with pytest.raises((litellm.ServiceUnavailableError, litellm.APIConnectionError)):
            if is_async:
                async for chunk in stream:
                    chunks.append(chunk)
            else:
                for chunk in stream:
                    chunks.append(chunk)
    assert [c.choices[0].index for c in chunks] == [[0]] * 6  # the user's chunks, untouched
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a is not None
    assert a["evaltrace.stream.chunks"] == 6
    assert "gen_ai.response.time_to_first_chunk" not in a
    assert "evaltrace internal error" in caplog.text
