"""The Interactions API (``client.interactions.create``) through the real google-genai client, sync and async.

Recorded: tests/fixtures/google-genai-cassettes/openinference/test_interactions_instrumentation (OpenInference's
recordings: plain and streamed text, thinking summaries in a stream, an image input, a background agent).
Every copied recording is also replayed by test_google_genai_recordings.py. No recording of a function call, of a
``failed`` interaction or of an ``error`` event exists: those tests serve bodies built from the SDK's own
interaction types (``Interaction``, ``FunctionCallStep``, ``Error``; the JSON the API sends), and say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import google.genai._gaos.types.interactions as it
import pytest
from google_genai_replay import AIOHTTP_WARNING, GENAI, client_for, replay
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import Recorded, ReplayServer, load_cassette
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor
from evaltrace.mapping import trace_from_spans

SET = GENAI / "openinference" / "test_interactions_instrumentation"


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GoogleGenAIInstrumentor]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]


async def _create(client: Any, is_async: bool, **kwargs: Any) -> list[Any]:
    """The interaction (or every event of a stream), read to the end."""
    if is_async:
        result = await client.aio.interactions.create(**kwargs)
        return [e async for e in result] if kwargs.get("stream") else [result]
    result = client.interactions.create(**kwargs)
    return list(result) if kwargs.get("stream") else [result]


def _span(exporter: InMemorySpanExporter) -> Any:
    (span,) = exporter.get_finished_spans()
    return span


async def test_a_streamed_interaction_with_thought_summaries(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with replay(SET / "test_interactions_with_thinking_stream.yaml") as (client, server):
        events = await _create(client, is_async, model="gemini-2.5-flash", stream=True,
                               input="Explain why the sky is blue in two sentences.",
                               generation_config={"temperature": 0.7, "max_output_tokens": 1024,
                                                  "thinking_level": "low", "thinking_summaries": "auto"})  # fmt: skip
        sent = server.received[0].json()
    assert sent["stream"] is True and events[-1].event_type == "interaction.completed"
    span = _span(exporter)
    a = span.attributes
    assert span.name == "chat gemini-2.5-flash"
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.request.temperature"] == 0.7 and a["gen_ai.request.max_tokens"] == 1024
    assert a["gen_ai.request.reasoning.level"] == "low"
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["gen_ai.response.finish_reasons"] == ("completed",)
    (message,) = json.loads(a["gen_ai.output.messages"])
    assert message["finish_reason"] == "stop"
    reasoning, answer = message["parts"]
    assert reasoning["type"] == "reasoning" and reasoning["content"].startswith("**Clarifying the Explanation**")
    assert "**Finalizing the Explanation**" in reasoning["content"]  # both summaries, in order
    assert answer == {"type": "text", "content": "The sky is blue because tiny air molecules scatter blue light "
                      "from the sun more effectively than other colors, a phenomenon called Rayleigh scattering. "
                      "This scattered blue light then reaches our eyes from all directions, making the sky appear "
                      "blue."}  # fmt: skip
    assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= (span.end_time - span.start_time) / 1e9
    assert a["evaltrace.cost_usd"] > 0


async def test_an_image_input_is_a_uri_part_without_its_bytes(is_async: bool, exporter: InMemorySpanExporter) -> None:
    path = SET / "test_generate_interactions_multi_model_messages[False].yaml"
    body = load_cassette(path)[0].request_json()  # the recorded call: text and a PNG, as base64 data
    with replay(path) as (client, _server):
        await _create(client, is_async, **body)
    a = _span(exporter).attributes
    (message,) = json.loads(a["gen_ai.input.messages"])
    text, image = message["parts"]
    assert text == {"type": "text", "content": "Describe the image in one sentence."}
    assert image["type"] == "uri" and image["modality"] == "image" and image["mime_type"] == "image/png"
    assert image["uri"].startswith("data:image/png;base64,<omitted ")
    assert "iVBORw0KGgo" not in a["gen_ai.input.messages"]


async def test_a_background_agent_interaction_is_not_traced(exporter: InMemorySpanExporter) -> None:
    with replay(SET / "test_agent_stream.yaml") as (client, _server):
        result = client.interactions.create(input="Research TPUs.", background=True,
                                            agent="deep-research-pro-preview-12-2025")  # fmt: skip
    assert result.status == "in_progress"
    assert exporter.get_finished_spans() == ()


def _made(interaction: dict[str, Any]) -> Recorded:
    """An ``Interaction`` body as the API sends it (no such recording exists: see the module docstring)."""
    return Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", "application/json")],
                    json.dumps({"object": "interaction", "model": "gemini-2.5-flash", **interaction}).encode())  # fmt: skip


async def test_a_function_call_step_is_a_tool_call_and_requires_action(exporter: InMemorySpanExporter) -> None:
    call = {"type": "function_call", "id": "call-1", "name": "get_weather", "arguments": {"city": "Paris"}}
    tools = [{"type": "function", "name": "get_weather", "description": "The weather.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
             {"type": "google_search"}]  # fmt: skip
    usage = {"total_input_tokens": 20, "total_output_tokens": 5, "total_tokens": 25}
    served = _made({"id": "i-1", "status": "requires_action", "steps": [call], "usage": usage})
    with ReplayServer([served]) as server:
        client = client_for(server)  # held: a client left to the garbage collector closes its connections
        result = client.interactions.create(model="gemini-2.5-flash", input="Weather?", tools=tools,
                                                        system_instruction="Be brief.")  # fmt: skip
    assert result.status == "requires_action"
    a = _span(exporter).attributes
    assert a["gen_ai.response.finish_reasons"] == ("requires_action",)
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "tool_call",
         "parts": [{"type": "tool_call", "id": "call-1", "name": "get_weather", "arguments": {"city": "Paris"}}]}
    ]  # fmt: skip
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be brief."}]
    definitions = json.loads(a["gen_ai.tool.definitions"])
    assert [d["type"] for d in definitions] == ["function", "google_search"]
    assert definitions[0]["name"] == "get_weather"
    assert definitions[1] == {"type": "google_search", "name": "google_search"}  # semconv requires a name
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (20, 5)


async def test_a_failed_interaction_fails_the_span_without_raising(exporter: InMemorySpanExporter) -> None:
    failed = _made({"id": "i-2", "status": "failed", "errors": [{"code": "INTERNAL", "message": "model crashed"}]})
    with ReplayServer([failed]) as server:
        client = client_for(server)
        result = client.interactions.create(model="gemini-2.5-flash", input="x")
    assert result.status == "failed"  # the app got the interaction, as the SDK returns it
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "INTERNAL"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("failed",)


async def test_an_error_event_mid_stream_fails_the_span_and_keeps_what_arrived(exporter: InMemorySpanExporter) -> None:
    """An ``error`` event (the SDK's ``ErrorEvent``; none was recorded) after some text."""
    events = [
        {"event_type": "interaction.created",
         "interaction": {"id": "i-3", "status": "in_progress", "object": "interaction", "model": "gemini-2.5-flash"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Half an ans"}},
        {"event_type": "error", "error": {"code": "RESOURCE_EXHAUSTED", "message": "quota"}},
    ]  # fmt: skip
    body = "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    served = Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", "text/event-stream")], body)
    with ReplayServer([served]) as server:
        client = client_for(server)
        received = list(client.interactions.create(model="gemini-2.5-flash", input="x", stream=True))
    assert received[-1].event_type == "error"  # the SDK hands the event to the app, raising nothing
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "RESOURCE_EXHAUSTED"
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Half an ans"}
    ]


