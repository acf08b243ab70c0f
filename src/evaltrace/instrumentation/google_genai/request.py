"""Pure: the keyword arguments of a ``generate_content`` / ``embed_content`` call -> request span attributes.

``contents`` and ``config`` are read in every shape the SDK accepts: a string, a ``Part``, a ``Content``, a
list mixing them, SDK models or their dicts (snake_case or the API's camelCase keys). As the SDK does, the
non-``Content`` items of a list (strings, parts, files, images) make one ``user`` message. The parameters of
``GenerateContentConfig`` map to ``gen_ai.request.*``; ``system_instruction`` to ``gen_ai.system_instructions``;
``tools`` to ``gen_ai.tool.definitions`` (function declarations as ``function`` tools with JSON Schema
``parameters``, a Python function given for automatic function calling as the SDK declares it, the API's own
tools named by their field name).
"""

from __future__ import annotations

import copy
import functools
import json
import sys
import threading
import types
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeGuard

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import Message, Part, field, text_part
from evaltrace.instrumentation.google_genai.parts import (
    PART_KEYS,
    content_messages,
    enum_name,
    file_part,
    part_of,
    read,
)

if TYPE_CHECKING:
    from google.genai.types import Schema

Attributes = dict[str, Any]
Scalar = str | int | float | bool


