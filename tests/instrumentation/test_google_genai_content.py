"""How the request (its ``Content``, the output it asks for) is recorded, through the real google-genai client.

The answers are the SDK's own ``GenerateContentResponse`` type serialised the way the API sends it (camelCase
JSON), served by ``cassettes.ReplayServer`` on 127.0.0.1; the requests are built from the SDK's types and go to the
server as the SDK sends them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

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
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


def _answer() -> Recorded:
    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=[types.Part(text="A bar chart.")]),
                                    finish_reason=types.FinishReason.STOP, index=0)],
        model_version=MODEL,
        response_id="r-1",
    )  # fmt: skip
    body = response.model_dump(mode="json", by_alias=True, exclude_none=True)
    return Recorded("POST", "/", b"", 200, "OK", [("Content-Type", "application/json")], json.dumps(body).encode())


async def _generate(is_async: bool, contents: Any, config: Any = None) -> dict[str, Any]:
    """The request body the server got; the call's span is left in the exporter."""
    with ReplayServer([_answer()]) as server:
        client = client_for(server)
        if is_async:
            await client.aio.models.generate_content(model=MODEL, contents=contents, config=config)
            await client.aio.aclose()
        else:
            client.models.generate_content(model=MODEL, contents=contents, config=config)
        sent: dict[str, Any] = server.received[0].json()
    return sent


def _attribute(exporter: InMemorySpanExporter, key: str) -> Any:
    (span,) = exporter.get_finished_spans()
    return json.loads(span.attributes[key])


async def test_media_a_function_returned_are_uri_parts_of_its_response(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    returned = types.FunctionResponse(
        id="call-1",
        name="chart",
        response={"output": "see the image"},
        parts=[
            types.FunctionResponsePart(inline_data=types.FunctionResponseBlob(mime_type="image/png", data=PNG)),
            types.FunctionResponsePart(
                file_data=types.FunctionResponseFileData(file_uri="gs://bucket/chart.pdf", mime_type="application/pdf")
            ),
        ],
    )
    contents = [
        types.Content(role="user", parts=[types.Part(text="Chart the sales.")]),
        types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(id="call-1", name="chart"))]),
        types.Content(role="user", parts=[types.Part(function_response=returned)]),
    ]
    sent = await _generate(is_async, contents)
    assert len(sent["contents"][2]["parts"][0]["functionResponse"]["parts"]) == 2  # the media went to the API
    messages = _attribute(exporter, "gen_ai.input.messages")
    assert messages[2] == {
        "role": "tool",
        "parts": [
            {
                "type": "tool_call_response",
                "id": "call-1",
                "response": {"output": "see the image"},
                "name": "chart",
                "parts": [
                    {
                        "type": "uri",
                        "modality": "image",
                        "uri": "data:image/png;base64,<omitted 64 bytes>",
                        "mime_type": "image/png",
                    },
                    {
                        "type": "uri",
                        "modality": "document",
                        "uri": "gs://bucket/chart.pdf",
                        "mime_type": "application/pdf",
                    },
                ],
            }
        ],
    }
    assert base64.b64encode(PNG).decode()[:12] not in json.dumps(messages)  # never the bytes