async def test_a_request_object_is_read_like_keyword_arguments(exporter: InMemorySpanExporter) -> None:
    """``create(request={"body": {...}})``, the SDK's other calling form, is read from that body."""
    with replay(SET / "test_generate_interactions_simple_message[False].yaml") as (client, server):
        body = {"model": "gemini-2.5-flash", "input": "Tell me a joke", "generation_config": {"temperature": 0.5}}
        client.interactions.create(request={"body": body})
        assert server.received[0].json()["input"] == "Tell me a joke"
    span = _span(exporter)
    assert span.name == "chat gemini-2.5-flash"
    assert span.attributes["gen_ai.request.temperature"] == 0.5
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Tell me a joke"}]}
    ]


async def test_a_streamed_function_call_and_image_are_parts(exporter: InMemorySpanExporter) -> None:
    """A function call whose arguments stream as ``arguments_delta`` fragments, and an image delta (the SDK's
    ``FunctionCallStep`` / ``ArgumentsDelta`` / ``ImageDelta`` shapes; no such recording exists)."""
    events = [
        {"event_type": "interaction.created",
         "interaction": {"id": "i-4", "status": "in_progress", "object": "interaction", "model": "gemini-2.5-flash"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "function_call", "id": "call-2", "name": "get_weather"}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": '{"city": '}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": '"Paris"}'}},
        {"event_type": "step.stop", "index": 1},
        {"event_type": "interaction.completed",
         "interaction": {"id": "i-4", "status": "requires_action", "object": "interaction", "model": "gemini-2.5-flash",
                         "usage": {"total_input_tokens": 12, "total_output_tokens": 8}}},
    ]  # fmt: skip
    body = "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    served = Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", "text/event-stream")], body)
    with ReplayServer([served]) as server:
        client = client_for(server)
        assert len(list(client.interactions.create(model="gemini-2.5-flash", input="x", stream=True))) == len(events)
    a = _span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["gen_ai.response.finish_reasons"] == ("requires_action",)
    (message,) = json.loads(a["gen_ai.output.messages"])
    assert message["finish_reason"] == "tool_call"
    image, call = message["parts"]
    assert image["type"] == "uri" and image["uri"] == "data:image/png;base64,<omitted 12 bytes>"
    assert call == {"type": "tool_call", "id": "call-2", "name": "get_weather", "arguments": {"city": "Paris"}}
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 8)


