"""Cohere auto-instrumentation: every v2 chat call of the official ``cohere`` client becomes a GenAI span.

Traced (sync and async clients): ``ClientV2.chat`` / ``chat_stream``, the same methods reached as ``client.v2``,
and ``AsyncClientV2.chat`` / ``chat_stream``; one call, one span (``chat {model}``, kind CLIENT, provider
``cohere``). Thinking content and the tool plan are ``reasoning`` parts, tool calls ``tool_call`` parts, finish
reasons verbatim, usage and cost from the billed units (the model's ``usage.tokens`` and ``cached_tokens``
beside them as ``cohere.usage.*``), cost from genai-prices. See docs/providers/cohere.md.

Nothing is patched at import, and ``instrument_cohere()`` imports neither the ``cohere`` SDK nor the codec: the
client's module is patched when it is imported, and the codec loads with the first patch.

Example:
    >>> from evaltrace.instrumentation.cohere import instrument_cohere, uninstrument_cohere
    >>> instrument_cohere()  # doctest: +SKIP
    >>> uninstrument_cohere()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.cohere.endpoints import ENDPOINTS

__all__ = ["CohereInstrumentor", "instrument_cohere", "uninstrument_cohere"]


class CohereInstrumentor(EngineInstrumentor):
    """Traces the official ``cohere`` client's v2 chat (``chat``, ``chat_stream``), sync and async.

    Example:
        >>> CohereInstrumentor().instrument()  # doctest: +SKIP
        >>> CohereInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("cohere >= 5.11",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.cohere.codec:CODEC"


def instrument_cohere(**kwargs: Any) -> CohereInstrumentor:
    """Trace every v2 chat call of the ``cohere`` client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return instrument_once(CohereInstrumentor(), kwargs)


def uninstrument_cohere() -> None:
    """Restore the original ``cohere`` methods (no-op when not instrumented)."""
    CohereInstrumentor().uninstrument()
