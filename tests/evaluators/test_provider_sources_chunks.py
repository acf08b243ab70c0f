"""A stored trace's provider retrieval results as RAG context: the shapes no instrumentation here records yet.

A Trace read back from storage (or written by another instrumentation) may hold an OpenAI Responses
``file_search_call`` with its ``results`` (``{file_id, filename, score, text}``, asked with
``include=["file_search_call.results"]``) as a tool result: each result with text is one chunk named by its file.
A trace stored by an earlier evaltrace holds an Anthropic server tool's result as its type alone: no chunk.
"""

from __future__ import annotations

from evaltrace.evaluators._base import context_chunks
from evaltrace.schema import ToolCall, TraceMessage

from .factories import build_trace


def test_a_file_search_result_gives_each_file_chunk_by_its_file_name() -> None:
    results = [
        {"file_id": "file-1", "filename": "policy.pdf", "score": 0.9, "text": "Refunds within 30 days."},
        {"file_id": "file-2", "filename": "empty.pdf", "score": 0.2, "text": ""},
    ]
    trace = build_trace("Refunds are accepted within 30 days.", question="Refund window?")
    trace.messages = [
        TraceMessage(role="user", content="Refund window?"),
        TraceMessage(role="assistant", tool_call=ToolCall(id="fs_1", name="file_search_call", arguments={})),
        TraceMessage(role="tool", tool_call_id="fs_1", content={"type": "file_search_call", "results": results}),
        TraceMessage(role="assistant", content="Refunds are accepted within 30 days."),
    ]
    assert context_chunks(trace) == ["policy.pdf\nRefunds within 30 days."]


def test_a_server_tool_result_stored_as_its_type_alone_is_no_chunk() -> None:
    """What evaltrace recorded of an Anthropic server tool's result before it kept its content: only its type."""
    trace = build_trace("Refunds are accepted within 30 days.", question="Refund window?")
    trace.messages = [
        TraceMessage(role="user", content="Refund window?"),
        TraceMessage(role="assistant", tool_call=ToolCall(id="m_1", name="search_docs", arguments={})),
        TraceMessage(role="tool", tool_call_id="m_1", content={"type": "mcp_tool_result"}),
        TraceMessage(role="tool", content="Refund window: 30 days."),  # a result with text still counts
        TraceMessage(role="assistant", content="Refunds are accepted within 30 days."),
    ]
    assert context_chunks(trace) == ["Refund window: 30 days."]


def test_an_application_search_tool_typed_as_a_search_keeps_its_described_results() -> None:
    """A result object of the application's own tool whose ``type`` names a search is read as one: by source."""
    hits = [{"name": "Refund policy", "description": "Refunds within 30 days of delivery."}, {"name": "No text"}]
    trace = build_trace("Refunds are accepted within 30 days.", question="Refund window?")
    trace.messages = [
        TraceMessage(role="assistant", tool_call=ToolCall(id="s_1", name="kb_search", arguments={})),
        TraceMessage(role="tool", tool_call_id="s_1", content={"type": "search", "hits": hits}),
    ]
    assert context_chunks(trace) == ["Refund policy\nRefunds within 30 days of delivery."]
