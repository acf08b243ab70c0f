"""LiteLLM auto-instrumentation: chat, embeddings and text completions as GenAI spans of the provider behind them.

Each ``completion`` call makes one ``chat {model}`` span whose ``gen_ai.provider.name`` is the provider LiteLLM
routes the model to (``litellm.get_llm_provider``: ``groq/llama3-8b-8192`` -> ``groq``, ``mistral/...`` ->
``mistral_ai``), with the server from ``api_base``. Streams (``stream=True``, LiteLLM's ``CustomStreamWrapper``,
sync and async) end the span when they end. ``embedding`` / ``aembedding`` make ``embeddings {model}`` spans,
``text_completion`` / ``atext_completion`` ``text_completion {model}`` spans, ``responses`` / ``aresponses``
(LiteLLM's Responses API) ``chat {model}`` spans, streamed too. When the provider's
own SDK is instrumented too (``instrument_openai()`` and LiteLLM calling the openai client), the LiteLLM span is
the one kept: the engine marks the call as traced, so the inner SDK call makes no second span. See docs/providers/litellm.md.

Example:
    >>> from evaltrace.instrumentation.litellm import instrument_litellm, uninstrument_litellm
    >>> instrument_litellm()  # doctest: +SKIP
    >>> uninstrument_litellm()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.litellm.endpoints import ENDPOINTS

__all__ = ["LiteLLMInstrumentor", "instrument_litellm", "uninstrument_litellm"]


class LiteLLMInstrumentor(EngineInstrumentor):
    """Traces LiteLLM's ``completion``, ``embedding``, ``text_completion`` and ``responses`` (and their async twins).

    Example:
        >>> LiteLLMInstrumentor().instrument()  # doctest: +SKIP
        >>> LiteLLMInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("litellm >= 1.50",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.litellm.hooks:CODEC"


def instrument_litellm(**kwargs: Any) -> LiteLLMInstrumentor:
    """Trace every LiteLLM chat, embeddings, text completion and Responses call (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return instrument_once(LiteLLMInstrumentor(), kwargs)


def uninstrument_litellm() -> None:
    """Restore LiteLLM's traced functions (no-op when not instrumented)."""
    LiteLLMInstrumentor().uninstrument()
