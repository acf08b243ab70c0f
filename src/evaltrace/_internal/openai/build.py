"""Pure: the span attributes of one call, built from its request kwargs and its response.

``LLMCall`` runs them once the call has returned (a stream's response part when it ends) and sets their output
in one write (``deferred_attributes.set_built``). They read only their arguments and never write them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from evaltrace import pricing
from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import registry
from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.encode import encoded, scalars_json, text_answer, text_messages, text_size
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import Outcome, outcome_attributes

Attributes = dict[str, Any]
OutcomeFn = Callable[[], Outcome]
ExtraFn = Callable[[Outcome], Attributes]

# Fixed per endpoint kind: ``LLMCall`` sets them at span start with the shape's preset (built once per shape).
KIND_ATTRS: dict[EndpointKind, Attributes] = {
    EndpointKind.CHAT: {
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_CHAT_COMPLETIONS,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.RESPONSES: {
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_RESPONSES,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.EMBEDDINGS: {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING},
}


_MODEL_AND_MESSAGES = frozenset(("model", "messages"))


def request_attributes(kind: EndpointKind, kwargs: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one call (``KIND_ATTRS`` excepted)."""
    params = registry.given_kwargs(kwargs)
    # A chat call of a model and messages only (the commonest call) has no parameter, instruction or tool to read.
    bare = kind is EndpointKind.CHAT and _MODEL_AND_MESSAGES.issuperset(params)
    attrs: Attributes = {}
    if not bare:
        attrs = req.request_attributes(kind, params)
        parameters = req.model_parameters(kind, params)
        if parameters:
            attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = scalars_json(parameters, max_len)
    if capture and kind is EndpointKind.EMBEDDINGS:
        _add_embedding_inputs(attrs, params, max_len)
    elif capture:
        given = params.get("messages")
        plain = req.plain_chat_messages(given) if kind is EndpointKind.CHAT and type(given) is list else None
        if plain is not None:  # the common request: converted and measured in one loop, encoded in one call
            messages, size = plain
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = text_messages(messages, size, max_len, "name")
        else:
            messages = req.input_messages(kind, params)
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
        # A chat request keeps its system messages among the messages; Responses ``instructions`` come apart.
        instructions = None if bare else req.system_instructions(params)
        instructions_json = capped_json(instructions, max_len) if instructions else None
        if instructions_json is not None:
            attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions_json
        attrs.update(list_values.input_attributes(messages, text, instructions, instructions_json, max_len))
        if bare:
            return attrs
        tools = req.tool_definitions(params)
        if tools:
            attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs


def _add_embedding_inputs(attrs: Attributes, params: dict[str, Any], max_len: int) -> None:
    """The embedded texts as ``input.value`` (JSON), which Langfuse and Phoenix show as the span's input.

    GenAI semconv has no embeddings input attribute; OpenInference's embedding spans put the raw input in
    ``input.value``. Its per-text ``embedding.embeddings.N.embedding.text`` is not written: one attribute per
    input would be uncapped in number and could push other attributes out of the SDK's attribute limit.
    """
    inputs = req.embedding_inputs(params)
    if inputs is not None:
        attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
        attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON


