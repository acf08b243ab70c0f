"""google-genai instrumentation end to end: recorded Gemini / Vertex AI traffic replayed through the real client.

Every call goes through the real ``google.genai.Client`` (sync ``client.models``, async ``client.aio.models``,
chats) to ``cassettes.ReplayServer`` on 127.0.0.1, and the spans come out of the real OTel SDK. No error response
was recorded in the fixture set: the error tests serve Google's documented error body
(``{"error": {"code", "message", "status"}}``) with its HTTP status, and say so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import errors, types
from google_genai_replay import AIOHTTP_WARNING, LOGFIRE, OI, client_for, otel_file, replay
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import evaltrace
from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal import settings
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GoogleGenAIInstrumentor]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]


def _span(exporter: InMemorySpanExporter) -> Any:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]  # one call, one span, ended exactly once
    return spans[0]


def _json(span: Any, key: str) -> Any:
    return json.loads(span.attributes[key])


async def _generate(client: Any, is_async: bool, **kwargs: Any) -> Any:
    if is_async:
        return await client.aio.models.generate_content(**kwargs)
    return client.models.generate_content(**kwargs)


async def _stream(client: Any, is_async: bool, limit: int | None = None, **kwargs: Any) -> list[Any]:
    chunks: list[Any] = []
    if is_async:
        async for chunk in await client.aio.models.generate_content_stream(**kwargs):
            chunks.append(chunk)
            if limit is not None and len(chunks) >= limit:
                break
    else:
        for chunk in client.models.generate_content_stream(**kwargs):
            chunks.append(chunk)
            if limit is not None and len(chunks) >= limit:
                break
    return chunks


async def test_generate_content_follows_genai_conventions(is_async: bool, exporter: InMemorySpanExporter) -> None:
    path = OI / ("test_async_generate_content.yaml" if is_async else "test_generate_content.yaml")
    with replay(path) as (client, server):
        response = await _generate(client, is_async, model="gemini-2.0-flash", contents="Say hello")
    span = _span(exporter)
    a = span.attributes
    assert span.name == "generate_content gemini-2.0-flash" and span.kind is SpanKind.CLIENT
    assert span.status.status_code is not StatusCode.ERROR
    assert a["gen_ai.operation.name"] == "generate_content"
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.request.model"] == "gemini-2.0-flash"
    port = int(server.url.rsplit(":", 1)[1])
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.response.id"] == response.response_id
    assert a["gen_ai.response.model"] == "gemini-2.0-flash"
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("STOP",)
    usage = response.usage_metadata
    assert a["gen_ai.usage.input_tokens"] == usage.prompt_token_count
    assert a["gen_ai.usage.output_tokens"] == usage.candidates_token_count
    assert _json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Say hello"}]}
    ]
    assert _json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": response.text}], "finish_reason": "stop"}
    ]
    assert a["evaltrace.cost_usd"] > 0  # gemini-2.0-flash is priced by genai-prices (provider google)


async def test_request_parameters_system_instruction_and_thinking_tokens(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    config = {"temperature": 0.5, "top_p": 0.95, "top_k": 40, "candidate_count": 1, "system_instruction": "Be terse."}
    config["thinking_config"] = {"thinking_budget": 100}
    with replay(OI / "test_generate_content_with_config_as_dict.yaml") as (client, server):
        response = await _generate(client, is_async, model="gemini-2.5-flash", contents="Repeat", config=config)
    sent = server.received[0].json()["generationConfig"]
    assert sent["temperature"] == 0.5 and sent["topK"] == 40
    a = _span(exporter).attributes
    assert a["gen_ai.request.temperature"] == 0.5 and a["gen_ai.request.top_p"] == 0.95
    assert a["gen_ai.request.top_k"] == 40
    assert "gen_ai.request.choice.count" not in a  # 1 is the default: not recorded
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be terse."}]
    thoughts = response.usage_metadata.thoughts_token_count
    assert thoughts and a["gen_ai.usage.reasoning.output_tokens"] == thoughts
    assert a["gen_ai.usage.output_tokens"] == response.usage_metadata.candidates_token_count + thoughts


async def test_stream_read_to_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    path = OI / ("test_async_streaming_text_content.yaml" if is_async else "test_streaming_text_content.yaml")
    with replay(path) as (client, _server):
        chunks = await _stream(client, is_async, model="gemini-2.0-flash", contents="A story")
    span = _span(exporter)
    a = span.attributes
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["gen_ai.response.id"] == chunks[-1].response_id
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("STOP",)
    assert a["gen_ai.usage.input_tokens"] == chunks[-1].usage_metadata.prompt_token_count
    text = "".join(c.text or "" for c in chunks)
    assert _json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": text}]
    first = a["gen_ai.response.time_to_first_chunk"]
    assert 0 <= first <= (span.end_time - span.start_time) / 1e9


async def test_stream_thoughts_and_tool_calls(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with replay(OI / "test_streaming_reasoning.yaml") as (client, _server):
        chunks = await _stream(client, is_async, model="gemini-3.5-flash", contents="Think")
    span = _span(exporter)
    parts = _json(span, "gen_ai.output.messages")[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]  # a thought never lands in the answer text
    assert span.attributes["gen_ai.usage.reasoning.output_tokens"] == chunks[-1].usage_metadata.thoughts_token_count
    exporter.clear()
    with replay(OI / "test_streaming_reasoning_with_multiple_tool_calls.yaml") as (client, _server):
        await _stream(client, is_async, model="gemini-3.5-flash", contents="Weather?")
    message = _json(_span(exporter), "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "tool_call"
    assert [(p["type"], p["name"], p["id"]) for p in message["parts"]] == [
        ("tool_call", "get_weather", "dv8szvqe"),
        ("tool_call", "get_weather", "j80tal12"),
    ]


async def test_stream_closed_early_ends_the_span_once(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with replay(OI / "test_streaming_reasoning.yaml") as (client, _server):
        chunks = await _stream(client, is_async, limit=2, model="gemini-3.5-flash", contents="Think")
        gc.collect()
        # The async stream the application holds is the SDK's own async generator around the request's (traced)
        # stream; Python finalizes an abandoned async generator in a task on the loop, which then drops ours.
        for _ in range(100):
            if exporter.get_finished_spans() or not is_async:
                break
            await asyncio.sleep(0)
    assert len(chunks) == 2
    span = _span(exporter)
    assert span.attributes["evaltrace.stream.end_reason"] in ("closed_early", "garbage_collected")
    assert span.attributes["evaltrace.stream.completed"] is False


async def test_chat_messages_are_one_span_each(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with replay(OI / "test_multi_turn_conversation.yaml") as (client, _server):
        chats = client.aio.chats if is_async else client.chats
        chat = chats.create(model="gemini-2.0-flash")
        for question in ("What is the capital of France?", "Why is the sky blue?"):
            result = chat.send_message(question)
            if is_async:
                await result
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["generate_content gemini-2.0-flash"] * 2
    second = json.loads(spans[1].attributes["gen_ai.input.messages"])
    assert [m["role"] for m in second] == ["user", "assistant", "user"]  # the session's history, as sent


async def test_chat_stream_and_tool_call(is_async: bool, exporter: InMemorySpanExporter) -> None:
    weather = types.FunctionDeclaration(
        name="get_weather",
        description="Get current weather information for a given location",
        parameters=types.Schema(type=types.Type.OBJECT, properties={"location": types.Schema(type=types.Type.STRING)}),
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[weather])])
    with replay(OI / "test_chat_session_with_tool.yaml") as (client, _server):
        chat = (client.aio.chats if is_async else client.chats).create(model="gemini-2.0-flash", config=config)
        result = chat.send_message("What's the weather like in San Francisco?")
        response = await result if is_async else result
    span = _span(exporter)
    call = _json(span, "gen_ai.output.messages")[0]["parts"][0]
    assert call == {
        "type": "tool_call",
        "id": None,
        "name": "get_weather",
        "arguments": response.function_calls[0].args,
    }
    assert _json(span, "gen_ai.tool.definitions")[0]["name"] == "get_weather"
    exporter.clear()
    with replay(OI / "test_streaming_text_content.yaml") as (client, _server):
        chat = (client.aio.chats if is_async else client.chats).create(model="gemini-2.0-flash")
        if is_async:
            async for _ in await chat.send_message_stream("A story"):
                pass
        else:
            for _ in chat.send_message_stream("A story"):
                pass
    assert _span(exporter).attributes["evaltrace.stream.end_reason"] == "exhausted"


def get_weather(location: str) -> dict[str, Any]:
    """Return the current weather at a location."""
    return {"location": location, "temperature": 65, "unit": "fahrenheit", "condition": "foggy", "humidity": "85%"}


async def test_automatic_function_calling_is_one_span_per_request(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Each billed request of the AFC loop is its own span with that response's exact usage and cost."""
    config = types.GenerateContentConfig(tools=[get_weather])
    with replay(OI / "test_generate_content_with_automatic_tool_calling.yaml") as (client, server):
        response = await _generate(
            client,
            is_async,
            model="gemini-2.0-flash",
            contents="What's the weather like in San Francisco?",
            config=config,
        )
    assert len(server.received) == 2  # the SDK ran the function and sent its result back
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["generate_content gemini-2.0-flash"] * 2
    first, last = (s.attributes for s in spans)
    # The recording's two responses: 64 in / 6 out (the function call), then 89 in / 23 out (the answer).
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (64, 6)
    assert (last["gen_ai.usage.input_tokens"], last["gen_ai.usage.output_tokens"]) == (89, 23)
    assert first["evaltrace.cost_usd"] > 0 and last["evaltrace.cost_usd"] > 0
    assert spans[0].end_time <= spans[1].start_time  # the requests, one after the other
    call = json.loads(first["gen_ai.output.messages"])[0]["parts"][0]
    assert call["type"] == "tool_call" and call["name"] == "get_weather"
    assert last["gen_ai.response.id"] == response.response_id  # the last response the SDK returned
    assert json.loads(last["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": response.text}]
    # The second request carried the function call and its result: its input says so.
    sent = json.loads(last["gen_ai.input.messages"])
    assert [p["type"] for m in sent for p in m["parts"]] == ["text", "tool_call", "tool_call_response"]
    for a in (first, last):
        assert json.loads(a["gen_ai.tool.definitions"])[0] == {
            "type": "function",
            "name": "get_weather",
            "description": "Return the current weather at a location.",
            # the JSON Schema the SDK declares the function with (``parameters_json_schema``)
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        }


