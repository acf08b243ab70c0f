"""Reading Q (the question) and RC (the retrieved context) out of a trace, for the evaluators that judge against them.

Inputs named in the catalogue (docs/evaluators.md) are found as follows:

* Q (question): ``trace.input`` keys ``question``, ``query``, ``input``, ``prompt``, ``message`` (first present),
  else the first user message with text of its own (not the documents sent in it: a message of documents only
  is skipped).
* RC (retrieved context): ``trace.input`` keys ``contexts``/``context``, else ``trace.extra["contexts"]`` /
  ``trace.extra["context"]`` (the mapping fills ``contexts`` from retrieval spans' documents), else the tool
  results' contents, then the provider's sources and the documents the requests sent (``extra["provider_sources"]``).
  A tool result of search results (``search_result`` blocks) is one chunk per source; a provider retrieval tool's
  result one per source with text; any other tool result one chunk, its text.

Re-exported by :mod:`evaltrace.evaluators._base`, where the evaluators import them from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaltrace._internal.openai.parts import DOCUMENT_KEY
from evaltrace._internal.sources import PROVIDER_SOURCES, search_result_chunks, server_result_chunks, unique
from evaltrace.evaluators._base import _EXPECTED_KEYS, MissingInputError, as_text, field_text, resolve_path
from evaltrace.schema import Trace, TraceMessage, derive_tool_views

_QUESTION_KEYS = ("question", "query", "input", "prompt", "message")
_CONTEXT_KEYS = ("contexts", "context", "retrieved_context", "documents")


def question_text(trace: Trace, explicit: str | None = None) -> str:
    """Return Q: an explicit path, else the usual input keys, else the first user message."""
    if explicit is not None:
        return field_text(trace, explicit)
    for key in _QUESTION_KEYS:
        value = trace.input.get(key)
        if value is not None:
            return as_text(value) or ""
    for message in trace.messages:
        if message.role == "user" and message.content is not None:
            asked = _asked(message)
            if asked is not None:  # None: a message of documents only (Groq's, Cohere's ``documents``)
                return asked
    others = [v for k, v in trace.input.items() if k not in _CONTEXT_KEYS and k not in _EXPECTED_KEYS]
    if len(others) == 1:  # a function called with one argument: that argument is the question
        return as_text(others[0]) or ""
    raise MissingInputError("no question found in trace.input or the user messages")


def _asked(message: TraceMessage) -> str | None:
    """What a user message asks: its text parts but the documents sent in it; None when it holds documents only.

    A message with images or audio gives its text parts, never a dump of its parts (and their payload).
    """
    parts = message.content.get("parts") if isinstance(message.content, dict) else None
    if not isinstance(parts, list) or not any(isinstance(p, dict) and p.get(DOCUMENT_KEY) is True for p in parts):
        return message.text() or ""
    texts = [
        p["content"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "text" and p.get(DOCUMENT_KEY) is not True
        and isinstance(p.get("content"), str) and p["content"]
    ]  # fmt: skip
    return "\n".join(texts) if texts else None


def _as_chunks(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [text for item in value if (text := as_text(item))]
    text = as_text(value)
    return [text] if text else []


def context_chunks(trace: Trace, explicit: str | None = None) -> list[str]:
    """Return RC as ranked chunks: an explicit path, else input/extra context keys, else tool results it was shown."""
    if explicit is not None:
        chunks = _as_chunks(resolve_path(trace, explicit))
    else:
        chunks = []
        for source in (trace.input, trace.extra):
            for key in _CONTEXT_KEYS:
                if not chunks and source.get(key) is not None:
                    chunks = _as_chunks(source[key])
        if not chunks:
            # Every tool result the model was shown, the history's too: an answer in a later turn may rest on
            # what an earlier turn's tool returned, though the trace's own tool_results hold only this turn's.
            # Then the sources the provider retrieved for its answers (a Gemini answer's grounding).
            seen = derive_tool_views(trace.messages)[1] if trace.messages else []
            chunks = [text for result in seen or trace.tool_results for text in _result_chunks(result.content)]
            sources = trace.extra.get(PROVIDER_SOURCES)
            if isinstance(sources, list):
                chunks.extend(s for s in sources if isinstance(s, str) and s)
            chunks = unique(chunks)
    if not chunks:
        raise MissingInputError(
            "no retrieved context (trace.input['contexts'], tool results, documents sent, or provider sources with text)"
        )
    return chunks


def _result_chunks(content: Any) -> list[str]:
    """A tool result as context chunks: search results one per source, a provider tool's sources, else its text."""
    chunks = search_result_chunks(content)
    if chunks is None:
        chunks = server_result_chunks(content)
    if chunks is None:
        text = as_text(content)
        return [text] if text else []
    return chunks
