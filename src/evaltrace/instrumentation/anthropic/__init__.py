"""Anthropic auto-instrumentation: every ``messages`` call of the official ``anthropic`` client becomes a GenAI span.

Traced (sync and async clients): ``messages.create`` (plain and ``stream=True``), the ``messages.stream()``
helper, their ``beta.messages`` twins and ``with_raw_response`` variants; ``messages.count_tokens`` is not
traced. Spans follow OTel GenAI semantic conventions v1.41 (``chat {model}``, kind CLIENT, provider
``anthropic``): the system prompt as ``gen_ai.system_instructions``, tool use and tool results as tool call
parts, thinking as ``reasoning`` parts (never in the answer text), input tokens including the prompt cache, plus
Langfuse's ``langfuse.observation.*`` (usage with cache keys, cost) and evaltrace's ``evaltrace.*`` attributes.

Example:
    >>> from evaltrace.instrumentation.anthropic import instrument_anthropic, uninstrument_anthropic
    >>> instrument_anthropic()  # doctest: +SKIP
    >>> uninstrument_anthropic()  # doctest: +SKIP
"""

from __future__ import annotations

from evaltrace._internal.anthropic.instrumentor import (
    AnthropicInstrumentor,
    instrument_anthropic,
    uninstrument_anthropic,
)

__all__ = ["AnthropicInstrumentor", "instrument_anthropic", "uninstrument_anthropic"]
