"""Pure: a Cohere v2 ``chat`` / ``chat_stream`` call -> request attributes, and a ``V2ChatResponse`` -> ``Outcome``.

The codec also routes ``embed`` / ``rerank`` (``embed_rerank``) and the v1 client's chat (``v1``) to their modules.

Cohere's v2 chat is OpenAI-shaped (roles ``system`` / ``user`` / ``assistant`` / ``tool``, ``tool_calls`` with
``function.{name, arguments}`` as a JSON string, ``tool_call_id``) with its own additions, all read here:

* content items ``text``, ``image_url``, ``document`` and, from reasoning models, ``thinking`` (a ``reasoning``
  part, never folded into the answer);
* the assistant's ``tool_plan`` (the plan the model writes before calling tools): a ``reasoning`` part too, since
  it is the model's thinking about the calls, not its answer;
* ``finish_reason`` in capitals (``COMPLETE``, ``STOP_SEQUENCE``, ``MAX_TOKENS``, ``TOOL_CALL``, ``ERROR``,
  ``TIMEOUT``): verbatim in ``gen_ai.response.finish_reasons``, mapped to the GenAI vocabulary on the message;
* usage in two counts: ``tokens`` (what the model read and wrote, template included) and ``billed_units`` (what
  is billed). ``gen_ai.usage.*`` are the billed units, each direction falling back to ``tokens`` when
  ``billed_units`` lacks it (``usage_of``):
  the token metric must report billable tokens when both are given, the metric and the cost are made from the
  span's ``Usage``, and one count everywhere keeps span, metric, cost and Langfuse's usage in agreement. The
  model's ``tokens`` are kept as ``cohere.usage.tokens.*``, ``cached_tokens`` as ``cohere.usage.cached_tokens``:
  it is a share of ``tokens`` (in a recording the model read 2935 input tokens, 2928 from the cache, and 2406 were
  billed), never of the billed units, so it is ``gen_ai.usage.cache_read.input_tokens`` only when the input count
  is the model's. The billed
  units stay as ``cohere.usage.billed_units.*`` too (with rerank's ``search_units``). The SDK types every count as
  a float: they are written as ints.

The SDK fills omitted keyword arguments with its ``OMIT`` sentinel (``...``); those are dropped first.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Accumulator, Codec, Server
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.values import host_port
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    chat_tool_call_part,
    document_part,
    document_text_part,
    field,
    reasoning_part,
    text_part,
    tool_response_part,
    uri_part,
)
from evaltrace._internal.openai.request import tool_definitions
from evaltrace.instrumentation.cohere import embed_rerank
from evaltrace.instrumentation.cohere.endpoints import CHAT_STREAM, EMBED, RERANK, V1_CHAT, V1_CHAT_STREAM

PROVIDER = "cohere"
DEFAULT_HOST = ("api.cohere.com", 443)

Attributes = dict[str, Any]
Scalar = str | int | float | bool

# finish_reason -> the GenAI finish reason of the output message; an unknown one is kept as sent.
FINISH_REASONS = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_call",
    "ERROR": "error",
    "TIMEOUT": "error",
    "ERROR_LIMIT": "error",  # v1: the context limit was hit
    "ERROR_TOXIC": "content_filter",  # v1
}

# (keyword, attribute, accepted types) of the sampling parameters; ``p`` and ``k`` are Cohere's top_p / top_k.
_PARAMETERS: tuple[tuple[str, str, tuple[type, ...]], ...] = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE, (int, float)),
    ("p", sc.GEN_AI_REQUEST_TOP_P, (int, float)),
    ("k", sc.GEN_AI_REQUEST_TOP_K, (int,)),
    ("max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS, (int,)),
    ("seed", sc.GEN_AI_REQUEST_SEED, (int,)),
    ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, (int, float)),
    ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY, (int, float)),
)
_FLOATS = frozenset({sc.GEN_AI_REQUEST_TEMPERATURE, sc.GEN_AI_REQUEST_TOP_P, sc.GEN_AI_REQUEST_FREQUENCY_PENALTY,
                     sc.GEN_AI_REQUEST_PRESENCE_PENALTY})  # fmt: skip
# Model parameters for Langfuse (``langfuse.observation.model.parameters``), under Cohere's own names.
_MODEL_PARAMETERS = ("temperature", "p", "k", "max_tokens", "seed", "frequency_penalty", "presence_penalty",
                     "safety_mode", "priority", "strict_tools", "logprobs")  # fmt: skip


def given(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments the caller gave: without the SDK's ``OMIT`` (``...``) and None."""
    return {k: v for k, v in kwargs.items() if v is not ... and v is not None}


