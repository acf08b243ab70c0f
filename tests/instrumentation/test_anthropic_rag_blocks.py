"""Search results and content documents given to Claude keep their text in ``gen_ai.input.messages``.

RAG with citations passes retrieved passages as ``search_result`` blocks (in a user message or a tool result) or
as a ``document`` whose source is a list of content blocks. Before, a search result was a bare
``{"type": "search_result"}`` and such a document the placeholder ``<content source>``: the context an answer
was grounded on was not in the trace. The request goes through the real client to a replayed answer.
"""

from __future__ import annotations

from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, Reply, attrs_json, client  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

PASSAGES = ["Refunds are accepted within 30 days.", " Store credit is offered after that."]
SEARCH_RESULT: dict[str, Any] = {
    "type": "search_result",
    "source": "https://example.invalid/policy",
    "title": "Refund policy",
    "content": [{"type": "text", "text": text} for text in PASSAGES],
    "citations": {"enabled": True},
}
DOCUMENT: dict[str, Any] = {
    "type": "document",
    "source": {"type": "content", "content": [{"type": "text", "text": text} for text in PASSAGES]},
    "title": "Policy",
    "citations": {"enabled": True},
}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_search_results_and_content_documents_keep_their_text(exporter: InMemorySpanExporter) -> None:
    messages = [
        {"role": "user", "content": [SEARCH_RESULT, DOCUMENT, {"type": "text", "text": "Can I get a refund?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [SEARCH_RESULT]}]},
    ]
    api, server = client([Reply("text.json")])
    api.messages.create(model=MODEL, max_tokens=256, messages=messages)
    assert server.requests[0]["messages"] == messages  # sent as given
    (span,) = exporter.get_finished_spans()
    user, _, tool = attrs_json(span, "gen_ai.input.messages")
    joined = "".join(PASSAGES)
    result = {"type": "search_result", "source": SEARCH_RESULT["source"], "title": "Refund policy", "content": joined}
    assert user["parts"] == [
        result,
        # The document's text, as a plain-text document's, marked a document with its title (RAG context).
        {"type": "text", "content": joined, "document": True, "title": "Policy"},
        {"type": "text", "content": "Can I get a refund?"},
    ]
    assert tool == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": [result]}]}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_content_document_with_an_image_is_still_a_placeholder_never_a_payload(
    exporter: InMemorySpanExporter,
) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    document = {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "a"}, image]}}
    api, _ = client([Reply("text.json")])
    api.messages.create(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": [document]}])
    (span,) = exporter.get_finished_spans()
    (user,) = attrs_json(span, "gen_ai.input.messages")
    assert user["parts"] == [{"type": "uri", "modality": "document", "uri": "<content source>"}]


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_content_document_of_one_string_and_a_search_result_without_text_are_recorded(
    exporter: InMemorySpanExporter,
) -> None:
    document = {"type": "document", "source": {"type": "content", "content": "One plain passage."}}
    bare = {"type": "search_result", "source": "https://example.invalid/empty", "title": "Empty", "content": []}
    api, _ = client([Reply("text.json")])
    api.messages.create(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": [document, bare]}])
    (span,) = exporter.get_finished_spans()
    (user,) = attrs_json(span, "gen_ai.input.messages")
    assert user["parts"] == [
        {"type": "text", "content": "One plain passage.", "document": True},
        {"type": "search_result", "source": "https://example.invalid/empty", "title": "Empty", "content": ""},
    ]
