"""``invoke_model`` through a real boto3 client: native bodies per model family, the body still the user's to read.

Recorded: Anthropic Messages (Claude 3 Haiku) and Amazon Nova (text, system prompt, tool use). No recording
exists of Meta Llama, Amazon Titan Text, Cohere Command / Command R, Mistral, Anthropic Text Completions or an
embedding model through ``invoke_model``: those tests serve the response bodies AWS documents for each family.
"""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

import botocore.response  # noqa: E402
from bedrock_replay import OPENINFERENCE, attrs_json, client, only_span, replay, send, synthetic  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import ReplayServer  # noqa: E402
from evaltrace._internal import settings  # noqa: E402

pytestmark = pytest.mark.usefixtures("bedrock_instrumented")


def test_anthropic_messages_body_and_the_user_still_reads_it(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "TestClaudeInvokeModelMessageApi.test_invoke_model.yaml") as (api, calls, _):
        (call,) = calls
        result = send(api, call)
        assert isinstance(result["body"], botocore.response.StreamingBody)
        raw = result["body"].read()
    assert raw == call.recorded.body  # byte for byte what the service sent, though the span read it first
    body = json.loads(raw)
    request = json.loads(call.params["body"])
    span = only_span(exporter)
    a = span.attributes
    assert span.name == "chat anthropic.claude-3-haiku-20240307-v1:0"
    assert a["gen_ai.provider.name"] == "aws.bedrock"
    assert a["gen_ai.request.max_tokens"] == request["max_tokens"]
    assert a["gen_ai.request.temperature"] == request["temperature"]
    assert a["gen_ai.response.model"] == body["model"]
    assert a["gen_ai.response.id"] == result["ResponseMetadata"]["RequestId"]  # the AWS request id
    assert a["gen_ai.response.finish_reasons"] == (body["stop_reason"],)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
        body["usage"]["input_tokens"],
        body["usage"]["output_tokens"],
    )
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in request["messages"]
    ]
    assert attrs_json(span, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": body["content"][0]["text"]}],
            "finish_reason": "stop",
        }
    ]
    assert a["evaltrace.cost_usd"] > 0


def test_the_rebuffered_body_reads_in_pieces_and_by_line(exporter: InMemorySpanExporter) -> None:
    path = OPENINFERENCE / "TestNovaInvokeModel.test_nova_micro_text.yaml"
    with replay(path) as (api, calls, _):
        result = send(api, calls[0])
    body = result["body"]
    first = body.read(10)
    rest = b"".join(body.iter_chunks(7))
    assert first + rest == calls[0].recorded.body
    assert body.read() == b""
    assert only_span(exporter).attributes["gen_ai.response.finish_reasons"] == ("end_turn",)


def test_nova_body_with_a_tool_call(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "TestNovaInvokeModel.test_nova_with_tool_use.yaml") as (api, calls, _):
        (call,) = calls
        body = json.loads(send(api, call)["body"].read())
    span = only_span(exporter)
    (use,) = [b["toolUse"] for b in body["output"]["message"]["content"] if "toolUse" in b]
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    assert parts[-1] == {"type": "tool_call", "id": use["toolUseId"], "name": use["name"], "arguments": use["input"]}
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    request = json.loads(call.params["body"])
    tools = attrs_json(span, "gen_ai.tool.definitions")
    spec = request["toolConfig"]["tools"][0]["toolSpec"]
    assert tools == [
        {
            "type": "function",
            "name": spec["name"],
            "description": spec["description"],
            "parameters": spec["inputSchema"]["json"],
        }
    ]
    assert span.attributes["gen_ai.request.max_tokens"] == request["inferenceConfig"]["maxTokens"]
    assert span.attributes["gen_ai.usage.input_tokens"] == body["usage"]["inputTokens"]


def test_nova_system_prompt(exporter: InMemorySpanExporter) -> None:
    with replay(OPENINFERENCE / "TestNovaInvokeModel.test_nova_lite_with_system.yaml") as (api, calls, _):
        send(api, calls[0])["body"].read()
    request = json.loads(calls[0].params["body"])
    span = only_span(exporter)
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": request["system"][0]["text"]}]


_HEADERS = [("X-Amzn-Bedrock-Input-Token-Count", "11"), ("X-Amzn-Bedrock-Output-Token-Count", "2")]

