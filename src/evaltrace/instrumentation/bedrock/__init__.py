"""AWS Bedrock auto-instrumentation: ``bedrock-runtime`` calls of boto3 clients become GenAI spans.

Traced: ``converse``, ``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream``, on every
``bedrock-runtime`` client, made before or after ``instrument()``. Spans follow OTel GenAI semantic conventions
v1.41 (``chat {modelId}``, kind CLIENT, provider ``aws.bedrock``); ``invoke_model``'s native bodies are read for
Anthropic (Messages and Text Completions), Amazon Nova and Titan, Meta Llama, Cohere Command and Command R,
Mistral and OpenAI-style models. See docs/providers/bedrock.md.

Example:
    >>> from evaltrace.instrumentation.bedrock import instrument_bedrock, uninstrument_bedrock
    >>> instrument_bedrock()  # doctest: +SKIP
    >>> uninstrument_bedrock()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.instrumentor import EngineInstrumentor, instrument_once
from evaltrace.instrumentation.bedrock.endpoints import ENDPOINTS

__all__ = ["BedrockInstrumentor", "instrument_bedrock", "uninstrument_bedrock"]


class BedrockInstrumentor(EngineInstrumentor):
    """Traces boto3's ``bedrock-runtime`` client: ``converse``, ``converse_stream``, ``invoke_model`` and its stream.

    Example:
        >>> BedrockInstrumentor().instrument()  # doctest: +SKIP
        >>> BedrockInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments = ("botocore >= 1.34",)
    endpoints = ENDPOINTS
    codec = "evaltrace.instrumentation.bedrock.codec:CODEC"


def instrument_bedrock(**kwargs: Any) -> BedrockInstrumentor:
    """Start tracing boto3's ``bedrock-runtime`` clients (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_bedrock`, to undo.
    """
    return instrument_once(BedrockInstrumentor(), kwargs)


def uninstrument_bedrock() -> None:
    """Restore botocore's original ``_make_api_call`` (no-op when not instrumented)."""
    BedrockInstrumentor().uninstrument()
