"""Pure: a ``GenerateContentResponse`` / ``EmbedContentResponse`` -> the response half of the span (an ``Outcome``).

Usage follows OTel's inclusive counts (conventions.md 1.3): ``prompt_token_count`` is the input and already
includes the cached content (``cached_content_token_count``, its cache-read subset), plus the prompt the API
itself fed to a server-side tool (``tool_use_prompt_token_count``: read, and billed, as input, so input plus
output is ``total_token_count``); Gemini counts the thoughts
apart from the candidates, so the output is ``candidates_token_count + thoughts_token_count`` and the thoughts
are its reasoning subset. ``gen_ai.response.finish_reasons`` are the API's values verbatim (``STOP``,
``MAX_TOKENS``, ``SAFETY``, ...), one per candidate; each output message carries the GenAI finish reason, and
after its answer what the answer was grounded on (``grounding``: search queries, sources, citations).

A blocked prompt (``prompt_feedback.block_reason``; the API answers 200 with no candidate and the SDK raises
nothing) is not an error of the call: its reason is the response's one finish reason, verbatim (``SAFETY``,
``PROHIBITED_CONTENT``...), and ``gcp.gemini.prompt_feedback.block_reason``; with content, the output is one
empty assistant message whose finish reason is ``content_filter``.
"""

from __future__ import annotations

import functools
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import plain_fields
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.openai.parts import Message, Part, field
from evaltrace.instrumentation.google_genai.grounding import citations_of, grounding_parts
from evaltrace.instrumentation.google_genai.parts import enum_name, parts_of, read

# FinishReason -> the GenAI finish reason of an output message (stop, length, content_filter, tool_call, error).
# STOP with a function call is ``tool_call`` (Gemini has no finish reason of its own for it). Unknown values are
# kept as sent, as the schema allows.
_CONTENT_FILTER = (
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "MODEL_ARMOR",
    "ESCALATION",  # filtered by an escalation rule
    "PUP_LIMITED_DISABLED",  # the account is limited for Prohibited Use Policy violations: a policy stop
)
_ERROR = (
    "FINISH_REASON_UNSPECIFIED",
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "MISSING_THOUGHT_SIGNATURE",
    "MALFORMED_RESPONSE",
    "IMAGE_OTHER",
    "NO_IMAGE",
    "OTHER",
)
FINISH_REASONS: dict[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "CONTINUATION": "length",  # the per-request token limit, to be continued by another request
    **dict.fromkeys(_CONTENT_FILTER, "content_filter"),
    **dict.fromkeys(_ERROR, "error"),
}


def finish_reason(reason: str | None, parts: list[Part]) -> str:
    """The output message's ``finish_reason``: mapped; none (a cut-off stream) is ``error``."""
    if not reason:
        return "error"
    mapped = FINISH_REASONS.get(reason, reason)
    if mapped == "stop" and any(p["type"] == "tool_call" for p in parts):
        return "tool_call"
    return mapped


# The fields of the SDK's ``GenerateContentResponseUsageMetadata`` that ``usage_of`` reads.
_USAGE_FIELDS = (
    "candidates_token_count",
    "thoughts_token_count",
    "prompt_token_count",
    "tool_use_prompt_token_count",
    "cached_content_token_count",
)


@functools.cache
def _sdk_usage_type() -> type | None:
    """google-genai's ``GenerateContentResponseUsageMetadata`` when its fields are plain ``__dict__`` entries.

    That is, when ``getattr`` of each field ``usage_of`` reads is the instance's ``__dict__`` entry
    (``plain_fields``), every one is a declared field, and the model forbids extra fields, so a name that is not a
    field (``response_token_count``) reads as None. None when not importable or not so.
    """
    try:
        from google.genai.types import GenerateContentResponseUsageMetadata as usage_type
    except ImportError:
        return None
    if (
        not plain_fields(usage_type, (*_USAGE_FIELDS, "response_token_count"))
        or not set(_USAGE_FIELDS) <= usage_type.model_fields.keys()
        or "response_token_count" in usage_type.model_fields
        or usage_type.model_config.get("extra") != "forbid"
    ):
        return None
    return usage_type