# (model, request body, response body, expected parameters, expected parts, finish reason); synthetic (see above).
_FAMILIES = [
    (
        "meta.llama3-8b-instruct-v1:0",
        {"prompt": "Hi", "max_gen_len": 64, "temperature": 0.2, "top_p": 0.9},
        {"generation": "Hello", "prompt_token_count": 11, "generation_token_count": 2, "stop_reason": "stop"},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9},
        [{"type": "text", "content": "Hello"}],
        "stop",
    ),
    (
        "amazon.titan-text-express-v1",
        {"inputText": "Hi", "textGenerationConfig": {"maxTokenCount": 64, "temperature": 0.2, "topP": 0.9,
                                                      "stopSequences": ["User:"]}},
        {"inputTextTokenCount": 11, "results": [{"tokenCount": 2, "outputText": "Hello", "completionReason": "FINISH"}]},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.stop_sequences": ("User:",)},
        [{"type": "text", "content": "Hello"}],
        "FINISH",
    ),
    (
        "cohere.command-text-v14",
        {"prompt": "Hi", "max_tokens": 64, "temperature": 0.2, "p": 0.9, "k": 5, "stop_sequences": ["--"]},
        {"id": "c1", "prompt": "Hi", "generations": [{"id": "g1", "text": "Hello", "finish_reason": "COMPLETE"}]},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.top_k": 5, "gen_ai.request.stop_sequences": ("--",)},
        [{"type": "text", "content": "Hello"}],
        "COMPLETE",
    ),
    (
        "cohere.command-r-v1:0",
        {"message": "Weather in Paris?", "chat_history": [{"role": "USER", "message": "Hi"},
                                                            {"role": "CHATBOT", "message": "Hello"}],
         "preamble": "Be brief.", "max_tokens": 64, "temperature": 0.2, "p": 0.9, "k": 5,
         "tools": [{"name": "weather", "description": "Weather", "parameter_definitions": {"city": {"type": "str"}}}]},
        {"response_id": "r1", "text": "", "generation_id": "g1", "finish_reason": "COMPLETE",
         "tool_calls": [{"name": "weather", "parameters": {"city": "Paris"}}],
         "meta": {"billed_units": {"input_tokens": 11, "output_tokens": 2}}},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.top_k": 5},
        [{"type": "tool_call", "id": None, "name": "weather", "arguments": {"city": "Paris"}}],
        "COMPLETE",
    ),
    (
        "anthropic.claude-v2",
        {"prompt": "Be brief.\n\nHuman: Hey\n\nAssistant: Hi!\n\nHuman: Hi\n\nAssistant:", "max_tokens_to_sample": 64, "temperature": 0.2, "top_k": 5,
         "stop_sequences": ["\n\nHuman:"]},
        {"completion": " Hello", "stop_reason": "stop_sequence", "stop": "\n\nHuman:"},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_k": 5,
         "gen_ai.request.stop_sequences": ("\n\nHuman:",)},
        [{"type": "text", "content": " Hello"}],
        "stop_sequence",
    ),
    (
        "openai.gpt-oss-20b-1:0",
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64, "temperature": 0.2, "top_p": 0.9},
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "openai.gpt-oss-20b-1:0",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9},
        [{"type": "text", "content": "Hello"}],
        "stop",
    ),
    (
        "us.deepseek.r1-v1:0",
        {"prompt": "Hi", "max_tokens": 64, "temperature": 0.2, "top_p": 0.9, "stop": ["</s>"]},
        {"choices": [{"text": "Hello", "stop_reason": "stop"}]},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.stop_sequences": ("</s>",)},
        [{"type": "text", "content": "Hello"}],
        "stop",
    ),
    (
        "ai21.j2-ultra-v1",
        {"prompt": "Hi", "maxTokens": 64, "temperature": 0.2, "topP": 0.9, "stopSequences": ["##"]},
        {"id": 1234, "prompt": {"text": "Hi"},
         "completions": [{"data": {"text": "Hello"}, "finishReason": {"reason": "endoftext"}}]},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.stop_sequences": ("##",)},
        [{"type": "text", "content": "Hello"}],
        "endoftext",
    ),
    (
        "mistral.mistral-7b-instruct-v0:2",
        {"prompt": "<s>[INST] Hi [/INST]", "max_tokens": 64, "temperature": 0.2, "top_p": 0.9, "top_k": 5},
        {"outputs": [{"text": "Hello", "stop_reason": "stop"}]},
        {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9,
         "gen_ai.request.top_k": 5},
        [{"type": "text", "content": "Hello"}],
        "stop",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "request_body", "response", "parameters", "parts", "reason"), _FAMILIES, ids=[f[0] for f in _FAMILIES]
)
def test_each_native_body_family(
    model: str,
    request_body: dict[str, Any],
    response: dict[str, Any],
    parameters: dict[str, Any],
    parts: list[dict[str, Any]],
    reason: str,
    exporter: InMemorySpanExporter,
) -> None:
    served = synthetic(
        f"{model}/invoke", json.dumps(response).encode(), [("Content-Type", "application/json"), *_HEADERS]
    )
    with ReplayServer([served]) as server:
        result = client(server).invoke_model(modelId=model, body=json.dumps(request_body))
        assert json.loads(result["body"].read()) == response
    span = only_span(exporter)
    a = span.attributes
    for name, value in parameters.items():
        assert a[name] == value, name
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == parts
    assert a["gen_ai.response.finish_reasons"] == (reason,)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (11, 2)  # body or headers
    assert a["gen_ai.response.id"] == "req-synthetic"
    messages = attrs_json(span, "gen_ai.input.messages")
    assert messages[-1]["role"] == "user"


