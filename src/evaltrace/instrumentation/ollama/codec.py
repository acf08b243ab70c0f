"""Pure: an Ollama ``chat`` / ``generate`` / ``embed`` call -> request attributes, and its response -> ``Outcome``.

The wrapped call is the client's ``_request(cls, "POST", path, json=body, stream=...)`` (see endpoints.py):
``request_params`` picks the LLM calls by path and reads the JSON body the SDK built from the user's arguments,
positional or not (messages, tools and options already as the dicts it sends). Sampling parameters live in
``options`` (a dict, or ``ollama.Options`` when a body is built by hand): ``temperature``, ``top_p``, ``top_k``, ``num_predict`` (the max
tokens), ``seed``, ``stop``, ``frequency_penalty``, ``presence_penalty``.

Responses: ``message.content`` (chat) or ``response`` (generate) is the answer, ``thinking`` (``think=True``) a
``reasoning`` part (an inline ``<think>`` block in the answer becomes one too), ``message.tool_calls`` ``tool_call``
parts with their arguments as the object the server sent (the SDK keeps no tool-call id). ``done_reason``
(``stop``, ``length``, ``load``, ``unload``, ...) is written verbatim; the output message's finish reason is
``tool_call`` when the answer calls tools (Ollama says ``stop`` then), the reason itself otherwise, and ``error``
when the response never finished. A finished response (``done: true``) without a ``done_reason`` (servers before
it existed, or a proxy that drops it) has no ``gen_ai.response.finish_reasons`` (the reason is unknown, never
guessed) and its message ``stop`` (``tool_call`` with tool calls): the schema needs one, and the generation ended
without an error. Usage: ``prompt_eval_count`` is the input (the whole prompt, cached tokens included),
``eval_count`` the output; a server that omits ``prompt_eval_count`` (it did on a prompt-cache hit) gives no input
count, not 0: the prompt's size is unknown then, and 0 would understate it and its cost.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from types import AsyncGeneratorType, GeneratorType
from typing import Any, cast

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Accumulator, Codec, Endpoint, Server
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    assistant_parts,
    field,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)
from evaltrace._internal.openai.request import embedding_inputs
from evaltrace.instrumentation.ollama.endpoints import PATHS

PROVIDER = "ollama"
DEFAULT_HOST = ("127.0.0.1", 11434)

Attributes = dict[str, Any]
Scalar = str | int | float | bool

OPERATIONS = {"chat": sc.OP_CHAT, "generate": sc.OP_TEXT_COMPLETION, "embed": sc.OP_EMBEDDINGS}

# (option, attribute, accepted types)
_OPTIONS: tuple[tuple[str, str, tuple[type, ...]], ...] = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE, (int, float)),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P, (int, float)),
    ("top_k", sc.GEN_AI_REQUEST_TOP_K, (int,)),
    ("num_predict", sc.GEN_AI_REQUEST_MAX_TOKENS, (int,)),
    ("seed", sc.GEN_AI_REQUEST_SEED, (int,)),
    ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, (int, float)),
    ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY, (int, float)),
)
_FLOATS = frozenset({sc.GEN_AI_REQUEST_TEMPERATURE, sc.GEN_AI_REQUEST_TOP_P, sc.GEN_AI_REQUEST_FREQUENCY_PENALTY,
                     sc.GEN_AI_REQUEST_PRESENCE_PENALTY})  # fmt: skip


def request_params(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(kind, params) of a ``_request(cls, method, path, json=body, stream=...)`` call; None: not an LLM call.

    ``params`` is the JSON body (a copy: the SDK's own dict is never written), with ``stream`` from the call and an
    empty ``model`` (the SDK's default) left out.
    """
    path = kwargs.get("url")
    for arg in args[1:3]:  # (cls, method, path): the path's place in every 0.4+ client
        if isinstance(arg, str) and arg.startswith("/"):
            path = arg
    kind = PATHS.get(path) if isinstance(path, str) else None
    if kind is None:
        return None
    body = kwargs.get("json")
    params = dict(body) if isinstance(body, dict) else {}
    if kwargs.get("stream") is True:
        params["stream"] = True
    if not params.get("model"):
        params.pop("model", None)
    return kind, params


