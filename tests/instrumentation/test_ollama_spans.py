"""``instrument_ollama()``: ``chat`` / ``generate`` / ``embed`` through the real ``ollama`` client, sync and async.

Chat replays tests/fixtures/ollama-cassettes (OpenInference's recordings: streamed and not, tool calls, a 404).
No ``/api/generate`` or ``/api/embed`` recording exists: those bodies are made in ollama_replay.py.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Iterator
from typing import Any

import ollama
import pytest
from ollama_replay import (
    MODEL,
    async_client_of,
    chat_interaction,
    client_of,
    embed_interaction,
    generate_interaction,
    recorded,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import ReplayServer
from evaltrace.instrumentation.ollama import OllamaInstrumentor

USER = [{"role": "user", "content": "Why is the sky blue? Answer in one sentence."}]


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[OllamaInstrumentor]:
    instrumentor = OllamaInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")


def _only_span(exporter: InMemorySpanExporter, name: str = f"chat {MODEL}") -> Any:
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [name]
    return spans[0]


def _json(span: Any, key: str) -> Any:
    return json.loads(span.attributes[key])


async def _call(url: str, is_async: bool, method: str, *args: Any, **kwargs: Any) -> Any:
    if is_async:
        async with async_client_of(url) as client:
            return await getattr(client, method)(*args, **kwargs)
    with client_of(url) as client:
        return getattr(client, method)(*args, **kwargs)


async def test_chat_span_follows_genai_conventions(is_async: bool, exporter: InMemorySpanExporter) -> None:
    name = "test_async_chat.yaml" if is_async else "test_chat.yaml"
    with ReplayServer(recorded(name)) as server:
        response = await _call(server.url, is_async, "chat", MODEL, USER, options={"temperature": 0, "seed": 42})
        port = int(server.url.rsplit(":", 1)[1])
        sent = server.received[0].json()
    assert response.message.content.startswith("The sky appears blue")
    assert sent["options"] == {"temperature": 0, "seed": 42}  # the call went through unchanged

    span = _only_span(exporter)
    a = span.attributes
    assert a["gen_ai.provider.name"] == "ollama"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == MODEL  # given positionally
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.request.temperature"] == 0.0
    assert a["gen_ai.request.seed"] == 42
    assert a["gen_ai.response.model"] == MODEL
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (21, 369)
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[0]["content"].startswith("Here's a thinking process")
    assert parts[1]["content"] == response.message.content  # the answer alone
    assert _json(span, "gen_ai.input.messages")[0]["parts"][0]["content"] == USER[0]["content"]
    assert span.status.status_code is StatusCode.UNSET


async def test_tool_call_is_a_tool_call_part(is_async: bool, exporter: InMemorySpanExporter) -> None:
    def add_two_numbers(a: int, b: int) -> int:
        """Add two numbers.

        Args:
          a: The first number.
          b: The second number.
        """
        return a + b

    with ReplayServer(recorded("test_chat_with_callable_tool.yaml")) as server:
        await _call(server.url, is_async, "chat", model=MODEL, messages=USER, tools=[add_two_numbers])
    span = _only_span(exporter)
    message = _json(span, "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "tool_call"
    assert message["parts"][-1] == {"type": "tool_call", "id": None, "name": "add_two_numbers",
                                    "arguments": {"a": 2, "b": 3}}  # fmt: skip
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert _json(span, "gen_ai.tool.definitions")[0]["name"] == "add_two_numbers"


async def _stream(url: str, is_async: bool, limit: int | None = None) -> list[Any]:
    chunks: list[Any] = []
    if is_async:
        async with async_client_of(url) as client:
            async for chunk in await client.chat(MODEL, USER, stream=True):
                chunks.append(chunk)
                if limit is not None and len(chunks) >= limit:
                    break
        return chunks
    with client_of(url) as client:
        for chunk in client.chat(MODEL, USER, stream=True):
            chunks.append(chunk)
            if limit is not None and len(chunks) >= limit:
                break
    return chunks


async def test_stream_read_to_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    name = "test_async_chat_stream.yaml" if is_async else "test_chat_stream.yaml"
    with ReplayServer(recorded(name)) as server:
        chunks = await _stream(server.url, is_async)
    assert chunks[-1].done is True
    span = _only_span(exporter)
    a = span.attributes
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["evaltrace.stream.chunks"] == len(chunks) > 100
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == chunks[-1].prompt_eval_count
    assert a["gen_ai.usage.output_tokens"] == chunks[-1].eval_count
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[1]["content"] == "".join(c.message.content or "" for c in chunks)


async def test_stream_left_early(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(recorded("test_chat_stream.yaml")) as server:
        await _stream(server.url, is_async, limit=3)
        gc.collect()
    a = _only_span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] in ("closed_early", "garbage_collected")
    assert a["evaltrace.stream.completed"] is False


async def test_error_line_mid_stream_fails_the_span_and_keeps_what_arrived(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Ollama reports a failure during generation as an ``{"error": ...}`` line of a 200 stream (made here from the
    recorded stream: its first lines, then such a line; no recording of one exists)."""
    stream = recorded("test_chat_stream.yaml")[0]
    lines = [line for line in stream.body.split(b"\n") if line.strip()][:5]
    lines.append(json.dumps({"error": "an error was encountered while running the model"}).encode())
    broken = dataclasses.replace(stream, body=b"\n".join(lines))
    with ReplayServer([broken]) as server:
        with pytest.raises(ollama.ResponseError) as raised:
            await _stream(server.url, is_async)
    assert "while running the model" in str(raised.value)
    span = _only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert span.attributes["evaltrace.stream.chunks"] == 5
    assert span.events[0].attributes["exception.type"].endswith("ResponseError")
    # The SDK gives this error ``status_code`` -1 (no HTTP status: the response itself was a 200): not a status.
    assert raised.value.status_code == -1
    assert "http.response.status_code" not in span.attributes
    assert span.attributes["error.type"] == "ResponseError"