def test_cohere_command_r_history_preamble_and_tools(exporter: InMemorySpanExporter) -> None:
    """Synthetic (no Cohere recording): chat_history roles, the preamble as system instructions, tool definitions."""
    _, request_body, response, *_ = _FAMILIES[3]
    with ReplayServer([synthetic("cohere.command-r-v1:0/invoke", json.dumps(response).encode(), _HEADERS)]) as server:
        client(server).invoke_model(modelId="cohere.command-r-v1:0", body=json.dumps(request_body))
    span = only_span(exporter)
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert attrs_json(span, "gen_ai.tool.definitions") == [
        {"type": "function", "name": "weather", "description": "Weather", "parameters": {"city": {"type": "str"}}}
    ]


def test_cohere_command_r_tool_results_and_billed_units(exporter: InMemorySpanExporter) -> None:
    """Synthetic (no Cohere recording): the answers to a tool call go back in ``tool_results`` (Bedrock's documented
    ``{"call": {"name", "parameters"}, "outputs": [...]}``); the answer bills its tokens in ``meta.billed_units``.

    No token-count headers are served, so the usage on the span can only have come from ``billed_units``.
    """
    request = {
        "message": "Weather in Paris?",
        "chat_history": [{"role": "USER", "message": "Hi"}, {"role": "CHATBOT", "message": "Hello"}],
        "tools": [{"name": "weather", "description": "Weather",
                   "parameter_definitions": {"city": {"description": "City", "type": "str", "required": True}}}],
        "tool_results": [{"call": {"name": "weather", "parameters": {"city": "Paris"}},
                          "outputs": [{"text": "sunny, 18C"}]}],
        "max_tokens": 64,
    }  # fmt: skip
    response = {
        "response_id": "r2", "text": "Sunny, 18C.", "generation_id": "g2", "finish_reason": "COMPLETE",
        "meta": {"api_version": {"version": "1"}, "billed_units": {"input_tokens": 42, "output_tokens": 7}},
    }  # fmt: skip
    served = synthetic("cohere.command-r-v1:0/invoke", json.dumps(response).encode())
    with ReplayServer([served]) as server:
        client(server).invoke_model(modelId="cohere.command-r-v1:0", body=json.dumps(request))
    span = only_span(exporter)
    messages = attrs_json(span, "gen_ai.input.messages")
    assert messages[2] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": None, "response": [{"text": "sunny, 18C"}], "name": "weather"}],
    }
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    a = span.attributes
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (42, 7)


def test_an_embedding_model_is_an_embeddings_span(exporter: InMemorySpanExporter) -> None:
    """Synthetic (no recording): Titan Embeddings' documented response."""
    response = {"embedding": [0.1, 0.2, 0.3], "inputTextTokenCount": 4}
    served = synthetic(
        "amazon.titan-embed-text-v2:0/invoke",
        json.dumps(response).encode(),
        [("X-Amzn-Bedrock-Input-Token-Count", "4")],
    )
    with ReplayServer([served]) as server:
        result = client(server).invoke_model(
            modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": "hi"})
        )
        assert json.loads(result["body"].read()) == response
    span = only_span(exporter)
    assert span.name == "embeddings amazon.titan-embed-text-v2:0"
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert span.attributes["gen_ai.usage.input_tokens"] == 4
    assert "gen_ai.output.messages" not in span.attributes


