"""Pure: messages in any common shape -> GenAI messages of parts (conventions.md 1.5), provider-independent.

Manual LLM spans (``evaltrace.llm_call``) accept what users of any SDK have at hand, one message at a time:

* our own ``TraceMessage``;
* a GenAI message already (a mapping with ``parts``), kept as it is;
* an OpenAI-style chat message (``{"role", "content", "tool_calls"?, "tool_call_id"?}``, dict or SDK object),
  converted by the OpenAI instrumentation's own request converter so both write identical parts;
* an Anthropic-style message whose ``content`` is a list of blocks (``text``, ``thinking``,
  ``redacted_thinking``, ``tool_use``, ``tool_result``, ``image``, ``document``, server and MCP tool calls,
  ``search_result``, ``compaction``), converted block by block by the Anthropic instrumentation's own converter.
  Its ``tool_result`` blocks become ``tool`` messages, as tool results are in OpenAI's shape.

Reasoning is always a ``reasoning`` part, never folded into text. Bad input raises ``ValueError`` / ``TypeError``
naming the message index and the problem.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evaltrace._internal.anthropic import request as anthropic_request
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    assistant_parts,
    chat_tool_call_part,
    field,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)
from evaltrace._internal.openai.registry import EndpointKind

if TYPE_CHECKING:
    from evaltrace.schema import TraceMessage

# Block types only Anthropic's Messages API uses: a message with any of them is read as Anthropic-shaped.
_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "image",
        "document",
        "server_tool_use",
        "mcp_tool_use",
        "search_result",
        "compaction",
    }
)
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

# Provider finish/stop reasons -> the GenAI finish reason of the output message (stop, length, content_filter,
# tool_call, error); the Anthropic instrumentation maps stop reasons the same way. Unknown ones are kept as sent.
FINISH_REASONS: dict[str, str] = {
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "tool_use": "tool_call",  # Anthropic
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "STOP": "stop",  # Gemini
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
}


def finish_reason(reason: str) -> str:
    """Map a provider's finish or stop reason to the GenAI vocabulary; unknown values are kept as given."""
    return FINISH_REASONS.get(reason, reason)


