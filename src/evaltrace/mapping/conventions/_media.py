"""Image, audio, video and document content of any convention -> GenAI typed parts (``uri``, ``blob``, ``file``).

Each instrumentation records media in its provider's or its own shape: OpenAI Chat ``image_url`` /
``input_audio`` / ``file`` blocks, Responses ``input_image`` / ``input_file``, Anthropic ``image`` / ``document``
blocks with a ``source``, the Vercel AI SDK's ``image`` / ``file`` parts, OpenInference's
``message_content.{image.url, audio.*}``. They all become the GenAI part form (conventions.md 1.5) with a
``modality``, so a message's text parts stay apart from its media and no base64 payload reaches a judge: a
``data:`` URL keeps its media type and the payload's size only (``_internal.openai.parts.uri_part``), a blob's
content is replaced by its length when the message is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.openai.parts import uri_part

# Block types that name their modality; ``file`` / ``input_file`` / ``document`` are documents unless a media
# type says otherwise.
_MODALITIES = {
    "image": "image",
    "image_url": "image",
    "input_image": "image",
    "audio": "audio",
    "input_audio": "audio",
    "video": "video",
    "file": "document",
    "input_file": "document",
    "document": "document",
}
_GENAI_MEDIA = frozenset({"uri", "blob", "file"})
_OMITTED = ",<omitted "  # what ``uri_part`` leaves of a data: URL's payload: a part read twice keeps its size


def media_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the GenAI part of a media content block, or None when ``block`` is not a media block we know."""
    kind = block.get("type")
    if not isinstance(kind, str):
        return None
    if kind in _GENAI_MEDIA and ("modality" in block or kind != "file"):  # Vercel's ``file`` has no modality
        return _genai(block)
    modality = _MODALITIES.get(kind)
    if modality is None:
        return None
    mime = _text(block.get("mimeType") or block.get("mediaType") or block.get("mime_type") or block.get("media_type"))
    # The payload sits under the block's type (OpenAI Chat, OpenInference), in a ``source`` (Anthropic), or on
    # the block itself (Responses, Vercel AI SDK).
    inner = block.get(kind)
    # OpenInference nests twice: ``message_content.image`` + ``image.url`` = ``message_content.image.image.url``.
    while isinstance(inner, Mapping) and isinstance(inner.get(kind), Mapping | str) and len(inner) == 1:
        inner = inner[kind]
    source = block.get("source")
    fields = source if isinstance(source, Mapping) else inner if isinstance(inner, Mapping) else block
    if isinstance(inner, str):  # Vercel ``{"type": "image", "image": <url or base64>}``
        part = _from_value(inner, modality, mime)
    else:
        part = _from_fields(fields, modality, mime)
    transcript = _text(fields.get("transcript"))  # OpenInference ``audio.transcript``: what the audio says
    if transcript:
        part["transcript"] = transcript
    return part


def _genai(block: Mapping[str, Any]) -> dict[str, Any]:
    """A GenAI part already; a ``uri`` holding a ``data:`` URL loses its payload like every other one."""
    uri = block.get("uri")
    if block.get("type") == "uri" and isinstance(uri, str) and uri[:5].lower() == "data:" and _OMITTED not in uri:
        return {**block, **uri_part(uri, str(block.get("modality") or "image"))}
    return dict(block)


def _from_fields(fields: Mapping[str, Any], modality: str, mime: str | None) -> dict[str, Any]:
    mime = mime or _text(
        fields.get("mime_type") or fields.get("media_type") or fields.get("mimeType") or fields.get("mediaType")
    )
    file_id = _text(fields.get("file_id"))
    if file_id:
        return _typed({"type": "file", "modality": _modality(modality, mime), "file_id": file_id}, mime)
    url = _text(fields.get("url") or fields.get("image_url") or fields.get("file_url") or fields.get("uri"))
    if url:
        return _from_value(url, modality, mime)
    data = fields.get("data") or fields.get("file_data") or fields.get("content")
    if isinstance(data, str) and data:
        if fields.get("format") and not mime:  # OpenAI input_audio: {"data": <base64>, "format": "wav"}
            mime = f"{modality}/{fields['format']}"
        return _from_value(data, modality, mime)
    part: dict[str, Any] = {"type": "uri", "modality": _modality(modality, mime), "uri": ""}
    return _typed(part, mime)


def _from_value(value: str, modality: str, mime: str | None) -> dict[str, Any]:
    """A URL (``http``, ``data:``, ``gs://``, ...) becomes a ``uri`` part; anything else is inline base64 data."""
    if value[:5].lower() == "data:" or "://" in value[:16]:
        part = uri_part(value, _modality(modality, mime))
        return _typed(part, mime) if "mime_type" not in part else part
    blob: dict[str, Any] = {"type": "blob", "modality": _modality(modality, mime), "content": value}
    return _typed(blob, mime)


def _modality(default: str, mime: str | None) -> str:
    """A document-typed block whose media type says image, audio or video has that modality."""
    if default == "document" and mime:
        head = mime.split("/", 1)[0]
        if head in ("image", "audio", "video"):
            return head
    return default


def _typed(part: dict[str, Any], mime: str | None) -> dict[str, Any]:
    if mime:
        part["mime_type"] = mime
    return part


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
