"""Pure: a Mistral ``ChatCompletionResponse`` / ``EmbeddingResponse`` -> the response half of the span.

Both become the OpenAI codec's ``Outcome``, so one attribute writer (``build.outcome_attributes_of``: ids, finish
reasons verbatim, usage, output messages, cost) serves every provider. Usage is OpenAI-shaped; the prompt-cache
count arrives as ``prompt_tokens_details.cached_tokens``, an extra field the SDK keeps but does not model.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from evaltrace._internal.engine.codec import plain_fields
from evaltrace._internal.engine.outcome import Outcome, Usage
from evaltrace._internal.error_body import code_in_body
from evaltrace._internal.openai.parts import Message, Part, output_message, reasoning_part, text_part
from evaltrace._internal.openai.response import chat_usage
from evaltrace.instrumentation.mistral.request import (
    chunk_part,
    get,
    known,
    thinking_references,
    thinking_text,
    tool_call,
)

# What ``chat_usage`` reads; the two details are extras the SDK keeps but does not model.
_USAGE_READS = ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")


@functools.cache
def _usage_type() -> Any:  # Any: a type check must not narrow the usage to object
    """The SDK's ``UsageInfo`` when ``chat_usage``'s reads of it are plain fields (``plain_fields``), else None."""
    for root in ("mistralai.client", "mistralai"):  # mistralai 2.x, then 1.x
        try:
            usage_type = importlib.import_module(f"{root}.models").UsageInfo
        except (ImportError, AttributeError):
            continue
        return usage_type if plain_fields(usage_type, _USAGE_READS) else None
    return None


def usage_of(usage: Any) -> Usage | None:
    """``UsageInfo`` -> Usage (cached and reasoning counts when the API sent their details).

    The SDK's own ``UsageInfo`` is read as the dict of its fields over its extras: what ``getattr`` returns for
    each name (``plain_fields``). A detail the API did not send is no attribute at all, and ``getattr`` finds
    that out through pydantic's ``__getattr__``, which raises and catches an ``AttributeError`` (most of the cost
    of a stream's response attributes); any other object is read by ``chat_usage`` as before.
    """
    if usage is not None and type(usage) is _usage_type():
        fields = usage.__dict__
        extra = usage.__pydantic_extra__
        return chat_usage({**extra, **fields} if extra else fields)
    return chat_usage(usage)


def chat_outcome(response: Any, content: bool = True) -> Outcome:
    """ChatCompletionResponse -> Outcome: one output message per choice, finish reasons verbatim."""
    messages: list[Message] | None = [] if content else None
    reasons: list[str] = []
    for choice in get(response, "choices") or ():
        reason = get(choice, "finish_reason")
        reasons.append(str(reason) if reason is not None else "")
        if messages is not None:
            messages.append(output_message(message_parts(get(choice, "message")), reason))
    return Outcome(
        response_id=get(response, "id"),
        response_model=get(response, "model"),
        finish_reasons=reasons,
        output_messages=messages,
        usage=usage_of(get(response, "usage")),
    )


def message_parts(message: Any) -> list[Part]:
    """An ``AssistantMessage`` -> parts: thinking first as ``reasoning``, then the answer, then tool calls."""
    parts: list[Part] = []
    if message is None:
        return parts
    content = get(message, "content")
    if isinstance(content, str):
        if content:
            parts.append(text_part(content))
    elif isinstance(content, list):
        content = [known(c) for c in content]  # a known type the SDK could not validate: read as that type
        thoughts = [c for c in content if get(c, "type") == "thinking"]
        thinking = [thinking_text(c) for c in thoughts]
        if any(thinking):
            parts.append(reasoning_part("".join(thinking)))
        for thought in thoughts:  # what the thinking cited, after it
            parts.extend(thinking_references(thought))
        parts.extend(chunk_part(c) for c in content if get(c, "type") != "thinking")
    for call in get(message, "tool_calls") or ():
        parts.append(tool_call(call))
    return parts


def embeddings_outcome(response: Any, content: bool = True) -> Outcome:
    """EmbeddingResponse -> Outcome (id, model and input tokens)."""
    usage = get(response, "usage")
    return Outcome(
        response_id=get(response, "id"),
        response_model=get(response, "model"),
        usage=Usage(input_tokens=get(usage, "prompt_tokens")) if usage is not None else None,
    )


def error_type(error: BaseException) -> str:
    """``error.type`` of a Mistral error: the body's ``type`` (``invalid_model``), else its ``code``, else the class.

    ``MistralError.body`` is the response text; the API's error object is ``{"object": "error", "message", "type",
    "code"}`` (``code`` is a number as a string, less telling than ``type``).
    """
    return code_in_body(getattr(error, "body", None), ("type", "code")) or type(error).__qualname__
