"""``converse`` request fields beyond ``inferenceConfig``, through a real boto3 client: output format, reasoning effort.

Structured output is replayed from pydantic-ai's recordings (tests/fixtures/bedrock-cassettes). No recording sets a
reasoning effort: those tests send the request (boto3 validates it against its service model) and serve a
documented Converse answer from the replay server on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import PYDANTIC_AI, client, only_span, read_stream, replay, send, synthetic  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace.evaluators._base import context_chunks, question_text  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

NATIVE_OUTPUT = PYDANTIC_AI / "bedrock" / "cassettes" / "test_native_output"
USER = [{"role": "user", "content": [{"text": "hi"}]}]
ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Hello"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4},
    "metrics": {"latencyMs": 10},
}


pytestmark = pytest.mark.usefixtures("bedrock_instrumented")


def _converse(model: str, answer: dict[str, Any] = ANSWER, **params: Any) -> dict[str, Any]:
    served = synthetic(f"{model}/converse", json.dumps(answer).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        result: dict[str, Any] = client(server).converse(modelId=model, messages=USER, **params)
    return result


@pytest.mark.parametrize("name", ["supported_model", "stream", "mistral"])
def test_a_json_schema_text_format_asks_for_json(name: str, exporter: InMemorySpanExporter) -> None:
    with replay(NATIVE_OUTPUT / f"test_bedrock_native_output_{name}.yaml") as (api, calls, _):
        (call,) = calls
        assert call.params["outputConfig"]["textFormat"]["type"] == "json_schema"
        result = send(api, call)
        if "stream" in result:
            read_stream(result)
    assert only_span(exporter).attributes["gen_ai.output.type"] == "json"


def test_a_request_without_an_output_format_has_no_output_type(exporter: InMemorySpanExporter) -> None:
    _converse("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    a = only_span(exporter).attributes
    assert "gen_ai.output.type" not in a and "gen_ai.request.reasoning.level" not in a


@pytest.mark.parametrize(
    ("model", "params", "level"),
    [
        ("us.anthropic.claude-opus-4-5-20251101-v1:0", {"outputConfig": {"effort": "medium"}}, "medium"),
        ("openai.gpt-oss-120b-1:0", {"additionalModelRequestFields": {"reasoning_effort": "high"}}, "high"),
        (
            "us.anthropic.claude-opus-4-5-20251101-v1:0",
            {"additionalModelRequestFields": {"output_config": {"effort": "high"}}},
            "high",
        ),
        (
            "openai.gpt-oss-120b-1:0",
            {"outputConfig": {"effort": "low"}, "additionalModelRequestFields": {"reasoning_effort": "high"}},
            "low",
        ),
        (
            "us.amazon.nova-2-lite-v1:0",
            {"additionalModelRequestFields": {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}},
            "low",
        ),
        (
            "us.amazon.nova-2-lite-v1:0",
            {"additionalModelRequestFields": {"reasoningConfig": {"type": "disabled", "maxReasoningEffort": "low"}}},
            None,
        ),
    ],
    ids=[
        "outputConfig.effort",
        "gpt-oss reasoning_effort",
        "claude output_config.effort",
        "outputConfig.effort first",
        "nova-2 maxReasoningEffort",
        "nova-2 disabled",
    ],
)
def test_the_reasoning_effort_is_the_reasoning_level_as_the_provider_spells_it(
    model: str, params: dict[str, Any], level: str | None, exporter: InMemorySpanExporter
) -> None:
    _converse(model, **params)
    assert only_span(exporter).attributes.get("gen_ai.request.reasoning.level") == level


def test_nova_2s_native_body_reasoning_config_is_its_reasoning_level(exporter: InMemorySpanExporter) -> None:
    body = {
        "schemaVersion": "messages-v1",
        "messages": USER,
        "inferenceConfig": {"maxTokens": 64},
        "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "medium"},
    }
    served = synthetic("m/invoke", json.dumps(ANSWER).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        client(server).invoke_model(modelId="us.amazon.nova-2-lite-v1:0", body=json.dumps(body))
    a = only_span(exporter).attributes
    assert a["gen_ai.request.reasoning.level"] == "medium"
    assert a["gen_ai.request.max_tokens"] == 64


# Every format botocore's bedrock-runtime model allows for Converse media, and its IANA media type (flv and wmv
# have none registered: the type in common use). Raw ``pcm`` names no sample format and gets none.
_MEDIA_TYPES = {
    "image": {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"},
    "document": {
        "pdf": "application/pdf",
        "csv": "text/csv",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "html": "text/html",
        "txt": "text/plain",
        "md": "text/markdown",
    },
    "video": {
        "mkv": "video/matroska",
        "mov": "video/quicktime",
        "mp4": "video/mp4",
        "webm": "video/webm",
        "flv": "video/x-flv",
        "mpeg": "video/mpeg",
        "mpg": "video/mpeg",
        "wmv": "video/x-ms-wmv",
        "three_gp": "video/3gpp",
    },
    "audio": {
        "mp3": "audio/mpeg",
        "opus": "audio/opus",
        "wav": "audio/wav",
        "aac": "audio/aac",
        "x-aac": "audio/aac",
        "flac": "audio/flac",
        "mp4": "audio/mp4",
        "m4a": "audio/mp4",
        "ogg": "audio/ogg",
        "mkv": "audio/matroska",
        "mka": "audio/matroska",
        "mpeg": "audio/mpeg",
        "mpga": "audio/mpeg",
        "webm": "audio/webm",
        "pcm": None,
    },
}
_MEDIA = [(modality, fmt, mime) for modality, types in _MEDIA_TYPES.items() for fmt, mime in types.items()]


def _media_block(modality: str, fmt: str) -> dict[str, Any]:
    block: dict[str, Any] = {"format": fmt, "source": {"bytes": b"\x00" * 5}}
    if modality == "document":
        block["name"] = "doc"
    return {modality: block}


def _input_parts(span: Any) -> list[dict[str, Any]]:
    return [p for m in json.loads(span.attributes["gen_ai.input.messages"]) for p in m["parts"]]


@pytest.mark.parametrize(("modality", "fmt", "mime"), _MEDIA, ids=[f"{m}-{f}" for m, f, _ in _MEDIA])
def test_media_blocks_have_their_iana_media_type(
    modality: str, fmt: str, mime: str | None, exporter: InMemorySpanExporter
) -> None:
    messages = [{"role": "user", "content": [{"text": "look"}, _media_block(modality, fmt)]}]
    served = synthetic("m/converse", json.dumps(ANSWER).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        client(server).converse(modelId="us.amazon.nova-2-omni-v1:0", messages=messages)
    part = _input_parts(only_span(exporter))[1]
    assert part["type"] == "uri" and part["modality"] == modality
    assert part.get("mime_type") == mime
    assert part["uri"] == f"data:{mime or ''};base64,<omitted 5 bytes>"  # payload-free, as every inline media


def test_chunked_documents_guarded_images_and_search_results_are_their_own_parts(
    exporter: InMemorySpanExporter,
) -> None:
    content = [
        {"document": {"name": "chunks", "source": {"content": [{"text": "first chunk. "}, {"text": "second."}]}}},
        {"guardContent": {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}},
        {"guardContent": {"text": {"text": "guarded text"}}},
        {
            "searchResult": {
                "source": "https://example.com/a",
                "title": "A page",
                "content": [{"text": "found "}, {"text": "this"}],
            }
        },
    ]
    served = synthetic("m/converse", json.dumps(ANSWER).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        client(server).converse(
            modelId="us.anthropic.claude-sonnet-4-5-20250929-v1:0", messages=[{"role": "user", "content": content}]
        )
    assert _input_parts(only_span(exporter)) == [
        # A text document is marked one, named: RAG context (tests/instrumentation/test_bedrock_documents_context.py).
        {"type": "text", "content": "first chunk. second.", "document": True, "title": "chunks"},
        {
            "type": "uri",
            "modality": "image",
            "uri": "data:image/png;base64,<omitted 4 bytes>",
            "mime_type": "image/png",
        },
        {"type": "text", "content": "guarded text"},
        {"type": "search_result", "source": "https://example.com/a", "title": "A page", "content": "found this"},
    ]


def test_a_search_result_sent_with_the_question_is_the_rag_context(exporter: InMemorySpanExporter) -> None:
    """A ``searchResult`` block in a user message is a context chunk (title - source, then its text), not the question."""
    search = {"searchResult": {"source": "https://cafe.example/menu", "title": "Menu",
                               "content": [{"text": "Soup costs "}, {"text": "5 euros."}]}}  # fmt: skip
    content = [search, {"text": "What does soup cost?"}]
    served = synthetic("m/converse", json.dumps(ANSWER).encode(), [("Content-Type", "application/json")])
    with ReplayServer([served]) as server:
        client(server).converse(
            modelId="us.anthropic.claude-sonnet-4-5-20250929-v1:0", messages=[{"role": "user", "content": content}]
        )
    trace = trace_from_spans([only_span(exporter)])
    assert context_chunks(trace) == ["Menu - https://cafe.example/menu\nSoup costs 5 euros."]
    assert question_text(trace) == "What does soup cost?"


def test_claudes_own_output_config_format_passed_through_asks_for_json(exporter: InMemorySpanExporter) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    _converse(
        "us.anthropic.claude-opus-4-5-20251101-v1:0",
        additionalModelRequestFields={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    assert only_span(exporter).attributes.get("gen_ai.output.type") == "json"
