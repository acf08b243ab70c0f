"""Pure: the Interactions API (``client.interactions.create``) -> request attributes, ``Interaction`` -> ``Outcome``.

One span per request the SDK sends (``Interactions.create`` of the generated client, which the public ``create``
calls once per hop: with automatic continuation a long answer is several billed requests, each its own span with
its own usage, as for ``generate_content``). The operation is ``chat``: an interaction is a conversational turn
whose state the server may keep (``previous_interaction_id``), like OpenAI's Responses. Agent interactions
(``agent`` / ``agent_config``: a server-side agent loop, usually ``background=True``, answered ``in_progress``)
are no model call of ours to measure and are not traced.

Request: ``input`` (a string, content items, turns ``{role, content}`` or steps), ``system_instruction``, ``tools``
and ``generation_config`` (``temperature``, ``top_p``, ``seed``, ``stop_sequences``, ``max_output_tokens``,
``thinking_level``); ``response_format`` and ``response_modalities`` (``gen_ai.output.type``). Response: the
``steps`` (``thought`` summaries as ``reasoning`` parts, never the signature; ``model_output`` content, a text's
citation annotations as its part's ``citations``;
``function_call`` as ``tool_call``; the API's own tool calls and results, ``*_call`` / ``*_result`` steps, as
``server_tool_call`` / ``server_tool_call_response``), ``status`` verbatim as the finish
reason (``completed``, ``incomplete``, ``requires_action``, ``failed``...), and ``usage``: input is
``total_input_tokens`` (cached included) plus ``total_tool_use_tokens``, output ``total_output_tokens`` plus
``total_thought_tokens`` (the reasoning), cache reads ``total_cached_tokens``. A ``failed`` interaction (HTTP 200,
nothing raised) fails the span.

The stream of a ``stream=True`` request is folded by ``interaction_stream``.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.request import joined_content
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import Message, Part, field, reasoning_part, text_part, tool_call_part
from evaltrace.instrumentation.google_genai.parts import blob_part, file_part, function_response_part, reasoning_media
from evaltrace.instrumentation.google_genai.request import first_output_type, modality_types

Attributes = dict[str, Any]

_STATUS = {
    "completed": "stop",
    "requires_action": "tool_call",
    "incomplete": "length",
    "requires_continuation": "length",
    "failed": "error",
    "cancelled": "error",
}
CONTENT_TYPES = frozenset({"text", "image", "audio", "video", "document"})
_MEDIA_TYPES = CONTENT_TYPES - {"text"}
_GENERATION = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE, float),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P, float),
    ("max_output_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS, int),
    ("seed", sc.GEN_AI_REQUEST_SEED, int),
)


def body_of(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The request body of a generated ``create(request=... | **body)`` call; None for an agent interaction."""
    request = kwargs.get("request")
    body = field(request, "body") if _given(request) else kwargs
    if body is None:
        return None
    dump = getattr(body, "model_dump", None)
    params = dump(exclude_none=True) if callable(dump) else dict(body)
    params = {k: v for k, v in params.items() if _given(v)}
    if params.get("agent") is not None or params.get("agent_config") is not None:
        return None
    return params


