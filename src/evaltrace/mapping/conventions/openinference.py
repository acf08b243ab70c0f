"""OpenInference (Arize Phoenix): ``openinference.span.kind``, ``llm.input_messages.N.message.*``, ``llm.token_count.*``.

Message keys (openinference-semantic-conventions): ``message.role``, ``message.content`` or
``message.contents.M.message_content.{type,text}``, ``message.tool_calls.M.tool_call.{id,function.name,
function.arguments}``, ``message.tool_call_id``, ``message.name``. TOOL spans carry ``tool.name``, ``tool.id``
and their arguments/result in ``input.value``/``output.value`` (``tool.parameters`` is the tool's JSON schema,
not the call's arguments). RETRIEVER spans carry ``retrieval.documents.N.document.content``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace.mapping.conventions._common import (
    Messages,
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

NAME = "openinference"
SPAN_KIND = "openinference.span.kind"
_INPUT = "llm.input_messages"
_OUTPUT = "llm.output_messages"

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
        elif content:
            parts.append({"type": str(kind), **{k: v for k, v in content.items() if k != "type"}})
    for call in indexed(message.get("tool_calls")):
        tool_call = node(path(call, "tool_call"))
        parts.append(
            tool_call_part(tool_call.get("id"), path(tool_call, "function.name"), path(tool_call, "function.arguments"))
        )
    if role == "tool":
        text = "\n".join(p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text")
        parts = [tool_response_part(message.get("tool_call_id"), text)]
    out: dict[str, Any] = {"role": role, "parts": parts}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


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
