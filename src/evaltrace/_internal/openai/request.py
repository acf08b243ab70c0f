"""Pure: the keyword arguments of a ``create()`` call -> request span attributes and input messages.

``params`` never holds openai's NOT_GIVEN / omit sentinels (``registry.given_kwargs`` drops them first).
"""

from __future__ import annotations

import json
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.openai.builtin import ResultsBudget, builtin_tool_parts, citations
from evaltrace._internal.openai.encode import quote_json
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    chat_tool_call_part,
    field,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)
from evaltrace._internal.openai.registry import EndpointKind

Attributes = dict[str, Any]
Scalar = str | int | float | bool

# Request keyword -> attribute, copied when the value has the expected type.
_NUMERIC = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE, float),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P, float),
    ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, float),
    ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY, float),
)

_NUMERIC_KEYS = frozenset(key for key, _, _ in _NUMERIC)


def request_attributes(kind: EndpointKind, params: dict[str, Any]) -> Attributes:
    """Return the request attributes (model, parameters) of one call; no content."""
    attrs: Attributes = {}
    for key, name, cast in _NUMERIC if not _NUMERIC_KEYS.isdisjoint(params) else ():
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attrs[name] = cast(value)
    if kind is EndpointKind.EMBEDDINGS:
        _embedding_params(params, attrs)
    elif kind is EndpointKind.CHAT:
        _chat_params(params, attrs)
    else:
        _responses_params(params, attrs)
    if params.get("stream") is True:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    tier = params.get("service_tier")
    if isinstance(tier, str):
        attrs[sc.OPENAI_REQUEST_SERVICE_TIER] = tier
    return attrs


# Request keywords copied verbatim into ``langfuse.observation.model.parameters`` when of these types.
_NUMBER = (int, float)
_MODEL_PARAMETERS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("temperature", _NUMBER),
    ("top_p", _NUMBER),
    ("max_tokens", (int,)),
    ("max_completion_tokens", (int,)),
    ("max_output_tokens", (int,)),
    ("frequency_penalty", _NUMBER),
    ("presence_penalty", _NUMBER),
    ("seed", (int,)),
    ("n", (int,)),
    ("stop", (str, list, tuple)),
    ("reasoning_effort", (str,)),
    ("service_tier", (str,)),
    ("stream", (bool,)),
)


_MODEL_PARAMETER_KEYS = frozenset(key for key, _ in _MODEL_PARAMETERS)
_MODEL_PARAMETER_TYPES = dict(_MODEL_PARAMETERS)
# The keys' place in ``_MODEL_PARAMETERS``: the given ones are written in that order, whatever order they came in.
_MODEL_PARAMETER_RANK = {key: rank for rank, (key, _) in enumerate(_MODEL_PARAMETERS)}
# Every chat keyword ``model_parameters`` reads: a call with none of them (model and messages only) skips it all.
_CHAT_PARAMETER_KEYS = _MODEL_PARAMETER_KEYS | {"response_format"}


