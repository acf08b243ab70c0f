"""``converse_stream`` and ``invoke_model_with_response_stream`` through a real boto3 client (replayed traffic).

The recorded event streams are served byte for byte (AWS event-stream frames, one per write) and parsed by
botocore's own ``EventStream``. Mid-stream service errors have no recording: those tests build the exception frame
Bedrock sends (``:message-type: exception``), as the docstrings say.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

import botocore.eventstream  # noqa: E402
import botocore.exceptions  # noqa: E402
from bedrock_replay import (  # noqa: E402
    OPENINFERENCE,
    PYDANTIC_AI,
    attrs_json,
    chunk_frame,
    client,
    converse_frame,
    exception_frame,
    only_span,
    read_stream,
    recorded_params,
    replay,
    send,
    synthetic,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace.instrumentation.bedrock import BedrockInstrumentor  # noqa: E402

TEST_BEDROCK = PYDANTIC_AI / "cassettes" / "test_bedrock"
USER = [{"role": "user", "content": [{"text": "hi"}]}]


@pytest.fixture
def reader(provider: TracerProvider, capture: None) -> Iterator[InMemoryMetricReader]:
    metrics = InMemoryMetricReader()
    instrumentor = BedrockInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[metrics]))
    yield metrics
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("reader")


def _metrics(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def test_converse_stream_with_a_tool_call(exporter: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    with replay(OPENINFERENCE / "TestConverseStream.test_invoke_tool_message.yaml") as (api, calls, _):
        (call,) = calls
        result = send(api, call)
        assert isinstance(result["stream"], botocore.eventstream.EventStream)  # still the stream, for isinstance
        assert exporter.get_finished_spans() == ()  # open until the stream ends
        events = read_stream(result)
    span = only_span(exporter)
    a = span.attributes
    assert span.name == "chat anthropic.claude-3-haiku-20240307-v1:0"
    assert a["gen_ai.request.stream"] is True
    start = next(e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e)
    arguments = "".join(e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events if "contentBlockDelta" in e)
    assert attrs_json(span, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": start["toolUseId"],
                    "name": start["name"],
                    "arguments": json.loads(arguments),
                }
            ],
            "finish_reason": "tool_call",
        }
    ]
    (stop,) = [e["messageStop"] for e in events if "messageStop" in e]
    (metadata,) = [e["metadata"] for e in events if "metadata" in e]
    assert a["gen_ai.response.finish_reasons"] == (stop["stopReason"],)
    assert a["gen_ai.usage.input_tokens"] == metadata["usage"]["inputTokens"]
    assert a["gen_ai.usage.output_tokens"] == metadata["usage"]["outputTokens"]
    assert a["evaltrace.stream.completed"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["evaltrace.stream.chunks"] == len(events)
    assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= (span.end_time - span.start_time) / 1e9
    metrics = _metrics(reader)
    (first,) = metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points
    assert first.count == 1 and first.attributes["gen_ai.provider.name"] == "aws.bedrock"
    tokens = metrics["gen_ai.client.token.usage"].data.data_points
    assert sorted(p.sum for p in tokens) == sorted(
        [metadata["usage"]["inputTokens"], metadata["usage"]["outputTokens"]]
    )


def test_streamed_reasoning_is_a_reasoning_part(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_model_thinking_part_stream.yaml") as (api, calls, _):
        events = read_stream(send(api, calls[0]))
    thinking = "".join(
        e["contentBlockDelta"]["delta"]["reasoningContent"].get("text", "")
        for e in events
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    )
    answer = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    assert thinking and answer
    parts = attrs_json(only_span(exporter), "gen_ai.output.messages")[0]["parts"]
    assert parts == [{"type": "reasoning", "content": thinking}, {"type": "text", "content": answer}]


def test_closing_a_stream_early_ends_the_span_once(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_stream_cancel.yaml") as (api, calls, _):
        stream = send(api, calls[0])["stream"]
        for index, _event in enumerate(stream):
            if index == 2:
                break
        stream.close()
        stream.close()
    a = only_span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] == "closed_early"
    assert a["evaltrace.stream.completed"] is False
    assert a["evaltrace.stream.chunks"] == 3


def test_an_unread_stream_ends_its_span_when_collected(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_model_stream.yaml") as (api, calls, _):
        result = send(api, calls[0])
        raw = result["stream"]._raw_stream  # the HTTP body, closed below: the test's, not the span's, business
        del result
        gc.collect()
        raw.close()
    a = only_span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] == "garbage_collected"
    assert a["evaltrace.stream.chunks"] == 0


def test_a_stream_the_service_refuses_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_streaming_error.yaml") as (api, calls, _):
        with pytest.raises(botocore.exceptions.ClientError) as raised:
            send(api, calls[0])
    span = only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == raised.value.response["Error"]["Code"]


def test_a_mid_stream_service_error_fails_the_span_and_keeps_what_arrived(exporter: InMemorySpanExporter) -> None:
    """No recording holds a mid-stream error: the frames are Bedrock's documented ones, built here."""
    body = b"".join(
        [
            converse_frame("messageStart", {"role": "assistant"}),
            converse_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Par"}}),
            exception_frame("modelStreamErrorException", "The model stopped"),
        ]
    )
    with ReplayServer([synthetic("m/converse-stream", body)]) as server:
        result = client(server).converse_stream(modelId="amazon.nova-micro-v1:0", messages=USER)
        seen: list[Any] = []
        with pytest.raises(botocore.exceptions.EventStreamError) as raised:
            for event in result["stream"]:
                seen.append(event)
        result["stream"].close()
    assert len(seen) == 2
    span = only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "modelStreamErrorException" == raised.value.response["Error"]["Code"]
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": "Par"}]


