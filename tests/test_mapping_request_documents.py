"""The documents a model call's request sent (marked text parts, search results) become RAG context chunks.

Spans as any instrumentation (or another process) writes them: ``gen_ai.input.messages`` with text parts marked
``"document": true`` and ``search_result`` parts. The mapping (eager and lazy alike: conftest checks both) puts each
one's chunk in ``Trace.extra["provider_sources"]``, which ``context_chunks`` reads beside the tool results.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace.evaluation._mapping import build_trace
from evaltrace.evaluators._base import MissingInputError, context_chunks, question_text
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace


def _trace(provider: TracerProvider, exporter: InMemorySpanExporter, *calls: list[dict[str, Any]]) -> Trace:
    """A trace of one model call per ``calls`` entry, each sent those input messages."""
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("rag"):
        for messages in calls:
            with tracer.start_as_current_span("chat m") as span:
                span.set_attribute(sc.GEN_AI_OPERATION_NAME, "chat")
                span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, json.dumps(messages, separators=(",", ":")))
                answer = [{"role": "assistant", "parts": [{"type": "text", "content": "5 euros."}]}]
                span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(answer))
    return trace_from_spans(exporter.get_finished_spans())


def _document(text: Any, **keys: Any) -> dict[str, Any]:
    return {"type": "text", "content": text, "document": True, **keys}


QUESTION = {"role": "user", "parts": [{"type": "text", "content": "What does soup cost?"}]}


def test_each_document_once_in_order_across_calls(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """A follow-up call sends the same documents again: each is one chunk, in the order first sent."""
    documents = {"role": "user", "parts": [_document("Soup: 5 euros.", id="menu"), _document("Open at 9h.")]}
    more = {"role": "user", "parts": [_document("Bread is free.", title="Card")]}
    trace = _trace(provider, exporter, [documents, QUESTION], [documents, more, QUESTION])
    assert context_chunks(trace) == ["Soup: 5 euros.", "Open at 9h.", "Card\nBread is free."]
    assert question_text(trace) == "What does soup cost?"


def test_what_is_not_a_document_with_text_is_no_chunk(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """Unmarked text (the question), a marker that is not ``true``, a document without text: none is context."""
    parts = [
        _document("   "),
        _document(None),
        {"type": "text", "content": "Soup: 5 euros.", "document": "yes"},
        {"type": "uri", "modality": "document", "uri": "https://x.example/a.pdf", "document": True},
        {"type": "search_result", "source": "https://x.example", "title": "Empty", "content": ""},
    ]
    trace = _trace(provider, exporter, [{"role": "user", "parts": parts}, QUESTION])
    with pytest.raises(MissingInputError, match="documents sent"):
        context_chunks(trace)


def test_a_tool_messages_search_results_are_read_once(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """A tool's search results are read source by source, once: the same result given again is no second chunk."""
    result = [{"type": "search_result", "source": "https://x.example", "title": "Menu", "content": "Soup: 5 euros."}]
    messages = [
        QUESTION,
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "search", "arguments": {}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": result}]},
        {"role": "user", "parts": [result[0]]},  # the same result given again, in a user message: a source
    ]
    trace = _trace(provider, exporter, messages)
    # The tool's result is its source's chunk (no longer its JSON); the user message's copy is the same chunk.
    assert context_chunks(trace) == ["Menu - https://x.example\nSoup: 5 euros."]


def test_a_marked_message_of_documents_only_is_not_the_question(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Groq and Cohere send ``documents`` as a user message before the question: the question is the next one."""
    documents = {"role": "user", "parts": [_document("Soup: 5 euros.")]}
    trace = _trace(provider, exporter, [documents, QUESTION])
    assert [m.role for m in trace.messages][:2] == ["user", "user"]
    assert question_text(trace) == "What does soup cost?"
    assert trace.messages[0].text() == "Soup: 5 euros."  # a judge's transcript still shows the documents


def _call(provider: TracerProvider, messages: list[dict[str, Any]], system: str | None = None) -> ReadableSpan:
    """A model call that is its own trace's root, its content attributes as the instrumentations write them."""
    instructions = [{"type": "text", "content": system}] if system else None
    with provider.get_tracer("test").start_as_current_span("chat m") as span:
        span.set_attribute(sc.GEN_AI_OPERATION_NAME, "chat")
        span.set_attributes(list_values.request_content_attributes(messages, instructions, None, 100_000))
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Soup costs 5 euros."}]}]
        span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(answer))
    assert isinstance(span, ReadableSpan)
    return span


