"""``converse`` through a real boto3 ``bedrock-runtime`` client, replayed from tests/fixtures/bedrock-cassettes."""

from __future__ import annotations

import json
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

import botocore.client  # noqa: E402
from bedrock_replay import (  # noqa: E402
    OPENINFERENCE,
    PYDANTIC_AI,
    attrs_json,
    client,
    only_span,
    recorded_params,
    replay,
    send,
)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import ReplayServer, load_cassette  # noqa: E402
from evaltrace import pricing  # noqa: E402
from evaltrace.instrumentation.bedrock import BedrockInstrumentor  # noqa: E402

TEST_BEDROCK = PYDANTIC_AI / "cassettes" / "test_bedrock"


@pytest.mark.usefixtures("bedrock_instrumented")
def test_converse_follows_genai_conventions(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_model_max_tokens.yaml") as (api, calls, server):
        (call,) = calls
        result = api.converse(
            modelId=call.model,
            messages=[{"role": "user", "content": [{"text": "What is the capital of France?"}]}],
            system=[{"text": "You are a helpful chatbot."}],
            inferenceConfig={"maxTokens": 5, "temperature": 0.5, "topP": 0.9, "stopSequences": ["\n\nHuman:"]},
        )
        host, port = server.url.removeprefix("http://").split(":")
    recorded = call.recorded.response_json()
    assert result["output"] == recorded["output"]  # the user's result is boto3's, untouched

    span = only_span(exporter)
    a = span.attributes
    assert span.name == "chat us.amazon.nova-micro-v1:0"
    assert span.kind.name == "CLIENT"
    assert a["gen_ai.provider.name"] == "aws.bedrock"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "us.amazon.nova-micro-v1:0"
    assert (a["server.address"], a["server.port"]) == (host, int(port))
    assert a["gen_ai.request.max_tokens"] == 5
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.stop_sequences"] == ("\n\nHuman:",)
    assert "gen_ai.request.stream" not in a
    assert "RequestId" not in result["ResponseMetadata"]  # pydantic-ai's recordings dropped x-amzn-requestid
    assert "gen_ai.response.id" not in a
    assert "gen_ai.response.model" not in a  # Converse names no model in its response
    assert a["gen_ai.response.finish_reasons"] == (recorded["stopReason"],) == ("max_tokens",)
    assert a["gen_ai.usage.input_tokens"] == recorded["usage"]["inputTokens"]
    assert a["gen_ai.usage.output_tokens"] == recorded["usage"]["outputTokens"]
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": "You are a helpful chatbot."}]
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}
    ]
    text = recorded["output"]["message"]["content"][0]["text"]
    assert attrs_json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "length"}
    ]
    # Priced through genai-prices' AWS Bedrock table, the us. inference profile included.
    cost = pricing.cost_of(
        "us.amazon.nova-micro-v1:0",
        input_tokens=recorded["usage"]["inputTokens"],
        output_tokens=recorded["usage"]["outputTokens"],
        provider="aws.bedrock",
    )
    assert cost is not None and cost.total_usd > 0
    assert a["evaltrace.cost_usd"] == pytest.approx(cost.total_usd)


@pytest.mark.usefixtures("bedrock_instrumented")
def test_the_response_id_is_the_aws_request_id(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "TestNovaInvokeModel.test_nova_converse.yaml") as (api, calls, _):
        result = send(api, calls[0])
    recorded = dict((k.lower(), v) for k, v in calls[0].recorded.headers)["x-amzn-requestid"]
    assert only_span(exporter).attributes["gen_ai.response.id"] == result["ResponseMetadata"]["RequestId"] == recorded


@pytest.mark.usefixtures("bedrock_instrumented")
def test_tool_use_and_tool_results_are_genai_parts(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "test_converse_tool_use_message.yaml") as (api, calls, _):
        (call,) = calls
        result = send(api, call)
    span = only_span(exporter)
    recorded = call.recorded.response_json()
    uses = [b["toolUse"] for b in recorded["output"]["message"]["content"] if "toolUse" in b]
    assert uses  # the recording answers with tool calls
    output = attrs_json(span, "gen_ai.output.messages")
    calls_out = [p for p in output[0]["parts"] if p["type"] == "tool_call"]
    assert [(p["id"], p["name"], p["arguments"]) for p in calls_out] == [
        (u["toolUseId"], u["name"], u["input"]) for u in uses
    ]
    assert output[0]["finish_reason"] == "tool_call"
    assert span.attributes["gen_ai.response.finish_reasons"] == (result["stopReason"],) == ("tool_use",)
    tools = attrs_json(span, "gen_ai.tool.definitions")
    specs = [t["toolSpec"] for t in call.params["toolConfig"]["tools"]]
    assert [(t["type"], t["name"], t["parameters"]) for t in tools] == [
        ("function", s["name"], s["inputSchema"]["json"]) for s in specs
    ]


