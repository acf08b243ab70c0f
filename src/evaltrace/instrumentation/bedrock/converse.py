"""Pure: Bedrock's Converse shape (``converse`` / ``converse_stream``, and Amazon Nova's invoke_model body) -> GenAI.

The request (``inferenceConfig``, ``system``, ``messages``, ``toolConfig``) and the whole response; content blocks
are read in ``blocks``, a stream's events folded in ``converse_stream``. A user turn's ``toolResult`` blocks go into
a ``tool`` message of their own, ahead of the rest of the turn.

Usage: Converse's ``inputTokens`` excludes the prompt cache (``inputTokens + outputTokens + cacheReadInputTokens +
cacheWriteInputTokens == totalTokens``), so OTel's inclusive input is their sum, as for Anthropic. Nova's native
body names the cache counts ``cacheReadInputTokenCount`` / ``cacheWriteInputTokenCount``; both spellings are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.response import usage_of
from evaltrace._internal.engine.outcome import Outcome, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.openai.parts import Message, Part, text_part
from evaltrace.instrumentation.bedrock.blocks import content_part, tool_result_part

Attributes = dict[str, Any]

# Bedrock stop reasons (Converse's StopReason, and the native families') -> the output message's GenAI finish
# reason. ``gen_ai.response.finish_reasons`` keeps the value verbatim; an unknown one is kept as sent here too.
FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "refusal": "content_filter",
    # native bodies: Llama, Titan, Cohere, Mistral
    "stop": "stop",
    "length": "length",
    "FINISH": "stop",
    "LENGTH": "length",
    "CONTENT_FILTERED": "content_filter",
    "COMPLETE": "stop",
    "MAX_TOKENS": "length",
    "ERROR_TOXIC": "content_filter",
    "tool_calls": "tool_call",
}


def finish_reason(reason: Any) -> str:
    """The output message's ``finish_reason``: mapped, an unknown one as sent, none (cut off) ``error``."""
    if not isinstance(reason, str) or not reason:
        return "error"
    return FINISH_REASONS.get(reason, reason)


def output_message(parts: list[Part], reason: Any) -> Message:
    """An assistant OutputMessage with the mapped finish reason."""
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason)}


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# --- request ---------------------------------------------------------------------------------------------