def _given(value: Any) -> bool:
    """Not None and not the generated SDK's ``UNSET`` sentinel."""
    return value is not None and type(value).__name__ != "Unset"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``gen_ai.request.*`` of ``generation_config``, and with ``capture`` the input, instructions and tools."""
    attrs: Attributes = {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION}
    config = params.get("generation_config")
    for key, name, kind in _GENERATION:
        value = field(config, key)
        if _number(value):
            attrs[name] = kind(value)
    stop = field(config, "stop_sequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    level = field(config, "thinking_level")
    if isinstance(level, str) and level:
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = level
    if params.get("stream") is True:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    previous = params.get("previous_interaction_id")
    if isinstance(previous, str) and previous:
        # The server holds the conversation so far: ``input`` carries only the new turn, as with OpenAI's
        # ``previous_response_id`` (the trace mapping reads the attribute so).
        attrs[sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID] = previous
    output_type = output_type_of(params)
    if output_type is not None:
        attrs[sc.GEN_AI_OUTPUT_TYPE] = output_type
    parameters = {k: v for k, v in _items(config) if isinstance(v, str | int | float)}
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(parameters, max_len)
    if capture:
        instruction = params.get("system_instruction")
        instructions = [text_part(instruction)] if isinstance(instruction, str) and instruction else None
        attrs.update(
            list_values.request_content_attributes(
                input_messages(params.get("input")), instructions, tool_definitions(params.get("tools")), max_len
            )
        )
    return attrs


# A ``response_format`` item's ``type`` -> the output type it asks for (``text`` is read apart: it may be JSON).
# Video and documents have no ``gen_ai.output.type`` value: none is recorded for them.
_FORMAT_TYPES = {"audio": "speech", "speech": "speech", "image": "image", "video": None, "document": None}


def output_type_of(params: dict[str, Any]) -> str | None:
    """``gen_ai.output.type`` of ``response_format`` and ``response_modalities``.

    Each format counts by its type; each modality as ``generate_content``'s (``audio`` speech, ``image`` image,
    ``text`` text). A text format is ``json`` with a JSON MIME type or a schema, else ``text``; a format of no
    known type is a JSON schema given as is (``json``); ``response_mime_type`` is read as ``generate_content``'s.
    Of several kinds, the one ``request.first_output_type`` picks.
    """
    formats = params.get("response_format")
    items = formats if isinstance(formats, list | tuple) else [] if formats is None else [formats]
    kinds = [_format_type(item) for item in items] + modality_types(params.get("response_modalities"))
    mime = params.get("response_mime_type")
    kinds.append("json" if mime == "application/json" else "text" if mime == "text/plain" else None)
    return first_output_type(kinds)


def _format_type(item: Any) -> str | None:
    kind = field(item, "type")
    if kind == "text":
        json_asked = field(item, "mime_type") == "application/json"
        # The SDK's model names it ``schema_`` (``schema`` is pydantic's own method); the wire's dict ``schema``.
        schema = item.get("schema", item.get("schema_")) if isinstance(item, dict) else field(item, "schema_")
        return "json" if json_asked or schema is not None else "text"
    if isinstance(kind, str) and kind in _FORMAT_TYPES:
        return _FORMAT_TYPES[kind]
    return "json"


def _items(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    dump = getattr(value, "model_dump", None)
    return list(dump(exclude_none=True).items()) if callable(dump) else []


def content_part(item: Any) -> Part | None:
    """One content item (``text``, ``image``, ``audio``, ``video``, ``document``) -> a GenAI part."""
    kind = field(item, "type")
    if kind == "text":
        text = field(item, "text")
        if not isinstance(text, str):
            return None
        part = text_part(text)
        cited = citations_of(field(item, "annotations"))
        if cited:
            part["citations"] = cited
        return part
    mime = field(item, "mime_type")
    data = field(item, "data")
    if data is not None:
        return blob_part(mime, data)
    uri = field(item, "uri")
    if uri is not None:
        return file_part(uri, mime)
    return {"type": str(kind)} if kind else None


# The annotations of a text that cite a source (``speech_metadata`` and ``word_info`` are timing, not sources).
_CITATIONS = frozenset({"url_citation", "file_citation", "place_citation"})


def citations_of(annotations: Any) -> list[dict[str, Any]]:
    """A text's citation annotations -> ``{type, source, title, start_index, end_index}`` (the keys given).

    ``source`` is where the cited text came from: a URL, a file's URI (else its name), a place's URL (else its id);
    ``title`` a URL's title, a file's name, a place's name. The keys match ``generate_content``'s citations.
    """
    out: list[dict[str, Any]] = []
    for annotation in annotations or ():
        kind = field(annotation, "type")
        if kind not in _CITATIONS:
            continue
        if kind == "file_citation":
            source = field(annotation, "document_uri") or field(annotation, "file_name")
            title = field(annotation, "file_name")
        elif kind == "place_citation":
            source = field(annotation, "url") or field(annotation, "place_id")
            title = field(annotation, "name")
        else:
            source, title = field(annotation, "url"), field(annotation, "title")
        given = {"source": source, "title": title, "start_index": field(annotation, "start_index"),
                 "end_index": field(annotation, "end_index")}  # fmt: skip
        out.append({"type": kind, **{k: v for k, v in given.items() if v is not None}})
    return out


def _parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [text_part(content)] if content else []
    return [p for p in (content_part(item) for item in content or ()) if p is not None]


def input_messages(value: Any) -> list[Message]:
    """``input`` in every shape: a string, content items (one user message), turns, or steps."""
    if isinstance(value, str):
        return [{"role": "user", "parts": [text_part(value)]}] if value else []
    items = list(value or ()) if isinstance(value, list | tuple) else [value]
    if not items:
        return []
    if all(field(i, "type") in CONTENT_TYPES for i in items):
        return [{"role": "user", "parts": _parts(items)}]
    messages: list[Message] = []
    for item in items:
        if field(item, "role") is not None:  # a turn
            role = str(field(item, "role"))
            messages.append({"role": "assistant" if role == "model" else role, "parts": _parts(field(item, "content"))})
            continue
        kind = field(item, "type")
        if kind == "user_input":
            messages.append({"role": "user", "parts": _parts(field(item, "content"))})
        elif kind == "function_result":
            messages.append({"role": "tool", "parts": [function_result_part(item)]})
        elif kind in CONTENT_TYPES:
            messages.append({"role": "user", "parts": _parts([item])})
        else:  # a step the model made (model_output, thought, function_call...), sent back as history
            parts = step_parts(item)
            if parts:
                messages.append({"role": "assistant", "parts": parts})
    return messages


def function_result_part(step: Any) -> Part:
    """A ``function_result`` step -> ``tool_call_response``, ``is_error`` kept when the result says so.

    A result of content items (``text``, ``image``...) is read as content is everywhere: media as ``uri`` parts
    without their bytes, and all text joined into one string (as Anthropic's tool results are); any other item
    (a ``function`` a tool search found) is kept as is.
    """
    result = field(step, "result")
    if isinstance(result, list | tuple):
        result = joined_content([_result_item(item) for item in result])
    part = function_response_part({"id": field(step, "call_id"), "name": field(step, "name"), "response": result})
    if field(step, "is_error") is True:
        part["is_error"] = True
    return part


def _result_item(item: Any) -> Part:
    part = content_part(item) if field(item, "type") in CONTENT_TYPES else None
    if part is not None:
        return part
    return item if isinstance(item, dict) else dict(_items(item))


def tool_definitions(tools: Any) -> list[dict[str, Any]] | None:
    """``function`` tools flat (name, description, parameters); the API's own tools by their type and name."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        kind = str(field(tool, "type") or "function")
        if kind != "function":
            # semconv requires a name: an MCP server's own, else the tool's type (``google_search``).
            name = field(tool, "name")
            out.append({"type": kind, "name": name if isinstance(name, str) and name else kind})
            continue
        definition: dict[str, Any] = {"type": "function", "name": field(tool, "name")}
        for key in ("description", "parameters"):
            value = field(tool, key)
            if value is not None:
                definition[key] = value
        out.append(definition)
    return out or None


def step_parts(step: Any) -> list[Part]:
    """One output step -> its GenAI parts (none for a bare thought signature or an unknown step)."""
    kind = str(field(step, "type") or "")
    if kind == "model_output":
        return _parts(field(step, "content"))
    if kind == "thought":
        summary = field(step, "summary") or ()
        texts = [field(s, "text") for s in summary]
        joined = "".join(t for t in texts if isinstance(t, str))
        return thought_parts(joined, [content_part(s) for s in summary if field(s, "type") in _MEDIA_TYPES])
    if kind == "function_call":
        return [tool_call_part(field(step, "id"), field(step, "name"), field(step, "arguments") or {})]
    if kind.endswith("_call"):
        name = kind[: -len("_call")]
        call = {"type": name, "arguments": field(step, "arguments")}
        tool = _mcp_names(step, call)
        return [{"type": "server_tool_call", "id": field(step, "id"), "name": tool or name, "server_tool_call": call}]
    if kind.endswith("_result") and kind != "function_result":
        response = field(step, "result")
        if isinstance(response, list | tuple) and any(field(item, "type") in CONTENT_TYPES for item in response):
            # Content items (an MCP tool's text, images...): read as a function result's are, never the bytes.
            response = joined_content([_result_item(item) for item in response])
        result = {"type": kind[: -len("_result")], "response": response}
        _mcp_names(step, result, result=True)
        return [{"type": "server_tool_call_response", "id": field(step, "call_id"),
                 "server_tool_call_response": result}]  # fmt: skip
    return []


def _mcp_names(step: Any, into: dict[str, Any], result: bool = False) -> str | None:
    """An MCP server tool step's tool name (``forecast``), returned; its server's name is kept in ``into``.

    A call part's ``name`` is the tool the model called, as for a function call, not the step kind; the server that
    ran it goes inside the call object, as the Anthropic instrumentation keeps an MCP tool's ``server_name``. A
    ``result`` part has no name of its own in the conventions: the tool's name goes inside its response object too.
    """
    name = field(step, "name")
    server = field(step, "server_name")
    if isinstance(server, str) and server:
        into["server_name"] = server
    if not isinstance(name, str) or not name:
        return None
    if result:
        into["name"] = name
    return name


def thought_parts(text: str, media: list[Part | None]) -> list[Part]:
    """A thought's summary: its text as one ``reasoning`` part, then its images as ``reasoning`` parts (no bytes)."""
    parts = [reasoning_part(text)] if text else []
    return parts + [reasoning_media(m) for m in media if m is not None]


def usage_of(usage: Any) -> Usage | None:
    """``Interaction.usage`` -> Usage (see the module docstring)."""
    if usage is None:
        return None
    prompt = count(field(usage, "total_input_tokens"))
    tool = count(field(usage, "total_tool_use_tokens"))
    if tool:
        prompt = (prompt or 0) + tool
    output = count(field(usage, "total_output_tokens"))
    thoughts = count(field(usage, "total_thought_tokens"))
    if output is not None or thoughts is not None:
        output = (output or 0) + (thoughts or 0)
    return Usage(input_tokens=prompt, output_tokens=output, cached_tokens=count(field(usage, "total_cached_tokens")),
                 reasoning_tokens=thoughts)  # fmt: skip


def message_finish_reason(status: Any, parts: list[Part]) -> str:
    """The output message's finish reason from the interaction's ``status``."""
    mapped = _STATUS.get(str(status), "error") if status else "error"
    if mapped == "stop" and any(p["type"] == "tool_call" for p in parts):
        return "tool_call"
    return mapped


def _status(value: Any) -> str | None:
    status = getattr(value, "value", value)
    return str(status) if status else None


def outcome_of(interaction: Any, parts: list[Part] | None, status: Any = None) -> Outcome:
    """An ``Interaction`` (and its output ``parts``, None without content capture) -> Outcome."""
    status = _status(status if status is not None else field(interaction, "status"))
    messages = None
    if parts is not None:
        messages = [{"role": "assistant", "parts": parts, "finish_reason": message_finish_reason(status, parts)}]
    return Outcome(
        response_id=field(interaction, "id"),
        response_model=field(interaction, "model"),
        finish_reasons=[status] if status else [],
        output_messages=messages,
        usage=usage_of(field(interaction, "usage")),
    )


def interaction_outcome(interaction: Any, capture: bool) -> Outcome:
    """A plain ``Interaction`` -> Outcome (output parts only with ``capture``)."""
    parts = None
    if capture:
        parts = [p for step in field(interaction, "steps") or () for p in step_parts(step)]
    return outcome_of(interaction, parts)


def failure_of(interaction: Any) -> tuple[str, str] | None:
    """(``error.type``, message) of a ``failed`` interaction: its first error's code, else ``failed``."""
    if _status(field(interaction, "status")) != "failed":
        return None
    errors = field(interaction, "errors") or ()
    first = errors[0] if errors else None
    code = field(first, "code")
    message = field(first, "message")
    return (str(code) if code is not None else "failed"), (str(message) if message else "failed")


def summary_of(interaction: Any) -> Summary:
    """Model and token counts, read without the content."""
    usage = usage_of(field(interaction, "usage"))
    model = field(interaction, "model")
    return Summary(model) if usage is None else Summary(model, usage.input_tokens, usage.output_tokens)