def options_of(params: dict[str, Any]) -> dict[str, Any]:
    """``options`` as a dict (a mapping, or ``ollama.Options`` with its unset fields left out)."""
    options = params.get("options")
    if options is None:
        return {}
    if isinstance(options, dict):
        return options
    dump = getattr(options, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        return dumped if isinstance(dumped, dict) else {}
    try:
        return dict(options)
    except (TypeError, ValueError):
        return {}


def request_attributes(method: str, params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one call (``params``: ``request_params``'s)."""
    embed = method == "embed"
    attrs: Attributes = {
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING if embed else sc.LANGFUSE_TYPE_GENERATION
    }
    options = options_of(params)
    attrs.update(option_attributes(options))
    if params.get("stream") is True:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    think = params.get("think")
    if isinstance(think, str) and think:  # "low" / "medium" / "high" (gpt-oss); a bool only switches thinking on
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = think
    fmt = params.get("format")
    if fmt == "json" or isinstance(fmt, dict):
        attrs[sc.GEN_AI_OUTPUT_TYPE] = "json"
    dimensions = params.get("dimensions")
    if embed and isinstance(dimensions, int) and not isinstance(dimensions, bool):
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
    parameters = model_parameters(params, options)
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(parameters, max_len)
    if not capture:
        return attrs
    if embed:
        inputs = embedding_inputs(params)
        if inputs is not None:
            attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
    elif method == "generate":
        attrs.update(list_values.request_content_attributes(prompt_messages(params), _system(params), None, max_len))
    else:
        attrs.update(
            list_values.request_content_attributes(
                input_messages(params.get("messages")), None, tool_definitions(params), max_len
            )
        )
    return attrs


def option_attributes(options: dict[str, Any]) -> Attributes:
    """``gen_ai.request.*`` of the sampling ``options``."""
    attrs: Attributes = {}
    for key, name, types in _OPTIONS:
        value: Any = options.get(key)
        if isinstance(value, types) and not isinstance(value, bool):
            attrs[name] = float(cast("float", value)) if name in _FLOATS else value
    stop = options.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    return attrs


def model_parameters(params: dict[str, Any], options: dict[str, Any]) -> dict[str, Scalar]:
    """The scalar options given, ``think`` and ``keep_alive``, for ``langfuse.observation.model.parameters``."""
    out: dict[str, Scalar] = {k: v for k, v in options.items() if isinstance(v, str | int | float)}
    stop = options.get("stop")
    if isinstance(stop, list | tuple) and stop:
        out["stop"] = json.dumps([str(s) for s in stop])
    for key in ("think", "keep_alive"):
        value = params.get(key)
        if isinstance(value, str | int | float):
            out[key] = value
    return out


def _system(params: dict[str, Any]) -> list[Part] | None:
    system = params.get("system")
    return [text_part(system)] if isinstance(system, str) and system else None


def prompt_messages(params: dict[str, Any]) -> list[Message]:
    """``generate``'s prompt (and images) as one user message."""
    parts: list[Part] = []
    prompt = params.get("prompt")
    if isinstance(prompt, str) and prompt:
        parts.append(text_part(prompt))
    parts.extend(_image_part(image) for image in params.get("images") or ())
    return [{"role": "user", "parts": parts}] if parts else []


def input_messages(messages: Any) -> list[Message]:
    """Chat ``messages`` (dicts or ``ollama.Message``) -> GenAI input messages."""
    out: list[Message] = []
    for message in messages or ():
        role = str(field(message, "role") or "user")
        content = field(message, "content")
        if role == "tool":
            part = tool_response_part(None, content if content is not None else "")
            tool_name = field(message, "tool_name")
            if isinstance(tool_name, str) and tool_name:  # the only link to its call: Ollama's calls have no id
                part["name"] = tool_name
            out.append({"role": "tool", "parts": [part]})
            continue
        thinking = field(message, "thinking")
        parts = assistant_parts(thinking if isinstance(thinking, str) else None,
                                content if isinstance(content, str) else None)  # fmt: skip
        if role != "assistant" and not thinking and isinstance(content, str):
            parts = [text_part(content)] if content else []  # a user's "<think>" is text, not reasoning
        parts.extend(_image_part(image) for image in field(message, "images") or ())
        parts.extend(_tool_call_part(call) for call in field(message, "tool_calls") or ())
        out.append({"role": role, "parts": parts})
    return out


def _image_part(image: Any) -> Part:
    """An image (base64 text, bytes, a path or ``ollama.Image``) by size only: never the payload."""
    value = getattr(image, "value", image)
    if isinstance(value, bytes):
        return {"type": "blob", "modality": "image", "content": f"<omitted {len(value)} bytes>"}
    return uri_part(f"data:;base64,{value}" if isinstance(value, str) else str(value), "image")


def _tool_call_part(call: Any) -> Part:
    function = field(call, "function")
    return tool_call_part(field(call, "id"), field(function, "name"), field(function, "arguments"))


def tool_definitions(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Tools (dicts, ``ollama.Tool`` or Python functions, described as the SDK describes them), flattened.

    Each becomes the dict the SDK sends, then is read as the OpenAI codec reads a Chat Completions tool.
    """
    tools = params.get("tools")
    if not tools:
        return None
    return openai_request.tool_definitions({"tools": [_tool_dict(tool) for tool in tools]})


def _tool_dict(tool: Any) -> Any:
    if callable(tool) and not isinstance(tool, dict):
        try:
            from ollama._utils import convert_function_to_tool

            tool = convert_function_to_tool(tool)
        except Exception:  # a function the SDK cannot describe: the SDK will say so; keep its name
            return {"type": "function", "function": {"name": getattr(tool, "__name__", str(tool))}}
    dump = getattr(tool, "model_dump", None)
    return dump(exclude_none=True, by_alias=True) if callable(dump) else tool


# --- response --------------------------------------------------------------------------------------------


def message_finish_reason(reason: Any, has_tool_call: bool, done: bool) -> str:
    """The output message's finish reason (see the module docstring); ``done``: the response finished."""
    if not reason:
        # A finished answer of no stated reason ended without an error: ``stop``; an unfinished one did not end.
        return ("tool_call" if has_tool_call else "stop") if done else "error"
    if has_tool_call and reason == "stop":
        return "tool_call"
    return str(reason)


def usage_of(response: Any) -> Usage | None:
    """``prompt_eval_count`` / ``eval_count`` -> Usage; None when the response has neither."""
    prompt = field(response, "prompt_eval_count")
    evaluated = field(response, "eval_count")
    if prompt is None and evaluated is None:
        return None
    return Usage(
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=evaluated if isinstance(evaluated, int) else None,
    )


def answer_parts(thinking: Any, text: Any, tool_calls: Any) -> list[Part]:
    """Reasoning, then the answer (its inline ``<think>`` moved to reasoning), then the tool calls."""
    parts = assistant_parts(thinking if isinstance(thinking, str) else None, text if isinstance(text, str) else None)
    parts.extend(_tool_call_part(call) for call in tool_calls or ())
    return parts


def outcome_of(method: str, response: Any, content: bool = True) -> Outcome:
    """ChatResponse / GenerateResponse / EmbedResponse -> Outcome (output message only with ``content``)."""
    reason = field(response, "done_reason")
    messages = None
    if method == "embed":
        return Outcome(response_model=field(response, "model"), usage=usage_of(response))
    if content:
        if method == "chat":
            message = field(response, "message")
            calls = field(message, "tool_calls")
            parts = answer_parts(field(message, "thinking"), field(message, "content"), calls)
        else:
            calls = None
            parts = answer_parts(field(response, "thinking"), field(response, "response"), None)
        messages = [
            {
                "role": "assistant",
                "parts": parts,
                "finish_reason": message_finish_reason(reason, bool(calls), field(response, "done") is True),
            }
        ]
    return Outcome(
        response_model=field(response, "model"),
        finish_reasons=[str(reason)] if reason else [],
        output_messages=messages,
        usage=usage_of(response),
    )


def summary_of(response: Any) -> Summary:
    """Model and token counts, read without the content."""
    usage = usage_of(response)
    model = getattr(response, "model", None)
    if usage is None:
        return Summary(model)
    return Summary(model, usage.input_tokens, usage.output_tokens)


def embedding_dimensions(response: Any) -> int | None:
    """The length of the first embedding an ``embed`` call returned."""
    embeddings = field(response, "embeddings")
    if embeddings and isinstance(embeddings[0], list | tuple):
        return len(embeddings[0])
    return None


def server_of(instance: Any) -> tuple[str | None, int | None]:
    """(host, port) of the client's host (``Client(host=...)``, ``OLLAMA_HOST``, default 127.0.0.1:11434)."""
    url = getattr(getattr(instance, "_client", None), "base_url", None)
    if url is None:
        return DEFAULT_HOST
    host = getattr(url, "host", None)
    port = getattr(url, "port", None)
    if port is None:
        port = {"https": 443, "http": 80}.get(str(getattr(url, "scheme", "")))
    return (host or None), port


# --- the engine's hooks ---------------------------------------------------------------------------------


class OllamaCodec(Codec):
    """Ollama's ``chat`` / ``generate`` / ``embed``: this module's functions behind the engine's hooks."""

    provider = PROVIDER
    label = "Ollama"

    def operation(self, kind: Hashable) -> str:
        """``chat``, ``text_completion`` (generate) or ``embeddings``."""
        return OPERATIONS.get(str(kind), str(kind))

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``chat`` / ``generate`` / ``embed`` by the path ``_request`` posts to, with the body as params."""
        return request_params(args, kwargs)

    def server_of(self, instance: Any) -> Server:
        """The client's host."""
        return server_of(instance)

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
        """See ``request_attributes``."""
        return request_attributes(str(kind), params, capture, max_len)

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A ``ChatResponse`` / ``GenerateResponse`` / ``EmbedResponse``."""
        outcome = outcome_of(str(kind), result, capture)
        if kind == "embed":
            dimensions = embedding_dimensions(result)
            if dimensions is not None:
                outcome.attributes = {sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: dimensions}
        return outcome

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Model and token counts, read without the content."""
        return summary_of(result)

    def status_code(self, error: BaseException) -> int | None:
        """The HTTP status of a ``ResponseError``; None for the SDK's -1 (an ``error`` line inside a 200 stream).

        ``ResponseError(error, status_code=-1)`` is what the client raises for a failure the server reports inside
        a stream: the response's status was 200, and -1 is no HTTP status, so no ``http.response.status_code``.
        """
        status = getattr(error, "status_code", None)
        return status if isinstance(status, int) and 100 <= status <= 599 else None

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        """``stream=True``: a generator (an async generator on ``AsyncClient``)."""
        return isinstance(result, GeneratorType | AsyncGeneratorType)

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh accumulator of ``chat`` or ``generate`` chunks."""
        from evaltrace.instrumentation.ollama.stream import OllamaStreamAccumulator  # it imports this module

        return OllamaStreamAccumulator(chat=kind == "chat")


CODEC = OllamaCodec()