async def test_model_call_inside_an_afc_tool_function_gets_its_own_span(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """An instrumented OpenAI call made by the user's tool function, which the SDK runs between two requests."""
    openai = pytest.importorskip("openai")
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    openai_instrumentor = OpenAIInstrumentor()
    openai_instrumentor.instrument()
    tool_spans: list[Any] = []
    oa_cassette = load_cassette(
        FIXTURES / "openai-cassettes" / "otel-contrib" / "test_chat_completion_with_content.yaml"
    )
    try:
        with ReplayServer(oa_cassette) as oa_server:
            oa_client = openai.OpenAI(api_key="test", base_url=f"{oa_server.url}/v1", max_retries=0)

            @evaltrace.tool
            def get_weather(location: str) -> str:
                """Return the current weather at a location."""
                tool_spans.append(trace.get_current_span())
                answer = oa_client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "Say this is a test"}]
                )
                return f"foggy in {location}: {answer.choices[0].message.content}"

            config = types.GenerateContentConfig(tools=[get_weather])
            with replay(OI / "test_generate_content_with_automatic_tool_calling.yaml") as (client, _server):
                with provider.get_tracer("app").start_as_current_span("app") as app:
                    await _generate(
                        client, is_async, model="gemini-2.0-flash", contents="Weather in SF?", config=config
                    )
            oa_client.close()
            assert len(oa_server.received) == 1
    finally:
        openai_instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert len(chats) == 1, [s.name for s in spans]  # the tool's model call is traced, once
    (tool,) = [s for s in spans if s.context.span_id == tool_spans[0].get_span_context().span_id]
    assert chats[0].parent is not None and chats[0].parent.span_id == tool.context.span_id  # under the tool
    assert tool.parent is not None and tool.parent.span_id == app.get_span_context().span_id  # under the app
    gemini = [s for s in spans if s.name == "generate_content gemini-2.0-flash"]
    assert len(gemini) == 2 and all(g.parent.span_id == app.get_span_context().span_id for g in gemini)
    assert gemini[0].end_time <= chats[0].start_time and chats[0].end_time <= gemini[1].start_time


