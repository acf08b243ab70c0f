"""A Gemini answer's thought images and its audio transcripts, whole and streamed.

No recording holds a thought image or an audio transcription (the fixture set in
tests/fixtures/google-genai-cassettes has none): every body here is the SDK's own ``GenerateContentResponse`` (or
Interactions event / ``Interaction``), validated by its types and serialised as the API sends it (camelCase JSON;
SSE ``data:`` events for a stream), served to the real google-genai client by ``cassettes.ReplayServer``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import google.genai._gaos.types.interactions as it
import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, client_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import Recorded, ReplayServer
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[GoogleGenAIInstrumentor]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]

MODEL = "gemini-2.5-flash"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
WAV = b"RIFF" + bytes(range(60))


def _chunk(parts: list[types.Part], **candidate: Any) -> types.GenerateContentResponse:
    return types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=parts), index=0, **candidate)],
        model_version=MODEL,
        response_id="r-1",
    )


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _api(chunk: types.GenerateContentResponse) -> dict[str, Any]:
    """A response as the Developer API sends it: its citations are ``citationSources`` there (the SDK renames them)."""
    body = _wire(chunk)
    for candidate in body.get("candidates", ()):
        cited = candidate.get("citationMetadata")
        if cited is not None:
            cited["citationSources"] = cited.pop("citations")
    return body


def _served(chunks: list[types.GenerateContentResponse], stream: bool) -> Recorded:
    if stream:
        body = "".join(f"data: {json.dumps(_api(c))}\r\n\r\n" for c in chunks)
        return Recorded("POST", "/", b"", 200, "OK", [("Content-Type", "text/event-stream")], body.encode())
    return Recorded("POST", "/", b"", 200, "OK", [("Content-Type", "application/json")],
                    json.dumps(_api(chunks[0])).encode())  # fmt: skip


def _output(exporter: InMemorySpanExporter, served: Recorded, stream: bool) -> dict[str, Any]:
    exporter.clear()
    with ReplayServer([served]) as server:
        client = client_for(server)
        if stream:
            list(client.models.generate_content_stream(model=MODEL, contents="Who won Euro 2024?"))
        else:
            client.models.generate_content(model=MODEL, contents="Who won Euro 2024?")
    (span,) = exporter.get_finished_spans()
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    result: dict[str, Any] = message
    return result


def _whole_and_streamed(
    exporter: InMemorySpanExporter, whole: types.GenerateContentResponse, chunks: list[types.GenerateContentResponse]
) -> dict[str, Any]:
    message = _output(exporter, _served([whole], stream=False), stream=False)
    assert _output(exporter, _served(chunks, stream=True), stream=True) == message
    return message


def test_an_image_the_model_drew_while_thinking_is_reasoning_without_its_bytes(exporter: InMemorySpanExporter) -> None:
    thought_image = types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG), thought=True)
    whole = _chunk([types.Part(text="Sketching.", thought=True), thought_image, types.Part(text=" Done.", thought=True),
                    types.Part(text="Here it is.")], finish_reason=types.FinishReason.STOP)  # fmt: skip
    chunks = [
        _chunk([types.Part(text="Sketching.", thought=True)]),
        _chunk([thought_image]),
        _chunk([types.Part(text=" Done.", thought=True)]),
        _chunk([types.Part(text="Here it is.")], finish_reason=types.FinishReason.STOP),
    ]
    message = _whole_and_streamed(exporter, whole, chunks)
    size = len(base64.b64encode(PNG))
    assert message["parts"] == [
        {"type": "reasoning", "content": "Sketching."},
        {"type": "reasoning", "content": "", "modality": "image", "mime_type": "image/png",
         "uri": f"data:image/png;base64,<omitted {size} bytes>"},
        {"type": "reasoning", "content": " Done."},  # thought text is never joined into the image's part
        {"type": "text", "content": "Here it is."},
    ]  # fmt: skip
    assert base64.b64encode(PNG).decode()[:12] not in json.dumps(message)


def test_an_audio_answer_keeps_its_transcript(exporter: InMemorySpanExporter) -> None:
    audio = types.Part(
        inline_data=types.Blob(mime_type="audio/wav", data=WAV),
        audio_transcription=types.Transcription(text="Spain won.", finished=True),
    )
    whole = _chunk([audio], finish_reason=types.FinishReason.STOP)
    message = _whole_and_streamed(exporter, whole, [whole])
    (part,) = message["parts"]
    assert part["type"] == "uri" and part["modality"] == "audio"
    assert part["transcript"] == "Spain won."


# The Interactions API: a thought summary may hold images (``ThoughtSummaryContent`` is text or an image).


def _interaction_output(exporter: InMemorySpanExporter, served: Recorded, stream: bool) -> list[dict[str, Any]]:
    exporter.clear()
    with ReplayServer([served]) as server:
        client = client_for(server)  # kept: a client collected mid-call closes its connection
        result = client.interactions.create(model=MODEL, input="Draw.", stream=stream)
        if stream:
            list(result)
    (span,) = exporter.get_finished_spans()
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    parts: list[dict[str, Any]] = message["parts"]
    return parts


def test_an_interaction_s_thought_image_is_reasoning_without_its_bytes_whole_and_streamed(
    exporter: InMemorySpanExporter,
) -> None:
    data = base64.b64encode(PNG).decode()
    text = {"type": "text", "text": "Sketching."}
    image = {"type": "image", "data": data, "mime_type": "image/png"}
    base = {"object": "interaction", "model": MODEL, "id": "i-1"}
    interaction = it.Interaction.model_validate(
        {**base, "status": "completed", "steps": [{"type": "thought", "summary": [text, image]}]}
    )
    whole = Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", "application/json")],
                     json.dumps(_wire(interaction)).encode())  # fmt: skip
    events = [
        it.InteractionCreatedEvent.model_validate({"event_type": "interaction.created",
                                                   "interaction": {**base, "status": "in_progress"}}),
        it.StepStart.model_validate({"event_type": "step.start", "index": 0, "step": {"type": "thought"}}),
        it.StepDelta.model_validate({"event_type": "step.delta", "index": 0,
                                     "delta": {"type": "thought_summary", "content": text}}),
        it.StepDelta.model_validate({"event_type": "step.delta", "index": 0,
                                     "delta": {"type": "thought_summary", "content": image}}),
        it.StepStop.model_validate({"event_type": "step.stop", "index": 0}),
        it.InteractionCompletedEvent.model_validate({"event_type": "interaction.completed",
                                                     "interaction": {**base, "status": "completed"}}),
    ]  # fmt: skip
    body = "".join(f"event: {e.event_type}\ndata: {json.dumps(_wire(e))}\n\n" for e in events)
    streamed = Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", "text/event-stream")],
                        body.encode())  # fmt: skip
    parts = _interaction_output(exporter, whole, stream=False)
    assert _interaction_output(exporter, streamed, stream=True) == parts
    assert parts == [
        {"type": "reasoning", "content": "Sketching."},
        {"type": "reasoning", "content": "", "modality": "image", "mime_type": "image/png",
         "uri": f"data:image/png;base64,<omitted {len(data)} bytes>"},
    ]  # fmt: skip