def usage_of(metadata: Any) -> Usage | None:
    """``usage_metadata`` (``GenerateContentResponseUsageMetadata`` or ``UsageMetadata``, or a dict) -> Usage.

    The SDK's own ``GenerateContentResponseUsageMetadata`` (every Gemini response and stream chunk) is read from
    its ``__dict__`` in one frame (``_sdk_usage_type``): six ``read`` calls cost ~25k instructions a response.
    """
    if metadata is None:
        return None
    if type(metadata) is _sdk_usage_type():
        try:
            return _plain_usage(metadata.__dict__)
        except KeyError:  # built without some field (``model_construct``): read as any other object
            pass
    candidates = count(read(metadata, "candidates_token_count", "candidatesTokenCount"))
    if candidates is None:  # the newer ``UsageMetadata`` (embeddings, live) says response tokens
        candidates = count(read(metadata, "response_token_count", "responseTokenCount"))
    thoughts = count(read(metadata, "thoughts_token_count", "thoughtsTokenCount"))
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    prompt = count(read(metadata, "prompt_token_count", "promptTokenCount"))
    tool_prompt = count(read(metadata, "tool_use_prompt_token_count", "toolUsePromptTokenCount"))
    if tool_prompt is not None:
        prompt = (prompt or 0) + tool_prompt
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cached_tokens=count(read(metadata, "cached_content_token_count", "cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def _plain_usage(fields: dict[str, Any]) -> Usage:
    """``usage_of`` of the SDK's usage model, from its ``__dict__`` (no ``response_token_count``: not a field)."""
    candidates = count(fields["candidates_token_count"])
    thoughts = count(fields["thoughts_token_count"])
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    prompt = count(fields["prompt_token_count"])
    tool_prompt = count(fields["tool_use_prompt_token_count"])
    if tool_prompt is not None:
        prompt = (prompt or 0) + tool_prompt
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cached_tokens=count(fields["cached_content_token_count"]),
        reasoning_tokens=thoughts,
    )


def block_reason(response: Any) -> str | None:
    """``prompt_feedback.block_reason`` of a response (or stream chunk), verbatim; None when the prompt passed."""
    feedback = read(response, "prompt_feedback", "promptFeedback")
    return enum_name(read(feedback, "block_reason", "blockReason")) if feedback is not None else None


def blocked(outcome: Outcome, reason: str) -> Outcome:
    """``outcome`` of a response with no candidate, for a prompt blocked for ``reason`` (see the module docstring)."""
    outcome.finish_reasons = [reason]
    if outcome.output_messages is not None:
        outcome.output_messages = [{"role": "assistant", "parts": [], "finish_reason": "content_filter"}]
    outcome.attributes = {sc.GCP_GEMINI_PROMPT_BLOCK_REASON: reason}
    return outcome


def output_message(parts: list[Part], reason: str | None) -> Message:
    """One candidate's answer as a GenAI OutputMessage."""
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason, parts)}


def response_outcome(response: Any, content: bool = True) -> Outcome:
    """GenerateContentResponse -> Outcome: one output message per candidate (only with ``content``)."""
    messages: list[Message] | None = [] if content else None
    reasons: list[str] = []
    for candidate in field(response, "candidates") or ():
        reason = enum_name(read(candidate, "finish_reason", "finishReason"))
        if reason:
            reasons.append(reason)
        if messages is not None:
            parts = parts_of(field(field(candidate, "content"), "parts"))
            parts = grounding_parts(
                parts,
                read(candidate, "grounding_metadata", "groundingMetadata"),
                citations_of(candidate),
                read(candidate, "url_context_metadata", "urlContextMetadata"),
            )
            messages.append(output_message(parts, reason))
    outcome = Outcome(
        response_id=read(response, "response_id", "responseId"),
        response_model=read(response, "model_version", "modelVersion"),
        finish_reasons=reasons,
        output_messages=messages,
        usage=usage_of(read(response, "usage_metadata", "usageMetadata")),
    )
    reason = None if reasons else block_reason(response)
    return outcome if reason is None else blocked(outcome, reason)


def response_summary(response: Any) -> Summary:
    """Model and token counts of a response, read without its content."""
    usage = usage_of(getattr(response, "usage_metadata", None))
    model = getattr(response, "model_version", None)
    if usage is None:
        return Summary(model)
    return Summary(model, usage.input_tokens, usage.output_tokens)


def cache_outcome(cached: Any) -> Outcome:
    """``CachedContent`` (what ``caches.create`` returns) -> Outcome: its name, model and the tokens it holds.

    The tokens cached are the call's input and its cache writes, written as attributes rather than ``Usage`` so no
    cost is derived: Gemini bills a cache by tokens held over time (its TTL), which no per-call price gives.
    """
    tokens = count(field(field(cached, "usage_metadata"), "total_token_count"))
    attributes = None
    if tokens is not None:
        attributes = {sc.GEN_AI_USAGE_INPUT_TOKENS: tokens, sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: tokens}
    return Outcome(response_id=field(cached, "name"), response_model=field(cached, "model"), attributes=attributes)


def embedding_outcome(response: Any, content: bool = True) -> Outcome:
    """EmbedContentResponse -> Outcome: its usage, when the API reported one.

    The Developer API reports no token count for embeddings; Vertex reports one per embedding
    (``statistics.token_count``), summed here, and newer endpoints a ``usage_metadata``.
    """
    usage = usage_of(field(response, "usage_metadata"))
    if usage is None:
        total = 0
        counted = False
        for embedding in field(response, "embeddings") or ():
            tokens = field(field(embedding, "statistics"), "token_count")
            if isinstance(tokens, int | float) and not isinstance(tokens, bool):
                total += int(tokens)
                counted = True
        usage = Usage(input_tokens=total) if counted else None
    attributes = None
    embeddings = field(response, "embeddings")
    values = field(embeddings[0], "values") if embeddings else None
    if values:  # the dimensions the model returned (the request's output_dimensionality, or the model's default)
        attributes = {sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: len(values)}
    return Outcome(usage=usage, attributes=attributes)
