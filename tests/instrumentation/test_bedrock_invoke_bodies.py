"""``invoke_model`` request bodies whose family only the model id tells, through a real boto3 client.

Synthetic: no recording exists of these families through ``invoke_model``. The request bodies are the ones AWS's
model-parameter pages give as examples; the responses are the documented response bodies, served by the replay
server on 127.0.0.1 and parsed by botocore.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import attrs_json, chunk_frame, client, only_span, read_stream, synthetic  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("bedrock_instrumented")

_HEADERS = [
    ("Content-Type", "application/json"),
    ("X-Amzn-Bedrock-Input-Token-Count", "11"),
    ("X-Amzn-Bedrock-Output-Token-Count", "2"),
]
_MISTRAL_ANSWER = {"outputs": [{"text": "Hello", "stop_reason": "stop"}]}
_COHERE_ANSWER = {"id": "c1", "generations": [{"id": "g1", "text": "Hello", "finish_reason": "COMPLETE"}]}
_DEEPSEEK_ANSWER = {"choices": [{"text": "Hello", "stop_reason": "stop"}]}
_LLAMA_ANSWER = {"generation": "Hello", "prompt_token_count": 11, "generation_token_count": 2, "stop_reason": "stop"}

# (model id, request body, response body, the parameters the span must have)
_BY_MODEL_ID = [
    (
        "mistral.mistral-7b-instruct-v0:2",
        {"prompt": "<s>[INST] Hi [/INST]", "max_tokens": 512, "temperature": 0.5},
        _MISTRAL_ANSWER,
        {"gen_ai.request.max_tokens": 512, "gen_ai.request.temperature": 0.5},
    ),
    (
        "cohere.command-light-text-v14",
        {"prompt": "Hi", "max_tokens": 512, "temperature": 0.5, "stop_sequences": ["--"]},
        _COHERE_ANSWER,
        {"gen_ai.request.max_tokens": 512, "gen_ai.request.temperature": 0.5,
         "gen_ai.request.stop_sequences": ("--",)},
    ),
    (
        "us.deepseek.r1-v1:0",
        {"prompt": "Hi", "max_tokens": 512, "temperature": 0.5, "top_p": 0.9},
        _DEEPSEEK_ANSWER,
        {"gen_ai.request.max_tokens": 512, "gen_ai.request.temperature": 0.5, "gen_ai.request.top_p": 0.9},
    ),
    (
        "arn:aws:bedrock:us-east-1::foundation-model/mistral.mistral-7b-instruct-v0:2",
        {"prompt": "<s>[INST] Hi [/INST]", "max_tokens": 512, "temperature": 0.5},
        _MISTRAL_ANSWER,
        {"gen_ai.request.max_tokens": 512, "gen_ai.request.temperature": 0.5},
    ),
    (
        "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.mistral.mistral-large-2402-v1:0",
        {"prompt": "<s>[INST] Hi [/INST]", "max_tokens": 256},
        _MISTRAL_ANSWER,
        {"gen_ai.request.max_tokens": 256},
    ),
    (
        "global.cohere.command-text-v14",
        {"prompt": "Hi", "max_tokens": 100},
        _COHERE_ANSWER,
        {"gen_ai.request.max_tokens": 100},
    ),
    # A model id that names no provider: the body's shape still says Llama.
    (
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6",
        {"prompt": "Hi", "max_gen_len": 64, "temperature": 0.2},
        _LLAMA_ANSWER,
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2},
    ),
    (
        "us.meta.llama3-2-3b-instruct-v1:0",
        {"prompt": "Hi", "max_gen_len": 64},
        _LLAMA_ANSWER,
        {"gen_ai.request.max_tokens": 64},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "request_body", "response", "parameters"), _BY_MODEL_ID, ids=[m[0] for m in _BY_MODEL_ID]
)
def test_a_bare_prompt_body_is_read_as_the_family_its_model_id_names(
    model: str,
    request_body: dict[str, Any],
    response: dict[str, Any],
    parameters: dict[str, Any],
    exporter: InMemorySpanExporter,
) -> None:
    with ReplayServer([synthetic("m/invoke", json.dumps(response).encode(), _HEADERS)]) as server:
        result = client(server).invoke_model(modelId=model, body=json.dumps(request_body))
        assert json.loads(result["body"].read()) == response
    span = only_span(exporter)
    recorded = {
        k: v for k, v in span.attributes.items() if k.startswith("gen_ai.request.") and k != "gen_ai.request.model"
    }
    assert recorded == parameters
    assert span.attributes["gen_ai.request.model"] == model
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": "Hello"}]
    assert (
        json.loads(span.attributes["langfuse.observation.model.parameters"])["max_tokens"]
        == parameters["gen_ai.request.max_tokens"]
    )


# A guardrail that blocked the answer: the body Bedrock returns in its place (as a model invocation log shows it),
# with the guardrail's action and trace and no stop reason.
_GUARDRAIL_TRACE = {
    "guardrail": {
        "actionReason": "Guardrail blocked.",
        "input": {"g1": {"contentPolicy": {"filters": [{"action": "BLOCKED", "type": "VIOLENCE"}]}}},
    }
}
_BLOCKED = "Sorry, I can't help with that."
_CLAUDE_REQUEST = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "a suspicious question"}],
}


def _assert_content_filtered(exporter: InMemorySpanExporter) -> None:
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("guardrail_intervened",)  # as Converse says it
    assert attrs_json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": _BLOCKED}], "finish_reason": "content_filter"}
    ]
    assert span.status.status_code.name == "UNSET"


def test_an_answer_a_guardrail_replaced_is_content_filtered(exporter: InMemorySpanExporter) -> None:
    response = {
        "amazon-bedrock-guardrailAction": "INTERVENED",
        "amazon-bedrock-trace": _GUARDRAIL_TRACE,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": _BLOCKED}],
    }
    with ReplayServer([synthetic("m/invoke", json.dumps(response).encode(), _HEADERS)]) as server:
        client(server).invoke_model(
            modelId="anthropic.claude-3-haiku-20240307-v1:0",
            guardrailIdentifier="g1",
            guardrailVersion="1",
            trace="ENABLED",
            body=json.dumps(_CLAUDE_REQUEST),
        )
    _assert_content_filtered(exporter)


def test_a_streamed_answer_a_guardrail_replaced_is_content_filtered(exporter: InMemorySpanExporter) -> None:
    """Claude's events without a stop reason, the guardrail's action on the last chunk with the metrics."""
    chunks = [
        {"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-3-haiku-20240307", "stop_reason": None,
                                              "usage": {"input_tokens": 11, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": _BLOCKED}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop", "amazon-bedrock-guardrailAction": "INTERVENED",
         "amazon-bedrock-trace": _GUARDRAIL_TRACE,
         "amazon-bedrock-invocationMetrics": {"inputTokenCount": 11, "outputTokenCount": 2}},
    ]  # fmt: skip
    body = b"".join(chunk_frame(c) for c in chunks)
    with ReplayServer([synthetic("m/invoke-with-response-stream", body)]) as server:
        result = client(server).invoke_model_with_response_stream(
            modelId="anthropic.claude-3-haiku-20240307-v1:0",
            guardrailIdentifier="g1",
            guardrailVersion="1",
            trace="ENABLED",
            body=json.dumps(_CLAUDE_REQUEST),
        )
        read_stream(result)
    _assert_content_filtered(exporter)


def test_a_guardrail_that_did_not_intervene_changes_nothing(exporter: InMemorySpanExporter) -> None:
    response = {
        "amazon-bedrock-guardrailAction": "NONE",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
    }
    with ReplayServer([synthetic("m/invoke", json.dumps(response).encode(), _HEADERS)]) as server:
        client(server).invoke_model(modelId="anthropic.claude-3-haiku-20240307-v1:0", body=json.dumps(_CLAUDE_REQUEST))
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == "stop"


_GPT_OSS = "openai.gpt-oss-120b-1:0"
_WEATHER_REQUEST = {
    "messages": [{"role": "user", "content": "Weather in Paris and Rome?"}],
    "max_tokens": 100,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
}


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": _GPT_OSS,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _call_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def test_openai_style_tool_calls_are_the_same_streamed_or_whole(exporter: InMemorySpanExporter) -> None:
    """gpt-oss's OpenAI-style answer: the whole body's tool calls, then the same calls streamed as deltas."""
    whole = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": _GPT_OSS,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
    }  # fmt: skip
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk(_call_delta(0, "", "call_1", "get_weather")),
        _chunk(_call_delta(0, '{"city": ')),
        _chunk(_call_delta(0, '"Paris"}')),
        _chunk(_call_delta(1, '{"city": "Rome"}', "call_2", "get_weather")),
        _chunk(
            {}, "tool_calls", **{"amazon-bedrock-invocationMetrics": {"inputTokenCount": 11, "outputTokenCount": 2}}
        ),
    ]
    served = [
        synthetic("m/invoke", json.dumps(whole).encode(), _HEADERS),
        synthetic("m/invoke-with-response-stream", b"".join(chunk_frame(c) for c in chunks)),
    ]
    with ReplayServer(served) as server:
        api = client(server)
        api.invoke_model(modelId=_GPT_OSS, body=json.dumps(_WEATHER_REQUEST))
        read_stream(api.invoke_model_with_response_stream(modelId=_GPT_OSS, body=json.dumps(_WEATHER_REQUEST)))
    answered, streamed = exporter.get_finished_spans()
    assert (
        attrs_json(streamed, "gen_ai.output.messages")
        == attrs_json(answered, "gen_ai.output.messages")
        == [
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
                    {"type": "tool_call", "id": "call_2", "name": "get_weather", "arguments": {"city": "Rome"}},
                ],
                "finish_reason": "tool_call",
            }
        ]
    )
    for span in (answered, streamed):
        assert span.attributes["gen_ai.response.model"] == _GPT_OSS
        assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
        assert (span.attributes["gen_ai.usage.input_tokens"], span.attributes["gen_ai.usage.output_tokens"]) == (11, 2)


_DIMENSIONS, _FORMATS = "gen_ai.embeddings.dimension.count", "gen_ai.request.encoding_formats"
# (model id, request body as each family's documentation gives it, the attributes the span must have)
_EMBEDDINGS = [
    (
        "amazon.titan-embed-text-v2:0",
        {"inputText": "hi", "dimensions": 512, "normalize": True, "embeddingTypes": ["float", "binary"]},
        {_DIMENSIONS: 512, _FORMATS: ("float", "binary")},
    ),
    ("amazon.titan-embed-image-v1", {"inputText": "hi", "embeddingConfig": {"outputEmbeddingLength": 256}},
     {_DIMENSIONS: 256}),
    (
        "amazon.nova-2-multimodal-embeddings-v1:0",
        {"taskType": "SINGLE_EMBEDDING",
         "singleEmbeddingParams": {"embeddingPurpose": "GENERIC_INDEX", "embeddingDimension": 1024,
                                   "text": {"truncationMode": "END", "value": "hi"}}},
        {_DIMENSIONS: 1024},
    ),
    ("cohere.embed-english-v3", {"texts": ["hi"], "input_type": "search_document", "embedding_types": ["float", "int8"]},
     {_FORMATS: ("float", "int8")}),
    ("amazon.titan-embed-text-v1", {"inputText": "hi"}, {}),
    # Cohere Embed v4: ``output_dimension`` (the cohere SDK's own name for it, in its v2 ``embed``)
    ("cohere.embed-v4:0", {"texts": ["hi"], "input_type": "search_document", "embedding_types": ["float"],
                           "output_dimension": 512},
     {_DIMENSIONS: 512, _FORMATS: ("float",)}),
]  # fmt: skip


@pytest.mark.parametrize(("model", "request_body", "expected"), _EMBEDDINGS, ids=[e[0] for e in _EMBEDDINGS])
def test_an_embedding_requests_dimensions_and_encoding_formats(
    model: str, request_body: dict[str, Any], expected: dict[str, Any], exporter: InMemorySpanExporter
) -> None:
    response = {"embedding": [0.1, 0.2], "inputTextTokenCount": 2}
    headers = [("Content-Type", "application/json"), ("X-Amzn-Bedrock-Input-Token-Count", "2")]
    with ReplayServer([synthetic("m/invoke", json.dumps(response).encode(), headers)]) as server:
        client(server).invoke_model(modelId=model, body=json.dumps(request_body))
    span = only_span(exporter)
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert {k: span.attributes[k] for k in (_DIMENSIONS, _FORMATS) if k in span.attributes} == expected