@pytest.mark.parametrize(
    ("modalities", "mime_type", "expected"),
    [
        (["AUDIO"], None, "speech"),
        (["IMAGE"], None, "image"),
        (["TEXT", "IMAGE"], None, "image"),  # an image answer with its text: the image is what was asked for
        ([types.Modality.TEXT, types.Modality.AUDIO], None, "speech"),
        (["TEXT"], None, "text"),
        (["TEXT"], "application/json", "json"),
        (None, "application/json", "json"),
    ],
)
async def test_the_output_type_follows_the_response_modalities(
    modalities: Any, mime_type: str | None, expected: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    config = types.GenerateContentConfig(response_modalities=modalities, response_mime_type=mime_type)
    sent = await _generate(is_async, "Say it.", config)
    asked = [getattr(m, "value", m) for m in modalities] if modalities else None
    assert sent["generationConfig"].get("responseModalities") == asked  # as the API got it
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.output.type"] == expected


# Already JSON Schema: recorded exactly as given (a round trip through Gemini's Schema would write 1 as 1.0 and drop
# ``example``).
MOON_SCHEMA = {
    "type": "object",
    "properties": {"date": {"type": "string", "example": "2026-01-01"}, "phase": {"type": "integer", "minimum": 1}},
}


async def test_tool_definitions_are_named_and_their_parameters_json_schema(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """semconv's tool definitions: every tool named, ``parameters`` in JSON Schema (Gemini's ``Schema`` converted)."""
    forecast = types.FunctionDeclaration(
        name="forecast",
        description="The forecast.",
        parameters=types.Schema(
            type=types.Type.OBJECT,
            properties={
                "city": types.Schema(type=types.Type.STRING, description="A city.", nullable=True),
                "days": types.Schema(type=types.Type.INTEGER, minimum=1),
                "hours": types.Schema(type=types.Type.ARRAY, items=types.Schema(type=types.Type.STRING), min_items=1),
            },
            required=["city"],
        ),
    )
    as_dict = {"name": "tide", "parameters": {"type": "OBJECT", "properties": {"port": {"type": "STRING"}}}}
    as_json_schema = types.FunctionDeclaration(name="moon", parameters_json_schema=MOON_SCHEMA)
    config = types.GenerateContentConfig(
        tools=[
            types.Tool(function_declarations=[forecast, as_dict, as_json_schema]),  # type: ignore[list-item]
            types.Tool(google_search=types.GoogleSearch()),
            types.Tool(code_execution=types.ToolCodeExecution()),
        ]
    )
    sent = await _generate(is_async, "Weather?", config)
    (declared,) = [t["functionDeclarations"] for t in sent["tools"] if "functionDeclarations" in t]
    assert declared[0]["parameters"]["type"] == "OBJECT"  # Gemini's Schema, as the SDK sent it
    definitions = _attribute(exporter, "gen_ai.tool.definitions")
    assert definitions == [
        {"type": "function", "name": "forecast", "description": "The forecast.",
         "parameters": {"type": "object", "required": ["city"], "properties": {
             "city": {"type": ["null", "string"], "description": "A city."},
             "days": {"type": "integer", "minimum": 1},
             "hours": {"type": "array", "items": {"type": "string"}, "minItems": 1}}}},
        {"type": "function", "name": "tide",
         "parameters": {"type": "object", "properties": {"port": {"type": "string"}}}},
        {"type": "function", "name": "moon", "parameters": MOON_SCHEMA},  # JSON Schema already: as given
        {"type": "google_search", "name": "google_search"},
        {"type": "code_execution", "name": "code_execution"},
    ]  # fmt: skip


def test_a_functions_definition_is_built_once_and_each_call_gets_its_own_copy() -> None:
    from evaltrace.instrumentation.google_genai import request

    def get_weather(city: str) -> str:
        """The weather."""
        return city

    first = request.tool_definitions([get_weather])
    assert first is not None
    first[0]["parameters"]["properties"]["city"]["type"] = "changed"  # a caller's change stays its own
    assert get_weather in request._DEFINITIONS
    assert request.tool_definitions([get_weather]) == [
        {"type": "function", "name": "get_weather", "description": "The weather.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    ]  # fmt: skip


async def test_converting_a_schema_logs_none_of_the_sdk_s_notes_and_leaves_the_app_its_own(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``Schema.json_schema`` logs an INFO note once a process: our conversion neither logs it nor uses it up."""
    monkeypatch.setattr(types, "_json_schema_warning_logged", False)  # a fresh process: the note not logged yet
    forecast = types.FunctionDeclaration(
        name="forecast",
        parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type="STRING")}),
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[forecast])])
    with caplog.at_level("INFO", logger="google_genai.types"):
        await _generate(False, "Weather?", config)
        (definition,) = _attribute(exporter, "gen_ai.tool.definitions")
        assert definition["parameters"] == {"type": "object", "properties": {"city": {"type": "string"}}}
        assert not [r for r in caplog.records if r.name == "google_genai.types"]
        forecast.parameters.json_schema  # the app's own conversion still gets the note, once  # noqa: B018
    (note,) = [r for r in caplog.records if r.name == "google_genai.types"]
    assert "JSON Schema" in note.getMessage() or "Json Schema" in note.getMessage()
