"""Pure: what a manual LLM span (``evaltrace.llm_call``) was given -> the attributes the auto-instrumentations write.

Request parameters are validated here so that bad input fails with a message naming the parameter; the
response half reuses the OpenAI instrumentation's writer (``outcome_attributes``), so token counts, Langfuse
cost details and cost read the same whichever way the span was made. Like the instrumented spans, manual ones
write no ``langfuse.observation.usage_details`` (Langfuse derives it from the ``gen_ai.usage.*`` counts,
conventions.md 4.2) and ``evaltrace.cost_thinking_usd`` only when reasoning tokens were billed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltrace import pricing
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Usage, outcome_attributes
from evaltrace._internal.genai_parts import system_parts, tool_definitions
from evaltrace._internal.jsonutil import capped_json

Attributes = dict[str, Any]

# (parameter, attribute) by type: numbers become floats where the conventions say double.
_FLOATS = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P),
    ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY),
    ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY),
)
_INTS = (
    ("top_k", sc.GEN_AI_REQUEST_TOP_K),  # an int, as on the conventions' main branch
    ("max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
    ("seed", sc.GEN_AI_REQUEST_SEED),
    ("choice_count", sc.GEN_AI_REQUEST_CHOICE_COUNT),
    ("server_port", sc.SERVER_PORT),
)
_STRINGS = (
    ("reasoning_level", sc.GEN_AI_REQUEST_REASONING_LEVEL),
    ("output_type", sc.GEN_AI_OUTPUT_TYPE),
    ("conversation_id", sc.GEN_AI_CONVERSATION_ID),
    ("server_address", sc.SERVER_ADDRESS),
)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """The request side of one manual call, as given to ``llm_call``."""

    model: str | None
    provider: str
    operation: str
    params: Mapping[str, Any]  # the request parameters given (None values left out)
    system: str | Sequence[Any] | None = None
    tools: Sequence[Any] | None = None


def start_attributes(spec: RequestSpec) -> Attributes:
    """Attributes set at span creation: what the GenAI spec lists for sampling, plus our routing kinds."""
    attrs: Attributes = {
        sc.GEN_AI_OPERATION_NAME: spec.operation,
        sc.GEN_AI_PROVIDER_NAME: spec.provider,
        sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
        sc.OPENINFERENCE_SPAN_KIND: "LLM",
    }
    if spec.model:
        attrs[sc.GEN_AI_REQUEST_MODEL] = spec.model
    return attrs


def request_attributes(spec: RequestSpec, capture: bool, max_len: int) -> Attributes:
    """Request parameters (validated), Langfuse model parameters and, when ``capture``, system and tools."""
    params = spec.params
    attrs = _parameter_attributes(params)
    # Langfuse shows model parameters; where the endpoint is and which conversation it belongs to are not ones.
    model_parameters = {
        k: json.dumps(list(v)) if isinstance(v, list | tuple) else v for k, v in params.items() if k not in _NOT_MODEL
    }
    if model_parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(model_parameters, max_len)
    if capture and spec.system:
        attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = capped_json(system_parts(spec.system), max_len)
    if capture and spec.tools:
        attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tool_definitions(spec.tools), max_len)
    return attrs


_NOT_MODEL = frozenset({"server_address", "server_port", "conversation_id"})


def _parameter_attributes(params: Mapping[str, Any]) -> Attributes:
    """The ``gen_ai.request.*`` (and server) attributes; a value of the wrong type names its parameter."""
    attrs: Attributes = {}
    for table, accepted, what in (
        (_FLOATS, int | float, "a number"),
        (_INTS, int, "an integer"),
        (_STRINGS, str, "a string"),
    ):
        for key, name in table:
            value = params.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, accepted):
                raise ValueError(f"llm_call({key}=...) must be {what}, got {value!r}")
            attrs[name] = float(value) if table is _FLOATS else value
    stop = params.get("stop_sequences")
    if stop is not None:
        if isinstance(stop, str) or not all(isinstance(s, str) for s in stop):
            raise ValueError(f"llm_call(stop_sequences=...) must be a list of strings, got {stop!r}")
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = list(stop)
    if params.get("stream") is True:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    return attrs


def response_attributes(
    response_id: str | None,
    response_model: str | None,
    usage: Usage | None,
    finish_reason: str | None,
) -> Attributes:
    """Response id/model, finish reasons and token counts, exactly as the OpenAI instrumentation writes them.

    No ``langfuse.observation.usage_details``: Langfuse derives the same object from the counts.
    """
    outcome = Outcome(
        response_id=response_id,
        response_model=response_model,
        finish_reasons=[finish_reason] if finish_reason else [],
        usage=usage,
    )
    return outcome_attributes(outcome)


def cost_attributes(usage: Usage | None, model: str | None, provider: str | None, cost_usd: float | None) -> Attributes:
    """``evaltrace.cost_usd`` (+ thinking share, with reasoning tokens) and Langfuse ``cost_details``: given, or priced.

    A given cost is the total only (its split is unknown). Without one, the price is looked up for
    ``model`` at ``provider`` (``set_model_price`` overrides win); no price or no input count means no cost.
    """
    if cost_usd is not None:
        return {
            sc.EVALTRACE_COST_USD: float(cost_usd),
            sc.LANGFUSE_OBSERVATION_COST_DETAILS: capped_json({"total": cost_usd}),
        }
    if usage is None or not model or not provider:
        return {}
    cost = pricing.cost_at(
        pricing.price_of(model, provider),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_tokens=usage.cached_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    if cost is None:
        return {}
    attrs: Attributes = {sc.EVALTRACE_COST_USD: cost.total_usd}
    if usage.reasoning_tokens:  # absent means none: the mapping reads a priced span without it as 0.0
        attrs[sc.EVALTRACE_COST_THINKING_USD] = cost.reasoning_usd
    attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS] = capped_json(cost.details())
    return attrs
