"""A stored trace's provider retrieval results as RAG context: the shapes no instrumentation here records yet.

A Trace read back from storage (or written by another instrumentation) may hold an OpenAI Responses
``file_search_call`` with its ``results`` (``{file_id, filename, score, text}``, asked with
``include=["file_search_call.results"]``) as a tool result: each result with text is one chunk named by its file.
A trace stored by an earlier evaltrace holds an Anthropic server tool's result as its type alone: no chunk.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.evaluators._base import MissingInputError, as_text, context_chunks
from evaltrace.schema import ToolCall, Trace, TraceMessage

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


def _shown(*contents: Any) -> Trace:
    """A trace whose model was shown each of ``contents`` as a tool's result."""
    trace = build_trace("Refunds are accepted within 30 days.", question="Refund window?")
    trace.messages = [TraceMessage(role="user", content="Refund window?")]
    for n, content in enumerate(contents):
        trace.messages.append(TraceMessage(role="assistant", tool_call=ToolCall(id=f"t{n}", name="tool", arguments={})))
        trace.messages.append(TraceMessage(role="tool", tool_call_id=f"t{n}", content=content))
    return trace


# An application's own tool results whose type merely contains a retrieval word: each is the application's data and
# keeps the one chunk it had before provider sources were read (its JSON), never read by the provider rules.
APPLICATION_RESULTS: list[dict[str, Any]] = [
    {"type": "product_search", "results": [{"sku": "A1", "price": 20}]},  # was [], no text key
    {"type": "research", "summary": "Refunds take 30 days.", "sources": [{"doi": "10.1/x", "year": 2024}]},
    {"type": "search_results", "results": [{"text": "Refunds: 30 days.", "author": "Ops", "rank": 1}]},
    {"type": "search", "hits": [{"name": "Refund policy", "description": "Refunds within 30 days."}]},
    {"type": "prefetch", "content": "cached refund page"},
    {"type": "browse_history", "pages": [{"url": "https://shop.example/refunds", "text": "30 days"}]},
    {"type": "retrieval_stats", "count": 3},
    {"type": "ok"},  # a type alone, not a provider's result block
]


@pytest.mark.parametrize("content", APPLICATION_RESULTS, ids=[c["type"] for c in APPLICATION_RESULTS])
def test_an_application_result_named_like_a_search_keeps_its_whole_chunk(content: dict[str, Any]) -> None:
    """Before, any type containing search/fetch/retriev/browse was read by the provider rules: data was lost."""
    assert context_chunks(_shown(content)) == [as_text(content)]


def test_a_groq_search_gives_each_block_of_its_output_and_keeps_one_of_another_shape() -> None:
    output = (
        "Title: Refunds\nURL: https://shop.example/refunds\nContent: Refunds within 30 days.\nScore: 0.9\n\n"
        "Title: a block Groq wrote without its URL\nContent: kept as it is"
    )
    browsed = {"type": "browser_search", "output": "Title: Returns\nURL: https://r.example\nContent: Free returns."}
    assert context_chunks(_shown({"type": "search", "output": output}, browsed)) == [
        "Refunds - https://shop.example/refunds\nRefunds within 30 days.",
        "Title: a block Groq wrote without its URL\nContent: kept as it is",
        "Returns - https://r.example\nFree returns.",
    ]


def test_a_provider_sources_informative_fields_are_kept_and_its_score_is_not() -> None:
    """A field beyond text, title and URL that says something (a date) is a line of the chunk; a ranking score not."""
    results = {"results": [{"title": "Refunds", "url": "https://shop.example/r", "content": "30 days.",
                            "published_date": "2025-09-17", "score": 0.93, "verified": True}]}  # fmt: skip
    assert context_chunks(_shown({"type": "search", "search_results": results})) == [
        "Refunds - https://shop.example/r\n30 days.\npublished_date: 2025-09-17"
    ]


def test_the_answers_citations_and_a_rendered_chip_under_a_source_without_text_are_no_context() -> None:
    """``citations`` hold the answer's own segments, ``rendered_content`` a suggestions chip: never a source."""
    source = {"title": "Refunds", "url": "https://shop.example/r", "citations": [{"text": "Refunds take 30 days."}]}
    chip = {"text": "<div class='chip'>refund window</div>"}
    result = {"type": "google_search", "response": [source], "rendered_content": chip}
    with pytest.raises(MissingInputError):
        context_chunks(_shown(result))


def _nested(depth: int) -> dict[str, Any]:
    """A file search result whose one source sits ``depth`` levels below the result object."""
    value: Any = {"text": f"source at depth {depth}"}
    for _ in range(depth - 2):  # the result's "results" list and its item are two of the levels
        value = {"inner": value}
    return {"type": "file_search_call", "results": [value]}


def test_a_source_nested_deeper_than_the_walk_goes_is_not_read() -> None:
    """A result nests its sources a few levels down at most: the walk stops at depth 8, bounding its work."""
    assert context_chunks(_shown(_nested(8))) == ["source at depth 8"]
    with pytest.raises(MissingInputError):
        context_chunks(_shown(_nested(9)))