def test_a_stream_cut_before_message_stop_is_truncated(exporter: InMemorySpanExporter) -> None:
    """Synthetic (no recording is cut short): a stream that ends without ``messageStop``."""
    body = converse_frame("messageStart", {"role": "assistant"}) + converse_frame(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    )
    with ReplayServer([synthetic("m/converse-stream", body)]) as server:
        read_stream(client(server).converse_stream(modelId="amazon.nova-micro-v1:0", messages=USER))
    a = only_span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] == "truncated"
    assert a["evaltrace.stream.completed"] is False


@pytest.mark.parametrize(("path", "index"), recorded_params("converse_stream"))
def test_every_recorded_converse_stream_is_on_its_span(path: Any, index: int, exporter: InMemorySpanExporter) -> None:
    with replay(path) as (api, calls, _):
        for call in calls[:index]:
            result = send(api, call)
            if call.method == "converse_stream":
                read_stream(result)
        events = read_stream(send(api, calls[index]))
    span = exporter.get_finished_spans()[index]
    a = span.attributes
    (stop,) = [e["messageStop"] for e in events if "messageStop" in e]
    assert a["gen_ai.response.finish_reasons"] == (stop["stopReason"],)
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    (metadata,) = [e["metadata"] for e in events if "metadata" in e]
    assert a["gen_ai.usage.output_tokens"] == metadata["usage"]["outputTokens"]
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    assert "".join(p["content"] for p in parts if p["type"] == "text") == text
    starts = [
        e["contentBlockStart"]["start"]["toolUse"]
        for e in events
        if "toolUse" in e.get("contentBlockStart", {}).get("start", {})
    ]
    calls_out = [p for p in parts if p["type"] in ("tool_call", "server_tool_call")]
    assert [(p["id"], p["name"]) for p in calls_out] == [(s["toolUseId"], s["name"]) for s in starts]


# --- invoke_model_with_response_stream ---------------------------------------------------------------------


def _chunks(events: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(e["chunk"]["bytes"]) for e in events]


def test_invoke_stream_anthropic_messages_with_tool_calls(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "TestInvokeModelWithStreamResponse.test_invoke.yaml") as (api, calls, _):
        (call,) = calls
        result = send(api, call)
        assert isinstance(result["body"], botocore.eventstream.EventStream)
        events = read_stream(result)
    chunks = _chunks(events)  # the user still reads every chunk's bytes
    assert chunks[0]["type"] == "message_start" and chunks[-1]["type"] == "message_stop"
    span = only_span(exporter)
    a = span.attributes
    assert span.name == "chat anthropic.claude-3-5-sonnet-20240620-v1:0"
    assert a["gen_ai.response.model"] == chunks[0]["message"]["model"]
    assert a["gen_ai.response.id"] == result["ResponseMetadata"]["RequestId"]
    delta = next(c for c in chunks if c["type"] == "message_delta")
    assert a["gen_ai.response.finish_reasons"] == (delta["delta"]["stop_reason"],) == ("tool_use",)
    assert a["gen_ai.usage.input_tokens"] == chunks[0]["message"]["usage"]["input_tokens"]
    assert a["gen_ai.usage.output_tokens"] == delta["usage"]["output_tokens"]
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    starts = [c["content_block"] for c in chunks if c["type"] == "content_block_start"]
    assert [p["type"] for p in parts] == ["text", "tool_call", "tool_call"]
    assert [(p["id"], p["name"]) for p in parts[1:]] == [(s["id"], s["name"]) for s in starts[1:]]
    assert all(p["arguments"] == {"city": "San Francisco"} for p in parts[1:])
    body = json.loads(call.params["body"])
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": body["system"]}]
    assert a["gen_ai.request.max_tokens"] == body["max_tokens"]
    tools = attrs_json(span, "gen_ai.tool.definitions")
    assert [t["name"] for t in tools] == [t["name"] for t in body["tools"]]
    assert a["evaltrace.stream.end_reason"] == "exhausted"


