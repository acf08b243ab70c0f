"""Pure: Bedrock's Converse content blocks (request and response, and Nova's native body) -> GenAI parts.

Content blocks are one-key dicts (``{"text": ...}``, ``{"toolUse": {...}}``, ...), as boto3 parses them and as
Nova's native JSON body carries them. They become GenAI parts (conventions.md 1.5): ``toolUse`` a ``tool_call``,
``toolResult`` a ``tool_call_response``, ``reasoningContent`` a ``reasoning`` part (``redactedContent`` an empty
redacted one), media ``uri`` parts that never carry their bytes, a text ``document`` a text part marked a document
(the RAG evaluators' context, never the question). ``cachePoint`` markers are not content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.openai.parts import (
    Part,
    document_text_part,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
)

REDACTED_REASONING: Part = {"type": "reasoning", "content": "", "redacted": True}


def content_part(block: Any) -> Part | None:
    """One content block (request or response) -> one GenAI part; None for a ``cachePoint`` marker."""
    if not isinstance(block, Mapping):
        return text_part(block) if isinstance(block, str) else None
    if "text" in block:
        text = block["text"]
        return text_part(text if isinstance(text, str) else str(text))
    if "toolUse" in block:
        return _tool_use_part(block["toolUse"] or {})
    if "reasoningContent" in block:
        return _reasoning(block["reasoningContent"])
    if "toolResult" in block:
        return tool_result_part(block["toolResult"])
    if "cachePoint" in block:
        return None
    for modality in ("image", "document", "video", "audio"):
        if modality in block:
            return _document_part(block[modality]) if modality == "document" else media_part(block[modality], modality)
    if "guardContent" in block:
        return _guarded_part(block["guardContent"] or {})
    if "searchResult" in block:
        return _search_result_part(block["searchResult"])
    if "citationsContent" in block:
        content = (block["citationsContent"] or {}).get("content") or ()
        return text_part("".join(str(c.get("text") or "") for c in content if isinstance(c, Mapping)))
    kind = next(iter(block), None)
    return {"type": str(kind)} if kind is not None else None


def _tool_use_part(use: Any) -> Part:
    part = tool_call_part(use.get("toolUseId"), use.get("name"), use.get("input"))
    if use.get("type") == "server_tool_use":  # a tool the service ran itself (Nova's code interpreter)
        return {
            "type": "server_tool_call",
            "id": use.get("toolUseId"),
            "name": use.get("name"),
            "server_tool_call": {"type": "server_tool_use", "arguments": part.get("arguments")},
        }
    return part


def _guarded_part(guarded: Any) -> Part:
    """Content a guardrail checks: its text, or an image like any other (never an empty text)."""
    if "image" in guarded:
        return media_part(guarded["image"], "image")
    text = guarded.get("text") or {}
    return text_part(str(text.get("text") or ""))


def _reasoning(content: Any) -> Part:
    if not isinstance(content, Mapping):
        return reasoning_part("")
    if "redactedContent" in content:
        return dict(REDACTED_REASONING)
    text = (content.get("reasoningText") or {}).get("text")
    return reasoning_part(text if isinstance(text, str) else "")


def tool_result_part(result: Any) -> Part:
    """``toolResult`` -> ``tool_call_response``: its text blocks joined, a ``json`` block as the object.

    A result with a ``type`` (``nova_code_interpreter_result``) is a server tool's, run by the service: a
    ``server_tool_call_response`` part.
    """
    if not isinstance(result, Mapping):
        return tool_response_part(None, "")
    server_type = result.get("type")
    content = result.get("content")
    response: Any = ""
    if isinstance(content, list | tuple):
        values: list[Any] = []
        for block in content:
            if isinstance(block, Mapping) and "json" in block:
                values.append(block["json"])
            elif isinstance(block, Mapping) and "text" in block:
                values.append(str(block["text"]))
            else:
                values.append(content_part(block))
        if values and all(isinstance(v, str) for v in values):
            response = "".join(values)
        elif len(values) == 1:
            response = values[0]
        else:
            response = values
    if isinstance(server_type, str) and server_type:
        return {
            "type": "server_tool_call_response",
            "id": result.get("toolUseId"),
            "server_tool_call_response": {"type": server_type, "response": response},
        }
    part = tool_response_part(result.get("toolUseId"), response)
    if result.get("status") == "error":
        part["is_error"] = True
    return part


def _document_part(document: Any) -> Part:
    """A ``document`` block: a document text part when its source is text (``source.text``, ``source.content``).

    Marked a document (``parts.DOCUMENT_KEY``) with its ``name`` as the title and its ``context`` (what the caller
    says about it), as Anthropic's text documents are: the trace mapping makes it a RAG context chunk and keeps it
    out of the question. A PDF, a document's bytes or an S3 location is a payload-free ``uri`` part: no text.
    """
    part = media_part(document, "document")
    if part["type"] != "text" or not isinstance(document, Mapping):
        return part
    marked = document_text_part(part["content"], title=document.get("name"))
    context = document.get("context")
    if isinstance(context, str) and context:
        marked["context"] = context
    return marked


def media_part(media: Any, modality: str) -> Part:
    """An image/document/video/audio block: bytes by media type and size only, an S3 location as its URI."""
    if not isinstance(media, Mapping):
        return {"type": "uri", "modality": modality, "uri": f"<{modality}>"}
    fmt = media.get("format")
    source = media.get("source") or {}
    if "text" in source and modality == "document":  # a plain-text document: its text is content, not media
        return text_part(str(source["text"]))
    if "content" in source and modality == "document":  # a document of text chunks (for citations): its text
        return text_part(_joined_text(source["content"]))
    location = source.get("s3Location")
    if isinstance(location, Mapping) and location.get("uri"):
        return {"type": "uri", "modality": modality, "uri": str(location["uri"])}
    data = source.get("bytes")
    return inline_media_part(modality, fmt, len(data) if isinstance(data, bytes | bytearray | str) else 0)


def inline_media_part(modality: str, fmt: Any, size: int) -> Part:
    """Media sent or answered inline: a payload-free ``data:`` URI with its media type and size (``size`` bytes)."""
    mime = _MIME_TYPES.get((modality, fmt), "") if isinstance(fmt, str) else ""
    part: Part = {"type": "uri", "modality": modality, "uri": f"data:{mime};base64,<omitted {size} bytes>"}
    if mime:
        part["mime_type"] = mime
    return part


def _joined_text(blocks: Any) -> str:
    """The text of a list of ``{"text": ...}`` blocks, joined."""
    if not isinstance(blocks, list | tuple):
        return ""
    return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, Mapping))


def _search_result_part(result: Any) -> Part:
    """A search result given to the model (RAG with citations): where it came from and its text."""
    part: Part = {"type": "search_result"}
    if not isinstance(result, Mapping):
        return {**part, "content": ""}
    for key in ("source", "title"):
        if result.get(key) is not None:
            part[key] = result[key]
    part["content"] = _joined_text(result.get("content"))
    return part


# The media type of each format botocore's service model allows (ImageFormat, DocumentFormat, VideoFormat,
# AudioFormat): the IANA type; for a format IANA registers none for (flv, wmv), the one in common use. Bedrock's
# raw ``pcm`` names no sample format, so it gets none: a format not here gives no ``mime_type`` rather than a guess.
_MIME_TYPES: dict[tuple[str, str], str] = {
    ("image", "png"): "image/png",
    ("image", "jpeg"): "image/jpeg",
    ("image", "gif"): "image/gif",
    ("image", "webp"): "image/webp",
    ("document", "pdf"): "application/pdf",
    ("document", "csv"): "text/csv",
    ("document", "doc"): "application/msword",
    ("document", "docx"): "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ("document", "xls"): "application/vnd.ms-excel",
    ("document", "xlsx"): "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ("document", "html"): "text/html",
    ("document", "txt"): "text/plain",
    ("document", "md"): "text/markdown",
    ("video", "mkv"): "video/matroska",
    ("video", "mov"): "video/quicktime",
    ("video", "mp4"): "video/mp4",
    ("video", "webm"): "video/webm",
    ("video", "flv"): "video/x-flv",
    ("video", "mpeg"): "video/mpeg",
    ("video", "mpg"): "video/mpeg",
    ("video", "wmv"): "video/x-ms-wmv",
    ("video", "three_gp"): "video/3gpp",
    ("audio", "mp3"): "audio/mpeg",
    ("audio", "opus"): "audio/opus",
    ("audio", "wav"): "audio/wav",
    ("audio", "aac"): "audio/aac",
    ("audio", "x-aac"): "audio/aac",
    ("audio", "flac"): "audio/flac",
    ("audio", "mp4"): "audio/mp4",
    ("audio", "m4a"): "audio/mp4",
    ("audio", "ogg"): "audio/ogg",
    ("audio", "mkv"): "audio/matroska",
    ("audio", "mka"): "audio/matroska",
    ("audio", "mpeg"): "audio/mpeg",
    ("audio", "mpga"): "audio/mpeg",
    ("audio", "webm"): "audio/webm",
}