@pytest.mark.usefixtures("bedrock_instrumented")
def test_a_tool_result_turn_becomes_a_tool_message(exporter: InMemorySpanExporter) -> None:
    path = (
        PYDANTIC_AI
        / "bedrock"
        / "cassettes"
        / "test_strict_tool_calls"
        / "test_bedrock_strict_tool_supported_model.yaml"
    )
    with replay(path) as (api, calls, _):
        for call in calls:
            send(api, call)
    second = exporter.get_finished_spans()[1]
    messages = attrs_json(second, "gen_ai.input.messages")
    results = [b["toolResult"] for m in calls[1].params["messages"] for b in m["content"] if "toolResult" in b]
    assert results
    tool_parts = [p for m in messages if m["role"] == "tool" for p in m["parts"]]
    assert [p["id"] for p in tool_parts] == [r["toolUseId"] for r in results]
    assert all(p["type"] == "tool_call_response" for p in tool_parts)


@pytest.mark.usefixtures("bedrock_instrumented")
def test_reasoning_content_is_reasoning_parts_never_answer_text(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_model_thinking_part_anthropic.yaml") as (api, calls, _):
        results = [send(api, call) for call in calls]
    spans = exporter.get_finished_spans()
    first = attrs_json(spans[0], "gen_ai.output.messages")[0]["parts"]
    blocks = results[0]["output"]["message"]["content"]
    thinking = [b["reasoningContent"]["reasoningText"]["text"] for b in blocks if "reasoningContent" in b]
    assert thinking
    assert [p["content"] for p in first if p["type"] == "reasoning"] == thinking
    answer = [p["content"] for p in first if p["type"] == "text"]
    assert answer == [b["text"] for b in blocks if "text" in b]
    assert not any(t in a for t in thinking for a in answer)
    # The second request sends the reasoning back: it is a reasoning part of the assistant's input turn.
    history = attrs_json(spans[1], "gen_ai.input.messages")
    assert any(p["type"] == "reasoning" for m in history if m["role"] == "assistant" for p in m["parts"])


@pytest.mark.usefixtures("bedrock_instrumented")
def test_redacted_reasoning_is_an_empty_redacted_part(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_model_thinking_part_redacted.yaml") as (api, calls, _):
        result = send(api, calls[0])
    blocks = result["output"]["message"]["content"]
    redacted = [b for b in blocks if "redactedContent" in b.get("reasoningContent", {})]
    assert redacted
    parts = attrs_json(exporter.get_finished_spans()[0], "gen_ai.output.messages")[0]["parts"]
    assert [p for p in parts if p.get("redacted")] == [{"type": "reasoning", "content": "", "redacted": True}] * len(
        redacted
    )


@pytest.mark.usefixtures("bedrock_instrumented")
def test_prompt_cache_counts_are_part_of_the_input_and_priced(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_cache_write_and_read.yaml") as (api, calls, _):
        results = [send(api, call) for call in calls]
    for span, result in zip(exporter.get_finished_spans(), results, strict=True):
        usage = result["usage"]
        a = span.attributes
        # Converse's inputTokens excludes the cache; OTel's input includes it (totalTokens = all four).
        assert a["gen_ai.usage.input_tokens"] == usage["totalTokens"] - usage["outputTokens"]
        assert a["gen_ai.usage.cache_read.input_tokens"] == usage["cacheReadInputTokens"]
        assert a["gen_ai.usage.cache_creation.input_tokens"] == usage["cacheWriteInputTokens"]
        details = json.loads(a["langfuse.observation.cost_details"])
        if usage["cacheWriteInputTokens"]:
            assert details["input_cache_creation"] > 0
        if usage["cacheReadInputTokens"]:
            assert details["input_cached_tokens"] > 0


@pytest.mark.usefixtures("bedrock_instrumented")
def test_top_k_in_additional_model_request_fields(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_top_k_anthropic_variant.yaml") as (api, calls, _):
        (call,) = calls
        send(api, call)
    top_k = call.params["additionalModelRequestFields"]["top_k"]
    assert only_span(exporter).attributes["gen_ai.request.top_k"] == top_k


@pytest.mark.usefixtures("bedrock_instrumented")
def test_a_client_error_is_recorded_and_reraised_unchanged(exporter: InMemorySpanExporter) -> None:
    with replay(TEST_BEDROCK / "test_bedrock_error.yaml") as (api, calls, _):
        (call,) = calls
        with pytest.raises(botocore.exceptions.ClientError) as raised:
            send(api, call)
    span = only_span(exporter)
    error = raised.value
    assert span.status.status_code is StatusCode.ERROR
    # error.type is botocore's error code (here the recorded 400 without x-amzn-errortype: botocore says "400").
    assert span.attributes["error.type"] == error.response["Error"]["Code"]
    assert span.attributes["http.response.status_code"] == error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.type"].endswith("ClientError")
    assert span.name == f"chat {call.model}"


@pytest.mark.usefixtures("bedrock_instrumented")
def test_clients_made_before_and_after_instrument_are_traced_and_other_operations_are_not(
    exporter: InMemorySpanExporter,
) -> None:
    items = load_cassette(TEST_BEDROCK / "test_bedrock_model_usage_limit_not_exceeded.yaml")  # count_tokens, converse
    with ReplayServer(items) as server:
        api = client(server)
        api.count_tokens(
            modelId="anthropic.claude-sonnet-4-20250514-v1:0",
            input={"converse": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}},
        )
        assert exporter.get_finished_spans() == ()  # not one of the four traced operations
        api.converse(
            modelId="us.anthropic.claude-sonnet-4-20250514-v1:0",
            messages=[{"role": "user", "content": [{"text": "hi"}]}],
        )
    assert [s.name for s in exporter.get_finished_spans()] == ["chat us.anthropic.claude-sonnet-4-20250514-v1:0"]


def test_uninstrument_restores_botocore_and_clients_made_earlier_stop_tracing(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    original = botocore.client.BaseClient._make_api_call
    path = TEST_BEDROCK / "test_bedrock_cache_write_and_read.yaml"  # two converse calls
    with replay(path) as (api, calls, _):
        BedrockInstrumentor().instrument()
        try:
            assert botocore.client.BaseClient._make_api_call is not original
            send(api, calls[0])  # a client made before instrument()
        finally:
            BedrockInstrumentor().uninstrument()
        assert botocore.client.BaseClient._make_api_call is original
        send(api, calls[1])
    assert len(exporter.get_finished_spans()) == 1


# Every converse call recorded: what the span says is what the recorded response says.
@pytest.mark.usefixtures("bedrock_instrumented")
@pytest.mark.parametrize(("path", "index"), recorded_params("converse"))
def test_every_recorded_converse_response_is_on_its_span(path: Any, index: int, exporter: InMemorySpanExporter) -> None:
    with replay(path) as (api, calls, _):
        results = [send(api, call) for call in calls[: index + 1]]
    span = exporter.get_finished_spans()[index]
    recorded = calls[index].recorded.response_json()
    assert results[index]["stopReason"] == recorded["stopReason"]
    a = span.attributes
    assert a["gen_ai.response.finish_reasons"] == (recorded["stopReason"],)
    usage = recorded["usage"]
    cache = usage.get("cacheReadInputTokens", 0) + usage.get("cacheWriteInputTokens", 0)
    assert a["gen_ai.usage.input_tokens"] == usage["inputTokens"] + cache
    assert a["gen_ai.usage.output_tokens"] == usage["outputTokens"]
    blocks = [b for b in recorded["output"]["message"]["content"] if "cachePoint" not in b]
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    assert len(parts) == len(blocks)
    for block, part in zip(blocks, parts, strict=True):
        if "text" in block:
            assert part == {"type": "text", "content": block["text"]}
        elif "toolUse" in block:
            assert part["id"] == block["toolUse"]["toolUseId"] and part["name"] == block["toolUse"]["name"]
            assert part.get("arguments", part.get("server_tool_call", {}).get("arguments")) == block["toolUse"]["input"]
        elif "reasoningContent" in block:
            assert part["type"] == "reasoning"
            text = block["reasoningContent"].get("reasoningText", {}).get("text", "")
            assert part["content"] == text
    if any("toolUse" in b and b["toolUse"].get("type") != "server_tool_use" for b in blocks):
        assert any(p["type"] == "tool_call" for p in parts)
    input_messages = attrs_json(span, "gen_ai.input.messages")
    assert input_messages and all(m["role"] in ("user", "assistant", "tool") for m in input_messages)


@pytest.mark.usefixtures("bedrock_instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_a_server_tool_run_by_the_service_is_a_server_tool_call_and_response(
    stream: bool, exporter: InMemorySpanExporter
) -> None:
    name = "test_bedrock_model_code_execution_tool_stream" if stream else "test_bedrock_model_with_code_execution_tool"
    with replay(TEST_BEDROCK / f"{name}.yaml") as (api, calls, _):
        result = send(api, calls[0])
        if stream:
            list(result["stream"])
    parts = attrs_json(exporter.get_finished_spans()[0], "gen_ai.output.messages")[0]["parts"]
    assert [p["type"] for p in parts] == ["server_tool_call", "server_tool_call_response", "tool_call"]
    call, response, final = parts
    assert call["name"] == "nova_code_interpreter" and call["id"] == response["id"]
    assert call["server_tool_call"]["arguments"] == {"snippet": "1234 * 5678"}
    assert response["server_tool_call_response"]["type"] == "nova_code_interpreter_result"
    assert response["server_tool_call_response"]["response"]["stdOut"] == "7006652"
    assert final["name"] == "final_result"