async def test_embeddings(is_async: bool, exporter: InMemorySpanExporter) -> None:
    path = OI / ("test_async_embed_content.yaml" if is_async else "test_embed_content.yaml")
    contents = ["Why is the sky blue?", "What is the capital of France?"]
    config = types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT", output_dimensionality=8)
    with replay(path) as (client, _server):
        models = client.aio.models if is_async else client.models
        result = models.embed_content(model="gemini-embedding-001", contents=contents, config=config)
        response = await result if is_async else result
    span = _span(exporter)
    a = span.attributes
    assert span.name == "embeddings gemini-embedding-001"
    assert a["gen_ai.operation.name"] == "embeddings" and a["gen_ai.provider.name"] == "gcp.gemini"
    # The recording returned the model's full size (it was made without output_dimensionality): the response wins.
    assert a["gen_ai.embeddings.dimension.count"] == len(response.embeddings[0].values) != 8
    assert json.loads(a["input.value"]) == contents


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_vertex_ai_client_is_gcp_vertex_ai(mode: str, exporter: InMemorySpanExporter) -> None:
    is_async = mode == "async"
    with replay(otel_file("non_streaming", "logcontent", mode), vertex=True) as (client, server):
        response = await _generate(client, is_async, model="gemini-2.5-flash", contents="Hi")
    assert "/projects/test-project/locations/test-location/" in server.received[0].path
    a = _span(exporter).attributes
    assert a["gen_ai.provider.name"] == "gcp.vertex_ai"
    assert a["gen_ai.response.id"] == response.response_id
    assert a["gen_ai.usage.reasoning.output_tokens"] == response.usage_metadata.thoughts_token_count
    exporter.clear()
    with replay(otel_file("streaming", "excludecontent", mode), vertex=True) as (client, _server):
        chunks = await _stream(client, is_async, model="gemini-2.5-flash", contents="Hi")
    a = _span(exporter).attributes
    assert a["gen_ai.provider.name"] == "gcp.vertex_ai" and a["gen_ai.response.id"] == chunks[-1].response_id


