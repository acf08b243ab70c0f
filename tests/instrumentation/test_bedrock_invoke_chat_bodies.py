"""``invoke_model`` chat bodies no recording holds, whole and streamed, through a real boto3 client.

Synthetic: the bodies are the model families' documented JSON (OpenAI-style chat of gpt-oss and DeepSeek, Mistral
Large's chat completion, Nova's messages), served by the replay server on 127.0.0.1; streams as AWS event-stream
``chunk`` frames that botocore parses. Metrics are read from a real ``MeterProvider``'s in-memory reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import attrs_json, chunk_frame, client, only_span, read_stream, synthetic  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace.instrumentation.bedrock import BedrockInstrumentor  # noqa: E402

GPT_OSS = "openai.gpt-oss-120b-1:0"
REQUEST = {"messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 100}
HEADERS = [
    ("Content-Type", "application/json"),
    ("X-Amzn-Bedrock-Input-Token-Count", "11"),
    ("X-Amzn-Bedrock-Output-Token-Count", "7"),
]
METRICS = {"amazon-bedrock-invocationMetrics": {"inputTokenCount": 11, "outputTokenCount": 7}}


@pytest.fixture
def reader(provider: TracerProvider, capture: None) -> Iterator[InMemoryMetricReader]:
    metrics = InMemoryMetricReader()
    instrumentor = BedrockInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[metrics]))
    yield metrics
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("reader")


def _token_points(reader: InMemoryMetricReader) -> list[Any]:
    data = reader.get_metrics_data()
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "gen_ai.client.token.usage"
        for point in metric.data.data_points
    ]


def _whole(model: str, response: dict[str, Any], request: dict[str, Any] = REQUEST) -> None:
    with ReplayServer([synthetic("m/invoke", json.dumps(response).encode(), HEADERS)]) as server:
        client(server).invoke_model(modelId=model, body=json.dumps(request))


def _streamed(model: str, chunks: list[dict[str, Any]], request: dict[str, Any] = REQUEST) -> None:
    body = b"".join(chunk_frame(c) for c in chunks)
    with ReplayServer([synthetic("m/invoke-with-response-stream", body)]) as server:
        read_stream(client(server).invoke_model_with_response_stream(modelId=model, body=json.dumps(request)))


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": GPT_OSS,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


# --- OpenAI-style reasoning --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_openai_style_reasoning_is_a_reasoning_part_whole_or_streamed(key: str, exporter: InMemorySpanExporter) -> None:
    """gpt-oss / DeepSeek put their thinking beside the answer (``reasoning_content``; vLLM-style ``reasoning``)."""
    whole = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": GPT_OSS,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Rayleigh scattering.", key: "Short waves scatter."},
                "finish_reason": "stop",
            }
        ],
    }
    _whole(GPT_OSS, whole)
    _streamed(
        GPT_OSS,
        [
            _chunk({"role": "assistant", key: "Short waves "}),
            _chunk({key: "scatter."}),
            _chunk({"content": "Rayleigh "}),
            _chunk({"content": "scattering."}),
            _chunk({}, "stop", **METRICS),
        ],
    )
    answered, streamed = exporter.get_finished_spans()
    expected = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Short waves scatter."},
                {"type": "text", "content": "Rayleigh scattering."},
            ],
            "finish_reason": "stop",
        }
    ]
    assert attrs_json(answered, "gen_ai.output.messages") == expected
    assert attrs_json(streamed, "gen_ai.output.messages") == expected


def test_reasoning_content_wins_over_reasoning(exporter: InMemorySpanExporter) -> None:
    """Both given (a server that sends the two spellings): ``reasoning_content``, as the OpenAI paths read it."""
    message = {"role": "assistant", "content": "A.", "reasoning_content": "kept", "reasoning": "not kept"}
    _whole(GPT_OSS, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    _streamed(
        GPT_OSS, [_chunk({"reasoning_content": "kept", "reasoning": "not kept"}), _chunk({"content": "A."}, "stop")]
    )
    for span in exporter.get_finished_spans():
        assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [
            {"type": "reasoning", "content": "kept"},
            {"type": "text", "content": "A."},
        ]


# --- Mistral Large chat completion --------------------------------------------------------------------------

MISTRAL_LARGE = "mistral.mistral-large-2407-v1:0"


def test_mistral_large_chats_stop_reason_is_its_finish_reason(exporter: InMemorySpanExporter) -> None:
    """Mistral Large's chat completion on ``invoke_model`` names its stop ``choices[].stop_reason``, not
    ``finish_reason`` (AWS's Mistral chat completion parameters page)."""
    call = {"id": "c1", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    _whole(
        MISTRAL_LARGE,
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                    "stop_reason": "tool_calls",
                }
            ]
        },
    )
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs_json(span, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}],
            "finish_reason": "tool_call",
        }
    ]