async def test_model_not_found_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer(recorded("test_chat_error_records_model_name.yaml")) as server:
        with pytest.raises(ollama.ResponseError) as raised:
            await _call(server.url, is_async, "chat", "nonexistent-model:latest", USER)
    assert raised.value.status_code == 404
    span = _only_span(exporter, "chat nonexistent-model:latest")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"]
    assert span.attributes["http.response.status_code"] == 404
    assert span.events[0].attributes["exception.type"].endswith("ResponseError")


async def test_generate_and_embed(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([generate_interaction(False), embed_interaction()]) as server:
        answer = await _call(server.url, is_async, "generate", MODEL, "Why?", system="Be brief.")
        await _call(server.url, is_async, "embed", "nomic-embed-text", ["a", "b"])
    assert answer.response == "Blue."
    generate, embed = exporter.get_finished_spans()
    assert generate.name == f"text_completion {MODEL}"
    assert generate.attributes["gen_ai.operation.name"] == "text_completion"
    assert _json(generate, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert _json(generate, "gen_ai.output.messages")[0]["parts"] == [
        {"type": "reasoning", "content": "Rayleigh."},
        {"type": "text", "content": "Blue."},
    ]
    assert embed.name == "embeddings nomic-embed-text"
    assert embed.attributes["gen_ai.usage.input_tokens"] == 4
    assert embed.attributes["gen_ai.embeddings.dimension.count"] == 3
    assert embed.attributes["input.value"] == '["a","b"]'


def test_streamed_generate(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([generate_interaction(True)]) as server, client_of(server.url) as client:
        text = "".join(chunk.response for chunk in client.generate(MODEL, "Why?", stream=True))
    assert text == "Blue."
    span = _only_span(exporter, f"text_completion {MODEL}")
    assert span.attributes["gen_ai.response.finish_reasons"] == ("length",)
    assert _json(span, "gen_ai.output.messages")[0]["finish_reason"] == "length"


def test_module_functions_make_one_span_and_uninstrument_restores_them(
    instrumented: OllamaInstrumentor, exporter: InMemorySpanExporter
) -> None:
    default = ollama._client  # the default client the module functions are bound to
    previous = default._client
    with ReplayServer(recorded("test_chat.yaml") * 2) as server, client_of(server.url) as replay:
        default._client = replay._client  # its HTTP client, pointed at the replay server (closed with it)
        try:
            ollama.chat(MODEL, USER)
            assert len(exporter.get_finished_spans()) == 1
            instrumented.uninstrument()
            ollama.chat(MODEL, USER)
        finally:
            default._client = previous
    assert len(exporter.get_finished_spans()) == 1


def test_a_name_imported_before_instrumenting_is_traced_like_one_imported_after(
    instrumented: OllamaInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """docs/providers/ollama.md, "Import order": ``from ollama import chat`` is traced whatever the order.

    Taken before ``instrument_ollama()`` it is the default client's original bound method, which no patch of the
    module or of ``Client.chat`` reaches; it is traced because it posts through the patched ``Client._request``
    (it used to make no span: the issue asked for this change). Taken after, it is the same. One span per call,
    streamed or not, and none once uninstrumented. ``ollama`` itself was imported long before all of it.
    """
    instrumented.uninstrument()  # this module's tests run instrumented: start from an uninstrumented SDK
    early = ollama.chat  # what `from ollama import chat` gives before instrumenting
    early_generate = ollama.generate
    instrumented.instrument()
    from ollama import chat as late

    default = ollama._client
    previous = default._client
    interactions = recorded("test_chat.yaml") * 2 + recorded("test_chat_stream.yaml") + [generate_interaction(False)]
    with ReplayServer(interactions + recorded("test_chat.yaml")) as server, client_of(server.url) as replay:
        default._client = replay._client  # the default client's HTTP client, pointed at the replay server
        try:
            assert early(MODEL, USER).message.content
            assert [s.name for s in exporter.get_finished_spans()] == [f"chat {MODEL}"]
            assert late(MODEL, USER).message.content
            assert "".join(chunk.message.content or "" for chunk in early(MODEL, USER, stream=True))
            assert early_generate(MODEL, "Why?").response == "Blue."
            instrumented.uninstrument()
            assert early(MODEL, USER).message.content
        finally:
            default._client = previous
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {MODEL}"] * 3 + [f"text_completion {MODEL}"]
    assert spans[0].attributes["gen_ai.request.model"] == MODEL  # read from the body the SDK built
    assert spans[2].attributes["gen_ai.request.stream"] is True
    assert spans[2].attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert spans[0].attributes["gen_ai.usage.output_tokens"] == 369


async def test_a_coroutine_imported_from_an_async_client_before_instrumenting_is_traced(
    instrumented: OllamaInstrumentor, exporter: InMemorySpanExporter
) -> None:
    """An ``AsyncClient`` method bound before ``instrument_ollama()`` posts through the patched ``_request`` too."""
    instrumented.uninstrument()
    with ReplayServer(recorded("test_async_chat.yaml") + recorded("test_async_chat_stream.yaml")) as server:
        async with async_client_of(server.url) as client:
            chat = client.chat  # bound before instrumenting
            instrumented.instrument()
            assert (await chat(MODEL, USER)).message.content
            chunks = [chunk async for chunk in await chat(MODEL, USER, stream=True)]
    assert chunks
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"chat {MODEL}"] * 2
    assert spans[1].attributes["evaltrace.stream.end_reason"] == "exhausted"


def test_calls_that_are_not_model_calls_make_no_span(exporter: InMemorySpanExporter) -> None:
    """``list``, ``show`` and the other client calls post through the same ``_request``: they stay untraced."""
    listing = {"models": [{"model": MODEL, "name": MODEL, "size": 1, "digest": "d"}]}
    made = dataclasses.replace(
        embed_interaction(), uri="http://127.0.0.1:11434/api/tags", body=json.dumps(listing).encode()
    )
    with ReplayServer([made]) as server, client_of(server.url) as client:
        assert [m.model for m in client.list().models] == [MODEL]
    assert exporter.get_finished_spans() == ()


def test_stream_metrics(provider: TracerProvider) -> None:
    reader = InMemoryMetricReader()
    OllamaInstrumentor().uninstrument()
    OllamaInstrumentor().instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    with ReplayServer(recorded("test_chat_stream.yaml")) as server, client_of(server.url) as client:
        list(client.chat(MODEL, USER, stream=True))
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (first,) = metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points
    assert first.attributes["gen_ai.provider.name"] == "ollama"
    (per_chunk,) = metrics["gen_ai.client.operation.time_per_output_chunk"].data.data_points
    assert per_chunk.count > 100


_HEAD = {"model": MODEL, "created_at": "2026-08-07T06:08:14Z"}


@pytest.mark.parametrize("stream", [False, True])
def test_finished_answer_without_done_reason_is_no_error(stream: bool, exporter: InMemorySpanExporter) -> None:
    """``done: true`` and no ``done_reason`` (older servers): no finish reason recorded, the message ``stop``."""
    counts = {"prompt_eval_count": 12, "eval_count": 2}
    if stream:
        lines = [
            {**_HEAD, "message": {"role": "assistant", "content": "Blu"}, "done": False},
            {**_HEAD, "message": {"role": "assistant", "content": "e."}, "done": True, **counts},
        ]
    else:
        lines = [{**_HEAD, "message": {"role": "assistant", "content": "Blue."}, "done": True, **counts}]
    with ReplayServer([chat_interaction(lines)]) as server, client_of(server.url) as client:
        if stream:
            text = "".join(chunk.message.content or "" for chunk in client.chat(MODEL, USER, stream=True))
        else:
            text = client.chat(MODEL, USER).message.content or ""
    assert text == "Blue."
    span = _only_span(exporter)
    assert span.status.status_code is not StatusCode.ERROR
    assert "gen_ai.response.finish_reasons" not in span.attributes  # unknown: never guessed
    assert "error.type" not in span.attributes
    message = _json(span, "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "stop"
    assert message["parts"] == [{"type": "text", "content": "Blue."}]


def test_finished_tool_call_without_done_reason_is_a_tool_call(exporter: InMemorySpanExporter) -> None:
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    line = {**_HEAD, "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": True}
    with ReplayServer([chat_interaction([line])]) as server, client_of(server.url) as client:
        client.chat(MODEL, USER)
    assert _json(_only_span(exporter), "gen_ai.output.messages")[0]["finish_reason"] == "tool_call"


def test_stream_cut_before_done_is_still_an_error_finish(exporter: InMemorySpanExporter) -> None:
    """The other side of the rule above: an answer that never said ``done`` did not finish."""
    lines = [
        {**_HEAD, "message": {"role": "assistant", "content": "Blu"}, "done": False},
        {**_HEAD, "message": {"role": "assistant", "content": "e."}, "done": False},
    ]
    with ReplayServer([chat_interaction(lines)]) as server, client_of(server.url) as client:
        assert "".join(c.message.content or "" for c in client.chat(MODEL, USER, stream=True)) == "Blue."
    assert _json(_only_span(exporter), "gen_ai.output.messages")[0]["finish_reason"] == "error"


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_cache_hit_without_prompt_eval_count_records_no_input_tokens(
    stream: bool, exporter: InMemorySpanExporter
) -> None:
    """A server that omits ``prompt_eval_count`` (a cached prompt): input tokens absent, never 0; output kept."""
    last = {**_HEAD, "message": {"role": "assistant", "content": "Blue."}, "done": True, "done_reason": "stop",
            "eval_count": 2, "eval_duration": 1}  # fmt: skip
    lines = [{**_HEAD, "message": {"role": "assistant", "content": ""}, "done": False}, last] if stream else [last]
    with ReplayServer([chat_interaction(lines)]) as server, client_of(server.url) as client:
        if stream:
            list(client.chat(MODEL, USER, stream=True))
        else:
            client.chat(MODEL, USER)
    span = _only_span(exporter)
    assert span.attributes["gen_ai.usage.output_tokens"] == 2
    assert "gen_ai.usage.input_tokens" not in span.attributes
    assert "evaltrace.cost_usd" not in span.attributes