def input_messages(messages: Sequence[Any]) -> list[Message]:
    """Convert the input messages of one call (see the module docstring for the shapes accepted)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of messages, not {type(messages).__name__}")
    out: list[Message] = []
    for index, message in enumerate(messages):
        out.extend(_message(message, index))
    return out


def output_message(
    output: Any,
    thinking: str | None,
    tool_calls: Sequence[Any] | None,
    reason: str | None,
) -> Message:
    """The assistant's answer as one GenAI output message: reasoning first, then text, then tool calls.

    ``output`` is a string, an assistant message in any accepted shape, a list of content blocks, or None.
    ``reason`` (already mapped) defaults to ``tool_call`` when the answer calls a tool, else ``stop``.
    """
    parts: list[Part] = []
    if isinstance(output, str):
        parts = [text_part(output)]
    elif isinstance(output, list | tuple):
        parts = _blocks_parts(output, "output")
    elif output is not None:
        for message in _message(output, 0):
            parts.extend(message["parts"])
    # Inline <think> blocks move to reasoning, as the instrumentations do with an answer's text.
    parts = [q for p in parts for q in (assistant_parts(None, p["content"]) if _is_text(p) else [p])]
    if tool_calls and any(p.get("type") == "tool_call" for p in parts):
        raise ValueError("tool calls were given twice: as tool_calls= and inside output")
    if thinking:
        if any(p.get("type") == "reasoning" for p in parts):
            raise ValueError("thinking was given twice: as thinking= and as reasoning inside output")
        parts.insert(0, reasoning_part(thinking))
    for index, call in enumerate(tool_calls or ()):
        parts.append(_tool_call(call, f"tool_calls[{index}]"))
    if reason is None:
        reason = "tool_call" if any(p.get("type") == "tool_call" for p in parts) else "stop"
    return {"role": "assistant", "parts": parts, "finish_reason": reason}


def _is_text(part: Part) -> bool:
    return part.get("type") == "text" and isinstance(part.get("content"), str)


def system_parts(system: str | Sequence[Any]) -> list[Part]:
    """System instructions (a string, or text blocks as Anthropic's ``system``) -> ``text`` parts."""
    if isinstance(system, str):
        return [text_part(system)]
    return _blocks_parts(system, "system")


def tool_definitions(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool definitions, OpenAI-style (nested ``function``) or flat (Anthropic ``input_schema``), flattened."""
    out: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        nested = field(tool, "function")
        source = nested if nested is not None else tool
        name = field(source, "name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools[{index}] has no name")
        entry: dict[str, Any] = {"type": field(tool, "type") or "function", "name": name}
        if entry["type"] == "custom" and nested is None:  # Anthropic's user-defined tool type
            entry["type"] = "function"
        description = field(source, "description")
        if description is not None:
            entry["description"] = description
        parameters = field(source, "parameters")
        if parameters is None:
            parameters = field(source, "input_schema")
        if parameters is not None:
            entry["parameters"] = parameters
        out.append(entry)
    return out


# --- one message -----------------------------------------------------------------------------------------


def _schema_instance(value: Any, name: str) -> bool:
    """True when ``value`` is ``evaltrace.schema.<name>``; never imports the schema (pydantic) to find out.

    An object of a schema class can only exist once the schema module is loaded, so an unloaded schema means no.
    """
    schema = sys.modules.get("evaltrace.schema")
    return schema is not None and isinstance(value, getattr(schema, name))


def _message(message: Any, index: int) -> list[Message]:
    if _schema_instance(message, "TraceMessage"):
        return [_trace_message(message)]
    if isinstance(message, Mapping) and "parts" in message:
        return [dict(message)]
    role = field(message, "role")
    if not isinstance(role, str) or role not in _ROLES:
        raise ValueError(f"messages[{index}] has no valid role (got {role!r}; expected one of {sorted(_ROLES)})")
    content = field(message, "content")
    if isinstance(content, list | tuple) and any(field(b, "type") in _ANTHROPIC_BLOCKS for b in content):
        return _anthropic_message(role, content, index)
    if content is not None and not isinstance(content, str | list | tuple):
        raise ValueError(
            f"messages[{index}].content must be a string or a list of blocks, not {type(content).__name__}"
        )
    converted = openai_request.input_messages(EndpointKind.CHAT, {"messages": [message]})
    reasoning = field(message, "reasoning_content")  # DeepSeek-style reasoning beside the content
    if isinstance(reasoning, str) and reasoning:
        converted[0]["parts"].insert(0, reasoning_part(reasoning))
    return converted


def _trace_message(message: TraceMessage) -> Message:
    if message.role == "tool":
        part = tool_response_part(message.tool_call_id, message.content)
        out: Message = {"role": "tool", "parts": [part]}
    else:
        parts: list[Part] = []
        if message.thinking:
            parts.append(reasoning_part(message.thinking))
        if isinstance(message.content, str) and message.content:
            parts.append(text_part(message.content))
        elif isinstance(message.content, dict):
            # {"parts": [...]} is how the mapping keeps media parts; any other object is structured text.
            nested = message.content.get("parts")
            parts.extend(nested if isinstance(nested, list) else [text_part(json.dumps(message.content))])
        if message.tool_call is not None:
            call = message.tool_call
            parts.append(tool_call_part(call.id, call.name, call.arguments))
        out = {"role": message.role, "parts": parts}
    if message.name:
        out["name"] = message.name
    return out


def _anthropic_message(role: str, blocks: Sequence[Any], index: int) -> list[Message]:
    """Tool results first, in one ``tool`` message (they answer the previous turn), then the rest.

    As the Anthropic instrumentation's ``input_messages`` writes the same message.
    """
    where = f"messages[{index}].content"
    results = [_tool_result_part(b, f"{where}[{j}]") for j, b in enumerate(blocks) if field(b, "type") == "tool_result"]
    others = [b for b in blocks if field(b, "type") != "tool_result"]
    out: list[Message] = []
    if results:
        out.append({"role": "tool", "parts": results})
    if others or not results:
        out.append({"role": role, "parts": _blocks_parts(others, where)})
    return out


def _tool_result_part(block: Any, where: str) -> Part:
    """A ``tool_result`` block as the Anthropic converter writes it, its content blocks checked as ours are."""
    content = field(block, "content")
    if isinstance(content, list | tuple):
        content = anthropic_request.joined_content(
            [_block_part(item, f"{where}.content[{k}]") for k, item in enumerate(content)]
        )
    return anthropic_request.tool_result_part(block, content)


def _blocks_parts(blocks: Sequence[Any], where: str) -> list[Part]:
    return [_block_part(block, f"{where}[{i}]") for i, block in enumerate(blocks)]


def _block_part(block: Any, where: str) -> Part:
    """One content block, Anthropic- or OpenAI-style, -> one part.

    Anthropic's blocks go through the Anthropic instrumentation's own converter, so a manual span and an
    instrumented call write identical parts (server tool calls, search results, compaction, documents).
    """
    if isinstance(block, str):
        return text_part(block)
    kind = field(block, "type")
    if kind in ("text", "input_text", "output_text"):
        text = field(block, "text")
        if not isinstance(text, str):
            raise ValueError(f"{where} is a text block without a string 'text'")
        return text_part(text)
    if kind == "image_url":
        return uri_part(str(field(field(block, "image_url"), "url") or ""), "image")
    if kind == "thinking":  # (a user's value may not be a string: written as one, as before)
        return reasoning_part(str(field(block, "thinking") or ""))
    if not isinstance(kind, str):
        raise ValueError(f"{where} is not a content block (no 'type'): {str(block)[:80]!r}")
    return anthropic_request.content_part(block)


def _tool_call(call: Any, where: str) -> Part:
    """A tool call as ``ToolCall``, OpenAI ``tool_calls`` entry, Anthropic ``tool_use`` block or flat dict."""
    if _schema_instance(call, "ToolCall"):
        return tool_call_part(call.id, call.name, call.arguments)
    if field(call, "function") is not None:
        return chat_tool_call_part(call)
    if field(call, "type") == "tool_use":
        return tool_call_part(field(call, "id"), field(call, "name"), field(call, "input"))
    name = field(call, "name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no tool name")
    arguments = field(call, "arguments")
    return tool_call_part(field(call, "id"), name, arguments if arguments is not None else field(call, "input"))