# GenerateContentConfig field (snake, camel) -> (attribute, type): the parameters GenAI semconv names.
_FLOATS = (
    ("temperature", "temperature", sc.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", "topP", sc.GEN_AI_REQUEST_TOP_P),
    ("presence_penalty", "presencePenalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY),
    ("frequency_penalty", "frequencyPenalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY),
)
_INTS = (
    ("max_output_tokens", "maxOutputTokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
    ("seed", "seed", sc.GEN_AI_REQUEST_SEED),
)
# Langfuse's model parameters: what the call set, under the SDK's own names.
_MODEL_PARAMETERS = (
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("max_output_tokens", "maxOutputTokens"),
    ("candidate_count", "candidateCount"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("seed", "seed"),
    ("stop_sequences", "stopSequences"),
    ("response_mime_type", "responseMimeType"),
)
# The Tool fields that are the API's own (server-side) tools; function declarations are read apart.
_SERVER_TOOLS = (
    "google_search",
    "google_search_retrieval",
    "code_execution",
    "url_context",
    "retrieval",
    "file_search",
    "google_maps",
    "enterprise_web_search",
    "computer_use",
    "parallel_ai_search",
    "exa_ai_search",
    "mcp_servers",
)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def request_attributes(operation: str, kwargs: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one call."""
    config = kwargs.get("config")
    if operation == sc.OP_EMBEDDINGS:
        return embedding_attributes(kwargs, config, capture, max_len)
    attrs = parameters(config)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_GENERATION
    model_parameters = _model_parameters(config)
    if model_parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(model_parameters, max_len)
    if capture:
        attrs.update(content_attributes(kwargs.get("contents"), config, max_len))
    return attrs


def content_attributes(contents: Any, config: Any, max_len: int) -> Attributes:
    """``contents`` as input messages, with the ``system_instruction`` and ``tools`` of ``config``."""
    messages = input_messages(contents)
    attrs: Attributes = {}
    text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
    instructions = system_instructions(read(config, "system_instruction", "systemInstruction"))
    instructions_json = capped_json(instructions, max_len) if instructions else None
    if instructions_json is not None:
        attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions_json
    attrs.update(list_values.input_attributes(messages, text, instructions, instructions_json, max_len))
    tools = tool_definitions(field(config, "tools"))
    if tools:
        attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs


def cache_attributes(kwargs: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``caches.create(model=..., config=...)``: with ``capture``, the cached contents, instructions and tools."""
    if not capture:
        return {}
    config = kwargs.get("config")
    return content_attributes(field(config, "contents"), config, max_len)


def parameters(config: Any) -> Attributes:
    """``gen_ai.request.*`` from a ``GenerateContentConfig`` (or its dict); no content."""
    attrs: Attributes = {}
    if config is None:
        return attrs
    for snake, camel, name in _FLOATS:
        value = read(config, snake, camel)
        if _number(value):
            attrs[name] = float(value)
    for snake, camel, name in _INTS:
        value = read(config, snake, camel)
        if _number(value):
            attrs[name] = int(value)
    top_k = read(config, "top_k", "topK")
    if _number(top_k):
        # The SDK types top_k as a float; the conventions' main branch makes it an int: a whole number is one.
        attrs[sc.GEN_AI_REQUEST_TOP_K] = int(top_k) if float(top_k).is_integer() else float(top_k)
    count = read(config, "candidate_count", "candidateCount")
    if _number(count) and count != 1:
        attrs[sc.GEN_AI_REQUEST_CHOICE_COUNT] = int(count)
    stop = read(config, "stop_sequences", "stopSequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    output_type = _output_type(config)
    if output_type is not None:
        attrs[sc.GEN_AI_OUTPUT_TYPE] = output_type
    thinking = read(config, "thinking_config", "thinkingConfig")
    level = enum_name(read(thinking, "thinking_level", "thinkingLevel")) if thinking is not None else None
    if level:
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = level  # the exact provider value, e.g. LOW
    return attrs


# When a request asks for several kinds of output, the one ``gen_ai.output.type`` records: a spoken or an image
# answer is what sets the call apart (text comes with it anyway), and a JSON answer is text with a format.
OUTPUT_TYPE_ORDER = ("speech", "image", "json", "text")


def first_output_type(kinds: Iterable[str | None]) -> str | None:
    """The output type of the kinds asked for, by ``OUTPUT_TYPE_ORDER``; None when none is one of them."""
    asked = set(kinds)
    return next((kind for kind in OUTPUT_TYPE_ORDER if kind in asked), None)


# A response modality (``Modality`` / the Interactions API's lower-case names) -> the output type it asks for.
MODALITY_TYPES = {"AUDIO": "speech", "IMAGE": "image", "TEXT": "text"}


def modality_types(modalities: Any) -> list[str | None]:
    """The output types ``response_modalities`` asks for (``["AUDIO"]`` -> ``["speech"]``)."""
    if not isinstance(modalities, list | tuple):
        return []
    return [MODALITY_TYPES.get(str(enum_name(m) or "").upper()) for m in modalities]


def _output_type(config: Any) -> str | None:
    """``gen_ai.output.type`` of the modalities, MIME type and schema asked for.

    ``response_modalities``: ``AUDIO`` speech, ``IMAGE`` image, ``TEXT`` text; ``json`` for a JSON MIME type or a
    response schema, ``text`` for text/plain. Of several, the one ``first_output_type`` picks.
    """
    mime = read(config, "response_mime_type", "responseMimeType")
    schema = read(config, "response_schema", "responseSchema") or read(
        config, "response_json_schema", "responseJsonSchema"
    )
    kinds = modality_types(read(config, "response_modalities", "responseModalities"))
    if mime == "application/json" or (schema is not None and not mime):
        kinds.append("json")
    elif mime == "text/plain":
        kinds.append("text")
    return first_output_type(kinds)


def _model_parameters(config: Any) -> dict[str, Scalar]:
    """The model parameters the call set (lists JSON-stringified, as Langfuse does with non-scalar parameters)."""
    out: dict[str, Scalar] = {}
    if config is None:
        return out
    for snake, camel in _MODEL_PARAMETERS:
        value = read(config, snake, camel)
        if isinstance(value, list | tuple):
            if value:
                out[snake] = json.dumps([str(v) for v in value])
        elif isinstance(value, str | int | float) and value is not None:
            out[snake] = value
    thinking = read(config, "thinking_config", "thinkingConfig")
    if thinking is not None:
        budget = read(thinking, "thinking_budget", "thinkingBudget")
        if _number(budget):
            out["thinking_budget"] = int(budget)
        level = enum_name(read(thinking, "thinking_level", "thinkingLevel"))
        if level:
            out["thinking_level"] = level
    return out


def _is_content(item: Any) -> bool:
    """A ``Content`` (a role and parts), as opposed to a single part or a plain value."""
    if isinstance(item, dict):
        return "parts" in item or "role" in item
    return type(item).__name__ == "Content" or (hasattr(item, "parts") and hasattr(item, "role"))


def _item_part(item: Any) -> Part | None:
    """One non-``Content`` item of ``contents``: a string, a Part (model or dict), an uploaded File, an image."""
    if isinstance(item, str):
        return text_part(item) if item else None
    if isinstance(item, dict) and not PART_KEYS.intersection(item):
        return {"type": "text", "content": capped_json(item)}  # an unknown dict: shown, never dropped
    if isinstance(item, dict) or type(item).__name__ == "Part":
        return part_of(item)
    uri = field(item, "uri")
    if isinstance(uri, str):  # an uploaded ``types.File``
        return file_part(uri, field(item, "mime_type"))
    if type(item).__module__.startswith("PIL."):
        mime = getattr(item, "get_format_mimetype", lambda: None)() or "image/*"
        return {"type": "uri", "modality": "image", "uri": f"<{type(item).__name__} image>", "mime_type": mime}
    return part_of(item)


def input_messages(contents: Any) -> list[Message]:
    """``contents`` -> ``gen_ai.input.messages``; consecutive parts and strings make one ``user`` message."""
    if contents is None:
        return []
    items = contents if isinstance(contents, list | tuple) else [contents]
    out: list[Message] = []
    loose: list[Part] = []
    for item in items:
        if _is_content(item):
            if loose:
                out.append({"role": "user", "parts": loose})
                loose = []
            out.extend(content_messages(item))
            continue
        part = _item_part(item)
        if part is not None:
            loose.append(part)
    if loose:
        out.append({"role": "user", "parts": loose})
    return out


def system_instructions(instruction: Any) -> list[Part] | None:
    """``config.system_instruction`` (a string, a Part, a Content or a list of them) -> GenAI parts."""
    if instruction is None or instruction == "":
        return None
    parts = [part for message in input_messages(instruction) for part in message["parts"]]
    return parts or None


# The OpenAPI type names of Gemini's ``Schema`` (``types.Type``), as a dict schema may spell them.
_SCHEMA_TYPES = frozenset({"OBJECT", "ARRAY", "STRING", "INTEGER", "NUMBER", "BOOLEAN", "NULL"})


def _schema(value: Any) -> Any:
    """A declaration's ``parameters`` -> JSON Schema, which ``gen_ai.tool.definitions`` holds.

    A ``types.Schema`` (or its dict, ``{"type": "OBJECT", ...}``) is Gemini's OpenAPI subset: the SDK's own
    ``Schema.json_schema`` writes it as JSON Schema (lower-case types, ``nullable`` as a ``null`` type,
    ``min_items`` as ``minItems``...). Anything else (``parameters_json_schema``) already is JSON Schema. Should the
    conversion fail, the schema's set fields are kept as they are.
    """
    schema_type = _sdk_schema_type()
    schema = value
    # Only Gemini's own upper-case type names: a JSON Schema dict (``"object"``, ``parameters_json_schema``) is
    # already what the attribute holds, and a round trip through ``Schema`` would rewrite it (``1`` as ``1.0``,
    # ``example`` dropped).
    if schema_type is not None and isinstance(value, dict) and value.get("type") in _SCHEMA_TYPES:
        try:
            schema = schema_type.model_validate(value)
        except Exception:
            return value  # not the SDK's Schema after all: kept as given
    if schema_type is not None and isinstance(schema, schema_type):
        try:
            converted = _quiet_json_schema(schema)
            return converted.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception:  # a schema the SDK cannot convert: its fields as set, rather than nothing
            pass
    dump = getattr(schema, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)  # set fields only: every unset one would be null
    return schema


# The google-genai module flag that makes ``Schema.json_schema`` log its note (about JSON Schema being supported
# natively) only once a process: the note is advice to whoever converts a schema, and we are not the one.
_NOTE_LOGGED = "_json_schema_warning_logged"
_NOTE_LOCK = threading.Lock()


def _quiet_json_schema(schema: Any) -> Any:
    """``schema.json_schema`` without the SDK's one-time INFO note, which stays the app's to see should it convert.

    The note is skipped by setting the SDK's module flag for the call and putting it back after, so a process
    that never converts a schema itself logs nothing, and one that does still logs the note once.
    """
    module = sys.modules.get(type(schema).__module__)
    # One conversion of ours at a time: two overlapping ones would let the first put the flag back while the
    # second still converts, which would log the note after all. (An app thread converting inside this window
    # has its note delayed to its next conversion: harmless.)
    with _NOTE_LOCK:
        if module is None or getattr(module, _NOTE_LOGGED, None) is not False:
            return schema.json_schema  # noted already (or a flag we do not know): nothing to keep quiet
        setattr(module, _NOTE_LOGGED, True)
        try:
            return schema.json_schema
        finally:
            setattr(module, _NOTE_LOGGED, False)


@functools.cache
def _sdk_schema_type() -> type[Schema] | None:
    """google-genai's ``Schema``, imported once (None: not importable)."""
    try:
        from google.genai.types import Schema
    except ImportError:
        return None
    return Schema


# A plain function's definition, built once: the SDK's declaration builds a pydantic TypeAdapter per parameter
# (~0.4 ms a function), and the same functions are passed on every call. Weak keys: a definition never keeps the
# application's function alive. Bound methods (a new object at each attribute read) are declared each time.
_DEFINITIONS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _callable_definition(tool: Any) -> dict[str, Any]:
    """A Python function given for automatic function calling, declared as the SDK declares it.

    ``FunctionDeclaration.from_callable_with_api_option(use_json_schema=True)`` reads its signature and docstring
    into ``parameters_json_schema``; a function it cannot declare keeps its name and docstring. A plain function's
    definition is built once (each call gets its own copy).
    """
    if type(tool) is types.FunctionType:
        cached = _DEFINITIONS.get(tool)
        if cached is None:
            cached = _DEFINITIONS[tool] = _declare(tool)
        return copy.deepcopy(cached)
    return _declare(tool)


def _declare(tool: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "name": getattr(tool, "__name__", type(tool).__name__)}
    try:
        from google.genai.types import FunctionDeclaration

        declaration = FunctionDeclaration.from_callable_with_api_option(callable=tool, use_json_schema=True)
    except Exception:  # not importable, or a signature the SDK does not support (it then refuses the call too)
        declaration = None
    description = declaration.description if declaration is not None else None
    if not description:
        description = (getattr(tool, "__doc__", None) or "").strip()
    if description:
        entry["description"] = description
    parameters = declaration.parameters_json_schema if declaration is not None else None
    if parameters is not None:
        entry["parameters"] = parameters
    return entry


def tool_definitions(tools: Any) -> list[dict[str, Any]] | None:
    """``config.tools`` -> ``gen_ai.tool.definitions`` (semconv's flat ``{type, name, description, parameters}``)."""
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if callable(tool) and not hasattr(tool, "function_declarations"):
            out.append(_callable_definition(tool))  # a Python function for automatic function calling
            continue
        declarations = read(tool, "function_declarations", "functionDeclarations")
        for declaration in declarations or ():
            entry: dict[str, Any] = {"type": "function", "name": field(declaration, "name")}
            description = field(declaration, "description")
            if description:
                entry["description"] = description
            schema = field(declaration, "parameters")
            if schema is None:
                schema = read(declaration, "parameters_json_schema", "parametersJsonSchema")
            if schema is not None:
                entry["parameters"] = _schema(schema)
            out.append(entry)
        for name in _SERVER_TOOLS:
            if read(tool, name, _camel(name)) is not None:
                out.append({"type": name, "name": name})  # semconv requires a name: the tool's is its type
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def embedding_attributes(kwargs: dict[str, Any], config: Any, capture: bool, max_len: int) -> Attributes:
    """An ``embed_content`` call: requested dimensions, task type as a model parameter, inputs as ``input.value``."""
    attrs: Attributes = {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING}
    dimensions = read(config, "output_dimensionality", "outputDimensionality") if config is not None else None
    if _number(dimensions):
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = int(dimensions)
    task = enum_name(read(config, "task_type", "taskType")) if config is not None else None
    if task:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json({"task_type": task}, max_len)
    if capture:
        contents = kwargs.get("contents")
        items = contents if isinstance(contents, list | tuple) else [] if contents is None else [contents]
        # Unlike generate_content, each item of the list is an input of its own (one embedding each).
        inputs = [_embedded(message) for item in items for message in input_messages(item)]
        if inputs:
            # As for OpenAI embeddings: the embedded inputs as ``input.value`` (semconv has no attribute for them).
            attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
    return attrs


def _embedded(message: Message) -> Any:
    """One embedded input: its text, or its parts when it is not text only (an image, a file)."""
    parts = message["parts"]
    if all(p.get("type") == "text" for p in parts):
        return "".join(p["content"] for p in parts)
    return parts
