"""What a response contributes to its span, whatever the provider: ``Outcome`` (all of it), ``Summary`` (metrics).

A codec turns a provider's response (or a stream's accumulated chunks) into one ``Outcome``; the engine writes it
(``outcome_attributes`` plus content, cost and stream timings in ``engine.build``). Field names follow OTel GenAI:
``Usage`` counts are inclusive (input includes cached and cache-write tokens, output includes reasoning).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from evaltrace._internal import semconv as sc


@dataclass(slots=True)
class Usage:
    """Token counts with OTel's inclusive semantics (input includes cached and cache writes, output reasoning)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass(slots=True)
class Outcome:
    """Everything the response contributes to the span."""

    response_id: str | None = None
    response_model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    output_messages: list[dict[str, Any]] | None = None
    usage: Usage | None = None
    service_tier: str | None = None
    system_fingerprint: str | None = None
    # Provider-specific response attributes (already named and typed), written with the rest; None: none.
    attributes: dict[str, Any] | None = None


class Summary(NamedTuple):
    """What metrics and pricing need when a call ends: read cheaply, without touching the content."""

    response_model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    @classmethod
    def of(cls, outcome: Outcome) -> Summary:
        """The summary of a full outcome."""
        usage = outcome.usage
        if usage is None:
            return cls(outcome.response_model)
        return cls(outcome.response_model, usage.input_tokens, usage.output_tokens)


EMPTY_SUMMARY = Summary()


# Finish reasons that are all strings are written as a tuple (see outcome_attributes).
_STR = frozenset((str,))


def outcome_attributes(outcome: Outcome) -> dict[str, Any]:
    """Response attributes without content (id, model, finish reasons, tiers, token counts)."""
    attrs: dict[str, Any] = {}
    if outcome.response_id:
        attrs[sc.GEN_AI_RESPONSE_ID] = outcome.response_id
    if outcome.response_model:
        attrs[sc.GEN_AI_RESPONSE_MODEL] = outcome.response_model
    reasons = outcome.finish_reasons
    if reasons:
        # A tuple when every reason is a string, as the SDK stores it (set_built stores such tuples as they are);
        # anything else stays a list, which the SDK's cleaning (or set_built's check) handles.
        attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons) if _STR.issuperset(map(type, reasons)) else reasons
    if outcome.service_tier:
        attrs[sc.OPENAI_RESPONSE_SERVICE_TIER] = outcome.service_tier
    if outcome.system_fingerprint:
        attrs[sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] = outcome.system_fingerprint
    usage = outcome.usage
    if usage is not None:
        # Written out, not a helper per count: a Python call costs ~1k instructions, five per call.
        if isinstance(count := usage.input_tokens, int):
            attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = count
        if isinstance(count := usage.output_tokens, int):
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = count
        if isinstance(count := usage.cached_tokens, int):
            attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = count
        if isinstance(count := usage.reasoning_tokens, int):
            attrs[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = count
        # conventions.md 6.1: cache_write_tokens -> the v1.41 name (1.1: "emit the v1.41 names"), the one
        # Langfuse prices as cache creation; [main]'s cache_write would become an unrelated usage key there (4.2).
        if isinstance(count := usage.cache_write_tokens, int):
            attrs[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = count
    return attrs
