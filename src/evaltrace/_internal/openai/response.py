"""Pure: a ChatCompletion / Response / CreateEmbeddingResponse -> the response half of the span.

The same ``Outcome`` comes out of the stream accumulators, so non-streamed and streamed calls share one
attribute writer (``outcome_attributes``).
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import EMPTY_SUMMARY as EMPTY_SUMMARY
from evaltrace._internal.engine.outcome import Outcome as Outcome
from evaltrace._internal.engine.outcome import Summary as Summary
from evaltrace._internal.engine.outcome import Usage as Usage
from evaltrace._internal.engine.outcome import outcome_attributes as outcome_attributes
from evaltrace._internal.openai.builtin import ResultsBudget, add_citations, builtin_tool_parts
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    assistant_parts,
    chat_tool_call_part,
    output_message,
    reasoning_extra,
    reasoning_part,
    tool_call_part,
)
from evaltrace._internal.openai.parts import field as get


def chat_usage(usage: Any) -> Usage | None:
    """``CompletionUsage`` (an SDK object or its dict) -> Usage."""
    if usage is None:
        return None
    read = get if isinstance(usage, dict) else getattr
    prompt_details = read(usage, "prompt_tokens_details", None)
    completion_details = read(usage, "completion_tokens_details", None)
    cached = writes = reasoning = None
    if prompt_details is not None:
        read_prompt = get if isinstance(prompt_details, dict) else getattr
        cached = read_prompt(prompt_details, "cached_tokens", None)
        writes = read_prompt(prompt_details, "cache_write_tokens", None)
    if completion_details is not None:
        reasoning = (get if isinstance(completion_details, dict) else getattr)(
            completion_details, "reasoning_tokens", None
        )
    return Usage(read(usage, "prompt_tokens", None), read(usage, "completion_tokens", None), cached, reasoning, writes)


def responses_usage(usage: Any) -> Usage | None:
    """``ResponseUsage`` -> Usage."""
    if usage is None:
        return None
    input_details = get(usage, "input_tokens_details")
    output_details = get(usage, "output_tokens_details")
    return Usage(
        input_tokens=get(usage, "input_tokens"),
        output_tokens=get(usage, "output_tokens"),
        cached_tokens=get(input_details, "cached_tokens") if input_details is not None else None,
        reasoning_tokens=get(output_details, "reasoning_tokens") if output_details is not None else None,
        cache_write_tokens=get(input_details, "cache_write_tokens") if input_details is not None else None,
    )


def chat_outcome(completion: Any, content: bool = True) -> Outcome:
    """ChatCompletion -> Outcome: one output message per choice (only with ``content``), finish reasons verbatim."""
    # The SDK's objects are read with the getattr builtin (half the cost of ``get`` per field); a dict with get.
    read = get if isinstance(completion, dict) else getattr
    messages: list[Message] | None = [] if content else None
    reasons: list[str] = []
    for choice in read(completion, "choices", None) or ():
        read_choice = get if isinstance(choice, dict) else getattr
        reason = read_choice(choice, "finish_reason", None)
        reasons.append(reason if reason is not None else "")
        if messages is not None:
            messages.append(_chat_choice_message(read_choice(choice, "message", None), reason))
    return Outcome(
        read(completion, "id", None),
        read(completion, "model", None),
        reasons,
        messages,
        chat_usage(read(completion, "usage", None)),
        read(completion, "service_tier", None),
        read(completion, "system_fingerprint", None),
    )


def _chat_choice_message(message: Any, reason: str | None) -> Message:
    if message is None:
        return output_message([], reason)
    read = get if isinstance(message, dict) else getattr
    reasoning = reasoning_extra(message)
    content = read(message, "content", None)
    refusal = read(message, "refusal", None)
    if not reasoning and not refusal and type(content) is str and content and "<think>" not in content:
        parts: list[Part] = [{"type": "text", "content": content}]  # assistant_parts of a plain answer, inlined
    else:
        parts = assistant_parts(reasoning, content, refusal)
    tool_calls = read(message, "tool_calls", None)
    for call in tool_calls or ():
        parts.append(chat_tool_call_part(call))
    legacy = read(message, "function_call", None)
    # llama.cpp and other OpenAI-compatible servers repeat each tool call as the legacy ``function_call``:
    # it is a call of its own only when no ``tool_calls`` came with it (the pre-tools API).
    if legacy is not None and not tool_calls:
        parts.append(tool_call_part(None, get(legacy, "name"), get(legacy, "arguments")))
    return output_message(parts, reason)


def responses_outcome(response: Any, content: bool = True) -> Outcome:
    """Response -> Outcome: all output items form one assistant message (kept only with ``content``)."""
    parts: list[Part] = []
    has_tool_call = False
    budget = ResultsBudget()  # one for the whole output: every search's results share it
    for item in get(response, "output") or ():
        has_tool_call |= _responses_item_parts(item, parts, budget)
    reason = responses_finish_reason(response, has_tool_call)
    return Outcome(
        response_id=get(response, "id"),
        response_model=get(response, "model"),
        finish_reasons=[reason],
        output_messages=[output_message(parts, reason)] if content else None,
        usage=responses_usage(get(response, "usage")),
        service_tier=get(response, "service_tier"),
    )


def responses_finish_reason(response: Any, has_tool_call: bool) -> str:
    """Map status: completed -> stop (tool_call when a function call is in the output); incomplete -> its reason."""
    status = get(response, "status")
    if status == "incomplete":
        return str(get(get(response, "incomplete_details"), "reason") or "incomplete")
    if status in ("failed", "cancelled"):
        return "error"
    return "tool_call" if has_tool_call else "stop"


def _responses_item_parts(item: Any, parts: list[Part], budget: ResultsBudget) -> bool:
    """Append the parts of one output item; return True for a function call."""
    item_type = get(item, "type")
    if item_type == "message":
        for content in get(item, "content") or ():
            if get(content, "type") == "refusal":
                parts.append({"type": "refusal", "content": get(content, "refusal")})
            else:
                start = len(parts)
                parts.extend(assistant_parts(None, get(content, "text")))
                add_citations(parts, start, get(content, "annotations"))
        return False
    if item_type == "reasoning":
        for entry in [*(get(item, "summary") or ()), *(get(item, "content") or ())]:
            text = get(entry, "text")
            if text:
                parts.append(reasoning_part(text))
        return False
    if item_type == "function_call":
        parts.append(tool_call_part(get(item, "call_id"), get(item, "name"), get(item, "arguments")))
        return True
    parts.extend(builtin_tool_parts(str(item_type), item, budget))
    return False


def embeddings_outcome(response: Any, content: bool = True) -> Outcome:
    """CreateEmbeddingResponse -> Outcome (model and input tokens only)."""
    usage = get(response, "usage")
    return Outcome(
        response_model=get(response, "model"),
        usage=Usage(input_tokens=get(usage, "prompt_tokens")) if usage is not None else None,
    )


def chat_summary(completion: Any) -> Summary:
    """``Summary`` of a ChatCompletion (the fields ``chat_outcome`` reads for model and token counts)."""
    usage = getattr(completion, "usage", None)
    model = getattr(completion, "model", None)
    if usage is None:
        return Summary(model)
    return Summary(model, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))


def responses_summary(response: Any) -> Summary:
    """``Summary`` of a Response."""
    usage = getattr(response, "usage", None)
    model = getattr(response, "model", None)
    if usage is None:
        return Summary(model)
    return Summary(model, getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))


def responses_failure(response: Any) -> tuple[str, str] | None:
    """(``error.type``, status message) of a Response whose status is ``failed``, else None.

    The API reports such a failure in the body (HTTP 200, or a ``response.failed`` stream event) and the SDK
    raises nothing, so this is the only sign that the call failed (conventions.md 1.2): ``error.type`` is the
    provider's error code, else ``_OTHER``. The error is read as an object (openai's ``ResponseError``) or a dict
    (LiteLLM's ``ResponsesAPIResponse.error``).
    """
    if getattr(response, "status", None) != "failed":
        return None
    error = getattr(response, "error", None)
    code = get(error, "code")
    error_type = code if isinstance(code, str) and code else sc.ERROR_TYPE_OTHER
    message = get(error, "message")
    return error_type, f"{error_type}: {message}" if message else error_type


def usage_details(usage: Usage) -> dict[str, int]:
    """Langfuse ``usage_details``: input/output exclude the cached, cache-write and reasoning subsets.

    As Langfuse itself normalises ``gen_ai.usage.*`` (conventions.md 4.2): ``input = input_tokens - cache_read -
    cache_creation``, with the cache writes under ``input_cache_creation``.
    """
    details: dict[str, int] = {}
    cached = usage.cached_tokens or 0
    writes = usage.cache_write_tokens if isinstance(usage.cache_write_tokens, int) else 0
    reasoning = usage.reasoning_tokens or 0
    if usage.input_tokens is not None:
        details["input"] = max(usage.input_tokens - cached - writes, 0)
    if usage.cached_tokens is not None:
        details["input_cached_tokens"] = cached
    if isinstance(usage.cache_write_tokens, int):
        details["input_cache_creation"] = writes
    if usage.output_tokens is not None:
        details["output"] = usage.output_tokens - reasoning
    if usage.reasoning_tokens is not None:
        details["output_reasoning_tokens"] = reasoning
    return details
