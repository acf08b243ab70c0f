"""Retrieved documents: the RAG context a trace's retrieval spans recorded, for the RAG evaluators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace.mapping._spans import json_attr


def retrieved_contexts(read: Sequence[tuple[ReadableSpan, Mapping[str, Any]]], notes: list[str]) -> list[str]:
    """The text of every document the spans' ``gen_ai.retrieval.documents`` hold, in span start order.

    Entries are ``{"content": text, ...}`` objects (what evaltrace's retriever spans record) or plain strings;
    entries without text (the spec's example records only ids and scores) give nothing to judge and are skipped.
    """
    chunks: list[str] = []
    for span, span_attrs in read:
        if sc.GEN_AI_RETRIEVAL_DOCUMENTS not in span_attrs:
            continue
        documents = json_attr(span, sc.GEN_AI_RETRIEVAL_DOCUMENTS, notes, span_attrs)
        if not isinstance(documents, list):
            continue
        for document in documents:
            content = document.get("content") if isinstance(document, dict) else document
            if isinstance(content, str) and content:
                chunks.append(content)
    return chunks
