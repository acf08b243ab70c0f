"""Ollama auto-instrumentation: ``chat``, ``generate`` and ``embed`` of the official ``ollama`` client as GenAI spans.

Traced: ``Client`` and ``AsyncClient`` ``chat`` (``chat {model}``), ``generate`` (``text_completion {model}``) and
``embed`` (``embeddings {model}``), streamed (``stream=True``) and not, and the module functions ``ollama.chat`` /
``generate`` / ``embed`` (the default client), whatever the import order (``from ollama import chat`` before
``instrument_ollama()`` included: the client's ``_request``, which every one of them posts through, is what is
wrapped): one call, one span, provider ``ollama``, the server from the client's host. ``thinking`` is a ``reasoning`` part, tool calls are ``tool_call`` parts, ``done_reason`` is kept
verbatim, usage is ``prompt_eval_count`` / ``eval_count``. See docs/providers/ollama.md.

Nothing is patched at import, and ``instrument_ollama()`` imports neither the ``ollama`` SDK nor the codec.

Example:
    >>> from evaltrace.instrumentation.ollama import instrument_ollama, uninstrument_ollama
    >>> instrument_ollama()  # doctest: +SKIP
    >>> uninstrument_ollama()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.ollama.endpoints import ENDPOINTS

__all__ = ["OllamaInstrumentor", "instrument_ollama", "uninstrument_ollama"]


class OllamaInstrumentor(EngineInstrumentor):
    """Traces the official ``ollama`` client's ``chat``, ``generate`` and ``embed``, sync and async.

    Example:
        >>> OllamaInstrumentor().instrument()  # doctest: +SKIP
        >>> OllamaInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("ollama >= 0.4",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.ollama.codec:CODEC"


def instrument_ollama(**kwargs: Any) -> OllamaInstrumentor:
    """Trace every ``chat`` / ``generate`` / ``embed`` call of the ``ollama`` client (idempotent).

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return instrument_once(OllamaInstrumentor(), kwargs)


def uninstrument_ollama() -> None:
    """Restore the original ``ollama`` client methods (no-op when not instrumented)."""
    OllamaInstrumentor().uninstrument()
