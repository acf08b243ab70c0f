"""Pure: an LLM call's ``input.value`` / ``output.value``, the pair trace lists and Langfuse show.

Trace lists show one input and one output per span: Phoenix reads OpenInference's ``input.value`` /
``output.value``, and Langfuse reads them *before* the ``gen_ai.*`` messages (its ``extractInputAndOutput``,
docs/conventions.md 4.2). So whatever route a span takes to Langfuse (a plain OTLP exporter, a collector without
our overlay), this pair is what it renders, and it must hold the whole exchange:

* Plain text when the exchange is plain: the input is one user message of one text part (no system
  instructions), the output one message of one text part, and the text cannot be read as JSON (Langfuse parses
  JSON-looking strings, whatever the mime type says). No mime type then: plain text is OpenInference's default.
* Otherwise the messages as JSON (``application/json``): the input messages, system instructions first as a
  ``system`` message (as Langfuse itself prepends ``gen_ai.system_instructions``), and the output messages with
  their tool calls. The text is the ``gen_ai.input.messages`` / ``gen_ai.output.messages`` value already
  serialised (the same string object, no second encoding); only system instructions are spliced in front.

A tool-calls-only answer therefore shows its tool calls, a structured (JSON) answer shows as the assistant's
message, a turn ending in tool results shows the whole history. Our own Langfuse route drops the pair from spans
with messages (``exporters.langfuse_view``), so Langfuse renders the messages there. Called only when content
capture is on, and capped like every captured value: a value cut at the cap is the JSON truncation marker.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json, capped_text
from evaltrace._internal.openai.parts import DOCUMENT_KEY

Attributes = dict[str, Any]


def only_text(message: Any, role: str) -> str | None:
    """The text of ``message`` when it is a ``role`` message of exactly one text part; else None."""
    if message.get("role") != role:
        return None
    parts = message.get("parts")
    if type(parts) is not list or len(parts) != 1:
        return None
    part = parts[0]
    if type(part) is not dict or part.get("type") != "text" or part.get(DOCUMENT_KEY) is True:
        return None  # a document sent alone is no prompt: the value is the message, marked as a document
    text = part.get("content")
    return text if type(text) is str else None


def is_plain(text: str) -> bool:
    """Whether ``text`` cannot be read as JSON (Langfuse would show a JSON-looking text as the value it parses to)."""
    first = text[:1]
    if first.isspace():
        first = text.lstrip()[:1]
    if first not in _JSON_STARTS:
        return True
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def is_bare_text(text: str, max_len: int) -> bool:
    """Whether ``text`` is its own value attribute with no mime type: ``text_attributes`` would give ``{key: text}``.

    True for a non-empty text within the cap whose first character is neither whitespace nor one a JSON text
    starts with (so ``is_plain`` holds too). The builders' common answer and prompt: one check instead of
    ``is_plain``, ``text_attributes``, ``capped_text`` and a dict per value.
    """
    first = text[:1]
    return bool(first) and first not in _JSON_STARTS and not first.isspace() and (max_len <= 0 or len(text) <= max_len)


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


def input_attributes(
    messages: Sequence[Any],
    messages_json: str,
    instructions: Sequence[Any] | None,
    instructions_json: str | None,
    max_len: int,
) -> Attributes:
    """``input.value`` (+ ``input.mime_type``) of a call that sent ``messages`` after system ``instructions``.

    Args:
        messages: The GenAI input messages (``{"role", "parts"}`` dicts).
        messages_json: Their ``gen_ai.input.messages`` text, reused as the value.
        instructions: The system instruction parts (None or empty: none).
        instructions_json: Their ``gen_ai.system_instructions`` text.
        max_len: The capture cap.
    """
    if not instructions and len(messages) == 1:
        text = only_text(messages[0], "user")
        if text is not None and is_plain(text):
            return text_attributes(sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, text or None, max_len)
    if not instructions:
        return {sc.INPUT_VALUE: messages_json, sc.INPUT_MIME_TYPE: sc.MIME_JSON} if messages else {}
    return {sc.INPUT_VALUE: _with_system(messages, messages_json, instructions, instructions_json, max_len),
            sc.INPUT_MIME_TYPE: sc.MIME_JSON}  # fmt: skip


def _with_system(
    messages: Sequence[Any],
    messages_json: str,
    instructions: Sequence[Any],
    instructions_json: str | None,
    max_len: int,
) -> str:
    """The JSON of ``[{"role": "system", "parts": instructions}, *messages]``, spliced from the texts made already."""
    if instructions_json and instructions_json[:1] == "[" and messages_json[:1] == "[":  # neither was cut
        head = f'[{{"role":"system","parts":{instructions_json}}}'
        text = f"{head}]" if messages_json == "[]" else f"{head},{messages_json[1:]}"
        if max_len <= 0 or len(text) <= max_len:
            return text
    return capped_json([{"role": "system", "parts": list(instructions)}, *messages], max_len)


def output_attributes(output: Sequence[Any], output_json: str, max_len: int) -> Attributes:
    """``output.value`` (+ ``output.mime_type``) of a call that answered ``output`` (its messages' JSON text)."""
    if len(output) == 1:
        text = only_text(output[0], "assistant")
        if text is not None and is_plain(text):
            return text_attributes(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, text or None, max_len)
    if not output:
        return {}
    return json_output_attributes(output_json)


def json_output_attributes(output_json: str) -> Attributes:
    """``output.value`` holding the answer's messages (``output_json``): for an answer that is no plain text."""
    return {sc.OUTPUT_VALUE: output_json, sc.OUTPUT_MIME_TYPE: sc.MIME_JSON}


def prompt_text(messages: Sequence[Any]) -> str | None:
    """The text of the last user message that has some; None when no user message has text.

    A document the request sent with the question (a text part marked ``"document": true``) is not its text.
    """
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            parts = message.get("parts")
            if not isinstance(parts, list):
                continue
            # .get: a text part recorded without content (another instrumentation's content-off messages)
            texts = [
                p.get("content")
                for p in parts
                if isinstance(p, dict) and p.get("type") == "text" and p.get(DOCUMENT_KEY) is not True
            ]
            text = "\n\n".join(t for t in texts if isinstance(t, str) and t)
            if text:
                return text
    return None


def sends_documents(messages: Sequence[Any]) -> bool:
    """Whether a user message of ``messages`` holds a document (a part marked ``"document": true``)."""
    return any(
        isinstance(m, dict) and m.get("role") == "user" and isinstance(parts := m.get("parts"), list)
        and any(isinstance(p, dict) and p.get(DOCUMENT_KEY) is True for p in parts)
        for m in messages
    )  # fmt: skip


def request_content_attributes(
    messages: list[Any], instructions: list[Any] | None, tools: list[Any] | None, max_len: int
) -> Attributes:
    """A request's content attributes: ``gen_ai.input.messages``, ``gen_ai.system_instructions``, this pair's input.

    For provider codecs whose messages, instructions and tool definitions are GenAI-shaped already (parts).

    Args:
        messages: The GenAI input messages.
        instructions: The system instruction parts (None or empty: none).
        tools: The flattened tool definitions (None or empty: none).
        max_len: The capture cap.
    """
    attrs: Attributes = {}
    text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
    instructions_json = capped_json(instructions, max_len) if instructions else None
    if instructions_json is not None:
        attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions_json
    attrs.update(input_attributes(messages, text, instructions, instructions_json, max_len))
    if tools:
        attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs
