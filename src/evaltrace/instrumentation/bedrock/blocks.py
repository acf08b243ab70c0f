"""Pure: Bedrock's Converse content blocks (request and response, and Nova's native body) -> GenAI parts.

Content blocks are one-key dicts (``{"text": ...}``, ``{"toolUse": {...}}``, ...), as boto3 parses them and as
Nova's native JSON body carries them. They become GenAI parts (conventions.md 1.5): ``toolUse`` a ``tool_call``,
``toolResult`` a ``tool_call_response``, ``reasoningContent`` a ``reasoning`` part (``redactedContent`` an empty
redacted one), media ``uri`` parts that never carry their bytes. ``cachePoint`` markers are not content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.openai.parts import Part, reasoning_part, text_part, tool_call_part, tool_response_part

REDACTED_REASONING: Part = {"type": "reasoning", "content": "", "redacted": True}


def content_part(block: Any) -> Part | None:
    """One content block (request or response) -> one GenAI part; None for a ``cachePoint`` marker."""
    if not isinstance(block, Mapping):
        return text_part(block) if isinstance(block, str) else None
    if "text" in block:
        text = block["text"]
        return text_part(text if isinstance(text, str) else str(text))
    if "toolUse" in block:
        use = block["toolUse"] or {}
        part = tool_call_part(use.get("toolUseId"), use.get("name"), use.get("input"))
        if use.get("type") == "server_tool_use":  # a tool the service ran itself (Nova's code interpreter)
            return {
                "type": "server_tool_call",
                "id": use.get("toolUseId"),
                "name": use.get("name"),
                "server_tool_call": {"type": "server_tool_use", "arguments": part.get("arguments")},
            }
        return part
    if "reasoningContent" in block:
        return _reasoning(block["reasoningContent"])
    if "toolResult" in block:
        return tool_result_part(block["toolResult"])
    if "cachePoint" in block:
        return None
    for modality in ("image", "document", "video", "audio"):
        if modality in block:
            return media_part(block[modality], modality)
    if "guardContent" in block:
        text = (block["guardContent"] or {}).get("text") or {}
        return text_part(str(text.get("text") or ""))
    if "citationsContent" in block:
        content = (block["citationsContent"] or {}).get("content") or ()
        return text_part("".join(str(c.get("text") or "") for c in content if isinstance(c, Mapping)))
    kind = next(iter(block), None)
    return {"type": str(kind)} if kind is not None else None


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


def media_part(media: Any, modality: str) -> Part:
    """An image/document/video/audio block: bytes by media type and size only, an S3 location as its URI."""
    if not isinstance(media, Mapping):
        return {"type": "uri", "modality": modality, "uri": f"<{modality}>"}
    fmt = media.get("format")
    source = media.get("source") or {}
    if "text" in source and modality == "document":  # a plain-text document: its text is content, not media
        return text_part(str(source["text"]))
    location = source.get("s3Location")
    if isinstance(location, Mapping) and location.get("uri"):
        return {"type": "uri", "modality": modality, "uri": str(location["uri"])}
    data = source.get("bytes")
    mime = f"{_MIME_PREFIX.get(modality, modality)}/{fmt}" if isinstance(fmt, str) else ""
    size = len(data) if isinstance(data, bytes | bytearray | str) else 0
    part: Part = {"type": "uri", "modality": modality, "uri": f"data:{mime};base64,<omitted {size} bytes>"}
    if mime:
        part["mime_type"] = mime
    return part


_MIME_PREFIX = {"image": "image", "video": "video", "audio": "audio", "document": "application"}