def test_content_capture_off_records_no_content(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with replay(OPENINFERENCE / "TestNovaInvokeModel.test_nova_lite_with_system.yaml") as (api, calls, _):
            send(api, calls[0])
    finally:
        settings.replace(previous)
    a = only_span(exporter).attributes
    assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"} & set(a)
    assert a["gen_ai.usage.output_tokens"] == 27


class _ShortBody(BaseHTTPRequestHandler):
    """Answers with a Content-Length longer than the body, then hangs up: a body whose read fails mid-way."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b'{"generation": "He')
        self.wfile.flush()
        self.close_connection = True


def test_a_body_whose_read_fails_fails_the_span_and_the_users_read_raises_the_same(
    exporter: InMemorySpanExporter,
) -> None:
    """No recording fails mid-body: a local server promises 100 bytes and sends 18."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ShortBody)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        api = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=f"http://{host!s}:{port}",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        result = api.invoke_model(modelId="meta.llama3-8b-instruct-v1:0", body=json.dumps({"prompt": "Hi"}))
        with pytest.raises(Exception) as raised:
            result["body"].read()
    finally:
        server.shutdown()
        server.server_close()
    span = only_span(exporter)
    assert span.status.status_code.name == "ERROR"
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.type"].endswith(type(raised.value).__name__)


def test_a_body_that_is_not_a_text_answer_keeps_its_header_counts_and_invents_no_message(
    exporter: InMemorySpanExporter,
) -> None:
    """Synthetic (no recording): an image model's documented answer (Titan Image Generator) is no chat message."""
    response = {"images": ["aGVsbG8="], "error": None}
    served = synthetic("amazon.titan-image-generator-v2:0/invoke", json.dumps(response).encode(), _HEADERS)
    with ReplayServer([served]) as server:
        result = client(server).invoke_model(
            modelId="amazon.titan-image-generator-v2:0", body=json.dumps({"taskType": "TEXT_IMAGE"})
        )
        assert json.loads(result["body"].read()) == response
    a = only_span(exporter).attributes
    assert "gen_ai.output.messages" not in a and "gen_ai.response.finish_reasons" not in a
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (11, 2)


def test_a_file_body_is_sent_untouched_and_its_span_has_no_request_content(exporter: InMemorySpanExporter) -> None:
    path = OPENINFERENCE / "TestNovaInvokeModel.test_nova_micro_text.yaml"
    with replay(path) as (api, calls, server):
        body = io.BytesIO(calls[0].params["body"])
        result = api.invoke_model(modelId=calls[0].model, body=body)
        assert server.received[0].body == calls[0].params["body"]  # botocore read the file, not us
        assert result["body"].read() == calls[0].recorded.body
    a = only_span(exporter).attributes
    assert "gen_ai.input.messages" not in a and "gen_ai.request.max_tokens" not in a
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)


def test_a_sampled_out_call_still_gives_the_user_the_whole_body(exporter: InMemorySpanExporter) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from evaltrace._internal import tracing

    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    previous = tracing.set_tracer_provider(sampled_out)
    try:
        with replay(OPENINFERENCE / "TestClaudeInvokeModelMessageApi.test_invoke_model.yaml") as (api, calls, _):
            assert send(api, calls[0])["body"].read() == calls[0].recorded.body
    finally:
        tracing.set_tracer_provider(previous)
        sampled_out.shutdown()
    assert exporter.get_finished_spans() == ()


def test_a_text_completions_prompt_is_read_as_its_turns(exporter: InMemorySpanExporter) -> None:
    """Synthetic (no recording of Claude's Text Completions API): the prompt's turns and its system prompt."""
    _, request_body, response, *_ = next(f for f in _FAMILIES if f[0] == "anthropic.claude-v2")
    with ReplayServer([synthetic("anthropic.claude-v2/invoke", json.dumps(response).encode(), _HEADERS)]) as server:
        client(server).invoke_model(modelId="anthropic.claude-v2", body=json.dumps(request_body))
    span = only_span(exporter)
    assert attrs_json(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Hey"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Hi!"}]},
        {"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
    ]