def _error(status: int, code: str, message: str) -> Recorded:
    """Google's documented error body (no error was recorded in the fixture set)."""
    body = {"error": {"code": status, "message": message, "status": code}}
    return Recorded("POST", "/", b"", status, code, [("Content-Type", "application/json")], json.dumps(body).encode())


async def test_api_error_fails_the_span_and_reaches_the_caller_unchanged(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_error(400, "INVALID_ARGUMENT", "bad model")]) as server:
        client = client_for(server)
        with pytest.raises(errors.ClientError) as raised:
            await _generate(client, is_async, model="gemini-2.0-flash", contents="x")
        # Both pools closed here: the sync one is otherwise closed only by the client's __del__, and the error's
        # traceback puts the client in a reference cycle, which the collector may break after finalising the
        # pooled socket, with "unclosed socket" then raised in whichever later test collects it.
        client.close()
        await client.aio.aclose()  # the SDK leaves an errored aiohttp connection to the session's close
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "INVALID_ARGUMENT"
    assert any(e.name == "exception" for e in span.events)
    assert raised.value.code == 400  # the SDK's own exception, as the SDK raised it
    exporter.clear()
    with ReplayServer([_error(400, "INVALID_ARGUMENT", "bad stream")]) as server:
        client = client_for(server)
        with pytest.raises(errors.ClientError):
            await _stream(client, is_async, model="gemini-2.0-flash", contents="x")
        client.close()
        await client.aio.aclose()
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "INVALID_ARGUMENT"


