"""Builders for GenAI message parts (conventions.md 1.5), shared by request, response and accumulators.

Parts are plain dicts with the exact semconv field names; they are serialised once, by ``capped_json``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evaltrace._internal.jsonutil import loads_or_raw, to_jsonable

Part = dict[str, Any]
Message = dict[str, Any]

_OPEN, _CLOSE = "<think>", "</think>"  # a reasoning model's thinking inside its answer (split_think)
_DATA_URL = re.compile(r"^data:([^;,]*)(;base64)?,", re.IGNORECASE)

FINISH_REASON_MAP = {"tool_calls": "tool_call", "function_call": "tool_call"}


def field(obj: Any, name: str, default: None = None) -> Any:
    """Read ``name`` from a dict (request params) or an object (SDK models); None when absent.

    ``default`` is always None: it lets callers pick ``field`` or the ``getattr`` builtin with one call shape.
    """
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def text_part(content: str) -> Part:
    """A ``text`` part."""
    return {"type": "text", "content": content}


DOCUMENT_KEY = "document"
"""The extra key (``true``) of a text part that is a document the application gave the model to answer from.

A document sent in the request (Groq's and Cohere's ``documents``, a ``document`` content part or block) is the
model's input, recorded as a ``text`` part so every reader shows it as text; the key tells it apart from the
user's words, so that the trace mapping can make it the RAG evaluators' context (``mapping._request_documents``).
"""


def document_text_part(content: str, ident: Any = None, title: Any = None) -> Part:
    """A ``text`` part of a document's text, marked (``DOCUMENT_KEY``), with its ``id`` and ``title`` when given.

    The id and title are extra keys (the text part has no field for them): citations name a document by its id,
    and the title is the first line of its context chunk.
    """
    part = text_part(content)
    part[DOCUMENT_KEY] = True
    if isinstance(ident, str) and ident:
        part["id"] = ident
    if isinstance(title, str) and title:
        part["title"] = title
    return part


def document_part(item: Any) -> Part:
    """A ``document`` content item (``{"document": {"data": ..., "id": ...}}``) -> a document text part of its data.

    Cohere's shape, which groq's document part shares: text data as it is, any other as JSON text, the way it was
    given (not ASCII-escaped), and never an error (a key JSON cannot have is its ``str``); its ``id`` kept.
    """
    document = field(item, "document")
    return document_text_part(data_text(field(document, "data")), field(document, "id"))


def data_text(data: Any) -> str:
    """A document's data as text: a string as it is, any other value as JSON text, as written (not ASCII-escaped)."""
    return data if isinstance(data, str) else json.dumps(to_jsonable(data), ensure_ascii=False)


def reasoning_part(content: str) -> Part:
    """A ``reasoning`` part (thinking text, kept out of the answer)."""
    return {"type": "reasoning", "content": content}


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> Part:
    """A ``tool_call`` part; JSON-string arguments become an object, invalid JSON stays the raw string."""
    part: Part = {"type": "tool_call", "id": call_id, "name": name}
    if isinstance(arguments, str):
        part["arguments"] = loads_or_raw(arguments) if arguments else {}
    elif arguments is not None:
        part["arguments"] = arguments
    return part


def chat_tool_call_part(call: Any) -> Part:
    """A Chat Completions ``tool_calls`` entry -> a ``tool_call`` part (``name`` is required, conventions.md 1.5).

    Function calls carry ``function.{name,arguments}``; custom-tool calls carry ``custom.{name,input}`` instead.
    """
    fn = field(call, "function")
    if fn is None:
        custom = field(call, "custom")
        if custom is not None:
            return tool_call_part(field(call, "id"), field(custom, "name"), field(custom, "input"))
    return tool_call_part(field(call, "id"), field(fn, "name"), field(fn, "arguments"))


def tool_response_part(call_id: Any, response: Any) -> Part:
    """A ``tool_call_response`` part (semconv uses ``response``, not ``result``)."""
    return {"type": "tool_call_response", "id": call_id, "response": response}


def uri_part(url: str, modality: str) -> Part:
    """A ``uri`` part; a ``data:`` URL keeps its media type but never its payload (size only)."""
    match = _DATA_URL.match(url)
    if match is None:
        return {"type": "uri", "modality": modality, "uri": url}
    header = url[: match.end()]
    part: Part = {"type": "uri", "modality": modality, "uri": f"{header}<omitted {len(url) - match.end()} bytes>"}
    if match.group(1):
        part["mime_type"] = match.group(1)
    return part


def split_think(text: str) -> tuple[str | None, str]:
    """Move ``<think>...</think>`` blocks out of ``text``: return (reasoning or None, answer).

    A block runs from ``<think>`` to the first ``</think>`` after it, or to the end of an unclosed one (a stream
    cut short, or still thinking). Found with ``str.find``, not a regular expression: the lazy ``(.*?)`` took a
    few hundred instructions per character of a streamed answer, twice (``findall`` and ``sub``).
    """
    start = text.find(_OPEN)
    if start < 0:
        return None, text
    thoughts: list[str] = []
    answer: list[str] = []
    end = 0  # where the text outside the blocks resumes
    while start >= 0:
        answer.append(text[end:start])
        close = text.find(_CLOSE, start + len(_OPEN))
        if close < 0:  # unclosed: the block runs to the end
            thoughts.append(text[start + len(_OPEN) :].strip())
            end = len(text)
            break
        thoughts.append(text[start + len(_OPEN) : close].strip())
        end = close + len(_CLOSE)
        start = text.find(_OPEN, end)
    answer.append(text[end:])
    reasoning = "\n\n".join(t for t in thoughts if t)
    return (reasoning or None), "".join(answer).strip()


def assistant_parts(reasoning: str | None, content: str | None, refusal: str | None = None) -> list[Part]:
    """Reasoning first, then the answer (with any ``<think>`` block moved to reasoning), then a refusal."""
    parts: list[Part] = []
    if content:
        thought, content = split_think(content)
        if thought:
            reasoning = f"{reasoning}\n\n{thought}" if reasoning else thought
    if reasoning:
        parts.append(reasoning_part(reasoning))
    if content:
        parts.append(text_part(content))
    if refusal:
        parts.append({"type": "refusal", "content": refusal})
    return parts


def output_message(parts: list[Part], finish_reason: str | None) -> Message:
    """An OutputMessage; the finish reason is normalised (``tool_calls`` -> ``tool_call``, missing -> ``error``)."""
    reason = FINISH_REASON_MAP.get(finish_reason, finish_reason) if finish_reason else "error"
    return {"role": "assistant", "parts": parts, "finish_reason": reason}


def reasoning_extra(obj: Any) -> str | None:
    """Reasoning text that OpenAI-compatible servers add as an extra field (DeepSeek, vLLM, OpenRouter).

    ``reasoning_content`` wins over ``reasoning``; both are read from the pydantic extras, so this is O(1).
    """
    extra = getattr(obj, "__pydantic_extra__", None)
    if not extra:
        return None
    value = extra.get("reasoning_content")
    if value is None:
        value = extra.get("reasoning")
    return value if isinstance(value, str) else None
