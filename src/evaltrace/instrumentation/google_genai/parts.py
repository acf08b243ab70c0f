"""Pure: google-genai ``Content`` / ``Part`` values (SDK models or their dicts) -> GenAI messages of parts.

conventions.md 1.5: text is a ``text`` part, a thought (``part.thought``) a ``reasoning`` part, a
``function_call`` a ``tool_call`` part, a ``function_response`` a ``tool_call_response`` part (in a ``tool``
message of its own), inline data and file URIs ``uri`` parts that never carry their bytes (a thought's image: a
``reasoning`` part with that ``uri``; audio: its ``audio_transcription`` text as ``transcript``), code execution and
the API's server-side tool parts ``server_tool_call`` / ``server_tool_call_response`` parts. The role ``model``
is ``assistant``. ``thought_signature`` (opaque bytes) is not content and is never recorded.

Every reader takes an SDK model or the dict a user passed (``field`` reads both); what a request may hold
besides (a plain string, a list of parts, an SDK ``File``, a PIL image) is read by ``request.input_messages``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evaltrace._internal.openai.parts import (
    Message,
    Part,
    field,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)

# The fields a google-genai Part (or its dict, in snake_case or the API's camelCase) may carry that we read.
PART_KEYS = frozenset(
    {
        "text",
        "thought",
        "function_call",
        "functionCall",
        "function_response",
        "functionResponse",
        "inline_data",
        "inlineData",
        "file_data",
        "fileData",
        "executable_code",
        "executableCode",
        "code_execution_result",
        "codeExecutionResult",
        "tool_call",
        "toolCall",
        "tool_response",
        "toolResponse",
    }
)

# Gemini roles -> GenAI roles; the API knows ``user`` and ``model`` (``function`` in some old histories).
ROLES = {"model": "assistant", "user": "user", "function": "tool", "tool": "tool", "system": "system"}


def read(obj: Any, snake: str, camel: str) -> Any:
    """A field by its SDK (snake_case) name, or by the API's camelCase name in a raw dict."""
    value = field(obj, snake)
    if value is None and isinstance(obj, dict):
        value = obj.get(camel)
    return value


def enum_name(value: Any) -> str | None:
    """An SDK enum (``FinishReason.STOP``) or the API's string -> its name as the API sends it (``STOP``)."""
    if value is None:
        return None
    name = getattr(value, "value", value)  # the SDK's enums are str enums whose value is the wire name
    return str(name)


def _modality(mime_type: Any) -> str:
    """The GenAI modality of a MIME type: ``image``, ``audio`` or ``video``; anything else is a ``document``."""
    major = str(mime_type or "").split("/", 1)[0]
    return major if major in ("image", "audio", "video") else "document"


