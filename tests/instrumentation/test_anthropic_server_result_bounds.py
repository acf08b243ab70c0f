"""An Anthropic server tool's result text is bounded: a long fetched page must not cost the answer or the question.

``max_attribute_length`` (32,768 characters by default) caps a whole messages attribute: before, a fetched page
longer than that was recorded whole in the output message, so the attribute became a truncation marker. The
answer was lost (``final_answer`` None: every answer evaluator skipped), and so was the next turn's input (the
page is in the history sent back), the user's question with it. Now each server result text (a page, an MCP
tool's text, a code run's stdout and stderr) keeps its first ``1/SERVER_TEXT_SHARE`` of the cap and says it was
cut as a capped value does (``evaltrace.truncated``, ``original_lengths``).

Also what each result keeps: an MCP error's flag (its text is no context), a search result's ``page_age``, a code
run's stderr and return code. No recording holds these blocks: the messages are validated by the SDK's own
``BetaMessage`` type and served to the real anthropic client, whole and streamed (``anthropic_replay``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, inline_client  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from test_anthropic_server_tools import ASK, MESSAGE  # noqa: E402

from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace._internal.anthropic.request import SERVER_TEXT_SHARE  # noqa: E402
from evaltrace._internal.jsonutil import DEFAULT_MAX_LENGTH, TRUNCATED_KEY  # noqa: E402
from evaltrace.evaluators._base import context_chunks  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

SHARE = DEFAULT_MAX_LENGTH // SERVER_TEXT_SHARE
LINE = "Lisbon, Tuesday 14:00: sunny, 24 C, light wind from the north, humidity 40 percent.\n"
PAGE = LINE * 620  # about 51,000 characters: longer than the whole attribute's cap
STDOUT = "row\n" * 12_000
STDERR = "warning: slow\n" * 4_000
ANSWER = "Sunny in Lisbon on Tuesday, 24 C."
URL = "https://weather.example/lisbon"
LONG: dict[str, Any] = {
    **MESSAGE,
    "id": "msg_01LongFetch0000000001",
    "content": [
        {"type": "server_tool_use", "id": "srvtoolu_f", "name": "web_fetch", "input": {"url": URL}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_f", "content": {
            "type": "web_fetch_result", "url": URL, "retrieved_at": "2026-11-30T10:00:00Z",
            "content": {"type": "document", "title": "Lisbon forecast",
                        "source": {"type": "text", "media_type": "text/plain", "data": PAGE}}}},
        {"type": "server_tool_use", "id": "srvtoolu_c", "name": "code_execution",
         "input": {"code": "print('row\\n' * 12000)"}},
        {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_c", "content": {
            "type": "code_execution_result", "stdout": STDOUT, "stderr": STDERR, "return_code": 1, "content": []}},
        {"type": "text", "text": ANSWER},
    ],
}  # fmt: skip
TOOLS = [
    {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1},
    {"type": "code_execution_20250825", "name": "code_execution"},
]
FOLLOW_UP = "And on Wednesday?"


def test_the_long_message_is_one_the_sdk_accepts() -> None:
    from anthropic.types.beta import BetaMessage

    assert len(PAGE) > DEFAULT_MAX_LENGTH
    assert [b.type for b in BetaMessage.model_validate(LONG).content][-1] == "text"


@pytest.mark.usefixtures("anthropic_instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_page_longer_than_the_cap_keeps_the_answer_and_the_next_turns_question(
    exporter: InMemorySpanExporter, stream: bool
) -> None:
    client = inline_client(LONG, stream=stream)
    answer = client.beta.messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS, stream=stream)
    if stream:
        list(answer)
    history = [*ASK, {"role": "assistant", "content": LONG["content"]}, {"role": "user", "content": FOLLOW_UP}]
    client.beta.messages.create(model=MODEL, max_tokens=1024, messages=history, tools=TOOLS)
    first, second = exporter.get_finished_spans()

    output = json.loads(str((first.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert isinstance(output, list)  # not a truncation marker standing for the whole attribute
    trace = trace_from_spans([first])
    assert trace.output.final_answer == ANSWER
    fetched, ran = (r.content for r in trace.tool_results)
    assert fetched == {
        "type": "web_fetch_tool_result", "url": URL, "title": "Lisbon forecast", "content": PAGE[:SHARE],
        TRUNCATED_KEY: True, "original_lengths": {"content": len(PAGE)},
    }  # fmt: skip
    assert ran == {
        "type": "code_execution_tool_result", "stdout": STDOUT[:SHARE], "stderr": STDERR[:SHARE], "return_code": 1,
        TRUNCATED_KEY: True, "original_lengths": {"stdout": len(STDOUT), "stderr": len(STDERR)},
    }  # fmt: skip
    assert context_chunks(trace)[0] == f"Lisbon forecast - {URL}\n{PAGE[:SHARE].strip()}"  # the preview is context

    sent = json.loads(str((second.attributes or {})[sc.GEN_AI_INPUT_MESSAGES]))
    assert isinstance(sent, list)
    texts = [p.get("content") for m in sent for p in m["parts"] if p.get("type") == "text"]
    assert texts == [ASK[0]["content"], ANSWER, FOLLOW_UP]  # the question and the follow-up both survive


@pytest.mark.usefixtures("anthropic_instrumented")
def test_no_cap_keeps_a_page_whole(exporter: InMemorySpanExporter) -> None:
    from evaltrace._internal import settings

    previous = settings.replace(settings.CaptureSettings(capture_content=True, max_attribute_length=0))
    try:
        inline_client(LONG, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS)
    finally:
        settings.replace(previous)
    fetched = trace_from_spans(exporter.get_finished_spans()).tool_results[0].content
    assert fetched["content"] == PAGE and TRUNCATED_KEY not in fetched


MCP_ERROR: dict[str, Any] = {
    **MESSAGE,
    "id": "msg_01McpError0000000001",
    "content": [
        {"type": "mcp_tool_use", "id": "mcptoolu_e", "name": "search_docs", "server_name": "docs",
         "input": {"query": "refunds"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_e", "is_error": True,
         "content": [{"type": "text", "text": "Error: the docs index is unavailable."}]},
        {"type": "mcp_tool_use", "id": "mcptoolu_o", "name": "search_docs", "server_name": "docs",
         "input": {"query": "refund window"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_o", "is_error": False,
         "content": [{"type": "text", "text": "Refunds within 30 days."}]},
        {"type": "text", "text": "Refunds are accepted within 30 days."},
    ],
}  # fmt: skip


@pytest.mark.usefixtures("anthropic_instrumented")
def test_an_mcp_error_is_recorded_as_one_and_is_no_context(exporter: InMemorySpanExporter) -> None:
    """The failed call's text is the tool's error, not a source: a judge must not read it as what grounds the answer."""
    servers = [{"type": "url", "url": "https://docs.example/mcp", "name": "docs"}]
    inline_client(MCP_ERROR, stream=False).beta.messages.create(
        model=MODEL, max_tokens=256, messages=ASK, mcp_servers=servers
    )
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [r.content for r in trace.tool_results] == [
        {"type": "mcp_tool_result", "content": "Error: the docs index is unavailable.", "is_error": True},
        {"type": "mcp_tool_result", "content": "Refunds within 30 days."},
    ]
    assert context_chunks(trace) == ["Refunds within 30 days."]  # its text, not the JSON around it


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_search_results_page_age_is_recorded(exporter: InMemorySpanExporter) -> None:
    result = {**MESSAGE["content"][1]["content"][0], "page_age": "November 30, 2026"}
    aged = {**MESSAGE, "content": [MESSAGE["content"][0], {**MESSAGE["content"][1], "content": [result]}]}
    inline_client(aged, stream=False).messages.create(model=MODEL, max_tokens=256, messages=ASK)
    (recorded,) = trace_from_spans(exporter.get_finished_spans()).tool_results
    assert recorded.content == {
        "type": "web_search_tool_result",
        "results": [
            {"url": "https://example.invalid/lisbon", "title": "Lisbon weather", "page_age": "November 30, 2026"}
        ],
    }


PDF_DATA = "JVBERi0xLjcK" * 2_000  # a fetched PDF's base64: never a text, never recorded
PDF: dict[str, Any] = {
    **LONG,
    "id": "msg_01PdfFetch00000000001",
    "content": [
        LONG["content"][0],
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_f", "content": {
            "type": "web_fetch_result", "url": URL, "retrieved_at": "2026-11-30T10:00:00Z",
            "content": {"type": "document", "title": "Lisbon forecast (PDF)",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_DATA}}}},
        {"type": "text", "text": ANSWER},
    ],
}  # fmt: skip


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_fetched_pdf_is_its_url_and_title_and_never_its_bytes(exporter: InMemorySpanExporter) -> None:
    inline_client(PDF, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=ASK, tools=TOOLS)
    (span,) = exporter.get_finished_spans()
    assert "JVBERi0" not in str((span.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES])
    fetched = trace_from_spans([span]).tool_results[0].content
    assert fetched == {"type": "web_fetch_tool_result", "url": URL, "title": "Lisbon forecast (PDF)"}
