"""Pure: an LLM call's prompt and answer as plain text, for ``input.value`` / ``output.value``.

Trace lists show one input and one output per span: Phoenix reads OpenInference's ``input.value`` /
``output.value``, and Langfuse reads them before ``gen_ai.*`` messages (docs/conventions.md). Without them a list
shows ``--`` or a JSON of message parts. The full conversation stays in ``gen_ai.input.messages`` /
``gen_ai.output.messages``; these two only name what a person scanning a list wants: the last thing the user
asked (the last user message with text, so a tool-results turn still shows the question) and the model's text.
Called only when content capture is on, and capped like every captured value.
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


def _value(key: str, mime_key: str, text: str | None, max_len: int) -> Attributes:
    if text is None:
        return {}
    value = capped_text(text, max_len)
    # A cut text is replaced by a JSON truncation marker: its mime type says so, so readers see the marker.
    return {key: value, mime_key: sc.MIME_TEXT if value is text else sc.MIME_JSON}


def prompt_attributes(messages: Sequence[Any], max_len: int) -> Attributes:
    """``input.value`` (and its mime type) for a call that sent ``messages``; empty without user text."""
    return _value(sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, prompt_text(messages), max_len)


def answer_attributes(messages: Iterable[Any], max_len: int) -> Attributes:
    """``output.value`` (and its mime type) for a call that answered ``messages``; empty without text."""
    return _value(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, answer_text(messages), max_len)
