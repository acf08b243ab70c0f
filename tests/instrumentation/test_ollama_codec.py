"""The Ollama codec over the recorded responses (tests/fixtures/ollama-cassettes), read through the real client.

``generate`` and ``embed`` have no recording; their bodies are made in ollama_replay.py (see its docstring).
"""

from __future__ import annotations

import ollama
from ollama._types import ChatRequest
from ollama_replay import MODEL, client_of, embed_interaction, generate_interaction, recorded

from cassettes import ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace.instrumentation.ollama import codec
from evaltrace.instrumentation.ollama.stream import OllamaStreamAccumulator

USER = [{"role": "user", "content": "hi"}]


def test_chat_thinking_is_reasoning_and_counts_are_usage() -> None:
    with ReplayServer(recorded("test_chat.yaml")) as server, client_of(server.url) as client:
        response = client.chat(MODEL, USER)
        assert codec.server_of(client) == ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    outcome = codec.outcome_of("chat", response)
    assert outcome.response_model == MODEL
    assert outcome.finish_reasons == ["stop"]
    assert outcome.usage is not None and (outcome.usage.input_tokens, outcome.usage.output_tokens) == (21, 369)
    assert outcome.output_messages is not None
    parts = outcome.output_messages[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[0]["content"].startswith("Here's a thinking process")
    assert parts[1]["content"].startswith("The sky appears blue")


def test_chat_tool_call_is_a_part_and_the_message_finishes_with_tool_call() -> None:
    with ReplayServer(recorded("test_chat_with_tool_call.yaml")) as server, client_of(server.url) as client:
        response = client.chat(MODEL, USER)
    outcome = codec.outcome_of("chat", response)
    assert outcome.finish_reasons == ["stop"]  # verbatim
    assert outcome.output_messages is not None
    message = outcome.output_messages[0]
    assert message["finish_reason"] == "tool_call"
    assert message["parts"][-1] == {
        "type": "tool_call", "id": None, "name": "get_current_weather", "arguments": {"city": "Paris"}
    }  # fmt: skip


def test_stream_chunks_join_into_reasoning_and_text() -> None:
    acc = OllamaStreamAccumulator(chat=True)
    with ReplayServer(recorded("test_chat_stream.yaml")) as server, client_of(server.url) as client:
        chunks = 0
        for chunk in client.chat(MODEL, USER, stream=True):
            acc.add(chunk)
            chunks += 1
    assert chunks > 100  # served one NDJSON line per chunk
    outcome = acc.outcome()
    assert acc.end_reason() == sc.STREAM_END_EXHAUSTED
    assert outcome.usage is not None and (outcome.usage.input_tokens, outcome.usage.output_tokens) == (21, 889)
    assert outcome.output_messages is not None
    parts = outcome.output_messages[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[1]["content"] == "1\n2\n3\n4\n5"


def test_generate_stream_and_embed_made_bodies() -> None:
    acc = OllamaStreamAccumulator(chat=False)
    with ReplayServer([generate_interaction(True), embed_interaction()]) as server, client_of(server.url) as client:
        for chunk in client.generate(MODEL, "Why?", stream=True):
            acc.add(chunk)
        embedded = client.embed("nomic-embed-text", ["a", "b"])
    outcome = acc.outcome()
    assert outcome.finish_reasons == ["length"]
    assert outcome.output_messages is not None
    assert outcome.output_messages[0] == {
        "role": "assistant",
        "parts": [{"type": "reasoning", "content": "Rayleigh."}, {"type": "text", "content": "Blue."}],
        "finish_reason": "length",
    }
    assert codec.embedding_dimensions(embedded) == 3
    embed_outcome = codec.outcome_of("embed", embedded)
    assert embed_outcome.usage is not None and embed_outcome.usage.input_tokens == 4


def test_the_request_body_and_its_options_are_read() -> None:
    """The params are the body the SDK's ``chat`` hands ``_request`` (built here as it builds it), path-routed."""
    body = ChatRequest(
        model=MODEL,
        messages=[ollama.Message(role="assistant", content="", thinking="t",
                                 tool_calls=[{"function": {"name": "f", "arguments": {"a": 1}}}])],
        options=ollama.Options(temperature=0, top_p=0.5, top_k=4, num_predict=9, seed=3, stop=["x"]),
        format={"type": "object"}, stream=True,
    ).model_dump(exclude_none=True)  # fmt: skip
    routed = codec.request_params((ollama.ChatResponse, "POST", "/api/chat"), {"json": body, "stream": True})
    assert routed is not None
    kind, params = routed
    assert kind == "chat"
    assert params["model"] == MODEL
    assert params is not body  # the SDK's own dict is never written
    assert codec.request_params((ollama.ListResponse, "GET", "/api/tags"), {}) is None
    assert codec.request_params((ollama.ChatResponse, "POST", "/api/chat"), {"json": {"model": ""}}) == ("chat", {})
    attrs = codec.request_attributes("chat", params, True, 10_000)
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.0
    assert attrs[sc.GEN_AI_REQUEST_TOP_P] == 0.5
    assert attrs[sc.GEN_AI_REQUEST_TOP_K] == 4
    assert attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 9
    assert attrs[sc.GEN_AI_REQUEST_SEED] == 3
    assert attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] == ["x"]
    assert attrs[sc.GEN_AI_REQUEST_STREAM] is True
    assert attrs[sc.GEN_AI_OUTPUT_TYPE] == "json"
    assert sc.GEN_AI_REQUEST_REASONING_LEVEL not in attrs
    level = codec.request_attributes("chat", {**params, "think": "high"}, False, 10_000)
    assert level[sc.GEN_AI_REQUEST_REASONING_LEVEL] == "high"
    assert codec.input_messages(params["messages"])[0]["parts"] == [
        {"type": "reasoning", "content": "t"},
        {"type": "tool_call", "id": None, "name": "f", "arguments": {"a": 1}},
    ]


def test_callable_tools_are_described_as_the_sdk_sends_them() -> None:
    def add_two_numbers(a: int, b: int) -> int:
        """Add two numbers.

        Args:
          a: The first number.
          b: The second number.
        """
        return a + b

    tools = codec.tool_definitions({"tools": [add_two_numbers]})
    assert tools is not None
    assert tools[0]["name"] == "add_two_numbers"
    assert tools[0]["description"] == "Add two numbers."
    assert tools[0]["parameters"]["required"] == ["a", "b"]
