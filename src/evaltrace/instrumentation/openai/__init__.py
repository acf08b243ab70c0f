"""OpenAI auto-instrumentation: every call of the official ``openai`` client becomes a GenAI span.

Example:
    >>> from evaltrace.instrumentation.openai import instrument_openai
    >>> instrument_openai()  # doctest: +SKIP
"""

from __future__ import annotations

from evaltrace._internal.openai.instrumentor import OpenAIInstrumentor, instrument_openai, uninstrument_openai

__all__ = ["OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"]
