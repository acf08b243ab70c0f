"""The Interactions API's own tools (``google_search``, ``code_execution``, ``url_context``...) streamed and whole.

No recording of a server tool step exists: every body here is built from the SDK's own interaction types
(``StepStart`` / ``StepDelta`` / ``StepStop`` events, ``Interaction``), validated and dumped as the API sends them,
and served to the real google-genai client by ``ReplayServer``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import google.genai._gaos.types.interactions as it
import pytest
from google.genai._gaos.types.interactions.stepdeltadata import _STEP_DELTA_DATA_VARIANTS
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

# What each server tool delta the SDK defines carries (its ``arguments`` or ``result``; some carry nothing but a
# signature). A new delta type in the SDK fails ``test_every_server_tool_delta_of_the_sdk_is_covered``.
PAYLOADS: dict[str, dict[str, Any]] = {
    "code_execution_call": {"arguments": {"code": "print(6 * 7)", "language": "python"}},
    "code_execution_result": {"result": "42\n"},
    "file_search_call": {},
    "file_search_result": {"result": [{}]},
    "google_maps_call": {"arguments": {"queries": ["coffee near the Louvre"]}},
    "google_maps_result": {"result": [{"places": [{"name": "Café Marly", "url": "https://maps.example/marly"}]}]},
    "google_search_call": {"arguments": {"queries": ["euro 2024 winner"]}},
    "google_search_result": {"result": [{"search_suggestions": "<div>euro 2024 winner</div>"}]},
    "mcp_server_tool_call": {"name": "forecast", "server_name": "weather", "arguments": {"city": "Paris"}},
    "mcp_server_tool_result": {"name": "forecast", "server_name": "weather", "result": "sunny"},
    "processing_call": {},
    "processing_result": {},
    "retrieval_call": {"arguments": {"queries": ["refund policy"]}},
    "retrieval_result": {},
    "tool_search_call": {"arguments": {"function_names": ["get_weather"]}},
    "tool_search_result": {"result": [{"type": "function", "name": "get_weather", "description": "The weather."}]},
    "url_context_call": {"arguments": {"urls": ["https://example.com/post"]}},
    "url_context_result": {"result": [{"url": "https://example.com/post", "status": "success"}]},
}


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _empty(value: Any) -> Any:
    """The empty value of a payload's kind: what a ``step.start`` holds before its delta."""
    return type(value)()


