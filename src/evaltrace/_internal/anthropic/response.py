"""Pure: an anthropic ``Message`` -> the response half of the span (the same ``Outcome`` as OpenAI's).

Anthropic's ``input_tokens`` excludes the prompt cache; OTel's ``gen_ai.usage.input_tokens`` includes it
(conventions.md 1.3), so input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens, with the
two cache counts as its subsets. The thinking tokens (``usage.output_tokens_details.thinking_tokens``, newer APIs; a
flat ``usage.thinking_tokens`` as some compatible servers send it) are ``reasoning_tokens``, a subset of the output;
an API that reports none leaves it None.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.anthropic.request import content_part
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.openai.parts import Message, Part
from evaltrace._internal.openai.parts import field as get

# stop_reason -> the GenAI finish reason of the output message. ``pause_turn`` (a server-tool turn the client
# should continue) has no GenAI counterpart and is not an error: it is kept as sent, as the schema allows.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}


def finish_reason(stop_reason: str | None) -> str:
    """The output message's ``finish_reason``: mapped, an unknown one as sent, none (cut off) ``error``."""
    if not stop_reason:
        return "error"
    return FINISH_REASONS.get(stop_reason, stop_reason)


def thinking_tokens(usage: Any) -> int | None:
    """The thinking token count of a ``usage`` (model or dict), None when it reports none."""
    value = get(get(usage, "output_tokens_details"), "thinking_tokens")
    if value is None:
        value = get(usage, "thinking_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(
    input_tokens: Any, output_tokens: Any, cache_read: Any, cache_creation: Any, thinking: Any = None
) -> Usage:
    """Anthropic's counts -> ``Usage`` with OTel's inclusive input; ``thinking`` is part of the output."""
    total = None
    if isinstance(input_tokens, int):
        total = input_tokens + (cache_read if isinstance(cache_read, int) else 0)
        total += cache_creation if isinstance(cache_creation, int) else 0
    return Usage(
        input_tokens=total,
        output_tokens=output_tokens if isinstance(output_tokens, int) else None,
        cached_tokens=cache_read if isinstance(cache_read, int) else None,
        cache_write_tokens=cache_creation if isinstance(cache_creation, int) else None,
        reasoning_tokens=thinking if isinstance(thinking, int) else None,
    )


def message_usage(usage: Any) -> Usage | None:
    """A ``Usage`` model (or dict) -> Usage."""
    if usage is None:
        return None
    return usage_of(
        get(usage, "input_tokens"),
        get(usage, "output_tokens"),
        get(usage, "cache_read_input_tokens"),
        get(usage, "cache_creation_input_tokens"),
        thinking_tokens(usage),
    )


def output_message(parts: list[Part], stop_reason: str | None) -> Message:
    """An OutputMessage with the mapped finish reason."""
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason(stop_reason)}


def message_outcome(message: Any, content: bool = True) -> Outcome:
    """Message -> Outcome: one output message (only with ``content``); finish reasons verbatim (conventions.md 1.3)."""
    stop_reason = get(message, "stop_reason")
    messages = None
    if content:
        parts = [content_part(block) for block in get(message, "content") or ()]
        messages = [output_message(parts, stop_reason)]
    return Outcome(
        response_id=get(message, "id"),
        response_model=get(message, "model"),
        finish_reasons=[stop_reason] if stop_reason else [],
        output_messages=messages,
        usage=message_usage(get(message, "usage")),
    )


def message_summary(message: Any) -> Summary:
    """``Summary`` of a Message (model and inclusive token counts), read without the content."""
    model = getattr(message, "model", None)
    usage = message_usage(getattr(message, "usage", None))
    if usage is None:
        return Summary(model)
    return Summary(model, usage.input_tokens, usage.output_tokens)
