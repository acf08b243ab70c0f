"""OpenInference (Arize Phoenix): ``openinference.span.kind``, ``llm.input_messages.N.message.*``, ``llm.token_count.*``.

Message keys (openinference-semantic-conventions): ``message.role``, ``message.content`` or
``message.contents.M.message_content.{type,text}`` (``type`` ``image`` with ``image.url``, ``audio`` with
``audio.{url,mime_type,transcript}``, ``video.url``, ``document.*`` become typed media parts),
``message.tool_calls.M.tool_call.{id,function.name,function.arguments}``, the legacy (pre-tools) OpenAI
``message.function_call_name`` / ``message.function_call_arguments_json``, ``message.tool_call_id``,
``message.name``. TOOL spans carry ``tool.name``, ``tool.id`` and their arguments/result in
``input.value``/``output.value`` (``tool.parameters`` is the tool's JSON schema, not the call's arguments).
RETRIEVER spans carry ``retrieval.documents.N.document.content``.

LLM spans: the model is ``llm.response.model_name``, else ``llm.model_name`` (the request's is
``llm.request.model_name``, else the ``model`` of ``llm.invocation_parameters``); the finish reason
``llm.finish_reason``. A streamed call gets the span event ``First Token Stream Event``
(openinference-instrumentation-openai ``_stream.py``) when its first chunk arrives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace.mapping.conventions._common import (
    Messages,
    StepInfo,
    StreamTiming,
    ToolRun,
    content_parts,
    indexed,
    node,
    parse_json,
    path,
    text_or_none,
    text_part,
    tool_call_part,
    tool_response_part,
    unflatten,
)
from evaltrace.mapping.conventions._media import media_part

NAME = "openinference"
SPAN_KIND = "openinference.span.kind"
_INPUT = "llm.input_messages"
_OUTPUT = "llm.output_messages"
FIRST_TOKEN_EVENT = "First Token Stream Event"
MODEL_KEYS = ("llm.response.model_name", "llm.model_name")
REQUEST_MODEL = "llm.request.model_name"
INVOCATION_PARAMETERS = "llm.invocation_parameters"
FINISH_REASON = "llm.finish_reason"

_KINDS = {
    "LLM": sc.KIND_LLM,
    "TOOL": sc.KIND_TOOL,
    "AGENT": sc.KIND_AGENT,
    "CHAIN": sc.KIND_WORKFLOW,
    "RETRIEVER": "retriever",
    "EMBEDDING": sc.KIND_EMBEDDING,
    "RERANKER": "reranker",
    "GUARDRAIL": "guardrail",
    # An evaluator's own span: never evaluated again (the processor skips evaluation spans).
    "EVALUATOR": sc.KIND_EVALUATION,
}

USAGE = {
    sc.GEN_AI_USAGE_INPUT_TOKENS: "llm.token_count.prompt",
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: "llm.token_count.completion",
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: "llm.token_count.completion_details.reasoning",
    sc.EVALTRACE_COST_USD: "llm.cost.total",
}


def detect(attributes: Mapping[str, Any]) -> bool:
    """Whether the span carries OpenInference attributes."""
    return SPAN_KIND in attributes or any(k.startswith((_INPUT, _OUTPUT)) for k in attributes)


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """Return the evaltrace span kind of ``openinference.span.kind`` (None for UNKNOWN, PROMPT or absent)."""
    kind = attributes.get(SPAN_KIND)
    return _KINDS.get(kind.upper()) if isinstance(kind, str) else None


def messages(attributes: Mapping[str, Any]) -> Messages:
    """Return the LLM span's input and output messages."""
    return Messages(
        inputs=[_message(m) for m in indexed(unflatten(attributes, _INPUT))],
        outputs=[_message(m) for m in indexed(unflatten(attributes, _OUTPUT))],
    )


def _message(item: Any) -> dict[str, Any]:
    message = node(path(item, "message"))
    role = text_or_none(message.get("role")) or "user"
    parts: list[Any] = []
    if "content" in message:
        parts.extend(content_parts(message["content"]))
    for block in indexed(message.get("contents")):
        content = node(path(block, "message_content"))
        kind = content.get("type", "text")
        if kind in ("text", "reasoning") and isinstance(content.get("text"), str):
            parts.append(text_part(content["text"]) if kind == "text" else {"type": kind, "content": content["text"]})
        elif content and (media := media_part(content)) is not None:
            parts.append(media)
        elif content:
            parts.append({"type": str(kind), **{k: v for k, v in content.items() if k != "type"}})
    calls = indexed(message.get("tool_calls"))
    for call in calls:
        tool_call = node(path(call, "tool_call"))
        parts.append(
            tool_call_part(tool_call.get("id"), path(tool_call, "function.name"), path(tool_call, "function.arguments"))
        )
    legacy = text_or_none(message.get("function_call_name"))
    if legacy is not None and not calls:  # OpenAI's pre-tools ``function_call``: a tool call without an id
        parts.append(tool_call_part(None, legacy, message.get("function_call_arguments_json")))
    if role == "tool":
        text = "\n".join(p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text")
        parts = [tool_response_part(message.get("tool_call_id"), text)]
    out: dict[str, Any] = {"role": role, "parts": parts}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def stream_timing(events: Sequence[Any], start_ns: int) -> StreamTiming | None:
    """Return the first chunk's time of a streamed call (its ``First Token Stream Event``), or None."""
    for event in events:
        if event.name == FIRST_TOKEN_EVENT:
            return StreamTiming(first_chunk_s=max(0, event.timestamp - start_ns) / 1e9)
    return None


def step_info(attributes: Mapping[str, Any]) -> StepInfo:
    """Return the model and finish reason an LLM span recorded."""
    finish = text_or_none(attributes.get(FINISH_REASON))
    requested = text_or_none(attributes.get(REQUEST_MODEL))
    if requested is None:
        parameters = parse_json(attributes.get(INVOCATION_PARAMETERS))
        requested = text_or_none(parameters.get("model")) if isinstance(parameters, dict) else None
    return StepInfo(
        model=next((m for k in MODEL_KEYS if (m := text_or_none(attributes.get(k)))), None),
        request_model=requested,
        finish_reasons=[finish] if finish else [],
    )


def tool_run(attributes: Mapping[str, Any]) -> ToolRun:
    """Return what a TOOL or RETRIEVER span recorded (arguments/result from ``input.value``/``output.value``)."""
    if span_kind(attributes) == "retriever":
        documents = [path(d, "document.content") for d in indexed(unflatten(attributes, "retrieval.documents"))]
        query = attributes.get(sc.INPUT_VALUE)
        return ToolRun(
            name=None,
            arguments={"query": query} if query is not None else None,
            result={"documents": documents},
            has_arguments=query is not None,
            has_result=True,
        )
    return ToolRun(
        name=text_or_none(attributes.get("tool.name")) or text_or_none(attributes.get("tool_call.function.name")),
        call_id=text_or_none(attributes.get("tool.id")) or text_or_none(attributes.get("tool_call.id")),
        arguments=parse_json(attributes.get("tool_call.function.arguments")),
        has_arguments="tool_call.function.arguments" in attributes,
    )
