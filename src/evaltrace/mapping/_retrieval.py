"""Retrieved documents: the RAG context a trace's retrieval spans and model calls recorded, for the RAG evaluators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace._internal.sources import PROVIDER_SOURCES as PROVIDER_SOURCES
from evaltrace._internal.sources import source_chunk, unique
from evaltrace.mapping._request_documents import request_documents
from evaltrace.mapping._spans import json_attr, loads

_SEARCH_RESULT = '"search_result"'  # in the output messages' JSON text when any part is one


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


def provider_sources(llm_read: Sequence[tuple[ReadableSpan, Mapping[str, Any]]]) -> list[str]:
    """The sources the provider itself retrieved for the model calls' answers, one chunk each, once, in order.

    They are the ``search_result`` parts of the calls' output messages: a Gemini answer's grounding chunks, which
    its instrumentation keeps under the answer text part's ``grounding`` (or beside the parts of an answer without
    text). Only the outputs are read: a source is what this call was grounded on, not the history's. The answer's
    segments each source supports (its ``citations``) are the model's words and never part of the chunk, nor is a
    source without text (see :mod:`evaltrace._internal.sources`). The JSON is parsed only when its text names a
    ``search_result``: every other model call costs one substring search.
    """
    chunks: list[str] = []
    for _, span_attrs in llm_read:
        raw = span_attrs.get(sc.GEN_AI_OUTPUT_MESSAGES)
        if type(raw) is not str or _SEARCH_RESULT not in raw:
            continue
        messages = loads(raw)  # a note about a cut or broken value is the conversation's to write, once
        for message in messages if isinstance(messages, list) else ():
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if not isinstance(part, dict):
                    continue
                grounding = part.get("grounding")
                for found in [part, *grounding] if isinstance(grounding, list) else (part,):
                    if isinstance(found, dict) and found.get("type") == "search_result":
                        chunk = source_chunk(found)
                        if chunk is not None:
                            chunks.append(chunk)
    chunks.extend(request_documents(llm_read))  # and the documents the requests sent (_request_documents)
    return unique(chunks)
