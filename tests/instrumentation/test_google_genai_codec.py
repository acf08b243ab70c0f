"""The google-genai codec (pure): recorded responses, parsed by the real SDK, -> the span's request/response halves.

Every response here is what the real ``google-genai`` client returned for a recorded exchange served from
127.0.0.1 (``google_genai_replay``), so the codec reads the SDK's own objects, not hand-made ones. The span
tests (test_google_genai_spans.py) check the same fields end to end through the instrumentation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, LOGFIRE, OI, client_for, otel_file, replay

from cassettes import ReplayServer, load_cassette
from evaltrace._internal import semconv as sc
from evaltrace.instrumentation.google_genai import request as req
from evaltrace.instrumentation.google_genai.response import embedding_outcome, response_outcome, usage_of
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator

pytestmark = AIOHTTP_WARNING


def _generate(path: Any, vertex: bool = False, **kwargs: Any) -> Any:
    with replay(path, vertex) as (client, _server):
        return client.models.generate_content(model=kwargs.pop("model", "gemini-2.0-flash"), **kwargs)


def _stream(path: Any, vertex: bool = False, **kwargs: Any) -> list[Any]:
    with replay(path, vertex) as (client, _server):
        return list(client.models.generate_content_stream(model=kwargs.pop("model", "gemini-2.0-flash"), **kwargs))


def test_text_response_outcome() -> None:
    response = _generate(OI / "test_generate_content.yaml", contents="hi")
    outcome = response_outcome(response)
    assert outcome.response_id == "hNcEarPuMNa3qtsP7MHt4As"
    assert outcome.response_model == "gemini-2.0-flash"
    assert outcome.finish_reasons == ["STOP"]  # verbatim, the FinishReason value name
    assert outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens, outcome.usage.reasoning_tokens) == (45, 23, None)
    assert outcome.output_messages == [
        {"role": "assistant", "parts": [{"type": "text", "content": response.text}], "finish_reason": "stop"}
    ]
    assert response_outcome(response, content=False).output_messages is None


def test_thoughts_and_tool_use_prompt_tokens_and_code_execution_parts() -> None:
    """thoughts_token_count is the reasoning subset of the output; the tool-use prompt is input (sum = total)."""
    response = _generate(OI / "test_validate_token_counts.yaml", model="gemini-2.5-flash", contents="x")
    outcome = response_outcome(response)
    usage = outcome.usage
    assert usage is not None
    assert usage.input_tokens == 32 + 720
    assert usage.output_tokens == 341 + 103
    assert usage.reasoning_tokens == 103
    assert usage.input_tokens + usage.output_tokens == response.usage_metadata.total_token_count
    assert outcome.output_messages is not None
    types_seen = [p["type"] for p in outcome.output_messages[0]["parts"]]
    assert "server_tool_call" in types_seen and "server_tool_call_response" in types_seen
    call = next(p for p in outcome.output_messages[0]["parts"] if p["type"] == "server_tool_call")
    assert call["name"] == "code_execution" and call["server_tool_call"]["language"] == "PYTHON"
    assert call["server_tool_call"]["code"]


def test_cached_content_tokens_are_the_cache_read_subset() -> None:
    """No recording has a cache hit: the usage shape is the SDK's, filled as the API documents it."""
    usage = usage_of(
        types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1000, cached_content_token_count=800, candidates_token_count=5, thoughts_token_count=7
        )
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens, usage.reasoning_tokens) == (1000, 800, 12, 7)
    camel = usage_of({"promptTokenCount": 3, "candidatesTokenCount": 4, "cachedContentTokenCount": 2})
    assert camel is not None and (camel.input_tokens, camel.output_tokens, camel.cached_tokens) == (3, 4, 2)


def test_function_calls_are_tool_call_parts_and_stop_with_a_call_is_tool_call() -> None:
    response = _generate(OI / "test_response_with_multiple_tool_calls[False].yaml", contents="x")
    outcome = response_outcome(response)
    assert outcome.finish_reasons == ["STOP"]
    assert outcome.output_messages is not None
    message = outcome.output_messages[0]
    assert message["finish_reason"] == "tool_call"
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    assert len(calls) == len(response.function_calls) >= 2
    for part, call in zip(calls, response.function_calls, strict=True):
        assert part["name"] == call.name and part["arguments"] == call.args


