"""OpenAI auto-instrumentation: every call of the official ``openai`` client becomes a GenAI span.

Traced (sync and async clients, any OpenAI-compatible base URL): ``chat.completions.create`` / ``parse`` /
``stream``, ``responses.create`` / ``parse`` / ``stream``, ``beta.responses.create``, ``embeddings.create``, and
their ``with_raw_response`` variants. Spans follow OTel GenAI semantic conventions v1.41 (``chat {model}`` /
``embeddings {model}``, kind CLIENT) plus Langfuse's ``langfuse.observation.*`` and evaltrace's ``evaltrace.*``
attributes (cost, streaming timings). Message content is recorded unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` or ``configure(capture_content=False)`` turns it off.

Nothing is patched at import: a resource package openai has not imported yet is patched when it is (openai loads
most of them on first use), and the wrapper code loads with the first patch, so ``instrument_openai()`` itself
imports neither.

Example:
    >>> from evaltrace.instrumentation.openai import instrument_openai, uninstrument_openai
    >>> instrument_openai()  # doctest: +SKIP
    >>> uninstrument_openai()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace._internal.openai.registry import ENDPOINTS

__all__ = ["OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"]


class OpenAIInstrumentor(EngineInstrumentor):
    """Traces the official ``openai`` client: chat completions, Responses and embeddings, sync and async.

    Example:
        >>> OpenAIInstrumentor().instrument()  # doctest: +SKIP
        >>> OpenAIInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("openai >= 1.40",)
    endpoints = ENDPOINTS
    wrappers = "evaltrace._internal.openai.wrappers"  # the engine's, bound to the codec (tests pin this path)


def instrument_openai(**kwargs: Any) -> OpenAIInstrumentor:
    """Start tracing the openai client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_openai`, to undo.
    """
    return instrument_once(OpenAIInstrumentor(), kwargs)


def uninstrument_openai() -> None:
    """Restore the original openai methods (no-op when not instrumented)."""
    OpenAIInstrumentor().uninstrument()
