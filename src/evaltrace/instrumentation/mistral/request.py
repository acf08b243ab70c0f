"""Pure: the keyword arguments of a Mistral ``chat`` / ``fim`` / ``agents`` / ``embeddings`` call -> span attributes.

The chat body is OpenAI-shaped apart from a few names (``random_seed`` for ``seed``) and its content chunks
(``thinking``, ``document_url``, ``image_url`` as a plain string, ``input_audio`` as base64), so the parameters go
through the OpenAI codec's readers once renamed, and only the messages have a converter of their own.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json, capped_text
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.encode import scalars_json
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
from evaltrace._internal.openai.registry import EndpointKind

Attributes = dict[str, Any]

# Mistral's name -> the OpenAI chat name the shared readers know.
_RENAMED = {"random_seed": "seed"}
# Keywords the shared readers would misname: ``service_tier`` becomes an ``openai.*`` attribute there.
_NOT_SHARED = frozenset({"service_tier"})
_PLAIN_VALUE_TYPES = frozenset((str, int, float, bool, list, dict, tuple))


def get(obj: Any, name: str) -> Any:
    """``field(obj, name)``, with the SDK's ``UNSET`` (a field the API left out; falsy) read as None."""
    value = field(obj, name)
    if value or value is None:
        return value
    return None if type(value).__name__ == "Unset" else value


