"""OpenLLMetry (traceloop): ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, ``llm.*``, ``traceloop.*``.

Versions up to 0.4x flatten messages into ``gen_ai.prompt.N.{role,content,tool_call_id}`` and
``gen_ai.completion.N.{role,content,finish_reason,tool_calls.M.{id,name,arguments}}`` (a Responses reasoning
summary in ``gen_ai.completion.N.reasoning`` / ``gen_ai.prompt.N.reasoning``); newer ones write the
GenAI ``gen_ai.input/output.messages`` JSON, which the default reader handles. Workflow, task, agent and tool
spans (``traceloop.span.kind``) carry their function's input and output as ``traceloop.entity.input/output``
(JSON; the input is ``{"args": [...], "kwargs": {...}}``).

A streamed call gets one span event per chunk: ``gen_ai.content.completion.chunk`` (0.4x and later) or
``llm.content.completion.chunk`` (earlier). Model: ``gen_ai.response.model`` / ``llm.response.model`` (asked for:
``gen_ai.request.model`` / ``llm.request.model``); finish reasons: ``gen_ai.completion.N.finish_reason``,
``gen_ai.response.finish_reason`` / ``stop_reason``, ``llm.response.finish_reason`` / ``stop_reason``.
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
    parse_json,
    text_or_none,
    tool_call_part,
    tool_response_part,
    unflatten,
)
from evaltrace.mapping.conventions._common import (
    node as as_node,
)

NAME = "openllmetry"
SPAN_KIND = "traceloop.span.kind"
REQUEST_TYPE = "llm.request.type"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"
_PROMPT = "gen_ai.prompt"
_COMPLETION = "gen_ai.completion"
CHUNK_EVENTS = frozenset({"gen_ai.content.completion.chunk", "llm.content.completion.chunk"})
MODEL_KEYS = ("gen_ai.response.model", "llm.response.model")
REQUEST_MODEL_KEYS = ("gen_ai.request.model", "llm.request.model")
FINISH_KEYS = (
    "gen_ai.response.finish_reason",
    "llm.response.finish_reason",
    "gen_ai.response.stop_reason",
    "llm.response.stop_reason",
)

_KINDS = {"workflow": sc.KIND_WORKFLOW, "task": sc.KIND_TASK, "agent": sc.KIND_AGENT, "tool": sc.KIND_TOOL}
_REQUEST_KINDS = {"chat": sc.KIND_LLM, "completion": sc.KIND_LLM, "embedding": sc.KIND_EMBEDDING}

USAGE = {
    sc.GEN_AI_USAGE_INPUT_TOKENS: "gen_ai.usage.prompt_tokens",
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: "gen_ai.usage.completion_tokens",
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: "gen_ai.usage.reasoning_tokens",
}


def detect(attributes: Mapping[str, Any]) -> bool:
    """Whether the span carries OpenLLMetry attributes."""
    if SPAN_KIND in attributes or REQUEST_TYPE in attributes:
        return True
    return any(_numbered(key) for key in attributes)


def _numbered(key: str) -> bool:
    """``gen_ai.prompt.0.role`` is OpenLLMetry's; ``gen_ai.prompt.name`` (GenAI conventions) is not."""
    for prefix in (_PROMPT, _COMPLETION):
        if (
            key.startswith(prefix)
            and key[len(prefix) : len(prefix) + 1] == "."
            and key[len(prefix) + 1 : len(prefix) + 2].isdigit()
        ):
            return True
    return False


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """Return the evaltrace kind of ``traceloop.span.kind``, else of ``llm.request.type``."""
    kind = attributes.get(SPAN_KIND)
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind]
    request = attributes.get(REQUEST_TYPE)
    return _REQUEST_KINDS.get(request) if isinstance(request, str) else None


