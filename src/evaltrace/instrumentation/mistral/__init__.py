"""Mistral auto-instrumentation: calls of the official ``mistralai`` client become GenAI spans.

Traced (sync and async): ``chat.complete``, ``chat.stream`` (the span covers the stream), ``chat.parse`` (through
``complete``), ``embeddings.create``, ``fim.complete`` / ``stream`` (``text_completion``), ``agents.complete`` /
``stream`` (``chat``, with ``gen_ai.agent.id``) and ``beta.conversations.start`` / ``append`` / ``restart`` and
their streams (``invoke_agent``). Spans follow OTel GenAI semantic conventions (``chat {model}``, kind
CLIENT, provider ``mistral_ai``): request parameters, messages and tool calls as GenAI parts, thinking chunks of
magistral models as ``reasoning`` parts, finish reasons verbatim, usage with prompt-cache hits, cost. See
docs/providers/mistral.md.

Example:
    >>> from evaltrace.instrumentation.mistral import instrument_mistral, uninstrument_mistral
    >>> instrument_mistral()  # doctest: +SKIP
    >>> uninstrument_mistral()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.mistral.endpoints import ENDPOINTS

__all__ = ["MistralInstrumentor", "instrument_mistral", "uninstrument_mistral"]


class MistralInstrumentor(EngineInstrumentor):
    """Traces the official ``mistralai`` client (``opentelemetry_instrumentor`` entry point ``evaltrace_mistral``).

    Example:
        >>> MistralInstrumentor().instrument()  # doctest: +SKIP
        >>> MistralInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("mistralai >= 1.0",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.mistral.codec:CODEC"


def instrument_mistral(**kwargs: Any) -> MistralInstrumentor:
    """Start tracing the mistralai client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_mistral`, to undo.

    Raises:
        ImportError: ``mistralai`` is not installed (the ``mistral`` extra).
    """
    if importlib.util.find_spec("mistralai") is None:
        raise ImportError("instrument_mistral() needs: pip install 'evaltrace[mistral]' (mistralai is not installed)")
    return instrument_once(MistralInstrumentor(), kwargs)


def uninstrument_mistral() -> None:
    """Restore the original mistralai methods (no-op when not instrumented)."""
    MistralInstrumentor().uninstrument()