def test_stream_accumulates_thoughts_as_reasoning_before_the_answer() -> None:
    chunks = _stream(OI / "test_streaming_reasoning.yaml", model="gemini-3.5-flash", contents="x")
    acc = GenerateContentAccumulator()
    carried = [acc.add(chunk) for chunk in chunks]
    assert any(carried)
    assert acc.end_reason() == sc.STREAM_END_EXHAUSTED
    outcome = acc.outcome()
    assert outcome.response_id == "iCUhao2zJ-LHjuMP1vvH2Qk" and outcome.response_model == "gemini-3.5-flash"
    assert outcome.finish_reasons == ["STOP"]
    assert outcome.usage is not None and outcome.usage.reasoning_tokens == 713
    assert outcome.usage.output_tokens == chunks[-1].usage_metadata.candidates_token_count + 713
    assert outcome.output_messages is not None
    parts = outcome.output_messages[0]["parts"]
    thought = "".join(p.text for c in chunks for p in c.candidates[0].content.parts or () if p.thought and p.text)
    answer = "".join(p.text for c in chunks for p in c.candidates[0].content.parts or () if not p.thought and p.text)
    assert thought and answer
    assert parts == [{"type": "reasoning", "content": thought}, {"type": "text", "content": answer}]


def test_stream_tool_calls_keep_their_ids_and_a_cut_stream_is_truncated() -> None:
    chunks = _stream(
        OI / "test_streaming_reasoning_with_multiple_tool_calls.yaml", model="gemini-3.5-flash", contents="x"
    )
    acc = GenerateContentAccumulator()
    acc.add(chunks[0])
    assert acc.end_reason() == sc.STREAM_END_TRUNCATED  # no finish reason yet
    cut = acc.outcome()
    assert cut.output_messages is not None and cut.output_messages[0]["finish_reason"] == "error"
    for chunk in chunks[1:]:
        acc.add(chunk)
    outcome = acc.outcome()
    assert outcome.output_messages is not None
    message = outcome.output_messages[0]
    assert message["finish_reason"] == "tool_call"
    assert [(p["id"], p["arguments"]) for p in message["parts"]] == [
        ("dv8szvqe", {"location": "Boston"}),
        ("j80tal12", {"location": "New Delhi"}),
    ]


def test_vertex_stream_and_response() -> None:
    chunks = _stream(otel_file("streaming", "logcontent", "sync"), True, model="gemini-2.5-flash", contents="x")
    acc = GenerateContentAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    outcome = acc.outcome()
    assert outcome.response_id == "vizpaJGEDvXZnvgPisGa2A0" and outcome.finish_reasons == ["STOP"]
    assert outcome.usage is not None and outcome.usage.reasoning_tokens == 2193
    response = _generate(otel_file("non_streaming", "logcontent", "sync"), True, model="gemini-2.5-flash", contents="x")
    assert response_outcome(response).response_id == "hizpaKmcH9qs698P85HHgAU"


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("MAX_TOKENS", "length"),
        ("CONTINUATION", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("ESCALATION", "content_filter"),
        ("PUP_LIMITED_DISABLED", "content_filter"),
        ("OTHER", "error"),
    ],
)
def test_finish_reasons_verbatim_and_mapped(reason: str, mapped: str) -> None:
    """No recording ends otherwise than STOP: a recorded body with only its finishReason changed, parsed by the SDK."""
    recorded = load_cassette(OI / "test_generate_content.yaml")[0]
    body = recorded.response_json()
    body["candidates"][0]["finishReason"] = reason
    with ReplayServer([dataclasses.replace(recorded, body=json.dumps(body).encode())]) as server:
        client = client_for(server)
        response = client.models.generate_content(model="gemini-2.0-flash", contents="x")
    outcome = response_outcome(response)
    assert outcome.finish_reasons == [reason]
    assert outcome.output_messages is not None and outcome.output_messages[0]["finish_reason"] == mapped


