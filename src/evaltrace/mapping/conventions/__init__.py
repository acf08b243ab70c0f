"""Foreign GenAI conventions: what other instrumentations' spans say, in evaltrace's terms.

One module per convention, each pure (attributes, and events for ``genai_events``, in; GenAI message JSON,
a span kind, token keys, a tool run out), chosen by what the span carries:

* ``openinference``: Arize OpenInference (``openinference.span.kind``, ``llm.input_messages.N.*``).
* ``openllmetry``: traceloop OpenLLMetry (``gen_ai.prompt.N.*``, ``gen_ai.completion.N.*``, ``traceloop.*``).
* ``vercel_ai``: the Vercel AI SDK (``ai.operationId``, ``ai.prompt.messages``, ``ai.usage.*``).
* ``genai_events``: the older GenAI conventions' message content as span events.

evaltrace's own attributes always win: ``evaltrace.span.kind`` over any derived kind, ``gen_ai.input.messages`` /
``gen_ai.output.messages`` / ``gen_ai.system_instructions`` over any foreign message form, each
``gen_ai.usage.*`` key over its foreign aliases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace.mapping.conventions import genai_events, langfuse, openinference, openllmetry, vercel_ai
from evaltrace.mapping.conventions._common import (
    Messages,
    StepInfo,
    StreamTiming,
    ToolRun,
    content_parts,
    parse_json,
    responses_messages,
    text_or_none,
)

__all__ = ["Messages", "StepInfo", "StreamTiming", "ToolRun", "content_parts", "foreign_kind", "foreign_messages",
           "input_key", "output_key", "request_messages", "responses_messages", "span_kind", "step_info",
           "stream_timing", "tool_run", "usage_keys"]  # fmt: skip

_OPERATION_KINDS = {
    sc.OP_CHAT: sc.KIND_LLM,
    "text_completion": sc.KIND_LLM,
    "generate_content": sc.KIND_LLM,
    sc.OP_EXECUTE_TOOL: sc.KIND_TOOL,
    "invoke_agent": sc.KIND_AGENT,
    "create_agent": sc.KIND_AGENT,
    "invoke_workflow": sc.KIND_WORKFLOW,
    "embeddings": sc.KIND_EMBEDDING,
    "retrieval": "retriever",
}
_OWN_MESSAGES = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
_USAGE: dict[str, tuple[str, ...]] = {}
# pydantic-ai writes GenAI attributes itself; its chat spans' cost is its own attribute.
_PYDANTIC_AI_USAGE = {
    sc.EVALTRACE_COST_USD: sc.PYDANTIC_AI_OPERATION_COST,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: sc.PYDANTIC_AI_REASONING_TOKENS,
    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: sc.PYDANTIC_AI_TIME_TO_FIRST_CHUNK,
}
for _module_usage in (openinference.USAGE, openllmetry.USAGE, vercel_ai.USAGE, _PYDANTIC_AI_USAGE):
    for _key, _aliases in _module_usage.items():
        _USAGE[_key] = (*_USAGE.get(_key, ()), *((_aliases,) if isinstance(_aliases, str) else _aliases))


def foreign_kind(attributes: Mapping[str, Any]) -> str | None:
    """Return the span kind a foreign convention's own kind attribute gives (OpenInference, OpenLLMetry, Vercel)."""
    return openinference.span_kind(attributes) or openllmetry.span_kind(attributes) or vercel_ai.span_kind(attributes)


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """Return the span's evaltrace kind, as evaluator ``span_kinds`` filters see it.

    ``evaltrace.span.kind`` when set; else the foreign convention's kind (an OpenInference ``TOOL`` span is
    ``"tool"``, ``LLM`` ``"llm"``, ``AGENT`` ``"agent"``, ``CHAIN`` ``"workflow"``; ``traceloop.span.kind``
    likewise); else the kind of ``gen_ai.operation.name`` (``chat`` -> ``"llm"``, ``execute_tool`` ->
    ``"tool"``, ``invoke_agent`` -> ``"agent"``). None when nothing tells.
    """
    own = attributes.get(sc.EVALTRACE_SPAN_KIND)
    if isinstance(own, str):
        return own
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    return foreign_kind(attributes) or (_OPERATION_KINDS.get(operation) if isinstance(operation, str) else None)


def foreign_messages(attributes: Mapping[str, Any], events: Sequence[Any] = ()) -> Messages | None:
    """Return a span's messages read by the first foreign convention that finds some, or None.

    None too when the span carries GenAI message attributes: those are read as evaltrace's own.
    """
    if any(key in attributes for key in _OWN_MESSAGES):
        return None
    for detect, read in (
        (openinference.detect, openinference.messages),
        (openllmetry.detect, openllmetry.messages),
        (vercel_ai.detect, vercel_ai.messages),
    ):
        if detect(attributes) and (found := read(attributes)):
            return found
    if events and genai_events.detect(events) and (found := genai_events.messages(events)):
        return found
    return None


def stream_timing(
    attributes: Mapping[str, Any], events: Sequence[Any], start_ns: int, output_tokens: float | None
) -> StreamTiming | None:
    """Return what a foreign convention recorded of a streamed call, or None when it recorded nothing.

    OpenInference's ``First Token Stream Event`` and OpenLLMetry's per-chunk events are read from ``events``
    (whatever convention the span's messages follow: OpenLLMetry 0.4x writes GenAI messages), the Vercel AI
    SDK's ``ai.response.msTo*`` attributes from a Vercel span, else Langfuse's
    ``langfuse.observation.completion_start_time``. ``output_tokens``: the span's output tokens, for
    the rate OpenLLMetry does not record.
    """
    if events:
        found = openinference.stream_timing(events, start_ns) or openllmetry.stream_timing(
            events, start_ns, output_tokens
        )
        if found is not None:
            return found
    if vercel_ai.detect(attributes):
        return vercel_ai.stream_timing(attributes)
    return langfuse.stream_timing(attributes, start_ns) if langfuse.COMPLETION_START in attributes else None