def blob_part(mime_type: Any, data: Any) -> Part:
    """Inline bytes -> a ``uri`` part with a payload-free ``data:`` URI (its base64 size, never the bytes)."""
    size = len(data) if isinstance(data, bytes | bytearray | str) else 0
    encoded = size if isinstance(data, str) else 4 * ((size + 2) // 3)  # bytes go out base64-encoded
    uri = f"data:{mime_type or ''};base64,<omitted {encoded} bytes>"  # as ``uri_part`` writes a data URL
    part: Part = {"type": "uri", "modality": _modality(mime_type), "uri": uri}
    if mime_type:
        part["mime_type"] = str(mime_type)
    return part


def file_part(file_uri: Any, mime_type: Any) -> Part:
    """A file reference (``gs://``, an uploaded file's URI, a URL) -> a ``uri`` part."""
    part = uri_part(str(file_uri or ""), _modality(mime_type))
    if mime_type:
        part["mime_type"] = str(mime_type)
    return part


def function_call_part(call: Any) -> Part:
    """``FunctionCall`` -> ``tool_call`` (Gemini ids are optional: the Developer API often sends none)."""
    args = field(call, "args")
    return tool_call_part(field(call, "id"), field(call, "name"), args if args is not None else {})


def function_response_part(response: Any) -> Part:
    """``FunctionResponse`` -> ``tool_call_response``; the function name is kept, the only link without an id.

    The media a function returned besides its ``response`` object (``FunctionResponse.parts``: inline data or a
    file) are the part's ``parts``, ``uri`` parts as media are everywhere (never the bytes), next to ``response``
    as the API holds them, so ``response`` keeps its shape whether or not media came with it.
    """
    part = tool_response_part(field(response, "id"), field(response, "response"))
    name = field(response, "name")
    if name is not None:
        part["name"] = name
    media = [p for p in (part_of(item) for item in field(response, "parts") or ()) if p is not None]
    if media:
        part["parts"] = media
    return part


def part_of(part: Any) -> Part | None:
    """One Part -> one GenAI part; None for a part with nothing to show (an empty text, a bare signature)."""
    text = field(part, "text")
    if text is not None:
        if not text:
            return None
        return reasoning_part(text) if field(part, "thought") is True else text_part(text)
    call = read(part, "function_call", "functionCall")
    if call is not None:
        return function_call_part(call)
    response = read(part, "function_response", "functionResponse")
    if response is not None:
        return function_response_part(response)
    blob = read(part, "inline_data", "inlineData")
    if blob is not None:
        media = blob_part(read(blob, "mime_type", "mimeType"), field(blob, "data"))
        return _media_of(part, media)
    data = read(part, "file_data", "fileData")
    if data is not None:
        return _media_of(part, file_part(read(data, "file_uri", "fileUri"), read(data, "mime_type", "mimeType")))
    return _server_tool_part(part)


def _media_of(part: Any, media: Part) -> Part:
    """A media part as read: a thought's is reasoning, audio keeps its transcript.

    A thought's media is an image the model drew while thinking; an audio part's ``audio_transcription.text`` (what
    the model said) is the part's ``transcript``, the key OpenInference's ``audio.transcript`` maps to.
    """
    if field(part, "thought") is True:
        return reasoning_media(media)
    transcript = field(read(part, "audio_transcription", "audioTranscription"), "text")
    if isinstance(transcript, str) and transcript:
        media["transcript"] = transcript
    return media


def reasoning_media(media: Part) -> Part:
    """Media the model produced as part of its thinking -> a ``reasoning`` part with no text, the media beside.

    The reasoning stays apart from the answer (never a media part of the output); its ``uri`` is the media part's,
    payload-free for inline bytes, so no image data is recorded.
    """
    return {"type": "reasoning", "content": "", **{k: v for k, v in media.items() if k != "type"}}


def _server_tool_part(part: Any) -> Part | None:
    """Code execution and the API's own tool calls (``tool_call`` / ``tool_response``): server-side tools."""
    code = read(part, "executable_code", "executableCode")
    if code is not None:
        call = {"type": "code_execution", "language": enum_name(field(code, "language")), "code": field(code, "code")}
        return {"type": "server_tool_call", "id": field(code, "id"), "name": "code_execution", "server_tool_call": call}
    result = read(part, "code_execution_result", "codeExecutionResult")
    if result is not None:
        outcome = {"type": "code_execution", "outcome": enum_name(field(result, "outcome"))}
        outcome["output"] = field(result, "output")
        return {"type": "server_tool_call_response", "id": field(result, "id"), "server_tool_call_response": outcome}
    tool_call = read(part, "tool_call", "toolCall")
    if tool_call is not None:
        kind = enum_name(read(tool_call, "tool_type", "toolType")) or "tool"
        call = {"type": kind, "arguments": field(tool_call, "args")}
        return {"type": "server_tool_call", "id": field(tool_call, "id"), "name": kind, "server_tool_call": call}
    tool_response = read(part, "tool_response", "toolResponse")
    if tool_response is not None:
        kind = enum_name(read(tool_response, "tool_type", "toolType")) or "tool"
        outcome = {"type": kind, "response": field(tool_response, "response")}
        return {
            "type": "server_tool_call_response",
            "id": field(tool_response, "id"),
            "server_tool_call_response": outcome,
        }
    return None


def parts_of(parts: Iterable[Any] | None) -> list[Part]:
    """Parts -> GenAI parts, dropping the empty ones; consecutive text (or thought) pieces are joined."""
    out: list[Part] = []
    for raw in parts or ():
        part = part_of(raw)
        if part is None:
            continue
        last = out[-1] if out else None
        kind = part["type"]
        if last is not None and kind in ("text", "reasoning") and last["type"] == kind and not _media_in(last, part):
            last["content"] += part["content"]  # a stream's pieces, or a thought split over parts
        else:
            out.append(part)
    return out


def _media_in(last: Part, part: Part) -> bool:
    """Whether either of two reasoning parts is a thought's media, which is never joined with thought text."""
    return "uri" in last or "uri" in part


def content_messages(content: Any) -> list[Message]:
    """One ``Content`` -> its message; function responses go into a ``tool`` message of their own, first."""
    role = ROLES.get(str(field(content, "role") or "user"), str(field(content, "role")))
    parts = parts_of(field(content, "parts"))
    results = [p for p in parts if p["type"] == "tool_call_response"]
    if not results:
        return [{"role": role, "parts": parts}]
    rest = [p for p in parts if p["type"] != "tool_call_response"]
    out: list[Message] = [{"role": "tool", "parts": results}]
    if rest:
        out.append({"role": role, "parts": rest})
    return out
