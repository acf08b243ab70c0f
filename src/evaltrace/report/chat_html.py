"""Chat bubbles for the trace report: one per message, tool calls with their arguments, reasoning folded away.

Each bubble carries ``data-role`` (system, user, assistant, tool) so tests and user styles can find it;
reasoning sits in a closed ``<details class="thinking">`` above the answer, never mixed into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaltrace.report.chat import ChatMessage, SpanChat
from evaltrace.report.text import esc, pretty
from evaltrace.schema import ToolCall

__all__ = ["render_bubbles", "render_span_chat", "render_thinking"]

_ROLES = ("system", "user", "assistant", "tool")


def render_thinking(text: str | None, title: str = "Reasoning") -> str:
    """A closed ``<details>`` with the model's reasoning (empty when there is none)."""
    if not text:
        return ""
    return f'<details class="thinking"><summary>{esc(title)}</summary><pre>{esc(text)}</pre></details>'


def _content(content: Any) -> str:
    if content is None or content == "":
        return ""
    if isinstance(content, str):
        return f'<div class="content">{esc(content)}</div>'
    return f"<pre>{esc(pretty(content))}</pre>"  # media parts, or a value cut at capture


def _tool_call(call: ToolCall) -> str:
    call_id = f' <code class="call-id">{esc(call.id)}</code>' if call.id else ""
    return (
        f'<div class="toolcall" data-tool="{esc(call.name)}"><div class="call-head">&#8618; calls '
        f"<b>{esc(call.name)}</b>{call_id}</div><pre>{esc(pretty(call.arguments))}</pre></div>"
    )


def _bubble(message: ChatMessage, output: bool) -> str:
    role = message.role if message.role in _ROLES else "other"
    label = esc(message.role)
    if message.name:
        label += f" &middot; {esc(message.name)}"
    if message.tool_call_id:
        label += f' <code class="call-id">{esc(message.tool_call_id)}</code>'
    calls = "".join(_tool_call(call) for call in message.tool_calls)
    body = f"{render_thinking(message.thinking)}{_content(message.content)}{calls}"
    if not body:
        body = '<div class="empty">(empty)</div>'
    return (
        f'<div class="bubble {role}{" out" if output else ""}" data-role="{esc(message.role)}">'
        f'<div class="role">{label}</div>{body}</div>'
    )


def render_bubbles(messages: Sequence[ChatMessage], output: bool = False) -> str:
    """The bubbles of ``messages``; ``output`` marks them as the model's answer."""
    return "".join(_bubble(message, output) for message in messages)


def render_span_chat(chat: SpanChat) -> str:
    """What a model call was sent, then what it answered, as a chat."""
    notes = "".join(f'<p class="empty">{esc(note)}</p>' for note in chat.notes)
    inputs = render_bubbles(chat.inputs) or '<p class="empty">No input messages recorded.</p>'
    outputs = render_bubbles(chat.outputs, output=True) or '<p class="empty">No output messages recorded.</p>'
    return f'<div class="chat">{notes}{inputs}<div class="chat-sep"><span>response</span></div>{outputs}</div>'
