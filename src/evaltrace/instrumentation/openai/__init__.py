"""OpenAI auto-instrumentation: every call of the official ``openai`` client becomes a GenAI span.

Traced (sync and async clients, any OpenAI-compatible base URL): ``chat.completions.create`` / ``parse`` /
``stream``, ``responses.create`` / ``parse`` / ``stream``, ``beta.responses.create``, ``embeddings.create``, and
their ``with_raw_response`` variants. Spans follow OTel GenAI semantic conventions v1.41 (``chat {model}`` /
``embeddings {model}``, kind CLIENT) plus Langfuse's ``langfuse.observation.*`` and evaltrace's ``evaltrace.*``
attributes (cost, streaming timings). Message content is recorded unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` or ``configure(capture_content=False)`` turns it off.

Example:
    >>> from evaltrace.instrumentation.openai import instrument_openai, uninstrument_openai
    >>> instrument_openai()  # doctest: +SKIP
    >>> uninstrument_openai()  # doctest: +SKIP
"""

from __future__ import annotations

from evaltrace._internal.openai.instrumentor import OpenAIInstrumentor, instrument_openai, uninstrument_openai

__all__ = ["OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"]
