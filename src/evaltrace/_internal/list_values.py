"""Pure: an LLM call's prompt and answer as plain text, for ``input.value`` / ``output.value``.

Trace lists show one input and one output per span: Phoenix reads OpenInference's ``input.value`` /
``output.value``, and Langfuse reads them before ``gen_ai.*`` messages (docs/conventions.md). Without them a list
shows ``--`` or a JSON of message parts. The full conversation stays in ``gen_ai.input.messages`` /
``gen_ai.output.messages``; these two only name what a person scanning a list wants: the last thing the user
asked (the last user message with text, so a tool-results turn still shows the question) and the model's text.
Called only when content capture is on, and capped like every captured value. ``*.mime_type`` is written only when
needed: ``text/plain`` for a text that could parse as JSON, ``application/json`` for a value cut at the cap (a JSON
truncation marker); other text goes without (plain text is OpenInference's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_text

Attributes = dict[str, Any]


def _text_of(message: Any) -> str:
    """The ``text`` parts of a GenAI message joined by blank lines (reasoning, tool calls and media left out)."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return ""
    texts = [p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    return "\n\n".join(text for text in texts if isinstance(text, str) and text)


def prompt_text(messages: Sequence[Any]) -> str | None:
    """The text of the last user message that has some; None when no user message has text."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text_of(message)
            if text:
                return text
    return None


def answer_text(messages: Iterable[Any]) -> str | None:
    """The text of the first output message that has some (the first choice); None for a tool-calls-only turn."""
    for message in messages:
        text = _text_of(message)
        if text:
            return text
    return None


def text_attributes(key: str, mime_key: str, text: str | None, max_len: int) -> Attributes:
    """``key`` (``input.value`` / ``output.value``) holding ``text``, capped, with ``mime_key`` when needed."""
    if text is None:
        return {}
    value = capped_text(text, max_len)
    if value is not text:
        # A cut text is replaced by a JSON truncation marker: its mime type says so, so readers see the marker.
        return {key: value, mime_key: sc.MIME_JSON}
    first = text[:1]
    if first.isspace():
        first = text.lstrip()[:1]
    if first in _JSON_STARTS:
        return {key: value, mime_key: sc.MIME_TEXT}  # could parse as JSON: say it is text
    # Plain text is OpenInference's default (Phoenix shows it as text) and readers without a mime type (our
    # mapping) parse JSON and keep anything else as text: no mime type needed, one attribute less per span.
    return {key: value}


# The first characters of a JSON text (Python's parser also takes NaN and Infinity): text that starts otherwise
# is never read as JSON, so it needs no ``text/plain``.
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def prompt_attributes(messages: Sequence[Any], max_len: int) -> Attributes:
    """``input.value`` (and ``input.mime_type`` when needed) for a call that sent ``messages``; empty without text."""
    return text_attributes(sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, prompt_text(messages), max_len)


def answer_attributes(messages: Iterable[Any], max_len: int) -> Attributes:
    """``output.value`` (and ``output.mime_type`` when needed) for a call that answered ``messages``, if any text."""
    return text_attributes(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, answer_text(messages), max_len)
