"""Pure: a Cohere Command R / R+ ``invoke_model`` body (``message`` + ``chat_history``) -> GenAI messages and usage.

Command R's body is Cohere's own v1 chat shape, unlike the other families' (see ``bodies``): the turns are
``chat_history`` (roles ``USER`` / ``CHATBOT`` / ``SYSTEM`` / ``TOOL``) then ``message``, the system prompt is
``preamble``, tools are ``parameter_definitions``, and the answer bills its tokens in ``meta.billed_units``.
``bodies`` picks the family and sends such a body here; the whole and the streamed answer share ``cohere_usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.engine.outcome import Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.openai.parts import Message, Part, text_part, tool_call_part, tool_response_part

_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}


def request_content(body: Mapping[str, Any]) -> tuple[list[Message], list[Part] | None, list[dict[str, Any]] | None]:
    """(input messages, system instructions, tool definitions) of a Command R request body."""
    return _chat_messages(body), _preamble(body), _tools(body)


def _preamble(body: Mapping[str, Any]) -> list[Part] | None:
    preamble = body.get("preamble")
    return [text_part(preamble)] if isinstance(preamble, str) and preamble else None


def _chat_messages(body: Mapping[str, Any]) -> list[Message]:
    """``chat_history`` then ``message`` (and ``tool_results``, the answers to the last turn's tool calls)."""
    out: list[Message] = []
    for turn in body.get("chat_history") or ():
        if not isinstance(turn, Mapping):
            continue
        role = _ROLES.get(str(turn.get("role")), str(turn.get("role")).lower())
        parts: list[Part] = []
        if isinstance(turn.get("message"), str) and turn["message"]:
            parts.append(text_part(turn["message"]))
        for call in turn.get("tool_calls") or ():
            parts.append(tool_call_part(None, call.get("name"), call.get("parameters")))
        for result in turn.get("tool_results") or ():
            parts.append(_tool_result(result))
        out.append({"role": role, "parts": parts})
    results = [_tool_result(r) for r in body.get("tool_results") or () if isinstance(r, Mapping)]
    if results:
        out.append({"role": "tool", "parts": results})
    message = body.get("message")
    if isinstance(message, str) and message:
        out.append({"role": "user", "parts": [text_part(message)]})
    return out


def _tool_result(result: Any) -> Part:
    call = result.get("call") if isinstance(result, Mapping) else None
    name = call.get("name") if isinstance(call, Mapping) else None
    outputs = result.get("outputs") if isinstance(result, Mapping) else None
    part = tool_response_part(None, outputs if outputs is not None else "")
    if name is not None:
        part["name"] = name
    return part


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, Mapping):
            entry: dict[str, Any] = {"type": "function", "name": tool.get("name")}
            if tool.get("description") is not None:
                entry["description"] = tool["description"]
            if tool.get("parameter_definitions") is not None:
                entry["parameters"] = tool["parameter_definitions"]
            out.append(entry)
    return out or None


def response_shape(body: Mapping[str, Any]) -> tuple[str, Any, Usage | None, list[Part]]:
    """(text, finish reason, billed usage, tool calls) of a Command R response body."""
    calls = [tool_call_part(None, c.get("name"), c.get("parameters")) for c in body.get("tool_calls") or ()]
    return str(body.get("text") or ""), body.get("finish_reason"), cohere_usage(body), calls


def cohere_usage(body: Mapping[str, Any]) -> Usage | None:
    """``meta.billed_units`` (what is billed) of a Cohere Command R response."""
    meta = body.get("meta")
    units = meta.get("billed_units") if isinstance(meta, Mapping) else None
    if not isinstance(units, Mapping):
        return None
    return Usage(count(units.get("input_tokens")), count(units.get("output_tokens")))
