"""Groq auto-instrumentation: ``chat.completions.create`` and ``embeddings.create`` of the ``groq`` client make GenAI spans.

Traced on ``Groq`` and ``AsyncGroq``, plain and ``stream=True`` (the span covers the stream). The groq SDK has
openai's shape, so the OpenAI readers make the attributes; Groq's own fields are read too: ``reasoning``,
``x_groq`` usage on the last stream chunk, built-in tool runs (``executed_tools``) and its error codes. See
docs/providers/groq.md.

Example:
    >>> from evaltrace.instrumentation.groq import instrument_groq, uninstrument_groq
    >>> instrument_groq()  # doctest: +SKIP
    >>> uninstrument_groq()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.groq.endpoints import ENDPOINTS

__all__ = ["GroqInstrumentor", "instrument_groq", "uninstrument_groq"]


class GroqInstrumentor(EngineInstrumentor):
    """Traces the official ``groq`` client (``opentelemetry_instrumentor`` entry point ``evaltrace_groq``).

    Example:
        >>> GroqInstrumentor().instrument()  # doctest: +SKIP
        >>> GroqInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("groq >= 0.11",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.groq.codec:CODEC"


def instrument_groq(**kwargs: Any) -> GroqInstrumentor:
    """Start tracing the groq client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_groq`, to undo.

    Raises:
        ImportError: ``groq`` is not installed (the ``groq`` extra).
    """
    if importlib.util.find_spec("groq") is None:
        raise ImportError("instrument_groq() needs: pip install 'evaltrace[groq]' (groq is not installed)")
    return instrument_once(GroqInstrumentor(), kwargs)


def uninstrument_groq() -> None:
    """Restore the original groq methods (no-op when not instrumented)."""
    GroqInstrumentor().uninstrument()
