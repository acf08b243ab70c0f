"""A server tool call (web search run by Anthropic) records the same part, with its input, streamed or not.

Before, a streamed call's ``server_tool_call`` part carried the search's input (its ``input_json_delta``
fragments) while the same call answered whole dropped it: one call, two records depending on the transport, and
the input of a non-streamed search (or of one in the conversation's history) was lost.

No recording with a server tool is in tests/fixtures/anthropic: the message below is written in the shape the
installed SDK's own types define (validated by ``anthropic.types.Message`` before use), and the stream is that
message cut into the events the API sends for it (``anthropic_replay.message_events``).
"""

from __future__ import annotations

from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, attrs_json, inline_client  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

SEARCH_INPUT = {"query": "weather in Lisbon today"}
MESSAGE: dict[str, Any] = {
    "id": "msg_01WebSearch0000000001",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": SEARCH_INPUT},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.invalid/lisbon",
                    "title": "Lisbon weather",
                    "encrypted_content": "RW5jcnlwdGVk",
                    "page_age": None,
                }
            ],
        },
        {"type": "text", "text": "It is sunny in Lisbon."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 2100,
        "output_tokens": 60,
        "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
    },
}


TOOLS = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}]
ASK = [{"role": "user", "content": "What is the weather in Lisbon today?"}]


def test_the_message_is_one_the_sdk_accepts() -> None:
    message = anthropic.types.Message.model_validate(MESSAGE)
    assert message.content[0].type == "server_tool_use"


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_server_tool_call_records_its_input_streamed_or_not(exporter: InMemorySpanExporter) -> None:
    inline_client(MESSAGE, stream=False).messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS)
    for _ in inline_client(MESSAGE, stream=True).messages.create(
        model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS, stream=True
    ):
        pass
    whole, streamed = exporter.get_finished_spans()
    assert attrs_json(whole, "gen_ai.output.messages") == attrs_json(streamed, "gen_ai.output.messages")
    (message,) = attrs_json(whole, "gen_ai.output.messages")
    call = message["parts"][0]
    assert call == {
        "type": "server_tool_call",
        "id": "srvtoolu_01",
        "name": "web_search",
        "server_tool_call": {"type": "server_tool_use", "arguments": SEARCH_INPUT},  # where every provider puts it
    }
    assert message["parts"][1]["type"] == "server_tool_call_response"
    assert message["parts"][1]["id"] == "srvtoolu_01"
    assert message["parts"][2] == {"type": "text", "content": "It is sunny in Lisbon."}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_server_tool_call_in_the_history_keeps_its_input(exporter: InMemorySpanExporter) -> None:
    history = [*ASK, {"role": "assistant", "content": MESSAGE["content"]}, {"role": "user", "content": "And tomorrow?"}]
    inline_client(MESSAGE, stream=False).messages.create(model=MODEL, max_tokens=1024, messages=history, tools=TOOLS)
    (span,) = exporter.get_finished_spans()
    assistant = attrs_json(span, "gen_ai.input.messages")[1]
    assert assistant["role"] == "assistant"
    assert assistant["parts"][0]["server_tool_call"] == {"type": "server_tool_use", "arguments": SEARCH_INPUT}


def _with_first_block(**changes: Any) -> dict[str, Any]:
    return {**MESSAGE, "content": [{**MESSAGE["content"][0], **changes}, *MESSAGE["content"][1:]]}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_server_tool_call_with_an_empty_input_records_it_empty_streamed_or_not(
    exporter: InMemorySpanExporter,
) -> None:
    message = _with_first_block(input={})
    inline_client(message, stream=False).messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS)
    stream = inline_client(message, stream=True)
    for _ in stream.messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS, stream=True):
        pass
    whole, streamed = exporter.get_finished_spans()
    assert attrs_json(whole, "gen_ai.output.messages") == attrs_json(streamed, "gen_ai.output.messages")
    assert attrs_json(whole, "gen_ai.output.messages")[0]["parts"][0]["server_tool_call"]["arguments"] == {}


MCP_INPUT = {"query": "refund policy", "limit": 3}
MCP_MESSAGE: dict[str, Any] = {
    **MESSAGE,
    "id": "msg_01Mcp00000000000000001",
    "content": [
        {"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "search_docs", "server_name": "docs", "input": MCP_INPUT},
        {
            "type": "mcp_tool_result",
            "tool_use_id": "mcptoolu_01",
            "is_error": False,
            "content": [{"type": "text", "text": "Refunds within 30 days."}],
        },
        {"type": "text", "text": "Refunds are accepted within 30 days."},
    ],
    "usage": {"input_tokens": 900, "output_tokens": 40},
}


def test_the_mcp_message_is_one_the_sdk_accepts() -> None:
    from anthropic.types.beta import BetaMessage

    assert BetaMessage.model_validate(MCP_MESSAGE).content[0].type == "mcp_tool_use"


@pytest.mark.usefixtures("anthropic_instrumented")
def test_an_mcp_tool_call_records_its_input_streamed_or_not(exporter: InMemorySpanExporter) -> None:
    servers = [{"type": "url", "url": "https://example.invalid/mcp", "name": "docs"}]
    ask: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": ASK, "mcp_servers": servers}
    inline_client(MCP_MESSAGE, stream=False).beta.messages.create(**ask)
    for _ in inline_client(MCP_MESSAGE, stream=True).beta.messages.create(**ask, stream=True):
        pass
    whole, streamed = exporter.get_finished_spans()
    assert attrs_json(whole, "gen_ai.output.messages") == attrs_json(streamed, "gen_ai.output.messages")
    call = attrs_json(streamed, "gen_ai.output.messages")[0]["parts"][0]
    assert call["name"] == "search_docs"
    assert call["server_tool_call"] == {"type": "mcp_tool_use", "server_name": "docs", "arguments": MCP_INPUT}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_an_answer_grounded_on_a_server_tool_is_the_traces_answer_and_the_search_its_tool_call(
    exporter: InMemorySpanExporter,
) -> None:
    """Before, the server tool's parts made the message structured content: no final_answer, so every answer
    evaluator skipped a search-grounded answer (``no_answer``), and the search was not among the tool calls."""
    from evaltrace.mapping import trace_from_spans

    inline_client(MESSAGE, stream=False).messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS)
    for _ in inline_client(MESSAGE, stream=True).messages.create(
        model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS, stream=True
    ):
        pass
    for span in exporter.get_finished_spans():
        trace = trace_from_spans([span])
        assert trace.output.final_answer == "It is sunny in Lisbon."
        assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [("srvtoolu_01", "web_search", SEARCH_INPUT)]
        (result,) = trace.tool_results
        assert result.tool_call_id == "srvtoolu_01" and result.name == "web_search"
        # Each result by its URL and title (before: the type alone); the encrypted content is never recorded.
        web = [{"url": "https://example.invalid/lisbon", "title": "Lisbon weather"}]
        assert result.content == {"type": "web_search_tool_result", "results": web}
