"""``invoke_model`` request bodies whose family only the model id tells, through a real boto3 client.

Synthetic: no recording exists of these families through ``invoke_model``. The request bodies are the ones AWS's
model-parameter pages give as examples; the responses are the documented response bodies, served by the replay
server on 127.0.0.1 and parsed by botocore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import attrs_json, client, only_span, synthetic  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace.instrumentation.bedrock import BedrockInstrumentor  # noqa: E402


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[BedrockInstrumentor]:
    instrumentor = BedrockInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")

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