def test_a_raw_response_call_is_left_intact_and_records_its_request(exporter: InMemorySpanExporter) -> None:
    """``with_raw_response.create``: the SDK's raw response reaches the app unchanged (its stream not proxied)."""
    with replay(SET / "test_generate_interactions_simple_message[True].yaml") as (client, _server):
        raw = client.interactions.with_raw_response.create(model="gemini-2.5-flash", input="x", stream=True)
        events = list(raw.parse())
    assert events[-1].event_type == "interaction.completed"
    span = _span(exporter)
    assert span.attributes["gen_ai.request.model"] == "gemini-2.5-flash"
    assert "gen_ai.response.id" not in span.attributes  # the response is the app's to parse: not read


_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        (it.TextResponseFormat(mime_type="application/json", schema_=_SCHEMA), "json"),
        (it.TextResponseFormat(mime_type="application/json"), "json"),
        (it.TextResponseFormat(mime_type="text/plain"), "text"),
        (it.ImageResponseFormat(mime_type="image/jpeg", aspect_ratio="1:1"), "image"),
        (it.AudioResponseFormat(mime_type="audio/wav"), "speech"),
        (it.VideoResponseFormat(aspect_ratio="16:9"), None),  # no output type names a video
        (_SCHEMA, "json"),  # a JSON schema given as the format
        ([it.TextResponseFormat(mime_type="text/plain"), it.ImageResponseFormat(mime_type="image/jpeg")], "image"),
    ],
    ids=["json-schema", "json", "text", "image", "audio", "video", "bare-schema", "text-and-image"],
)
async def test_the_output_type_is_the_response_format_s_type(
    response_format: Any, expected: str | None, exporter: InMemorySpanExporter
) -> None:
    served = _made({"id": "i-5", "status": "completed", "steps": []})
    with ReplayServer([served]) as server:
        client = client_for(server)
        client.interactions.create(model="gemini-2.5-flash", input="x", response_format=response_format)
        sent = server.received[0].json()["response_format"]
    assert sent  # the format went to the API as given
    assert _span(exporter).attributes.get("gen_ai.output.type") == expected


