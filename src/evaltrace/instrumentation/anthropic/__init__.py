"""Anthropic auto-instrumentation: every ``messages`` call of the official ``anthropic`` client becomes a GenAI span.

Traced (sync and async clients): ``messages.create`` (plain and ``stream=True``), the ``messages.stream()``
helper, ``messages.parse``, their ``beta.messages`` twins and ``with_raw_response`` variants;
``messages.count_tokens`` is not traced. Spans follow OTel GenAI semantic conventions v1.41 (``chat {model}``,
kind CLIENT, provider ``anthropic``): the system prompt as ``gen_ai.system_instructions``, tool use and tool
results as tool call parts, thinking as ``reasoning`` parts (never in the answer text), input tokens including the
prompt cache, plus Langfuse's ``langfuse.observation.*`` (usage with cache keys, cost) and evaltrace's
``evaltrace.*`` attributes.

Example:
    >>> from evaltrace.instrumentation.anthropic import instrument_anthropic, uninstrument_anthropic
    >>> instrument_anthropic()  # doctest: +SKIP
    >>> uninstrument_anthropic()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.anthropic.registry import ENDPOINTS
from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once

__all__ = ["AnthropicInstrumentor", "instrument_anthropic", "uninstrument_anthropic"]


class AnthropicInstrumentor(EngineInstrumentor):
    """Traces the official ``anthropic`` client: ``messages.create``, ``.stream`` and ``.parse``, sync and async.

    Example:
        >>> AnthropicInstrumentor().instrument()  # doctest: +SKIP
        >>> AnthropicInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider). The SDK's own call span (anthropic >= 2
    traces its calls itself) is withheld inside the calls we trace, so one call makes one span; the client's other
    calls keep it.
    """

    instruments = ("anthropic >= 0.40",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.anthropic.codec:CODEC"


def instrument_anthropic(**kwargs: Any) -> AnthropicInstrumentor:
    """Start tracing the anthropic client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_anthropic`, to undo.
    """
    return instrument_once(AnthropicInstrumentor(), kwargs)


def uninstrument_anthropic() -> None:
    """Restore the original anthropic methods (no-op when not instrumented)."""
    AnthropicInstrumentor().uninstrument()
