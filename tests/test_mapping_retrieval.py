"""Retrieved documents on spans (``gen_ai.retrieval.documents``) become the Trace's ``extra["contexts"]``."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.mapping import trace_from_spans


def _trace(provider: TracerProvider, exporter: InMemorySpanExporter, *documents: str) -> dict[str, object]:
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("rag"):
        for value in documents:
            with tracer.start_as_current_span("retrieval docs") as span:
                span.set_attribute("gen_ai.retrieval.documents", value)
    return trace_from_spans(exporter.get_finished_spans()).extra


def test_contents_of_every_retrieval_span_in_order(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    first = json.dumps([{"id": "a", "score": 0.9, "content": "Paris is in France."}, "A plain string document."])
    second = json.dumps([{"content": "Lyon is in France.", "metadata": {"page": 2}}])
    extra = _trace(provider, exporter, first, second)
    assert extra["contexts"] == ["Paris is in France.", "A plain string document.", "Lyon is in France."]


def test_documents_without_text_give_no_context(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """The spec's example records ids and scores only; text that is not a JSON list is not documents either."""
    extra = _trace(provider, exporter, json.dumps([{"id": "doc_123", "score": 0.95}]), "not json", '{"a": 1}')
    assert "contexts" not in extra