@pytest.mark.parametrize(
    ("parts", "system"),
    [
        pytest.param([_document("Soup: 5 euros.")], "Summarize.", id="system-and-documents"),
        pytest.param([_document("Soup: 5 euros."), _document("Bread is free.")], None, id="two-documents"),
        pytest.param([_document("Soup: 5 euros.")], None, id="one-document"),
    ],
)
def test_documents_without_a_question_ask_nothing(
    provider: TracerProvider, exporter: InMemorySpanExporter, parts: list[dict[str, Any]], system: str | None
) -> None:
    """A call sent documents and no question: no question (its evaluators are not run), never its input as one.

    Before, the judge's question was the whole input as JSON (system prompt, document markers) or the document.
    """
    span = _call(provider, [{"role": "user", "parts": parts}], system)
    assert (span.attributes or {})[sc.INPUT_MIME_TYPE] == sc.MIME_JSON  # a document alone is no plain-text prompt
    for trace in (trace_from_spans(exporter.get_finished_spans()), build_trace([span], span)):
        assert trace.input == {}
        with pytest.raises(MissingInputError, match="no question"):
            question_text(trace)
        assert context_chunks(trace) == [p["content"] for p in parts]


def test_each_call_sees_its_own_documents(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """Two calls sent different documents: the run's context is both, each step's only what it was sent."""
    with provider.get_tracer("test").start_as_current_span("agent"):
        first = _call(provider, [{"role": "user", "parts": [_document("Soup: 5 euros.")]}, QUESTION])
        second = _call(provider, [{"role": "user", "parts": [_document("Bread is free.")]}, QUESTION])
        again = _call(provider, [{"role": "user", "parts": [_document("Soup: 5 euros.")]}, QUESTION])
    assert context_chunks(trace_from_spans(exporter.get_finished_spans())) == ["Soup: 5 euros.", "Bread is free."]
    for span, chunks in ((first, ["Soup: 5 euros."]), (second, ["Bread is free."]), (again, ["Soup: 5 euros."])):
        step = build_trace([span], span)
        assert context_chunks(step) == chunks
        assert question_text(step) == "What does soup cost?"


def test_a_tool_messages_own_documents_are_not_chunks_of_their_own(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A search result or a document among a tool message's parts is that message's, not a request document."""
    messages = [
        QUESTION,
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "search", "arguments": {}}]},
        {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": "t1", "response": "Soup: 5 euros."},
            {"type": "search_result", "source": "https://x.example", "title": "Menu", "content": "Bread is free."},
            _document("Open at 9h."),
        ]},
    ]  # fmt: skip
    chunks = context_chunks(_trace(provider, exporter, messages))
    assert chunks[0] == "Soup: 5 euros."
    # Its other parts are the tool message's (as the mapping shows them), never request documents' chunks.
    assert "Menu - https://x.example\nBread is free." not in chunks and "Open at 9h." not in chunks


def test_documents_in_spaced_json_are_read(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """Another process may write its messages with a space after each colon: the documents are still context."""
    with provider.get_tracer("test").start_as_current_span("chat m") as span:
        span.set_attribute(sc.GEN_AI_OPERATION_NAME, "chat")
        span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, json.dumps([{"role": "user", "parts": [_document("Soup.")]}]))
    assert '"document": true' in str((span.attributes or {})[sc.GEN_AI_INPUT_MESSAGES])
    assert context_chunks(trace_from_spans(exporter.get_finished_spans())) == ["Soup."]


def test_a_tool_result_of_documents_shows_no_marker(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """A tool answered with documents (Cohere): its result as the judge reads it holds no evaltrace marker."""
    result = [_document('{"title": "Menu", "text": "Soup: 5 euros."}', id="d1"), {"type": "text", "content": "x"}]
    messages = [
        QUESTION,
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "menu", "arguments": {}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": result}]},
    ]
    trace = _trace(provider, exporter, messages)
    unmarked = [{"type": "text", "content": '{"title": "Menu", "text": "Soup: 5 euros."}', "id": "d1"}, result[1]]
    assert context_chunks(trace) == [json.dumps(unmarked, ensure_ascii=False, separators=(",", ":"))]
    assert next(m for m in trace.messages if m.role == "tool").content == context_chunks(trace)[0]


@pytest.mark.parametrize("empty", ["{}", "[]"])
def test_an_empty_data_document_is_no_chunk(
    provider: TracerProvider, exporter: InMemorySpanExporter, empty: str
) -> None:
    """``data={}`` is recorded as ``{}``: nothing to judge against, no chunk."""
    trace = _trace(provider, exporter, [{"role": "user", "parts": [_document(empty), _document("Soup.")]}, QUESTION])
    assert context_chunks(trace) == ["Soup."]