def _step(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    ids = {"call_id": "t-1"} if kind.endswith("_result") else {"id": "t-1"}
    return {"type": kind, **ids, **payload}


def _served(body: bytes, content_type: str) -> Recorded:
    return Recorded("POST", "/v1beta/interactions", b"", 200, "OK", [("content-type", content_type)], body)


def _output_parts(exporter: InMemorySpanExporter, served: Recorded, **kwargs: Any) -> list[dict[str, Any]]:
    exporter.clear()
    with ReplayServer([served]) as server:
        client = client_for(server)
        result = client.interactions.create(model="gemini-2.5-flash", input="Go.", **kwargs)
        if kwargs.get("stream"):
            list(result)
    (span,) = exporter.get_finished_spans()
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    parts: list[dict[str, Any]] = message["parts"]
    return parts


def _whole(kind: str, payload: dict[str, Any]) -> Recorded:
    interaction = it.Interaction.model_validate({"object": "interaction", "model": "gemini-2.5-flash", "id": "i-1",
                                                 "status": "completed", "steps": [_step(kind, payload)]})  # fmt: skip
    return _served(json.dumps(_wire(interaction)).encode(), "application/json")


def _streamed(kind: str, payload: dict[str, Any]) -> Recorded:
    interaction = {"object": "interaction", "model": "gemini-2.5-flash", "id": "i-1"}
    start = {k: (_empty(v) if k in ("arguments", "result") else v) for k, v in payload.items()}
    events = [
        it.InteractionCreatedEvent.model_validate({"event_type": "interaction.created",
                                                   "interaction": {**interaction, "status": "in_progress"}}),
        it.StepStart.model_validate({"event_type": "step.start", "index": 0, "step": _step(kind, start)}),
        it.StepDelta.model_validate({"event_type": "step.delta", "index": 0, "delta": {"type": kind, **payload}}),
        it.StepStop.model_validate({"event_type": "step.stop", "index": 0}),
        it.InteractionCompletedEvent.model_validate({"event_type": "interaction.completed",
                                                     "interaction": {**interaction, "status": "completed"}}),
    ]  # fmt: skip
    body = "".join(f"event: {e.event_type}\ndata: {json.dumps(_wire(e))}\n\n" for e in events)
    return _served(body.encode(), "text/event-stream")


def test_every_server_tool_delta_of_the_sdk_is_covered() -> None:
    kinds = {k for k in _STEP_DELTA_DATA_VARIANTS if k.endswith(("_call", "_result")) and not k.startswith("function_")}
    assert kinds == set(PAYLOADS)


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_a_streamed_server_tool_step_records_what_the_whole_step_records(
    kind: str, exporter: InMemorySpanExporter
) -> None:
    payload = PAYLOADS[kind]
    whole = _output_parts(exporter, _whole(kind, payload))
    streamed = _output_parts(exporter, _streamed(kind, payload), stream=True)
    assert streamed == whole
    (part,) = streamed
    if kind.endswith("_call"):
        assert part["type"] == "server_tool_call" and part["server_tool_call"]["type"] == kind[: -len("_call")]
    else:
        assert part["type"] == "server_tool_call_response"
    recorded = part.get("server_tool_call") or part["server_tool_call_response"]
    if "arguments" in payload:
        assert recorded["arguments"] == payload["arguments"]
    if "result" in payload:
        assert recorded["response"] == payload["result"]


def test_an_mcp_tool_s_media_result_is_recorded_without_its_bytes_streamed_or_whole(
    exporter: InMemorySpanExporter,
) -> None:
    """An MCP tool's result of content items (the SDK types it as a function result's) keeps no base64 payload."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    payload = {"name": "chart", "server_name": "plots", "result": [
        {"type": "text", "text": "The chart: "}, {"type": "image", "data": png, "mime_type": "image/png"}]}  # fmt: skip
    whole = _output_parts(exporter, _whole("mcp_server_tool_result", payload))
    streamed = _output_parts(exporter, _streamed("mcp_server_tool_result", payload), stream=True)
    assert streamed == whole
    assert png[:16] not in json.dumps(whole)
    (part,) = whole
    assert part["server_tool_call_response"]["response"] == [
        {"type": "text", "content": "The chart: "},
        {"type": "uri", "modality": "image", "mime_type": "image/png",
         "uri": f"data:image/png;base64,<omitted {len(png)} bytes>"},
    ]  # fmt: skip


def test_an_mcp_tool_step_is_named_by_its_tool_and_keeps_its_server_streamed_or_whole(
    exporter: InMemorySpanExporter,
) -> None:
    """An MCP call is the tool the model called (``forecast``), not the step kind; its server is kept inside."""
    for kind in ("mcp_server_tool_call", "mcp_server_tool_result"):
        payload = PAYLOADS[kind]
        whole = _output_parts(exporter, _whole(kind, payload))
        streamed = _output_parts(exporter, _streamed(kind, payload), stream=True)
        assert streamed == whole
        (part,) = whole
        if kind.endswith("_call"):
            assert part["name"] == "forecast"
            assert part["server_tool_call"] == {
                "type": "mcp_server_tool", "server_name": "weather", "arguments": {"city": "Paris"}}  # fmt: skip
        else:
            assert part["server_tool_call_response"] == {
                "type": "mcp_server_tool", "server_name": "weather", "name": "forecast", "response": "sunny"}  # fmt: skip


def test_the_sources_an_answer_cites_are_recorded_on_its_text_streamed_or_whole(
    exporter: InMemorySpanExporter,
) -> None:
    """A text's citation annotations (url, file, place) are its part's ``citations``; timing annotations are not."""
    annotations = [
        {"type": "url_citation", "url": "https://a.example/euro", "title": "Euro", "start_index": 0, "end_index": 5},
        {"type": "file_citation", "document_uri": "gs://docs/r.pdf", "file_name": "r.pdf", "page_number": 3},
        {"type": "place_citation", "name": "Olympiastadion", "place_id": "places/1"},
        {"type": "word_info", "word": "Spain", "start_offset": "0s"},  # timing, not a source
    ]
    base = {"object": "interaction", "model": "gemini-2.5-flash", "id": "i-1"}
    output = {"type": "model_output", "content": [{"type": "text", "text": "Spain won.", "annotations": annotations}]}
    interaction = it.Interaction.model_validate({**base, "status": "completed", "steps": [output]})
    whole = _served(json.dumps(_wire(interaction)).encode(), "application/json")
    events = [
        it.InteractionCreatedEvent.model_validate({"event_type": "interaction.created",
                                                   "interaction": {**base, "status": "in_progress"}}),
        it.StepStart.model_validate({"event_type": "step.start", "index": 0, "step": {"type": "model_output"}}),
        it.StepDelta.model_validate({"event_type": "step.delta", "index": 0,
                                     "delta": {"type": "text", "text": "Spain won."}}),
        it.StepDelta.model_validate({"event_type": "step.delta", "index": 0,
                                     "delta": {"type": "text_annotation_delta", "annotations": annotations}}),
        it.StepStop.model_validate({"event_type": "step.stop", "index": 0}),
        it.InteractionCompletedEvent.model_validate({"event_type": "interaction.completed",
                                                     "interaction": {**base, "status": "completed"}}),
    ]  # fmt: skip
    body = "".join(f"event: {e.event_type}\ndata: {json.dumps(_wire(e))}\n\n" for e in events)
    parts = _output_parts(exporter, whole)
    assert _output_parts(exporter, _served(body.encode(), "text/event-stream"), stream=True) == parts
    assert parts == [{"type": "text", "content": "Spain won.", "citations": [
        {"type": "url_citation", "source": "https://a.example/euro", "title": "Euro", "start_index": 0, "end_index": 5},
        {"type": "file_citation", "source": "gs://docs/r.pdf", "title": "r.pdf"},
        {"type": "place_citation", "source": "places/1", "title": "Olympiastadion"},
    ]}]  # fmt: skip
