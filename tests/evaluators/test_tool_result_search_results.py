"""A tool that returns search results gives the RAG evaluators one context chunk per source, named by it.

RAG with citations has an application's search tool return Anthropic-style ``search_result`` blocks (``source``,
``title``, the passage as ``content``: a string or ``text`` blocks; ``citations`` / ``cache_control`` besides).
Before, such a result was one chunk, the JSON of every block: a judge read the keys and the sources run together,
and a passage could not be told from its neighbour. Now each source with text is a chunk, ``title - source`` then
its text; a result of any other shape (a key the block does not have, an application's own ``type``) keeps its
whole text as one chunk, as before.

The tool is a real ``@evaltrace.tool`` function traced by the real OTel SDK (in-memory exporter), the trace built
by the real mapping; the other shapes are traces as stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings
from evaltrace.evaluators._base import as_text, context_chunks
from evaltrace.mapping import trace_from_spans
from evaltrace.mapping._messages import tool_content
from evaltrace.schema import ToolCall, Trace, TraceMessage

from .factories import build_trace

POLICY = {
    "type": "search_result",
    "source": "https://example.invalid/policy",
    "title": "Refund policy",
    "content": [{"type": "text", "text": "Refunds are accepted within 30 days."}],
    "citations": {"enabled": True},
}
CREDIT = {
    "type": "search_result",
    "source": "kb://credit",
    "title": "Store credit",
    "content": [{"type": "text", "text": "Store credit is offered "}, {"type": "text", "text": "after that."}],
    "cache_control": {"type": "ephemeral"},
}
EMPTY = {"type": "search_result", "source": "kb://empty", "title": "Empty", "content": []}
CHUNKS = [
    "Refund policy - https://example.invalid/policy\nRefunds are accepted within 30 days.",
    "Store credit - kb://credit\nStore credit is offered after that.",
]


@pytest.fixture
def captured(provider: TracerProvider) -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    yield
    settings.replace(previous)


@evaltrace.tool
def search_policy(query: str) -> list[dict[str, Any]]:
    return [POLICY, CREDIT, EMPTY]


@evaltrace.agent
def support_agent(question: str) -> str:
    search_policy(question)
    return "Refunds are accepted within 30 days."


@pytest.mark.usefixtures("captured")
def test_a_traced_tool_returning_search_results_gives_one_chunk_per_source(exporter: InMemorySpanExporter) -> None:
    support_agent("Refund window?")
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [r.name for r in trace.tool_results] == ["search_policy"]
    # One chunk per source with text, titled and sourced; the empty one gives none, the citations flag is no text.
    assert context_chunks(trace) == CHUNKS


def _shown(*contents: Any) -> Trace:
    """A trace whose model was shown each of ``contents`` as a tool's result."""
    trace = build_trace("Refunds are accepted within 30 days.", question="Refund window?")
    trace.messages = [TraceMessage(role="user", content="Refund window?")]
    for n, content in enumerate(contents):
        trace.messages.append(TraceMessage(role="assistant", tool_call=ToolCall(id=f"t{n}", name="kb", arguments={})))
        # As the mapping keeps a tool's result: a list as its JSON text, an object or a string as it is.
        trace.messages.append(TraceMessage(role="tool", tool_call_id=f"t{n}", content=tool_content(content)))
    return trace


def test_the_recorded_part_shape_and_a_single_block_are_read_source_by_source() -> None:
    """The instrumentations record a search result's text as one string (Anthropic's list, Bedrock's one block)."""
    recorded = [{"type": "search_result", "source": "kb://a", "title": "A", "content": "Refunds within 30 days."}]
    single = {"type": "search_result", "source": "kb://b", "title": "B", "content": "Credit after that."}
    trace = _shown(recorded, single)
    assert context_chunks(trace) == ["A - kb://a\nRefunds within 30 days.", "B - kb://b\nCredit after that."]


@pytest.mark.parametrize(
    "content",
    [
        [dict(POLICY, score=0.9)],  # a key a search_result block does not have: the application's data
        [POLICY, {"type": "text", "text": "A note of the tool's."}],  # not search results only
        [dict(POLICY, source=None)],  # no source
        [dict(POLICY, content=[{"type": "image", "source": {}}])],  # content that is not text
        {"type": "product_search", "title": "Shoes", "content": "Size 42."},  # another type
        [{k: v for k, v in POLICY.items() if k != "title"}],  # no title
        [dict(POLICY, content=[{"type": "text", "text": None}])],  # a text block without text
        [dict(POLICY, content=[{"type": "text", "text": "30 days.", "lang": "en"}])],  # a text block's extra key
    ],
    ids=["extra-key", "mixed", "no-source", "image-content", "other-type", "no-title", "text-none", "text-extra-key"],
)
def test_any_other_result_keeps_its_whole_text_as_one_chunk(content: Any) -> None:
    # The whole result, as before: its JSON text, not split into sources.
    assert context_chunks(_shown(content)) == [as_text(tool_content(content))]


def test_a_result_of_search_results_without_text_is_no_context() -> None:
    """Only empty sources: nothing to judge against (the other tool's text still counts)."""
    assert context_chunks(_shown([EMPTY], "Refund window: 30 days.")) == ["Refund window: 30 days."]
