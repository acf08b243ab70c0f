"""The documents an application sent the model with its request, as RAG context chunks.

A request may carry the documents the answer is to rest on: Groq's and Cohere's ``documents`` parameter, a
``document`` content part (Groq, Cohere) or block (Anthropic), an Anthropic ``search_result`` block. The
instrumentations record a document as a ``text`` part marked ``"document": true`` (``parts.DOCUMENT_KEY``, with
its ``title`` / ``id`` / ``context`` when given) and a search result as a ``search_result`` part, in
``gen_ai.input.messages``. Those of every message but a tool's (user, system and assistant messages alike) are
the context a RAG evaluator judges the answer against, beside the sources the provider retrieved itself
(``_retrieval.provider_sources``). A tool message's are not read here: a tool's result is already the evaluators'
context, as the model was shown it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace._internal.openai.parts import DOCUMENT_KEY
from evaltrace._internal.sources import source_chunk
from evaltrace.mapping._spans import loads

# What the messages' JSON text holds when any part is a document or a search result: a request without either
# costs two substring searches, never a parse. The key alone (``part_chunk`` reads its value): a span another
# process wrote may have a space after the colon.
_DOCUMENT = f'"{DOCUMENT_KEY}":'
_SEARCH_RESULT = '"search_result"'
# Which of a document part's keys its chunk shows: the title first, the text, then what the caller said of it.
_SHOWN = ("title", "context")


def request_documents(llm_read: Sequence[tuple[ReadableSpan, Mapping[str, Any]]]) -> list[str]:
    """The chunk of every document and search result the model calls' requests sent, in order (repeats kept).

    Every call's input is read, as each call was given its documents: a follow-up that sends them again gives
    the same chunks, which the caller's de-duplication drops.
    """
    chunks: list[str] = []
    for _, span_attrs in llm_read:
        raw = span_attrs.get(sc.GEN_AI_INPUT_MESSAGES)
        if type(raw) is not str or (_DOCUMENT not in raw and _SEARCH_RESULT not in raw):
            continue
        messages = loads(raw)  # a note about a cut or broken value is the conversation's to write, once
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, dict) or message.get("role") == "tool":
                continue
            parts = message.get("parts")
            for part in parts if isinstance(parts, list) else ():
                chunk = part_chunk(part) if isinstance(part, dict) else None
                if chunk is not None:
                    chunks.append(chunk)
    return chunks


def part_chunk(part: dict[str, Any]) -> str | None:
    """A document or search-result part as a chunk (title, then text); None for any other part or no text."""
    if part.get("type") == "search_result":
        return source_chunk(part)
    if part.get(DOCUMENT_KEY) is not True or part.get("type") != "text":
        return None
    text = part.get("content")
    if not isinstance(text, str) or not text.strip():
        return None
    if text.startswith(("{", "[")):
        # A document given as data (Groq's ``json`` source, Cohere's ``data``) is its JSON text: its own title and
        # text fields make the chunk when it has a text field; other data is read as the JSON it was sent as.
        data = loads(text)
        if isinstance(data, dict | list) and not data:
            return None  # empty data (``data={}``): nothing to judge against
        if isinstance(data, dict) and (chunk := source_chunk(data)) is not None:
            return chunk
    return source_chunk({"content": text, **{key: part[key] for key in _SHOWN if key in part}})