def test_request_parameters_from_a_config_model_and_a_camel_case_dict() -> None:
    config = types.GenerateContentConfig(
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        max_output_tokens=256,
        stop_sequences=["END"],
        seed=7,
        candidate_count=2,
        presence_penalty=0.1,
        frequency_penalty=0.3,
        response_mime_type="application/json",
        thinking_config=types.ThinkingConfig(thinking_budget=1024, thinking_level=types.ThinkingLevel.LOW),
    )
    attrs = req.parameters(config)
    assert attrs == {
        sc.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        sc.GEN_AI_REQUEST_TOP_P: 0.9,
        sc.GEN_AI_REQUEST_PRESENCE_PENALTY: 0.1,
        sc.GEN_AI_REQUEST_FREQUENCY_PENALTY: 0.3,
        sc.GEN_AI_REQUEST_MAX_TOKENS: 256,
        sc.GEN_AI_REQUEST_SEED: 7,
        sc.GEN_AI_REQUEST_TOP_K: 40,
        sc.GEN_AI_REQUEST_CHOICE_COUNT: 2,
        sc.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"],
        sc.GEN_AI_OUTPUT_TYPE: "json",
        sc.GEN_AI_REQUEST_REASONING_LEVEL: "LOW",
    }
    assert req.parameters({"maxOutputTokens": 10, "temperature": 1, "candidateCount": 1}) == {
        sc.GEN_AI_REQUEST_TEMPERATURE: 1.0,
        sc.GEN_AI_REQUEST_MAX_TOKENS: 10,
    }
    params = json.loads(
        req.request_attributes("generate_content", {"config": config}, False, 10_000)[
            sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS
        ]
    )
    assert params["thinking_budget"] == 1024 and params["top_k"] == 40 and params["stop_sequences"] == '["END"]'


def _weather(location: str) -> str:
    """Return the weather at a location."""
    return f"sunny in {location}"


def test_system_instruction_tools_and_contents() -> None:
    config = types.GenerateContentConfig(
        system_instruction="Be brief.",
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="get_weather",
                        description="Weather now",
                        parameters=types.Schema(
                            type=types.Type.OBJECT, properties={"city": types.Schema(type="STRING")}
                        ),
                    )
                ]
            ),
            types.Tool(google_search=types.GoogleSearch()),
            _weather,
        ],
    )
    contents = [
        "Look at this",
        types.Part.from_bytes(data=b"\x89PNG....", mime_type="image/png"),
        types.Part.from_uri(file_uri="gs://bucket/cat.jpg", mime_type="image/jpeg"),
    ]
    attrs = req.request_attributes("generate_content", {"contents": contents, "config": config}, True, 100_000)
    assert json.loads(attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS]) == [{"type": "text", "content": "Be brief."}]
    tools = json.loads(attrs[sc.GEN_AI_TOOL_DEFINITIONS])
    assert tools == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},  # as JSON Schema
        },
        {"type": "google_search", "name": "google_search"},
        {
            "type": "function",
            "name": "_weather",
            "description": "Return the weather at a location.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        },
    ]
    messages = json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES])
    assert messages == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Look at this"},
                {
                    "type": "uri",
                    "modality": "image",
                    "uri": "data:image/png;base64,<omitted 12 bytes>",
                    "mime_type": "image/png",
                },
                {"type": "uri", "modality": "image", "uri": "gs://bucket/cat.jpg", "mime_type": "image/jpeg"},
            ],
        }
    ]