def messages(attributes: Mapping[str, Any]) -> Messages:
    """Return the LLM span's prompt and completion messages."""
    return Messages(
        inputs=[_message(m, "user") for m in indexed(unflatten(attributes, _PROMPT))],
        outputs=[_message(m, "assistant") for m in indexed(unflatten(attributes, _COMPLETION))],
    )


def _message(item: Any, default_role: str) -> dict[str, Any]:
    node = as_node(item)
    role = text_or_none(node.get("role")) or default_role
    parts = _reasoning(node.get("reasoning")) + content_parts(node.get("content"))
    for call in indexed(node.get("tool_calls")):
        if isinstance(call, dict):
            parts.append(tool_call_part(call.get("id"), call.get("name"), call.get("arguments")))
    if role == "tool":
        text = "\n".join(p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text")
        parts = [tool_response_part(node.get("tool_call_id"), text)]
    message: dict[str, Any] = {"role": role, "parts": parts}
    if isinstance(node.get("finish_reason"), str):
        message["finish_reason"] = node["finish_reason"]
    return message


def stream_timing(events: Sequence[Any], start_ns: int, output_tokens: float | None) -> StreamTiming | None:
    """Return the timing of a streamed call from its per-chunk events, or None when it has none.

    Tokens per second are computed as evaltrace's own instrumentation does: output tokens over the time from
    the first chunk to the last.
    """
    times = [event.timestamp for event in events if event.name in CHUNK_EVENTS]
    if not times:
        return None
    first, last = min(times), max(times)
    rate = output_tokens / ((last - first) / 1e9) if output_tokens is not None and last > first else None
    return StreamTiming(
        first_chunk_s=max(0, first - start_ns) / 1e9,
        last_chunk_s=max(0, last - start_ns) / 1e9,
        chunks=len(times),
        output_tokens_per_second=rate,
    )


def step_info(attributes: Mapping[str, Any]) -> StepInfo:
    """Return the model and finish reasons an LLM span recorded (per completion first, else the span's)."""
    reasons = [
        r for c in indexed(unflatten(attributes, _COMPLETION)) if (r := text_or_none(as_node(c).get("finish_reason")))
    ]
    if not reasons:
        reasons = [r for k in FINISH_KEYS if (r := text_or_none(attributes.get(k)))][:1]
    return StepInfo(
        model=next((m for k in MODEL_KEYS if (m := text_or_none(attributes.get(k)))), None),
        request_model=next((m for k in REQUEST_MODEL_KEYS if (m := text_or_none(attributes.get(k)))), None),
        finish_reasons=reasons,
    )


def _reasoning(value: Any) -> list[dict[str, Any]]:
    """``gen_ai.completion.N.reasoning`` (Responses reasoning summary): text, or JSON ``[{"text": ...}, ...]``."""
    value = parse_json(value)
    if isinstance(value, str):
        return [{"type": "reasoning", "content": value}] if value else []
    texts = (
        [t for v in value if isinstance(v, dict) and (t := text_or_none(v.get("text")))]
        if isinstance(value, list)
        else []
    )
    return [{"type": "reasoning", "content": "\n".join(texts)}] if texts else []


def tool_run(attributes: Mapping[str, Any]) -> ToolRun:
    """Return what a ``traceloop.span.kind=tool`` span recorded: name, keyword (or positional) args, result."""
    raw_input = parse_json(attributes.get(ENTITY_INPUT))
    arguments: Any = raw_input
    if isinstance(raw_input, dict) and set(raw_input) <= {"args", "kwargs"}:
        args, kwargs = raw_input.get("args") or [], raw_input.get("kwargs") or {}
        arguments = {**({"args": args} if args else {}), **(kwargs if isinstance(kwargs, dict) else {})}
    return ToolRun(
        name=text_or_none(attributes.get("traceloop.entity.name")),
        arguments=arguments,
        result=parse_json(attributes.get(ENTITY_OUTPUT)),
        has_arguments=ENTITY_INPUT in attributes,
        has_result=ENTITY_OUTPUT in attributes,
    )
