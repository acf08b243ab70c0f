"""The older GenAI conventions' message content as span events (semantic conventions before 1.37).

Per-message events ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
``gen_ai.tool.message`` and ``gen_ai.choice`` carry the message in their body. Official instrumentations emit
them as *log* events, which a span processor never sees; they are read here when they arrive as *span*
events, with the body as the JSON attribute ``gen_ai.event.content`` (Azure AI Inference) or ``body``, or
flattened into the event attributes (``content``, ``role``, ``tool_calls``, ``id``, ``message``,
``finish_reason``). The 1.26-era ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events (JSON
``gen_ai.prompt`` / ``gen_ai.completion`` attributes) are read too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from evaltrace.mapping.conventions._common import (
    Messages,
    StepInfo,
    content_parts,
    parse_json,
    responses_messages,
    text_or_none,
    tool_call_part,
    tool_response_part,
)

NAME = "genai_events"
_ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE = "gen_ai.choice"
_PROMPT_EVENT, _COMPLETION_EVENT = "gen_ai.content.prompt", "gen_ai.content.completion"
_EVENTS = frozenset({*_ROLE_EVENTS, CHOICE, _PROMPT_EVENT, _COMPLETION_EVENT})
_BODY_KEYS = ("gen_ai.event.content", "body")


class SpanEvent(Protocol):
    """The part of an OTel span event read here."""

    @property
    def name(self) -> str: ...  # noqa: D102

    @property
    def attributes(self) -> Mapping[str, Any] | None: ...  # noqa: D102


def detect(events: Sequence[SpanEvent]) -> bool:
    """Whether the span has GenAI message events."""
    return any(event.name in _EVENTS for event in events)


def messages(events: Sequence[SpanEvent]) -> Messages:
    """Return the messages of the span's GenAI events, in event order."""
    out = Messages()
    for event in events:
        attributes = event.attributes or {}
        if event.name in _ROLE_EVENTS:
            out.inputs.append(_message(_body(attributes), _ROLE_EVENTS[event.name]))
        elif event.name == CHOICE:
            body = _body(attributes)
            message = parse_json(body.get("message"))
            choice = _message(message if isinstance(message, dict) else {}, "assistant")
            if isinstance(body.get("finish_reason"), str):
                choice["finish_reason"] = body["finish_reason"]
            out.outputs.append(choice)
        elif event.name in (_PROMPT_EVENT, _COMPLETION_EVENT):
            key, role, target = (
                ("gen_ai.prompt", "user", out.inputs)
                if event.name == _PROMPT_EVENT
                else ("gen_ai.completion", "assistant", out.outputs)
            )
            listed = parse_json(attributes.get(key))
            if (items_read := responses_messages(listed)) is not None:  # an OpenAI Responses ``input`` list
                target.extend(items_read)
                continue
            items = listed if isinstance(listed, list) else [{"content": listed}] if listed is not None else []
            target.extend(_message(item if isinstance(item, dict) else {"content": item}, role) for item in items)
    return out


def finish_reasons(events: Sequence[SpanEvent]) -> list[str]:
    """Return the ``finish_reason`` of each ``gen_ai.choice`` event, in event order."""
    reasons: list[str] = []
    for event in events:
        if event.name == CHOICE and isinstance(reason := _body(event.attributes or {}).get("finish_reason"), str):
            reasons.append(reason)
    return reasons


def step_info(events: Sequence[SpanEvent]) -> StepInfo:
    """Return the finish reasons the span's events recorded (events carry no model)."""
    return StepInfo(finish_reasons=finish_reasons(events))


def _body(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The event body: a JSON attribute when present, else the attributes themselves."""
    for key in _BODY_KEYS:
        body = parse_json(attributes.get(key))
        if isinstance(body, dict):
            return body
    return dict(attributes)


def _message(body: Mapping[str, Any], default_role: str) -> dict[str, Any]:
    role = text_or_none(body.get("role")) or default_role
    parts = content_parts(body.get("content"))
    calls = parse_json(body.get("tool_calls"))
    for item in calls if isinstance(calls, list | tuple) else []:
        call = parse_json(item)
        if isinstance(call, dict):
            nested = call.get("function")
            function: dict[str, Any] = nested if isinstance(nested, dict) else call
            parts.append(tool_call_part(call.get("id"), function.get("name"), function.get("arguments")))
    if role == "tool":
        parts = [tool_response_part(body.get("id") or body.get("tool_call_id"), body.get("content"))]
    return {"role": role, "parts": parts}