def test_recorded_function_response_turn_becomes_tool_call_and_tool_messages() -> None:
    """The second request automatic function calling really sent (recorded), read as the raw camelCase JSON."""
    path = OI / "test_generate_content_with_automatic_tool_calling.yaml"
    sent = load_cassette(path)[1].request_json()
    messages = req.input_messages(sent["contents"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    call = messages[1]["parts"][0]
    result = messages[2]["parts"][0]
    assert call["type"] == "tool_call" and result["type"] == "tool_call_response"
    assert result["name"] == call["name"] and result["response"]
    # The same turn as SDK models gives the same messages.
    models = [types.Content.model_validate(c) for c in sent["contents"]]
    assert req.input_messages(models) == messages


def test_embeddings_request_and_response() -> None:
    with replay(OI / "test_embed_content_multiple_contents.yaml") as (client, _server):
        contents = ["What is the meaning of life?", "How do I bake a cake?"]
        response = client.models.embed_content(model="gemini-embedding-001", contents=contents)
    assert len(response.embeddings) == 2
    assert embedding_outcome(response).usage is None  # the Developer API reports no token count for embeddings
    config = types.EmbedContentConfig(output_dimensionality=64, task_type="RETRIEVAL_QUERY")
    attrs = req.request_attributes(sc.OP_EMBEDDINGS, {"contents": contents, "config": config}, True, 10_000)
    assert attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 64
    assert json.loads(attrs[sc.INPUT_VALUE]) == contents
    vertex = types.EmbedContentResponse(
        embeddings=[
            types.ContentEmbedding(values=[0.1], statistics=types.ContentEmbeddingStatistics(token_count=4)),
            types.ContentEmbedding(values=[0.2], statistics=types.ContentEmbeddingStatistics(token_count=6)),
        ]
    )
    usage = embedding_outcome(vertex).usage
    assert usage is not None and usage.input_tokens == 10


def test_async_client_returns_the_same_objects() -> None:
    async def run() -> Any:
        with replay(OI / "test_async_generate_content.yaml") as (client, _server):
            return await client.aio.models.generate_content(model="gemini-2.0-flash", contents="x")

    outcome = response_outcome(asyncio.run(run()))
    assert outcome.response_id == "h9cEasnrMqCVmtkP9P7tiQU" and outcome.finish_reasons == ["STOP"]


def test_logfire_gzip_recording() -> None:
    response = _generate(
        LOGFIRE / "test_instrument_google_genai_response_schema.yaml", model="gemini-2.5-flash", contents="x"
    )
    outcome = response_outcome(response)
    assert outcome.usage is not None and outcome.usage.reasoning_tokens == 58 and outcome.usage.output_tokens == 71


def test_vertex_hosts_name_vertex_ai_for_metrics_and_pricing() -> None:
    from evaltrace.instrumentation.google_genai.codec import CODEC

    assert CODEC.provider_for("us-central1-aiplatform.googleapis.com") == "gcp.vertex_ai"
    assert CODEC.provider_for("aiplatform.googleapis.com") == "gcp.vertex_ai"
    assert CODEC.provider_for("generativelanguage.googleapis.com") == "gcp.gemini"
    assert CODEC.provider_for(None) == "gcp.gemini"


def test_a_function_call_streamed_in_pieces_is_one_call_with_its_arguments() -> None:
    """Vertex AI streams a call's arguments (``partial_args`` by JSON path, ``will_continue``); no recording has
    it, so the chunks are the SDK's own models filled as its types document them."""

    def chunk(call: types.FunctionCall, reason: str | None = None) -> types.GenerateContentResponse:
        content = types.Content(role="model", parts=[types.Part(function_call=call)])
        return types.GenerateContentResponse(
            candidates=[types.Candidate(index=0, content=content, finish_reason=reason)], response_id="r1"
        )

    acc = GenerateContentAccumulator()
    acc.add(chunk(types.FunctionCall(name="book", id="c1", will_continue=True)))
    for arg in (
        types.PartialArg(json_path="$.city", string_value="San ", will_continue=True),
        types.PartialArg(json_path="$.city", string_value="Francisco"),
        types.PartialArg(json_path="$.nights", number_value=2.0),
        types.PartialArg(json_path="$.guests[1].name", string_value="Ada"),
        types.PartialArg(json_path="$['late']", bool_value=True),
    ):
        acc.add(chunk(types.FunctionCall(partial_args=[arg], will_continue=True)))
    acc.add(chunk(types.FunctionCall(will_continue=False), "STOP"))
    outcome = acc.outcome()
    assert outcome.output_messages is not None
    assert outcome.output_messages[0]["parts"] == [
        {
            "type": "tool_call",
            "id": "c1",
            "name": "book",
            "arguments": {"city": "San Francisco", "nights": 2, "guests": [None, {"name": "Ada"}], "late": True},
        }
    ]
    assert outcome.output_messages[0]["finish_reason"] == "tool_call"
