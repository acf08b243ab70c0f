"""Vercel AI SDK telemetry: ``ai.operationId``, ``ai.prompt.messages``, ``ai.response.*``, ``ai.usage.*``, ``ai.toolCall.*``.

Only the provider-call spans (``ai.generateText.doGenerate``, ``ai.streamText.doStream``, ...) are model
calls; the outer ``ai.generateText`` span repeats their usage and is a workflow, so tokens are not counted
twice. ``ai.prompt.messages`` holds the AI SDK's messages (content text or ``text`` / ``tool-call`` /
``tool-result`` parts); SDK 4 names usage ``promptTokens``/``completionTokens``, SDK 5 ``inputTokens``/
``outputTokens``, and tool arguments/results ``args``/``result`` or ``input``/``output``. Image and file parts
(``image``, ``data``, ``mimeType`` in SDK 4 / ``mediaType`` in SDK 5) become typed media parts.

Provider-call spans also carry the model (``ai.response.model``; asked for: ``ai.model.id``), the finish reason
(``ai.response.finishReason``; SDK 3 ``ai.finishReason``) and, for ``doStream``, the stream's timing
(``ai.response.msToFirstChunk``, SDK 3 ``ai.stream.msToFirstChunk``; ``ai.response.msToFinish``;
``ai.response.avgOutputTokensPerSecond``, SDK 4 ``ai.response.avgCompletionTokensPerSecond``), in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace.mapping.conventions._common import (
    Messages,
    StepInfo,
    StreamTiming,
    ToolRun,
    parse_json,
    text_or_none,
    text_part,
    tool_call_part,
    tool_response_part,
)
from evaltrace.mapping.conventions._media import media_part

NAME = "vercel_ai"
OPERATION_ID = "ai.operationId"

FIRST_CHUNK_KEYS = ("ai.response.msToFirstChunk", "ai.stream.msToFirstChunk")
FINISH_MS = "ai.response.msToFinish"
RATE_KEYS = ("ai.response.avgOutputTokensPerSecond", "ai.response.avgCompletionTokensPerSecond")
FINISH_REASON_KEYS = ("ai.response.finishReason", "ai.finishReason")

USAGE = {
    sc.GEN_AI_USAGE_INPUT_TOKENS: ("ai.usage.promptTokens", "ai.usage.inputTokens"),
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: ("ai.usage.completionTokens", "ai.usage.outputTokens"),
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: ("ai.usage.reasoningTokens",),
}


def detect(attributes: Mapping[str, Any]) -> bool:
    """Whether the span is a Vercel AI SDK span."""
    return isinstance(attributes.get(OPERATION_ID), str) and str(attributes[OPERATION_ID]).startswith("ai.")


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """Return the evaltrace kind of ``ai.operationId``."""
    operation = attributes.get(OPERATION_ID)
    if not isinstance(operation, str) or not operation.startswith("ai."):
        return None
    if operation == "ai.toolCall":
        return sc.KIND_TOOL
    if operation.endswith((".doGenerate", ".doStream")):
        return sc.KIND_LLM
    if operation.endswith(".doEmbed"):
        return sc.KIND_EMBEDDING
    return sc.KIND_WORKFLOW


def messages(attributes: Mapping[str, Any]) -> Messages:
    """Return the provider call's prompt messages and its response (text and tool calls)."""
    prompt = parse_json(attributes.get("ai.prompt.messages"))
    out = Messages(inputs=[_message(m) for m in prompt if isinstance(m, dict)] if isinstance(prompt, list) else [])
    parts: list[Any] = []
    if isinstance(attributes.get("ai.response.text"), str):
        parts.append(text_part(attributes["ai.response.text"]))
    calls = parse_json(attributes.get("ai.response.toolCalls"))
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            parts.append(tool_call_part(call.get("toolCallId"), call.get("toolName"), _first(call, "args", "input")))
    if parts:
        out.outputs.append({"role": "assistant", "parts": parts})
    return out


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    return next((mapping[k] for k in keys if k in mapping), None)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = text_or_none(message.get("role")) or "user"
    content = message.get("content")
    parts: list[Any] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            parts.append(text_part(part))
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append(text_part(str(part.get("text") or "")))
        elif isinstance(part, dict) and part.get("type") == "reasoning":
            parts.append({"type": "reasoning", "content": str(part.get("text") or "")})
        elif isinstance(part, dict) and part.get("type") == "tool-call":
            parts.append(tool_call_part(part.get("toolCallId"), part.get("toolName"), _first(part, "args", "input")))
        elif isinstance(part, dict) and part.get("type") == "tool-result":
            result = _first(part, "result", "output")
            if isinstance(result, dict) and result.get("type") in ("text", "json") and "value" in result:
                result = result["value"]  # SDK 5 wraps results as {"type": "text"|"json", "value": ...}
            parts.append(tool_response_part(part.get("toolCallId"), result))
        elif isinstance(part, dict) and (media := media_part(part)) is not None:
            parts.append(media)
        elif part is not None:
            parts.append(part)
    return {"role": role, "parts": parts}


def stream_timing(attributes: Mapping[str, Any]) -> StreamTiming | None:
    """Return the timing a ``doStream`` span recorded (milliseconds in the attributes), or None."""
    first = _number(attributes, FIRST_CHUNK_KEYS)
    finish = _number(attributes, (FINISH_MS,))
    rate = _number(attributes, RATE_KEYS)
    if first is None and finish is None and rate is None:
        return None
    return StreamTiming(
        first_chunk_s=None if first is None else first / 1000,
        last_chunk_s=None if finish is None else finish / 1000,
        output_tokens_per_second=rate,
    )


def step_info(attributes: Mapping[str, Any]) -> StepInfo:
    """Return the model and finish reason a provider-call span recorded."""
    requested = text_or_none(attributes.get("ai.model.id"))
    finish = next((r for k in FINISH_REASON_KEYS if (r := text_or_none(attributes.get(k)))), None)
    return StepInfo(
        model=text_or_none(attributes.get("ai.response.model")) or requested,
        request_model=requested,
        finish_reasons=[finish] if finish else [],
    )


def _number(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def tool_run(attributes: Mapping[str, Any]) -> ToolRun:
    """Return what an ``ai.toolCall`` span recorded."""
    args_key = next((k for k in ("ai.toolCall.args", "ai.toolCall.input") if k in attributes), None)
    result_key = next((k for k in ("ai.toolCall.result", "ai.toolCall.output") if k in attributes), None)
    return ToolRun(
        name=text_or_none(attributes.get("ai.toolCall.name")),
        call_id=text_or_none(attributes.get("ai.toolCall.id")),
        arguments=parse_json(attributes[args_key]) if args_key else None,
        result=parse_json(attributes[result_key]) if result_key else None,
        has_arguments=args_key is not None,
        has_result=result_key is not None,
    )