def _number(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def request_attributes(params: dict[str, Any], capture: bool, max_len: int, stream: bool = False) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one v2 ``chat`` call (``params``: given)."""
    attrs: Attributes = {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION}
    for key, name, types in _PARAMETERS:
        value: Any = params.get(key)
        if _number(value, types):
            attrs[name] = float(value) if name in _FLOATS else value
    stop = params.get("stop_sequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    if stream:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    output_type = _output_type(params.get("response_format"))
    if output_type:
        attrs[sc.GEN_AI_OUTPUT_TYPE] = output_type
    parameters = model_parameters(params)
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(parameters, max_len)
    if capture:
        attrs.update(
            list_values.request_content_attributes(
                with_documents(input_messages(params.get("messages")), params.get("documents")),
                None,
                _tools(params),
                max_len,
            )
        )
    return attrs


def model_parameters(params: dict[str, Any]) -> dict[str, Scalar]:
    """The scalar model parameters given, and the thinking budget (``thinking.token_budget``) when enabled."""
    out: dict[str, Scalar] = {}
    for key in _MODEL_PARAMETERS:
        value = params.get(key)
        if isinstance(value, str | int | float):
            out[key] = value
    stop = params.get("stop_sequences")
    if isinstance(stop, list | tuple) and stop:
        out["stop_sequences"] = json.dumps([str(s) for s in stop])
    thinking = params.get("thinking")
    if field(thinking, "type") is not None:
        out["thinking_type"] = str(field(thinking, "type"))
        budget = field(thinking, "token_budget")
        if isinstance(budget, int):
            out["thinking_token_budget"] = budget
    return out


def _output_type(response_format: Any) -> str | None:
    kind = field(response_format, "type")
    return "json" if kind == "json_object" else ("text" if kind == "text" else None)


def _tools(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    return tool_definitions(params) if params.get("tools") else None


def input_messages(messages: Any) -> list[Message]:
    """The v2 ``messages`` (dicts or SDK message objects) -> GenAI input messages."""
    return [_message(m) for m in messages or ()]


def with_documents(messages: list[Message], documents: Any) -> list[Message]:
    """``messages`` with the request's ``documents`` as one ``user`` message after the system messages.

    Each document (a string, or ``{"data": {...}, "id"?}``) is a document text part (``parts.document_part``: its
    data as JSON text, its id kept), the RAG evaluators' context. A ``user`` message, as Groq's documents are
    recorded: they are data the caller gave, not instructions, and the conversation's last user turn stays its
    question. Only a list or tuple is read: any other iterable would be consumed before the SDK sends it.
    """
    if not isinstance(documents, list | tuple):
        return messages
    parts = [
        document_text_part(item) if isinstance(item, str) else document_part({"document": item})
        for item in documents
        if isinstance(item, str) or field(item, "data") is not None
    ]
    if not parts:
        return messages
    first = next((n for n, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    return [*messages[:first], {"role": "user", "parts": parts}, *messages[first:]]


def _message(message: Any) -> Message:
    role = str(field(message, "role") or "user")
    content = field(message, "content")
    if role == "tool":
        return {"role": "tool", "parts": [tool_response_part(field(message, "tool_call_id"), _tool_result(content))]}
    parts: list[Part] = []
    plan = field(message, "tool_plan")
    if isinstance(plan, str) and plan:
        parts.append(reasoning_part(plan))
    if isinstance(content, str):
        if content:
            parts.append(text_part(content))
    else:
        parts.extend(content_part(item) for item in content or ())
    parts.extend(chat_tool_call_part(call) for call in field(message, "tool_calls") or ())
    return {"role": role, "parts": parts}


def _tool_result(content: Any) -> Any:
    """A tool message's content: a string as is, text items joined, anything else as parts."""
    if isinstance(content, str) or content is None:
        return content if content is not None else ""
    items = list(content)
    texts = [field(item, "text") for item in items]
    if all(isinstance(t, str) for t in texts):
        return "".join(t for t in texts if isinstance(t, str))
    return [content_part(item) for item in items]


def content_part(item: Any) -> Part:
    """One content item (request or response) -> one GenAI part."""
    kind = field(item, "type")
    if kind == "text":
        return text_part(field(item, "text") or "")
    if kind == "thinking":
        return reasoning_part(field(item, "thinking") or "")
    if kind == "image_url":
        return uri_part(str(field(field(item, "image_url"), "url") or ""), "image")
    if kind == "document":
        return document_part(item)
    if isinstance(item, str):
        return text_part(item)
    return {"type": str(kind)}


# --- response --------------------------------------------------------------------------------------------


def finish_reason(reason: Any) -> str:
    """The output message's ``finish_reason``: mapped, an unknown one as sent, none (cut off) ``error``."""
    if not reason:
        return "error"
    return FINISH_REASONS.get(str(reason), str(reason))


def _int(value: Any) -> int | None:
    """A count the SDK types as float (``2406.0``) -> int; anything else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _billed_tokens(usage: Any) -> Any:
    """``usage.billed_units`` when it bills tokens (a rerank's bills search units only), else None."""
    billed = field(usage, "billed_units")
    if _int(field(billed, "input_tokens")) is None and _int(field(billed, "output_tokens")) is None:
        return None
    return billed


def usage_of(usage: Any) -> Usage | None:
    """``usage`` (v2) or ``meta`` (v1, embed, rerank) -> Usage, direction by direction: billed, else used.

    Each count is ``billed_units``' when it has that field, 0 included (Cohere billing nothing is a real 0, priced
    as 0), else the model's ``tokens`` for that direction: a partial ``billed_units`` loses neither count.
    ``cached_tokens`` is a share of the model's input ``tokens``, so it is the cache read only when the input
    count is that one. Image units (``images``, ``image_tokens``) are not text input tokens and are not added to
    them: an image-only embed's input is the model's ``tokens``, when the response gives them.
    """
    if usage is None:
        return None
    billed = field(usage, "billed_units")
    tokens = field(usage, "tokens")
    input_tokens = _int(field(billed, "input_tokens"))
    output_tokens = _int(field(billed, "output_tokens"))
    cached = None
    if input_tokens is None:
        input_tokens = _int(field(tokens, "input_tokens"))
        cached = _int(field(usage, "cached_tokens"))
    if output_tokens is None:
        output_tokens = _int(field(tokens, "output_tokens"))
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached)


def usage_attributes(usage: Any) -> Attributes:
    """``cohere.usage.*`` of a ``usage`` / ``meta``: the billed units, and what ``gen_ai.usage.*`` do not hold.

    With billed tokens in ``gen_ai.usage.*``, the model's ``tokens`` and ``cached_tokens`` are kept here.
    """
    if usage is None:
        return {}
    billed = field(usage, "billed_units")
    attrs: Attributes = {}
    for key, name in (
        ("input_tokens", sc.COHERE_USAGE_BILLED_INPUT_TOKENS),
        ("output_tokens", sc.COHERE_USAGE_BILLED_OUTPUT_TOKENS),
        ("search_units", sc.COHERE_USAGE_BILLED_SEARCH_UNITS),
    ):
        value = _int(field(billed, key))
        if value is not None:
            attrs[name] = value
    if _billed_tokens(usage) is not None:
        tokens = field(usage, "tokens")
        for key, name, source in (
            ("input_tokens", sc.COHERE_USAGE_TOKENS_INPUT, tokens),
            ("output_tokens", sc.COHERE_USAGE_TOKENS_OUTPUT, tokens),
            ("cached_tokens", sc.COHERE_USAGE_CACHED_TOKENS, usage),
        ):
            value = _int(field(source, key))
            if value is not None:
                attrs[name] = value
    return attrs


def output_parts(message: Any) -> list[Part]:
    """The assistant message's parts: the tool plan, the content (thinking, text) in order, then the tool calls."""
    plan = field(message, "tool_plan")
    parts = [reasoning_part(plan)] if isinstance(plan, str) and plan else []
    parts.extend(content_part(item) for item in field(message, "content") or ())
    parts.extend(chat_tool_call_part(call) for call in field(message, "tool_calls") or ())
    return parts


def chat_outcome(response: Any, content: bool = True) -> Outcome:
    """V2ChatResponse -> Outcome: one output message (only with ``content``); the finish reason verbatim."""
    reason = field(response, "finish_reason")
    messages = None
    if content:
        parts = output_parts(field(response, "message"))
        messages = [{"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason)}]
    return Outcome(
        response_id=field(response, "id"),
        response_model=None,  # the v2 response names no model: the request's is the span's
        finish_reasons=[str(reason)] if reason else [],
        output_messages=messages,
        usage=usage_of(field(response, "usage")),
    )


def chat_failure(response: Any) -> tuple[str, str] | None:
    """(``error.type``, message) of a response whose generation ended in ``ERROR`` or ``TIMEOUT``, else None.

    The API reports these in the body of a 200 and the SDK raises nothing: the finish reason is the error type.
    """
    reason = getattr(response, "finish_reason", None)
    if reason in ("ERROR", "TIMEOUT"):
        return str(reason), str(reason)
    return None


def chat_summary(response: Any) -> Summary:
    """Model (none in the response) and token counts of a V2ChatResponse, read without the content."""
    usage = usage_of(getattr(response, "usage", None))
    if usage is None:
        return Summary(None)
    return Summary(None, usage.input_tokens, usage.output_tokens)


def server_of(instance: Any) -> tuple[str | None, int | None]:
    """(host, port) of a v2 client's base URL (``ClientV2`` or ``client.v2``)."""
    wrapper = getattr(instance, "_client_wrapper", None)
    if wrapper is None:
        wrapper = getattr(getattr(instance, "_raw_client", None), "_client_wrapper", None)
    url = getattr(wrapper, "_base_url", None)
    if not isinstance(url, str):
        return DEFAULT_HOST
    return host_port(url)


def _body(result: Any) -> Any:
    """The response of a result: itself, or the ``data`` of the raw client's ``HttpResponse``."""
    if hasattr(result, "finish_reason") or hasattr(result, "meta"):  # every v2 response (chat, embed, rerank)
        return result
    return getattr(result, "data", result)


_OPERATIONS = {EMBED: sc.OP_EMBEDDINGS, RERANK: sc.OP_RERANK}
_V1_KINDS = (V1_CHAT, V1_CHAT_STREAM)
_STREAMS = (CHAT_STREAM, V1_CHAT_STREAM)


# --- the engine's hooks ---------------------------------------------------------------------------------


class CohereCodec(Codec):
    """Cohere v2 chat, embed and rerank, and v1 chat: this package's functions behind the engine's hooks."""

    provider = PROVIDER
    label = "Cohere"
    cache_plain_types = True  # every response type is always a plain response; streams are told apart by kind

    def operation(self, kind: Hashable) -> str:
        """``embeddings`` for embed, ``rerank`` (no GenAI operation: Cohere's name) for rerank, else ``chat``."""
        return _OPERATIONS.get(str(kind), sc.OP_CHAT)

    def span_kind(self, kind: Hashable) -> str:
        """``task`` for rerank (it answers nothing: not an LLM step), else the engine's."""
        return sc.KIND_TASK if kind == RERANK else super().span_kind(kind)

    def server_of(self, instance: Any) -> Server:
        """The client's ``base_url``."""
        return server_of(instance)

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Any:
        """See ``codec.request_attributes`` (chat), ``embed_rerank`` and ``v1``."""
        params = given(params)
        if kind == EMBED:
            return embed_rerank.embed_request_attributes(params, capture, max_len)
        if kind == RERANK:
            return embed_rerank.rerank_request_attributes(params, capture, max_len)
        if kind in _V1_KINDS:
            from evaltrace.instrumentation.cohere import v1  # it imports this module

            attrs = request_attributes(params, False, max_len, stream=kind == V1_CHAT_STREAM)
            conversation = params.get("conversation_id")
            if isinstance(conversation, str) and conversation:  # a server-side thread the API keeps and reads
                attrs[sc.GEN_AI_CONVERSATION_ID] = conversation
            if capture:
                attrs.update(
                    list_values.request_content_attributes(
                        v1.input_messages(params), v1.system_instructions(params), v1.tool_definitions(params), max_len
                    )
                )
            return attrs
        return request_attributes(params, capture, max_len, stream=kind == CHAT_STREAM)

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A response (or the raw client's ``HttpResponse`` of one), with its ``cohere.usage.*`` counts."""
        result = _body(result)
        if kind in (EMBED, RERANK, *_V1_KINDS):
            meta = getattr(result, "meta", None)
            usage = usage_of(meta)
            if kind == EMBED:
                outcome = embed_rerank.embed_outcome(result, usage)
            elif kind == RERANK:
                outcome = embed_rerank.rerank_outcome(result, usage, capture, self._max_len())
            else:
                from evaltrace.instrumentation.cohere import v1

                outcome = v1.chat_outcome(result, usage, capture)
            counts = usage_attributes(meta)
            if counts:
                outcome.attributes = {**(outcome.attributes or {}), **counts}
            return outcome
        outcome = chat_outcome(result, capture)
        outcome.attributes = usage_attributes(getattr(result, "usage", None)) or None
        return outcome

    @staticmethod
    def _max_len() -> int:
        from evaltrace._internal import settings

        return settings.get().max_attribute_length

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Token counts, read without the content."""
        result = _body(result)
        if kind in (EMBED, RERANK, *_V1_KINDS):
            usage = usage_of(getattr(result, "meta", None))
            return Summary(None) if usage is None else Summary(None, usage.input_tokens, usage.output_tokens)
        return chat_summary(result)

    def failure(self, kind: Hashable, result: Any) -> tuple[str, str] | None:
        """An ``ERROR`` / ``TIMEOUT`` finish (HTTP 200, nothing raised); v1's ``ERROR_LIMIT`` too."""
        if kind in _V1_KINDS:
            from evaltrace.instrumentation.cohere import v1

            return v1.failure(getattr(_body(result), "finish_reason", None))
        if kind in (EMBED, RERANK):
            return None
        return chat_failure(_body(result))

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        """``chat_stream`` always returns a stream (a generator, an async one on the async client)."""
        return kind in _STREAMS

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh accumulator of v2 (or v1) chat stream events."""
        if kind == V1_CHAT_STREAM:
            from evaltrace.instrumentation.cohere.v1 import V1StreamAccumulator

            return V1StreamAccumulator()
        from evaltrace.instrumentation.cohere.stream import ChatStreamAccumulator  # it imports this module

        return ChatStreamAccumulator()


CODEC = CohereCodec()
