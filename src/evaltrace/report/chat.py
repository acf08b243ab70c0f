"""One LLM span's messages as a chat: system, user, assistant and tool turns, with tool calls and reasoning.

Messages are read by the same code that builds the Trace (:mod:`evaltrace.mapping`), so a span of a foreign
convention (OpenInference, OpenLLMetry, Vercel AI SDK, GenAI events) reads the same as one of ours. The mapping
splits an assistant message with several tool calls into one message per call; the chat joins them back, so
one bubble holds the text, the reasoning and every call the model made in that turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace.mapping import conventions
from evaltrace.mapping._messages import MessageReader
from evaltrace.mapping._spans import is_llm
from evaltrace.schema import ToolCall, TraceMessage

__all__ = ["ChatMessage", "SpanChat", "chat_messages", "span_chat", "span_io"]


@dataclass
class ChatMessage:
    """One bubble of a chat."""

    role: str
    content: str | dict[str, Any] | None = None
    thinking: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    name: str | None = None
    """The tool's name on a tool message, the participant's name otherwise."""
    tool_call_id: str | None = None


@dataclass
class SpanChat:
    """What one LLM call was sent and what it answered."""

    inputs: list[ChatMessage]
    outputs: list[ChatMessage]
    notes: list[str] = field(default_factory=list)
    """Attributes that could not be read (malformed JSON, wrong shape), as the mapping words them."""


def chat_messages(messages: Sequence[TraceMessage]) -> list[ChatMessage]:
    """Turn mapped messages into bubbles, joining an assistant turn's extra tool-call-only messages to it."""
    out: list[ChatMessage] = []
    for message in messages:
        previous = out[-1] if out else None
        only_a_call = message.tool_call is not None and message.content is None and message.thinking is None
        if only_a_call and previous is not None and previous.role == message.role and previous.tool_calls:
            assert message.tool_call is not None
            previous.tool_calls.append(message.tool_call)
            continue
        out.append(
            ChatMessage(
                role=message.role,
                content=message.content,
                thinking=message.thinking,
                tool_calls=[message.tool_call] if message.tool_call is not None else [],
                name=message.name,
                tool_call_id=message.tool_call_id,
            )
        )
    return out


def span_chat(span: ReadableSpan) -> SpanChat | None:
    """The chat of ``span``, or None when it is no model call or carries no messages (content not captured)."""
    if not is_llm(span):
        return None
    notes: list[str] = []
    reader = MessageReader(notes)
    attributes = span.attributes or {}
    foreign = conventions.foreign_messages(attributes, span.events)
    if foreign is not None:
        inputs, outputs = reader.foreign(span, foreign)
    else:
        inputs = reader.system(span) + reader.messages(span, semconv.GEN_AI_INPUT_MESSAGES, "user")
        outputs = reader.messages(span, semconv.GEN_AI_OUTPUT_MESSAGES, "assistant")
    if not inputs and not outputs and not notes:
        return None
    return SpanChat(chat_messages(inputs), chat_messages(outputs), notes)


# What a span that is no model call took and gave: (heading, keys, first wins).
_IO = (
    ("Input", (semconv.INPUT_VALUE, semconv.GEN_AI_TOOL_CALL_ARGUMENTS, "traceloop.entity.input")),
    ("Output", (semconv.OUTPUT_VALUE, semconv.GEN_AI_TOOL_CALL_RESULT, "traceloop.entity.output")),
)


def span_io(attributes: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``("Input", value)`` and ``("Output", value)`` of a span that is no model call (a tool, a function).

    The HTML report and ``traces show --details`` both show these; a JSON-encoded string is shown as the string.
    """
    shown: list[tuple[str, Any]] = []
    for heading, keys in _IO:
        value = next((attributes[key] for key in keys if key in attributes), None)
        if isinstance(value, str) and value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if value is not None:
            shown.append((heading, value))
    return shown