def test_a_finish_reason_wins_over_a_choices_stop_reason(exporter: InMemorySpanExporter) -> None:
    """vLLM-style servers send both: ``stop_reason`` is then the stop string matched, not the reason."""
    message = {"role": "assistant", "content": "A."}
    _whole(GPT_OSS, {"choices": [{"index": 0, "message": message, "finish_reason": "stop", "stop_reason": "END"}]})
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


# --- the model and counts the metrics record ----------------------------------------------------------------


def test_an_openai_style_streams_model_and_counts_are_on_its_metrics(
    exporter: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    _streamed(GPT_OSS, [_chunk({"content": "Hi"}), _chunk({}, "stop", **METRICS)])
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.model"] == GPT_OSS
    points = _token_points(reader)
    assert sorted((p.attributes["gen_ai.token.type"], p.sum) for p in points) == [("input", 11), ("output", 7)]
    assert {p.attributes["gen_ai.response.model"] for p in points} == {GPT_OSS}


ROUTER = "arn:aws:bedrock:us-east-1:123456789012:default-prompt-router/amazon.nova:1"
ROUTED = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0"
NOVA_REQUEST = {"schemaVersion": "messages-v1", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_a_prompt_routers_model_in_a_nova_invoke_stream_is_on_its_metrics(
    exporter: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    """Nova's native stream is Converse's events; the router's choice comes in its ``metadata`` trace."""
    _streamed(
        ROUTER,
        [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": "Hi"}, "contentBlockIndex": 0}},
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"messageStop": {"stopReason": "end_turn"}},
            {
                "metadata": {
                    "usage": {"inputTokens": 11, "outputTokens": 7},
                    "trace": {"promptRouter": {"invokedModelId": ROUTED}},
                },
                **METRICS,
            },
        ],
        NOVA_REQUEST,
    )
    assert only_span(exporter).attributes["gen_ai.response.model"] == ROUTED
    points = _token_points(reader)
    assert sorted(p.sum for p in points) == [7, 11]
    assert {p.attributes["gen_ai.response.model"] for p in points} == {ROUTED}


# --- a guardrail that intervened in an answer with a stop reason of its own ----------------------------------

CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"
CLAUDE_REQUEST = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": REQUEST["messages"]}
MASKED = "Call me at {PHONE}."


def _assert_guardrail_won(exporter: InMemorySpanExporter) -> None:
    for span in exporter.get_finished_spans():
        assert span.attributes["gen_ai.response.finish_reasons"] == ("guardrail_intervened",)
        assert attrs_json(span, "gen_ai.output.messages") == [
            {"role": "assistant", "parts": [{"type": "text", "content": MASKED}], "finish_reason": "content_filter"}
        ]


def test_a_guardrails_intervention_wins_over_the_models_stop_reason(exporter: InMemorySpanExporter) -> None:
    """The model ended its turn and a guardrail then masked its answer: what the caller got is the guardrail's.

    Converse reports such a call as ``guardrail_intervened``; ``invoke_model`` records it the same way.
    """
    _whole(
        CLAUDE,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": MASKED}],
            "stop_reason": "end_turn",
            "amazon-bedrock-guardrailAction": "INTERVENED",
        },
        CLAUDE_REQUEST,
    )
    _streamed(
        CLAUDE,
        [
            {
                "type": "message_start",
                "message": {
                    "id": "m1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-3-haiku-20240307",
                    "stop_reason": None,
                    "usage": {"input_tokens": 11, "output_tokens": 1},
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": MASKED}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
            {"type": "message_stop", "amazon-bedrock-guardrailAction": "INTERVENED", **METRICS},
        ],  # fmt: skip
        CLAUDE_REQUEST,
    )
    assert len(exporter.get_finished_spans()) == 2
    _assert_guardrail_won(exporter)


def test_a_guardrail_in_an_openai_style_stream_wins_too(exporter: InMemorySpanExporter) -> None:
    _streamed(
        GPT_OSS,
        [
            _chunk({"content": MASKED}),
            _chunk({}, "stop", **{"amazon-bedrock-guardrailAction": "INTERVENED"}, **METRICS),
        ],
    )
    _assert_guardrail_won(exporter)


def test_a_guardrails_intervention_is_not_undone_by_a_later_chunks_none(exporter: InMemorySpanExporter) -> None:
    """Each chunk may carry the guardrail's header; a later ``NONE`` does not clear an earlier ``INTERVENED``."""
    _streamed(
        GPT_OSS,
        [
            _chunk({"content": MASKED}, **{"amazon-bedrock-guardrailAction": "INTERVENED"}),
            _chunk({}, "stop", **{"amazon-bedrock-guardrailAction": "NONE"}, **METRICS),
        ],
    )
    _assert_guardrail_won(exporter)


def test_every_choice_of_a_body_a_guardrail_intervened_in_is_content_filter(exporter: InMemorySpanExporter) -> None:
    """``n`` > 1: the guardrail's finish is each choice's, not the first one's only."""
    choices = [
        {"index": i, "message": {"role": "assistant", "content": MASKED}, "finish_reason": "stop"} for i in range(3)
    ]
    _whole(GPT_OSS, {"choices": choices, "amazon-bedrock-guardrailAction": "INTERVENED"})
    span = only_span(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("guardrail_intervened",) * 3
    assert [m["finish_reason"] for m in attrs_json(span, "gen_ai.output.messages")] == ["content_filter"] * 3


# --- an inline <think> block, whole and streamed -----------------------------------------------------------

THOUGHT = [
    {"type": "reasoning", "content": "Short waves scatter."},
    {"type": "text", "content": "Rayleigh scattering."},
]


def test_a_streamed_think_block_is_reasoning_as_a_whole_answers_is(exporter: InMemorySpanExporter) -> None:
    """DeepSeek-style: the thinking inline in the answer; the stream's fragments split it only once joined."""
    answer = "<think>Short waves scatter.</think>\n\nRayleigh scattering."
    message = {"role": "assistant", "content": answer}
    _whole(GPT_OSS, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    fragments = ["<thi", "nk>Short waves ", "scatter.</th", "ink>\n\nRayleigh ", "scattering."]
    _streamed(GPT_OSS, [_chunk({"content": f}) for f in fragments] + [_chunk({}, "stop", **METRICS)])
    whole, streamed = exporter.get_finished_spans()
    assert attrs_json(whole, "gen_ai.output.messages")[0]["parts"] == THOUGHT
    assert attrs_json(streamed, "gen_ai.output.messages")[0]["parts"] == THOUGHT


def test_a_reasoning_field_and_a_think_block_are_both_recorded_the_field_first(
    exporter: InMemorySpanExporter,
) -> None:
    message = {"role": "assistant", "content": "<think>Then this.</think>A.", "reasoning_content": "First this."}
    _whole(GPT_OSS, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    _streamed(
        GPT_OSS,
        [
            _chunk({"reasoning_content": "First this."}),
            _chunk({"content": "<think>Then this.</think>"}),
            _chunk({"content": "A."}, "stop"),
        ],
    )
    for span in exporter.get_finished_spans():
        assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [
            {"type": "reasoning", "content": "First this.\n\nThen this."},
            {"type": "text", "content": "A."},
        ]


def test_a_reasoning_only_first_chunk_is_the_first_output(exporter: InMemorySpanExporter) -> None:
    """Time to first chunk is taken at the first chunk of reasoning, not at the answer's first text."""
    chunks = [_chunk({"reasoning_content": "Hm."}), _chunk({"content": "A."}), _chunk({}, "stop", **METRICS)]
    body = b"".join(chunk_frame(c) for c in chunks)
    with ReplayServer([synthetic("m/invoke-with-response-stream", body)]) as server:
        result = client(server).invoke_model_with_response_stream(modelId=GPT_OSS, body=json.dumps(REQUEST))
        events = iter(result["body"])
        next(events)
        time.sleep(0.3)  # before the answer's first text
        list(events)
    assert only_span(exporter).attributes["gen_ai.response.time_to_first_chunk"] < 0.3