def model_parameters(kind: EndpointKind, params: dict[str, Any]) -> dict[str, Scalar]:
    """The model parameters the call gave, for ``langfuse.observation.model.parameters`` (chat and Responses).

    Keys are the request keywords as given (``reasoning.effort`` and ``text.format`` of Responses are named
    ``reasoning_effort`` and ``response_format``, as in chat); values are scalars, and a non-scalar (a list of
    ``stop`` sequences) is JSON-stringified, as Langfuse does for parameters (conventions.md 4.2).
    """
    out: dict[str, Scalar] = {}
    if kind is EndpointKind.EMBEDDINGS or (kind is EndpointKind.CHAT and _CHAT_PARAMETER_KEYS.isdisjoint(params)):
        return out
    # Only the keywords given are looked at (a stream's call gives two or three of the thirteen).
    given = _MODEL_PARAMETER_KEYS.intersection(params)
    for key in sorted(given, key=_MODEL_PARAMETER_RANK.__getitem__) if len(given) > 1 else given:
        types = _MODEL_PARAMETER_TYPES[key]
        value: Any = params[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            continue
        if isinstance(value, list | tuple):
            if not value:
                continue
            value = json.dumps([str(v) for v in value])
        out[key] = value
    if kind is EndpointKind.RESPONSES:
        effort = field(params.get("reasoning"), "effort")
        if isinstance(effort, str):
            out["reasoning_effort"] = effort
    fmt = _format_type(kind, params)
    if fmt is not None:
        out["response_format"] = fmt
    return out


def _format_type(kind: EndpointKind, params: dict[str, Any]) -> str | None:
    """The response format type as sent: parse()'s pydantic class goes out as a ``json_schema`` format."""
    if kind is EndpointKind.RESPONSES:
        fmt = params.get("text_format")
        if fmt is None:
            fmt = field(params.get("text"), "format")
    else:
        fmt = params.get("response_format")
    if isinstance(fmt, type):
        return "json_schema"
    fmt_type = field(fmt, "type")
    return fmt_type if isinstance(fmt_type, str) else None


def _embedding_params(params: dict[str, Any], attrs: Attributes) -> None:
    fmt = params.get("encoding_format")
    if isinstance(fmt, str):
        attrs[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = [fmt]
    dims = params.get("dimensions")
    if isinstance(dims, int):
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dims


# The keywords _chat_params reads: a call with none of them (model and messages only) skips it.
_CHAT_KEYS = frozenset(
    ("max_completion_tokens", "max_tokens", "stop", "seed", "n", "reasoning_effort", "modalities", "response_format")
)


def _chat_params(params: dict[str, Any], attrs: Attributes) -> None:
    if _CHAT_KEYS.isdisjoint(params):
        return
    max_tokens = params.get("max_completion_tokens", params.get("max_tokens"))
    if isinstance(max_tokens, int):
        attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    stop = params.get("stop")
    if isinstance(stop, str):
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [stop]
    elif isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    seed = params.get("seed")
    if isinstance(seed, int):
        attrs[sc.GEN_AI_REQUEST_SEED] = seed
    n = params.get("n")
    if isinstance(n, int) and n != 1:
        attrs[sc.GEN_AI_REQUEST_CHOICE_COUNT] = n
    effort = params.get("reasoning_effort")
    if isinstance(effort, str):
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
    modalities = params.get("modalities")
    # Audio output asked for (modalities ["text", "audio"]): the reply is spoken, whatever its text format.
    speech = isinstance(modalities, list | tuple) and "audio" in modalities
    output_type = "speech" if speech else _output_type(params.get("response_format"))
    if output_type:
        attrs[sc.GEN_AI_OUTPUT_TYPE] = output_type


def _responses_params(params: dict[str, Any], attrs: Attributes) -> None:
    max_tokens = params.get("max_output_tokens")
    if isinstance(max_tokens, int):
        attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    effort = field(params.get("reasoning"), "effort")
    if isinstance(effort, str):
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
    previous = params.get("previous_response_id")
    if isinstance(previous, str):
        attrs[sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID] = previous
    conversation = params.get("conversation")
    conversation_id = conversation if isinstance(conversation, str) else field(conversation, "id")
    if isinstance(conversation_id, str):
        attrs[sc.GEN_AI_CONVERSATION_ID] = conversation_id  # a real server-side conversation, never invented
    output_type = "json" if params.get("text_format") is not None else _output_type(field(params.get("text"), "format"))
    if output_type:
        attrs[sc.GEN_AI_OUTPUT_TYPE] = output_type


def _output_type(response_format: Any) -> str | None:
    """``response_format`` / ``text.format`` -> ``gen_ai.output.type`` (a pydantic class, for parse(), is json)."""
    if response_format is None:
        return None
    if isinstance(response_format, type):
        return "json"
    fmt_type = field(response_format, "type")
    if fmt_type in ("json_schema", "json_object"):
        return "json"
    return "text" if fmt_type == "text" else None


# --- content ---------------------------------------------------------------------------------------------


# The keys of a chat message that ``plain_chat_messages`` converts itself; any other key takes ``_chat_message``.
_PLAIN_KEYS = frozenset({"role", "content", "name"})


def plain_chat_messages(messages: Any) -> tuple[list[Message], int] | None:
    """Chat messages that are dicts of a role and a text content (and a name): converted, and their text's size.

    The common request (system, user and assistant turns as plain dicts) converted in one loop, with the number
    of characters in its strings for ``encode.encoded``. None when any message has another shape (tool calls,
    tool results, content parts, SDK objects): ``input_messages`` converts those, to the same output.
    """
    history = plain_chat_history(messages)
    return None if history is None else (history[0], history[1])


def plain_chat_history(messages: Any) -> tuple[list[Message], int, list[str]] | None:
    """``plain_chat_messages``, plus each converted message's JSON text, written in the same loop.

    The texts are those ``encode.text_messages`` writes for these messages (``encode.joined_messages`` joins and
    caps them): converting and encoding the history in one pass instead of walking the converted messages again.
    """
    out: list[Message] = []
    pieces: list[str] = []
    size = 0
    quote = quote_json
    for message in messages:
        if type(message) is not dict:
            return None
        role = message.get("role")
        content = message.get("content")
        if type(content) is not str or type(role) is not str or not role or role == "tool":
            return None
        if not _PLAIN_KEYS.issuperset(message):
            return None
        converted: Message = {"role": role, "parts": [{"type": "text", "content": content}]}
        name = message.get("name")
        if type(name) is str:
            converted["name"] = name
            size += len(name)
            tail = f',"name":{quote(name)}}}'
        elif name is not None:
            return None
        else:
            tail = "}"
        out.append(converted)
        pieces.append(f'{{"role":{quote(role)},"parts":[{{"type":"text","content":{quote(content)}}}]{tail}')
        size += len(content) + len(role)
    return out, size, pieces


def input_messages(kind: EndpointKind, params: dict[str, Any]) -> list[Message]:
    """Return ``gen_ai.input.messages`` for a chat or Responses request."""
    if kind is EndpointKind.CHAT:
        return [_chat_message(m) for m in params.get("messages") or ()]
    items = params.get("input")
    if isinstance(items, str):
        return [{"role": "user", "parts": [text_part(items)]}]
    budget = ResultsBudget()  # one for the whole input: every earlier search sent back shares it
    return [_responses_item(item, budget) for item in items or ()]


def embedding_inputs(params: dict[str, Any]) -> list[Any] | None:
    """What an embeddings request embedded, one entry per input (``input.value``); None for an unknown shape.

    Texts are kept as they are. A pre-tokenised input (a list of token ids) becomes ``{"type": "tokens",
    "count": n}``: ids say nothing without the model's tokenizer, and a batch of them would fill the cap.
    """
    value = params.get("input")
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple):
        return None  # an iterable the SDK has consumed by now, or an array type: nothing to read safely
    if value and isinstance(value[0], int):  # one pre-tokenised input
        return [_token_ids(value)]
    return [item if isinstance(item, str) else _token_ids(item) for item in value]


def _token_ids(ids: Any) -> dict[str, Any]:
    return {"type": "tokens", "count": len(ids) if hasattr(ids, "__len__") else None}


def system_instructions(params: dict[str, Any]) -> list[Part] | None:
    """Responses ``instructions`` -> ``gen_ai.system_instructions``."""
    instructions = params.get("instructions")
    return [text_part(instructions)] if isinstance(instructions, str) and instructions else None


def tool_definitions(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Tools flattened as semconv shows: ``{"type":"function","name":...,"description":...,"parameters":...}``.

    Chat nests a tool's fields under its type (``function``, ``custom``); Responses tools are flat already.
    """
    tools = params.get("tools")
    if not tools:
        # Chat's deprecated ``functions`` (the pre-tools API, whose ``function_call`` messages we read too).
        tools = [{"type": "function", "function": fn} for fn in params.get("functions") or ()]
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        nested = field(tool, "function")
        if nested is None:
            nested = field(tool, "custom")
        source = nested if nested is not None else tool
        entry: dict[str, Any] = {"type": field(tool, "type") or "function"}
        for key in ("name", "description", "parameters"):
            value = field(source, key)
            if value is not None:
                entry[key] = value
        out.append(entry)
    return out


def _chat_message(message: Any) -> Message:
    role = field(message, "role") or "user"
    content = field(message, "content")
    if role == "tool":
        return {"role": "tool", "parts": [tool_response_part(field(message, "tool_call_id"), _plain(content))]}
    parts = _content_parts(content)
    tool_calls = field(message, "tool_calls")
    for call in tool_calls or ():
        parts.append(chat_tool_call_part(call))
    legacy = field(message, "function_call")
    if legacy is not None and not tool_calls:  # a duplicate of the tool call when both came (response.py)
        parts.append(tool_call_part(None, field(legacy, "name"), field(legacy, "arguments")))
    out: Message = {"role": role, "parts": parts}
    name = field(message, "name")
    if isinstance(name, str):
        out["name"] = name
    return out


def _responses_item(item: Any, budget: ResultsBudget) -> Message:
    item_type = field(item, "type")
    if item_type == "function_call":
        part = tool_call_part(field(item, "call_id"), field(item, "name"), field(item, "arguments"))
        return {"role": "assistant", "parts": [part]}
    if item_type == "function_call_output":
        return {"role": "tool", "parts": [tool_response_part(field(item, "call_id"), _plain(field(item, "output")))]}
    if item_type == "reasoning":
        texts = [field(s, "text") for s in field(item, "summary") or ()]
        return {"role": "assistant", "parts": [{"type": "reasoning", "content": t} for t in texts if t]}
    if item_type in (None, "message"):
        return {"role": field(item, "role") or "user", "parts": _content_parts(field(item, "content"))}
    if isinstance(item_type, str) and item_type.endswith("_call"):  # a built-in tool's call, echoed back as input
        return {"role": "assistant", "parts": builtin_tool_parts(item_type, item, budget)}
    return {"role": "assistant", "parts": [{"type": str(item_type), "id": field(item, "id")}]}


def _content_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)]
    return [_content_part(p) for p in content]


def _content_part(part: Any) -> Part:
    ptype = field(part, "type")
    if ptype in ("text", "input_text", "output_text"):
        text = text_part(field(part, "text") or "")
        cited = citations(field(part, "annotations")) if ptype == "output_text" else None
        if cited:  # an earlier answer echoed back keeps what it cited, as the answer itself recorded it
            text["citations"] = cited
        return text
    if ptype == "refusal":
        return {"type": "refusal", "content": field(part, "refusal")}
    if ptype == "image_url":
        return uri_part(str(field(field(part, "image_url"), "url") or ""), "image")
    if ptype == "input_image":
        url = field(part, "image_url")
        if url:
            return uri_part(str(url), "image")
        return {"type": "file", "modality": "image", "file_id": field(part, "file_id")}
    if ptype == "input_audio":
        audio = field(part, "input_audio")
        data = field(audio, "data") or ""
        return uri_part(f"data:audio/{field(audio, 'format')};base64,{data}", "audio")
    if ptype in ("file", "input_file"):
        return _file_part(field(part, "file") if ptype == "file" else part)
    return {"type": str(ptype)}


def _file_part(file: Any) -> Part:
    file_id = field(file, "file_id")
    if file_id:
        return {"type": "file", "modality": "document", "file_id": file_id}
    data = field(file, "file_data") or field(file, "file_url") or ""
    return uri_part(str(data), "document")


def _plain(content: Any) -> Any:
    """Tool output as sent: a string stays a string, text parts are joined."""
    if isinstance(content, list):
        texts = [field(p, "text") for p in content]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)
    return content