def given(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords the call really gave: None and the SDK's ``UNSET`` sentinel mean 'not in the request'.

    The sentinel is told by class name (``mistralai`` moved it between versions). A call with nothing to drop
    (checked in one C-level pass) gets ``kwargs`` itself back: the result is only read.
    """
    if _PLAIN_VALUE_TYPES.issuperset(map(type, kwargs.values())):
        return kwargs
    return {k: v for k, v in kwargs.items() if v is not None and type(v).__name__ != "Unset"}


def chat_params(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``given(kwargs)`` under the OpenAI chat names (a new dict only when a name differs)."""
    params = given(kwargs)
    if _RENAMED.keys().isdisjoint(params) and _NOT_SHARED.isdisjoint(params):
        return params
    return {_RENAMED.get(k, k): v for k, v in params.items() if k not in _NOT_SHARED}


def request_attributes(operation: str, kwargs: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one chat or embeddings call."""
    if operation == sc.OP_EMBEDDINGS:
        return _embeddings(given(kwargs), capture, max_len)
    if operation == sc.OP_TEXT_COMPLETION:
        return _fim(chat_params(kwargs), capture, max_len)
    params = chat_params(kwargs)
    attrs = openai_request.request_attributes(EndpointKind.CHAT, params)
    top_k = params.get("top_k")
    if isinstance(top_k, int) and not isinstance(top_k, bool):
        attrs[sc.GEN_AI_REQUEST_TOP_K] = float(top_k)
    parameters = openai_request.model_parameters(EndpointKind.CHAT, params)
    mode = params.get("prompt_mode")
    if isinstance(mode, str) and mode:  # "reasoning": magistral's reasoning system prompt, which changes the answer
        parameters["prompt_mode"] = mode
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = scalars_json(parameters, max_len)
    if capture:
        messages = input_messages(params.get("messages") or ())
        text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
        attrs.update(list_values.input_attributes(messages, text, None, None, max_len))
        tools = openai_request.tool_definitions(params)
        if tools:
            attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs


def _fim(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``fim.complete`` / ``stream``: the chat parameters it shares; the prompt as the user's text, the suffix apart.

    The suffix is the code after the gap, not something the user said: ``mistral.fim.suffix``, so a judge reading
    the input messages sees the prompt alone.
    """
    attrs = openai_request.request_attributes(EndpointKind.CHAT, params)
    parameters = openai_request.model_parameters(EndpointKind.CHAT, params)
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = scalars_json(parameters, max_len)
    if capture:
        prompt = params.get("prompt")
        messages: list[Message] = [{"role": "user", "parts": [text_part(prompt)]}] if isinstance(prompt, str) else []
        attrs.update(list_values.request_content_attributes(messages, None, None, max_len))
        suffix = params.get("suffix")
        if isinstance(suffix, str) and suffix:
            attrs[sc.MISTRAL_FIM_SUFFIX] = capped_text(suffix, max_len)
    return attrs


def _embeddings(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    attrs: Attributes = {}
    # ``encoding_format`` (float or base64, how the vectors are sent) and ``output_dtype`` (float, int8, binary...:
    # what each value is) are both formats the request asked for, as Cohere's ``embedding_types`` are.
    formats = [f for f in (params.get("encoding_format"), params.get("output_dtype")) if isinstance(f, str) and f]
    if formats:
        attrs[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = list(dict.fromkeys(formats))
    dims = params.get("output_dimension")
    if isinstance(dims, int) and not isinstance(dims, bool):
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dims
    if capture:
        inputs = openai_request.embedding_inputs({"input": params.get("inputs")})
        if inputs is not None:
            attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
    return attrs


def input_messages(messages: Any) -> list[Message]:
    """Mistral chat messages (dicts or SDK models) -> GenAI input messages."""
    return [_message(m) for m in messages]


def _message(message: Any) -> Message:
    role = get(message, "role") or "user"
    content = get(message, "content")
    if role == "tool":
        return {"role": "tool", "parts": [tool_response_part(get(message, "tool_call_id"), _tool_output(content))]}
    parts = content_parts(content)
    for call in get(message, "tool_calls") or ():
        parts.append(tool_call(call))
    return {"role": str(role), "parts": parts}


def tool_call(call: Any) -> Part:
    """A Mistral ``ToolCall`` -> a ``tool_call`` part (its arguments are a JSON string or an object already)."""
    fn = get(call, "function")
    call_id = get(call, "id")
    # The SDK fills a missing id with the string "null".
    return tool_call_part(None if call_id == "null" else call_id, get(fn, "name"), get(fn, "arguments"))


def content_parts(content: Any) -> list[Part]:
    """A message's content (a string or a list of chunks) -> parts; thinking chunks become ``reasoning``."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)] if content else []
    parts: list[Part] = []
    for chunk in content:
        chunk = known(chunk)
        parts.append(chunk_part(chunk))
        if get(chunk, "type") == "thinking":
            parts.extend(thinking_references(chunk))
    return parts


def _items(value: Any) -> Any:
    """A chunk's list field; anything else (None, a string from a body the SDK could not validate) as empty."""
    return value if isinstance(value, list | tuple) else ()


def thinking_text(chunk: Any) -> str:
    """The text of a ``thinking`` chunk (its ``thinking`` list holds text chunks and references)."""
    texts = [get(t, "text") for t in _items(get(chunk, "thinking"))]
    return "".join(t for t in texts if isinstance(t, str))


def thinking_references(chunk: Any) -> list[Part]:
    """What a ``thinking`` chunk cites besides its text (``reference`` / ``tool_reference`` chunks), as parts."""
    return [chunk_part(t) for t in _items(get(chunk, "thinking")) if get(t, "type") not in ("text", None)]


# The fields a generic part keeps of the chunks that cite or point at something the model read, or that a
# built-in tool made (``tool_file``: a code interpreter's or image generator's output file).
_CITING = {
    "reference": ("reference_ids",),
    "tool_reference": ("tool", "title", "url", "description", "favicon"),
    "resource_link": ("uri", "metadata"),
    "tool_file": ("tool", "file_id", "file_name", "file_type"),
}
# The chunk types ``chunk_part`` converts by their fields (the others become generic parts).
_KNOWN = frozenset(("text", "thinking", "image_url", "document_url", "file", "input_audio", "resource", *_CITING))


def known(chunk: Any) -> Any:
    """``chunk``, or the body of an ``UnknownContentChunk`` whose type ``chunk_part`` knows.

    The SDK parses a chunk of a known type whose fields fail its validation (``{"type": "text", "text": null}``,
    a ``thinking`` holding an item it does not know) as ``UnknownContentChunk(raw=body)`` too: that body is read
    as its type says, so a text stays a text part with content and a thinking stays reasoning.
    """
    if get(chunk, "type") == "UNKNOWN":
        raw = get(chunk, "raw")
        if isinstance(raw, dict) and raw.get("type") in _KNOWN:
            return raw
    return chunk


def _plain(value: Any) -> Any:
    """A field's value for a part, with every ``data:`` URL in it (at any depth) left without its payload.

    A chunk the SDK could not validate keeps its nested objects (an ``image_url`` object, ``metadata``): a payload
    there is as much the user's data as one at the top.
    """
    if isinstance(value, str):
        return uri_part(value, "")["uri"] if value.startswith("data:") else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def generic_part(kind: str, fields: Any) -> Part:
    """A generic part of type ``kind`` with the given fields (None and the SDK's ``UNSET`` left out)."""
    part: Part = {"type": kind}
    for name, value in fields:
        if name != "type" and value is not None and type(value).__name__ != "Unset":
            part[str(name)] = _plain(value)
    return part


def chunk_part(chunk: Any) -> Part:
    """One content chunk -> one part. A chunk this module does not know is a generic part with its fields.

    mistralai 3.x parses an unknown chunk as ``UnknownContentChunk(type="UNKNOWN", raw=...)``: the part takes the
    type and fields of ``raw``, what the API sent, so nothing is lost or renamed; a ``raw`` of a known type is
    converted as that type (``known``). Every field may be missing or None there.
    """
    chunk = known(chunk)
    ctype = get(chunk, "type")
    if ctype == "text":
        return text_part(get(chunk, "text") or "")
    if ctype == "thinking":
        return reasoning_part(thinking_text(chunk))
    if ctype == "image_url":
        image = get(chunk, "image_url")
        url = image if isinstance(image, str) else get(image, "url")
        return uri_part(str(url or ""), "image")
    if ctype == "document_url":
        return uri_part(str(get(chunk, "document_url") or ""), "document")
    if ctype == "file":
        return {"type": "file", "modality": "document", "file_id": get(chunk, "file_id")}
    if ctype == "input_audio":
        return _audio_part(get(chunk, "input_audio"))
    if ctype == "resource":
        return _resource_part(chunk)
    names = _CITING.get(str(ctype))
    if names is not None:
        return generic_part(str(ctype), ((name, get(chunk, name)) for name in names))
    raw = get(chunk, "raw") if ctype == "UNKNOWN" else chunk
    if isinstance(raw, dict) and isinstance(raw.get("type"), str):
        return generic_part(raw["type"], raw.items())
    return {"type": str(ctype)}


def _audio_part(audio: Any) -> Part:
    """``input_audio``: a URL as is; base64 audio by its size only (as ``uri_part`` counts a payload it leaves out).

    Mistral's chunk holds the base64 alone, with no format field (OpenAI's ``{data, format}`` is written as
    ``data:audio/<format>``): a ``data:;base64,`` URL would claim ``text/plain`` (RFC 2397's default), so the
    placeholder is no data URL, with modality audio and no media type.
    """
    data = audio if isinstance(audio, str) else ""
    if data.startswith(("http://", "https://")):
        return uri_part(data, "audio")
    return {"type": "uri", "modality": "audio", "uri": f"<omitted {len(data)} bytes>"}


def _resource_part(chunk: Any) -> Part:
    """An embedded (MCP) ``resource``: its text as the model read it, an image by its URL, else its ``uri``.

    A ``uri`` part would need a modality, which a resource of unknown content does not say: a generic part.
    """
    content = known(get(chunk, "content"))
    kind = get(content, "type")
    if kind in ("text", "image_url"):
        return chunk_part(content)
    return generic_part("resource", (("uri", get(chunk, "uri")),))


def _tool_output(content: Any) -> Any:
    """A tool message's content as sent: a string stays a string, text chunks are joined."""
    if isinstance(content, list):
        texts = [get(c, "text") for c in content]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)
        return [chunk_part(c) for c in content]
    return content