async def test_no_content_when_capture_is_off(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with replay(LOGFIRE / "test_instrument_google_genai_response_schema.yaml") as (client, _server):
            client.models.generate_content(model="gemini-2.5-flash", contents="secret")
    finally:
        settings.replace(previous)
    a = _span(exporter).attributes
    assert not any(k in a for k in ("gen_ai.input.messages", "gen_ai.output.messages", "input.value"))
    assert a["gen_ai.usage.reasoning.output_tokens"] == 58


def test_uninstrument_restores_the_methods(
    instrumented: GoogleGenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    instrumented.uninstrument()
    try:
        with replay(OI / "test_generate_content.yaml") as (client, _server):
            client.models.generate_content(model="gemini-2.0-flash", contents="x")
        assert exporter.get_finished_spans() == ()
    finally:
        instrumented.instrument()


async def test_image_input_is_a_uri_part_without_its_bytes(is_async: bool, exporter: InMemorySpanExporter) -> None:
    image = bytes(range(256)) * 4  # 1024 bytes, 1368 in base64
    contents = ["Describe Image.", types.Part.from_bytes(data=image, mime_type="image/png")]
    with replay(OI / "test_generate_content_describe_image[False].yaml") as (client, server):
        await _generate(client, is_async, model="gemini-2.5-flash", contents=contents)
    sent = server.received[0].json()["contents"][0]["parts"][1]["inlineData"]["data"]
    span = _span(exporter)
    assert _json(span, "gen_ai.input.messages")[0]["parts"][1] == {
        "type": "uri",
        "modality": "image",
        "uri": "data:image/png;base64,<omitted 1368 bytes>",
        "mime_type": "image/png",
    }
    assert len(sent) == 1368 and not any(sent[:64] in str(v) for v in span.attributes.values())


async def test_stream_metrics(is_async: bool, provider: TracerProvider) -> None:
    """Duration, token usage and time to first chunk, through a MeterProvider given to instrument()."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    with replay(OI / "test_streaming_reasoning.yaml") as (client, _server):
        chunks = await _stream(client, is_async, model="gemini-3.5-flash", contents="Think")
    data = reader.get_metrics_data()
    found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (duration,) = found["gen_ai.client.operation.duration"].data.data_points
    assert duration.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert duration.attributes["gen_ai.operation.name"] == "generate_content"
    assert duration.attributes["gen_ai.response.model"] == "gemini-3.5-flash"
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in found["gen_ai.client.token.usage"].data.data_points}
    usage = chunks[-1].usage_metadata
    assert tokens == {
        "input": usage.prompt_token_count,
        "output": usage.candidates_token_count + usage.thoughts_token_count,
    }
    (first,) = found["gen_ai.client.operation.time_to_first_chunk"].data.data_points
    assert first.count == 1 and 0 <= first.sum <= duration.sum


@pytest.mark.parametrize("reason", [r.value for r in types.FinishReason])
def test_every_finish_reason_of_the_sdk_gets_a_genai_finish_reason(reason: str, exporter: InMemorySpanExporter) -> None:
    """Each value of the installed SDK's ``FinishReason`` in a recorded body (only its finishReason changed)."""
    recorded = load_cassette(OI / "test_generate_content.yaml")[0]
    body = recorded.response_json()
    body["candidates"][0]["finishReason"] = reason
    with ReplayServer([dataclasses.replace(recorded, body=json.dumps(body).encode())]) as server:
        client = client_for(server)  # held: a client left to the garbage collector closes its connections
        client.models.generate_content(model="gemini-2.0-flash", contents="x")
    span = _span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == (reason,)
    (message,) = _json(span, "gen_ai.output.messages")
    assert message["finish_reason"] in ("stop", "length", "content_filter", "error")