async def test_a_function_result_s_media_are_uri_parts_and_its_error_is_kept(exporter: InMemorySpanExporter) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    history = [
        it.UserInputStep(content=[it.TextContent(text="Chart the sales.")]),
        it.FunctionCallStep(id="call-3", name="chart", arguments={"year": 2024}),
        it.FunctionResultStep(call_id="call-3", name="chart", is_error=True,
                              result=[it.TextContent(text="Partial chart: "), it.TextContent(text="2 of 4 series."),
                                      it.ImageContent(data=png, mime_type="image/png")]),
        it.FunctionResultStep(call_id="call-4", name="legend", is_error=False, result=[it.TextContent(text="A "),
                                                                      it.TextContent(text="legend.")]),
    ]  # fmt: skip
    with ReplayServer([_made({"id": "i-6", "status": "completed", "steps": []})]) as server:
        client = client_for(server)
        client.interactions.create(model="gemini-2.5-flash", input=history)
        assert server.received[0].json()["input"][2]["result"][2]["data"] == png  # the image went to the API
    a = _span(exporter).attributes
    assert png[:16] not in a["gen_ai.input.messages"]  # never the bytes
    messages = json.loads(a["gen_ai.input.messages"])
    assert messages[2] == {"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "call-3", "name": "chart", "is_error": True,
         "response": [{"type": "text", "content": "Partial chart: "}, {"type": "text", "content": "2 of 4 series."},
                      {"type": "uri", "modality": "image", "mime_type": "image/png",
                       "uri": f"data:image/png;base64,<omitted {len(png)} bytes>"}]}]}  # fmt: skip
    assert messages[3] == {"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "call-4", "name": "legend", "response": "A legend."}]}  # fmt: skip


@pytest.mark.parametrize(
    ("modalities", "expected"),
    [(["audio"], "speech"), (["image"], "image"), (["text", "image"], "image"), (["text"], "text"), (["video"], None)],
)
async def test_the_output_type_follows_the_response_modalities(
    modalities: list[str], expected: str | None, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_made({"id": "i-7", "status": "completed", "steps": []})]) as server:
        client = client_for(server)
        client.interactions.create(model="gemini-2.5-flash", input="x", response_modalities=modalities)
        assert server.received[0].json()["response_modalities"] == modalities
    assert _span(exporter).attributes.get("gen_ai.output.type") == expected


def test_a_chained_interaction_names_its_previous_one_and_the_mapping_keeps_its_turn(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The user asks the same again in a chained interaction (``previous_interaction_id``: the server keeps the
    history, the input is the new turn only); the trace's conversation keeps both turns."""
    answers = [
        _made({"id": f"i-{n}", "status": "completed", "usage": {"total_input_tokens": 5, "total_output_tokens": 3},
               "steps": [{"type": "model_output", "content": [{"type": "text", "text": text}]}]})
        for n, text in ((8, "Why did the chicken cross the road?"), (9, "A horse walks into a bar."))
    ]  # fmt: skip
    with ReplayServer(answers) as server, provider.get_tracer("app").start_as_current_span("invoke_agent jokes"):
        client = client_for(server)
        first = client.interactions.create(model="gemini-2.5-flash", input="A joke.", system_instruction="Be brief.")
        client.interactions.create(model="gemini-2.5-flash", input="A joke.", system_instruction="Be brief.",
                                   previous_interaction_id=first.id)  # fmt: skip
        assert server.received[1].json()["previous_interaction_id"] == "i-8"
    chained = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")][1]
    assert chained.attributes["gen_ai.request.previous_response.id"] == "i-8"
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [(m.role, m.content) for m in trace.messages] == [
        ("system", "Be brief."),
        ("user", "A joke."),
        ("assistant", "Why did the chicken cross the road?"),
        ("user", "A joke."),
        ("assistant", "A horse walks into a bar."),
    ]