def inference_attributes(config: Any, extra: Any = None) -> Attributes:
    """``inferenceConfig`` (and ``additionalModelRequestFields``' top k) -> ``gen_ai.request.*``.

    Nova's native body spells the limit ``max_new_tokens`` as well as ``maxTokens``; top k is not a Converse
    parameter and travels in ``additionalModelRequestFields`` (``top_k`` for Anthropic, ``inferenceConfig.topK``
    for Nova) or in Nova's own ``inferenceConfig.topK``.
    """
    attrs: Attributes = {}
    if not isinstance(config, Mapping):
        config = {}
    max_tokens = count(config.get("maxTokens"))
    if max_tokens is None:
        max_tokens = count(config.get("max_new_tokens"))
    if max_tokens is not None:
        attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    for key, name in (("temperature", sc.GEN_AI_REQUEST_TEMPERATURE), ("topP", sc.GEN_AI_REQUEST_TOP_P)):
        value = _float(config.get(key))
        if value is not None:
            attrs[name] = value
    stop = config.get("stopSequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    top_k = count(config.get("topK"))
    if top_k is None and isinstance(extra, Mapping):
        top_k = count(extra.get("top_k"))
        if top_k is None:
            top_k = count(extra.get("topK"))
        nested = extra.get("inferenceConfig")
        if top_k is None and isinstance(nested, Mapping):
            top_k = count(nested.get("topK"))
    if top_k is not None:
        attrs[sc.GEN_AI_REQUEST_TOP_K] = top_k
    return attrs


def output_attributes(output_config: Any, extra: Any = None) -> Attributes:
    """``outputConfig`` (and ``additionalModelRequestFields``' reasoning effort) -> output type and reasoning level.

    A ``json_schema`` text format asks for JSON (``gen_ai.output.type``). The reasoning effort is recorded as the
    provider spells it: ``outputConfig.effort``, else a model's own field passed through ``extra``: Claude's
    ``output_config.effort`` (whose ``format`` asks for JSON too), gpt-oss's ``reasoning_effort`` or Nova 2's ``reasoningConfig.maxReasoningEffort`` (also the top level of Nova's native
    body, which is passed as ``extra``), unless that config turns reasoning off.

    Args:
        output_config: The call's ``outputConfig``, if any.
        extra: ``additionalModelRequestFields`` (or Nova's native body), if any.

    Returns:
        ``gen_ai.output.type`` and ``gen_ai.request.reasoning.level``, those the request gives.
    """
    attrs: Attributes = {}
    effort: Any = None
    if isinstance(output_config, Mapping):
        text_format = output_config.get("textFormat")
        if isinstance(text_format, Mapping) and text_format.get("type") == "json_schema":
            attrs[sc.GEN_AI_OUTPUT_TYPE] = "json"
        effort = output_config.get("effort")
    if isinstance(extra, Mapping):
        claude = extra.get("output_config")  # Claude's own request field, passed through the extra fields
        if isinstance(claude, Mapping):
            claude_format = claude.get("format")
            if isinstance(claude_format, Mapping) and claude_format.get("type") == "json_schema":
                attrs[sc.GEN_AI_OUTPUT_TYPE] = "json"
            if not _level(effort):
                effort = claude.get("effort")
    if not _level(effort) and isinstance(extra, Mapping):
        effort = extra.get("reasoning_effort")
        reasoning = extra.get("reasoningConfig")
        if not _level(effort) and isinstance(reasoning, Mapping) and reasoning.get("type") != "disabled":
            effort = reasoning.get("maxReasoningEffort")
    if _level(effort):
        attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
    return attrs


def _level(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def system_instructions(system: Any) -> list[Part] | None:
    """``system`` (a list of system content blocks) -> ``gen_ai.system_instructions``; cache points skipped."""
    if isinstance(system, str):
        return [text_part(system)] if system else None
    if not isinstance(system, list | tuple):
        return None
    parts = [part for block in system if (part := content_part(block)) is not None]
    return parts or None


def input_messages(messages: Any) -> list[Message]:
    """``messages`` -> ``gen_ai.input.messages``; tool results go into a ``tool`` message ahead of the rest."""
    out: list[Message] = []
    for message in messages if isinstance(messages, list | tuple) else ():
        if not isinstance(message, Mapping):
            continue
        role = message.get("role") or "user"
        content = message.get("content")
        if isinstance(content, str):  # not Converse, but some native bodies accept it
            out.append({"role": role, "parts": [text_part(content)]})
            continue
        results: list[Part] = []
        parts: list[Part] = []
        for block in content if isinstance(content, list | tuple) else ():
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            # A user turn's tool results answer the previous turn; an assistant turn's are a server tool's own.
            if result is not None and role == "user":
                results.append(tool_result_part(result))
            elif (part := content_part(block)) is not None:
                parts.append(part)
        if results:
            out.append({"role": "tool", "parts": results})
        if parts or not results:
            out.append({"role": role, "parts": parts})
    return out


def tool_definitions(tool_config: Any) -> list[dict[str, Any]] | None:
    """``toolConfig.tools`` flattened as semconv shows: ``toolSpec`` as ``function``, a ``systemTool`` by name."""
    tools = tool_config.get("tools") if isinstance(tool_config, Mapping) else None
    if not isinstance(tools, list | tuple):
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        spec = tool.get("toolSpec")
        if isinstance(spec, Mapping):
            entry: dict[str, Any] = {"type": "function", "name": spec.get("name")}
            if spec.get("description") is not None:
                entry["description"] = spec["description"]
            schema = spec.get("inputSchema")
            if isinstance(schema, Mapping) and "json" in schema:
                entry["parameters"] = schema["json"]
            out.append(entry)
        elif isinstance(tool.get("systemTool"), Mapping):
            out.append({"type": "system_tool", "name": tool["systemTool"].get("name")})
    return out or None


# --- response --------------------------------------------------------------------------------------------


def converse_usage(usage: Any) -> Usage | None:
    """Converse ``usage`` (or Nova's body usage / a stream's ``metadata.usage``) -> Usage, input inclusive."""
    if not isinstance(usage, Mapping):
        return None
    read = usage.get("cacheReadInputTokens")
    if read is None:
        read = usage.get("cacheReadInputTokenCount")
    write = usage.get("cacheWriteInputTokens")
    if write is None:
        write = usage.get("cacheWriteInputTokenCount")
    return usage_of(count(usage.get("inputTokens")), count(usage.get("outputTokens")), count(read), count(write))


def converse_outcome(body: Any, response_id: str | None, content: bool = True) -> Outcome:
    """A Converse response (or Nova's native body) -> Outcome; ``stopReason`` verbatim."""
    reason = body.get("stopReason")
    messages = None
    if content:
        message = (body.get("output") or {}).get("message") or {}
        blocks = message.get("content") or ()
        parts = [part for block in blocks if (part := content_part(block)) is not None]
        messages = [output_message(parts, reason)]
    return Outcome(
        response_id=response_id,
        response_model=invoked_model(body.get("trace")),
        finish_reasons=[reason] if isinstance(reason, str) and reason else [],
        output_messages=messages,
        usage=converse_usage(body.get("usage")),
    )


def invoked_model(trace: Any) -> str | None:
    """The model a prompt router chose (``trace.promptRouter.invokedModelId``), verbatim; None without a router.

    A call to a prompt router names the router, which has no price: the model it routed to is the one that answered,
    and the one cost is looked up for.
    """
    if trace is None:  # most calls: no ABC check (``isinstance(None, Mapping)``) for them
        return None
    router = trace.get("promptRouter") if isinstance(trace, Mapping) else None
    model = router.get("invokedModelId") if isinstance(router, Mapping) else None
    return model if isinstance(model, str) and model else None
