"""Google Gen AI SDK (``google-genai``) auto-instrumentation: every model call of ``google.genai.Client`` is a span.

Traced, on ``client.models`` and ``client.aio.models``: ``generate_content``, ``generate_content_stream`` and
``embed_content``; ``caches.create`` (a ``task`` span ``create_cache {model}``) and the Interactions API's
``interactions.create`` (``chat {model}``, model interactions, not agent ones). Chat sessions (``client.chats`` / ``client.aio.chats``: ``send_message``,
``send_message_stream``) go through them. Each request the SDK sends is one span: a plain call or chat message
is one, and automatic function calling gives one per request (each with its own usage), the application's tool
functions running between them outside our spans. Spans follow OTel GenAI semantic
conventions v1.41 (``generate_content {model}`` / ``embeddings {model}``, kind CLIENT, provider ``gcp.gemini`` or,
for a Vertex AI client, ``gcp.vertex_ai``): ``system_instruction`` as ``gen_ai.system_instructions``, function
calls and responses as tool call parts, thoughts as ``reasoning`` parts, ``thoughts_token_count`` as reasoning
tokens inside the output, ``cached_content_token_count`` as cache reads inside the input, finish reasons as the
API sends them (``STOP``, ``MAX_TOKENS``, ``SAFETY``...), and the cost from ``evaltrace.pricing``.

Importing this module imports neither ``google.genai`` nor the codec: both load when the SDK is patched.

Example:
    >>> from evaltrace.instrumentation.google_genai import instrument_google_genai, uninstrument_google_genai
    >>> instrument_google_genai()  # doctest: +SKIP
    >>> uninstrument_google_genai()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.google_genai.endpoints import ENDPOINTS

__all__ = ["GoogleGenAIInstrumentor", "instrument_google_genai", "uninstrument_google_genai"]


class GoogleGenAIInstrumentor(EngineInstrumentor):
    """Traces ``google.genai`` model calls: generate (plain and streamed) and embed, sync and async.

    Example:
        >>> GoogleGenAIInstrumentor().instrument()  # doctest: +SKIP
        >>> GoogleGenAIInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("google-genai >= 1.20",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.google_genai.codec:CODEC"


def instrument_google_genai(**kwargs: Any) -> GoogleGenAIInstrumentor:
    """Start tracing the google-genai client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_google_genai`, to undo.
    """
    return instrument_once(GoogleGenAIInstrumentor(), kwargs)


def uninstrument_google_genai() -> None:
    """Restore the original google-genai methods (no-op when not instrumented)."""
    GoogleGenAIInstrumentor().uninstrument()