def test_invoke_stream_nova(exporter: InMemorySpanExporter) -> None:
    path = OPENINFERENCE / "TestNovaInvokeModelWithResponseStream.test_nova_micro_streaming.yaml"
    with replay(path) as (api, calls, _):
        chunks = _chunks(read_stream(send(api, calls[0])))
    text = "".join(c["contentBlockDelta"]["delta"]["text"] for c in chunks if "contentBlockDelta" in c)
    (metadata,) = [c["metadata"] for c in chunks if "metadata" in c]
    a = only_span(exporter).attributes
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
        metadata["usage"]["inputTokens"],
        metadata["usage"]["outputTokens"],
    )
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)


_METRICS = {"inputTokenCount": 11, "outputTokenCount": 7, "invocationLatency": 5, "firstByteLatency": 2}

# No recording covers these families' streams: the chunks are the shapes AWS documents for each model family.
_FAMILY_STREAMS = {
    "meta.llama3-8b-instruct-v1:0": [
        {"generation": "Hel", "prompt_token_count": 11, "generation_token_count": 1, "stop_reason": None},
        {"generation": "lo", "prompt_token_count": None, "generation_token_count": 2, "stop_reason": "stop",
         "amazon-bedrock-invocationMetrics": _METRICS},
    ],
    "amazon.titan-text-express-v1": [
        {"outputText": "Hel", "index": 0, "totalOutputTextTokenCount": 1, "completionReason": None,
         "inputTextTokenCount": 11},
        {"outputText": "lo", "index": 0, "totalOutputTextTokenCount": 2, "completionReason": "FINISH",
         "amazon-bedrock-invocationMetrics": _METRICS},
    ],
    "cohere.command-r-v1:0": [
        {"is_finished": False, "event_type": "stream-start", "generation_id": "g"},
        {"is_finished": False, "event_type": "text-generation", "text": "Hel"},
        {"is_finished": False, "event_type": "text-generation", "text": "lo"},
        {"is_finished": True, "event_type": "stream-end", "finish_reason": "COMPLETE",
         "response": {"text": "Hello", "meta": {"billed_units": {"input_tokens": 11, "output_tokens": 2}}},
         "amazon-bedrock-invocationMetrics": _METRICS},
    ],
    "cohere.command-text-v14": [
        {"generations": [{"text": "Hel", "is_finished": False}]},
        {"generations": [{"text": "lo", "is_finished": True, "finish_reason": "COMPLETE"}],
         "amazon-bedrock-invocationMetrics": _METRICS},
    ],
    "anthropic.claude-v2": [
        {"completion": "Hel", "stop_reason": None, "stop": None},
        {"completion": "lo", "stop_reason": "stop_sequence", "stop": "\n\nHuman:",
         "amazon-bedrock-invocationMetrics": _METRICS},
    ],
    "us.deepseek.r1-v1:0": [
        {"choices": [{"text": "Hel", "stop_reason": None}]},
        {"choices": [{"text": "lo", "stop_reason": "stop"}], "amazon-bedrock-invocationMetrics": _METRICS},
    ],
}  # fmt: skip
_EXPECTED_REASON = {
    "us.deepseek.r1-v1:0": "stop",
    "meta.llama3-8b-instruct-v1:0": "stop",
    "amazon.titan-text-express-v1": "FINISH",
    "cohere.command-r-v1:0": "COMPLETE",
    "cohere.command-text-v14": "COMPLETE",
    "anthropic.claude-v2": "stop_sequence",
}


@pytest.mark.parametrize("model", list(_FAMILY_STREAMS))
def test_invoke_stream_of_each_text_family(model: str, exporter: InMemorySpanExporter) -> None:
    """Synthetic chunks in each family's documented shape (no recording of these families exists)."""
    body = b"".join(chunk_frame(c) for c in _FAMILY_STREAMS[model])
    with ReplayServer([synthetic(f"{model}/invoke-with-response-stream", body)]) as server:
        events = read_stream(
            client(server).invoke_model_with_response_stream(modelId=model, body=json.dumps({"prompt": "Hi"}))
        )
    assert len(events) == len(_FAMILY_STREAMS[model])
    a = only_span(exporter).attributes
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "Hello"}]
    assert a["gen_ai.response.finish_reasons"] == (_EXPECTED_REASON[model],)
    assert a["gen_ai.usage.input_tokens"] == 11
    assert a["evaltrace.stream.end_reason"] == "exhausted"