def step_info(attributes: Mapping[str, Any], events: Sequence[Any] = ()) -> StepInfo:
    """Return the model and finish reasons of a model-call span, from every convention that recorded them.

    The GenAI attributes (``gen_ai.response.model``, else Langfuse's ``langfuse.observation.model.name``;
    ``gen_ai.request.model``, ``gen_ai.response.finish_reasons``) come first, then the span's foreign convention
    (OpenInference, OpenLLMetry, Vercel AI SDK, GenAI events), then the ``finish_reason`` of each GenAI output
    message. Finish reasons are kept as recorded.
    """
    info = StepInfo(
        model=text_or_none(attributes.get(sc.GEN_AI_RESPONSE_MODEL)) or text_or_none(attributes.get(langfuse.MODEL)),
        request_model=text_or_none(attributes.get(sc.GEN_AI_REQUEST_MODEL)),
        finish_reasons=_reasons(attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)),
    )
    if info.model and info.request_model and info.finish_reasons:
        return info  # all recorded the GenAI way (evaltrace's own spans): no foreign convention to look for
    for detect, read in (
        (openinference.detect, openinference.step_info),
        (openllmetry.detect, openllmetry.step_info),
        (vercel_ai.detect, vercel_ai.step_info),
    ):
        if detect(attributes):
            _fill(info, read(attributes))
    if not info.finish_reasons and events:
        _fill(info, genai_events.step_info(events))
    if not info.finish_reasons and sc.GEN_AI_OUTPUT_MESSAGES in attributes:
        outputs = parse_json(attributes[sc.GEN_AI_OUTPUT_MESSAGES])
        if isinstance(outputs, list):
            info.finish_reasons = [
                m["finish_reason"] for m in outputs if isinstance(m, dict) and isinstance(m.get("finish_reason"), str)
            ]
    info.model = info.model or info.request_model
    return info


def _reasons(value: Any) -> list[str]:
    """Finish reasons as a list: a ``string[]`` attribute, a JSON array text, or one string."""
    value = parse_json(value) if isinstance(value, str) and value.startswith("[") else value
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list | tuple):  # what an attribute holds (no ABC check: this runs per model call)
        return [v for v in value if isinstance(v, str) and v]
    return []


def _fill(info: StepInfo, found: StepInfo) -> None:
    """Set what ``info`` lacks from ``found``."""
    info.model = info.model or found.model
    info.request_model = info.request_model or found.request_model
    info.finish_reasons = info.finish_reasons or found.finish_reasons


def request_messages(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Return the GenAI input messages of a model call whose ``input.value`` is an OpenAI Responses request.

    ``input.value`` holding the ``input`` item list itself, or the request body (``{"input": [...],
    "instructions": ..., "model": ...}``, as OpenInference records it), gives its items as messages (and the
    ``instructions`` as a system message); anything else gives None.
    """
    value = parse_json(attributes.get(sc.INPUT_VALUE))
    body = value if isinstance(value, dict) else {"input": value}
    found = responses_messages(body.get("input"))
    if found is None:
        return None
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        found.insert(0, {"role": "system", "parts": [{"type": "text", "content": instructions}]})
    return found


def tool_run(attributes: Mapping[str, Any]) -> ToolRun | None:
    """Return what a foreign tool (or retriever) span recorded, or None for a span of no foreign convention."""
    for detect, read in (
        (openinference.detect, openinference.tool_run),
        (vercel_ai.detect, vercel_ai.tool_run),
        (openllmetry.detect, openllmetry.tool_run),
    ):
        if detect(attributes):
            return read(attributes)
    return None


def usage_keys(key: str) -> tuple[str, ...]:
    """Return ``key`` (a ``gen_ai.usage.*`` or cost attribute) followed by its foreign aliases, in preference order."""
    return (key, *_USAGE.get(key, ()))


def input_key(attributes: Mapping[str, Any]) -> str:
    """Return the attribute holding a span's input: ``input.value``, else OpenLLMetry's ``traceloop.entity.input``.

    A pydantic-ai agent run span has neither: its ``pydantic_ai.all_messages`` (the run's messages) then.
    """
    if sc.INPUT_VALUE not in attributes and openllmetry.ENTITY_INPUT in attributes:
        return openllmetry.ENTITY_INPUT
    if sc.INPUT_VALUE not in attributes and sc.PYDANTIC_AI_ALL_MESSAGES in attributes:
        return sc.PYDANTIC_AI_ALL_MESSAGES
    return sc.INPUT_VALUE


def output_key(attributes: Mapping[str, Any]) -> str:
    """Return the attribute holding a span's output: ``output.value``, else ``traceloop.entity.output``.

    A pydantic-ai agent run span (it has ``pydantic_ai.all_messages``) holds its output in ``final_result``.
    """
    if sc.OUTPUT_VALUE not in attributes and openllmetry.ENTITY_OUTPUT in attributes:
        return openllmetry.ENTITY_OUTPUT
    if sc.OUTPUT_VALUE not in attributes and sc.PYDANTIC_AI_ALL_MESSAGES in attributes:
        return sc.PYDANTIC_AI_FINAL_RESULT
    return sc.OUTPUT_VALUE