def response_attributes(
    make_outcome: OutcomeFn,
    extra: ExtraFn | None,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """Response fields, output content (when ``capture``) and cost of one call.

    The price comes from ``pricing.price_of``, which resolves each (provider, model) once and caches it. Not
    written: Langfuse's ``usage_details``, which Langfuse derives from the ``gen_ai.usage.*`` counts to the same
    values (conventions.md 4.2), and the thinking cost of a call without reasoning tokens (the mapping reads 0.0).
    """
    return outcome_attributes_of(make_outcome(), extra, capture, max_len, request_model, provider)


def outcome_attributes_of(
    outcome: Outcome,
    extra: ExtraFn | None,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """``response_attributes`` of an ``Outcome`` made already."""
    attrs = outcome_attributes(outcome)
    output = outcome.output_messages
    if capture and output is not None:
        parts = output[0]["parts"] if len(output) == 1 else None
        if parts and len(parts) == 1 and parts[0]["type"] == "text" and type(text := parts[0]["content"]) is str:
            # One choice answering in text (the common reply): its size and its list value are that text.
            answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES] = text_answer(output, text, max_len)
            if list_values.is_plain(text):
                attrs.update(list_values.text_attributes(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, text or None, max_len))
            else:  # a structured (JSON) answer: the message, which Langfuse would otherwise show as a bare value
                attrs.update(list_values.json_output_attributes(answer))  # decided: not parsed a second time
        else:
            size = text_size(output)
            answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES] = (
                encoded(output, size, max_len) if size >= 0 else capped_json(output, max_len)
            )
            attrs.update(list_values.output_attributes(output, answer, max_len))
    usage = outcome.usage
    if usage is not None:
        model = outcome.response_model or request_model
        writes = usage.cache_write_tokens
        details = pricing.cost_details_at(
            pricing.price_of(model, provider) if model else None,
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            writes if isinstance(writes, int) else None,
        )
        if details is not None:
            attrs[sc.EVALTRACE_COST_USD] = details["total"]
            if usage.reasoning_tokens:  # absent means none: the mapping reads a priced span without it as 0.0
                attrs[sc.EVALTRACE_COST_THINKING_USD] = details["output_reasoning_tokens"]
            attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS] = encoded(details, 0, max_len)  # floats only
    if extra is not None:
        attrs.update(extra(outcome))
    return attrs


def result_attributes(
    outcome_of: Callable[[Any, bool], Outcome],
    result: Any,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """``response_attributes`` of a parsed response body, its ``Outcome`` made here by ``outcome_of``."""
    return outcome_attributes_of(outcome_of(result, capture), None, capture, max_len, request_model, provider)


def chunk_times(
    span_start_ns: Any, start: float, first: float | None, first_wall_ns: int, last: float | None
) -> tuple[float | None, float | None]:
    """(time to first chunk, time to last chunk) in seconds, measured from the span's own start stamp.

    ``span_start_ns`` is the span's ``start_time`` (wall-clock ns, None for a span that records nothing). The first
    chunk's wall-clock stamp is read on the same clock as the span's start and end stamps, so the time to first
    chunk can never exceed the span's duration (a ``perf_counter`` taken before the span started counted the
    span's start, on-start processors included, and drifted from the span's clock). The time to the last chunk
    adds the monotonic gap from the first chunk to it. ``start``, ``first`` and ``last`` are ``perf_counter``
    stamps: the fallback when the span has no start stamp, or no chunk carried content.
    """
    if first is None:
        return None, (last - start if last is not None else None)
    if isinstance(span_start_ns, int):
        ttfc = max(0.0, (first_wall_ns - span_start_ns) / 1e9)
    else:
        ttfc = first - start
    return ttfc, (ttfc + (last - first) if last is not None else None)


def stream_attributes(
    reason: str,
    chunks: int,
    times: tuple[float | None, float | None],
    first_wall_ns: int,
    first: float | None,
    last: float | None,
    outcome: Outcome,
) -> Attributes:
    """Stream attributes from the timestamps the proxy took on the application thread (``times``: ``chunk_times``)."""
    attrs: Attributes = {
        sc.EVALTRACE_STREAM_COMPLETED: reason == sc.STREAM_END_EXHAUSTED,
        sc.EVALTRACE_STREAM_END_REASON: reason,
        sc.EVALTRACE_STREAM_CHUNKS: chunks,
    }
    first_seconds, last_seconds = times
    if first_seconds is not None:
        attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first_seconds
        stamp = dt.datetime.fromtimestamp(first_wall_ns / 1e9, tz=dt.UTC)
        attrs[sc.LANGFUSE_OBSERVATION_COMPLETION_START_TIME] = stamp.isoformat(timespec="microseconds")
    if last_seconds is not None:
        attrs[sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK] = last_seconds
    output = outcome.usage.output_tokens if outcome.usage is not None else None
    if output is not None and first is not None and last is not None and last > first:
        attrs[sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND] = output / (last - first)
    return attrs
