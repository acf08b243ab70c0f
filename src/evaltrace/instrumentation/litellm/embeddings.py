"""Pure: a ``litellm.embedding`` / ``aembedding`` call -> request attributes, its ``EmbeddingResponse`` -> Outcome.

LiteLLM takes OpenAI's embeddings keywords (``input``, ``dimensions``, ``encoding_format``) whatever the provider
and returns OpenAI's shape (``data[i].embedding``, ``usage.prompt_tokens``), so the OpenAI instrumentation's readers
are used, as the OpenAI embeddings span has them. What LiteLLM adds: the vectors' size read from the response when
the request named none (as the Cohere and Ollama embeddings spans do), since LiteLLM maps ``dimensions`` onto each
provider's own parameter and the model's default size is known only from its answer.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai import build
from evaltrace._internal.openai.parts import field
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import embeddings_outcome

Attributes = dict[str, Any]


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``gen_ai.request.encoding_formats``, ``gen_ai.embeddings.dimension.count``; the inputs with ``capture``.

    The inputs go to ``input.value`` (JSON, one entry per input, token-id inputs as their count), as the OpenAI
    embeddings span has them: the content setting decides, as for every span.
    """
    attrs = build.request_attributes(EndpointKind.EMBEDDINGS, params, capture, max_len)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_EMBEDDING
    return attrs


def outcome(response: Any, content: bool = True) -> Outcome:
    """``EmbeddingResponse`` -> Outcome: response model, input tokens, the size of the vectors returned.

    A base64 vector (``encoding_format="base64"``) is a string: its size is not read (the request's
    ``dimensions``, if any, stays the span's).
    """
    result = embeddings_outcome(response, content)
    data = field(response, "data")
    first = data[0] if isinstance(data, list) and data else None
    vector = field(first, "embedding") if first is not None else None
    if isinstance(vector, list) and vector:
        result.attributes = {sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: len(vector)}
    return result


def summary(response: Any) -> Summary:
    """Model and input tokens of an ``EmbeddingResponse`` (embeddings produce no output tokens)."""
    usage = field(response, "usage")
    tokens = field(usage, "prompt_tokens") if usage is not None else None
    return Summary(field(response, "model"), tokens if isinstance(tokens, int) else None)
