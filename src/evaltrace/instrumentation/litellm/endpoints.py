"""The LiteLLM functions traced (the table only: ``instrument_litellm()`` imports neither LiteLLM nor the codec).

``litellm.completion`` / ``acompletion`` (chat), ``embedding`` / ``aembedding`` (embeddings),
``text_completion`` / ``atext_completion`` (text completion), ``responses`` / ``aresponses`` (LiteLLM's Responses
API, a chat) and ``rerank`` / ``arerank`` (a rerank, Cohere's API whatever the provider) are module functions: the package attributes are
wrapped, which is where applications (and LiteLLM's ``Router``) look them up. Code that ran ``from litellm import
completion`` before ``instrument_litellm()`` keeps the unwrapped function. The async functions call the sync ones
through ``litellm.main``'s own names (unwrapped), so one call makes one span.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

COMPLETION = "completion"
ACOMPLETION = "acompletion"
EMBEDDING = "embedding"
AEMBEDDING = "aembedding"
TEXT_COMPLETION = "text_completion"
ATEXT_COMPLETION = "atext_completion"
RESPONSES = "responses"
ARESPONSES = "aresponses"
RERANK = "rerank"
ARERANK = "arerank"

SYNC_FUNCTIONS = frozenset((COMPLETION, EMBEDDING, TEXT_COMPLETION, RESPONSES))
"""The functions whose stream (if any) is iterated with ``for``: LiteLLM's stream classes are both kinds."""
EMBEDDING_FUNCTIONS = frozenset((EMBEDDING, AEMBEDDING))
TEXT_FUNCTIONS = frozenset((TEXT_COMPLETION, ATEXT_COMPLETION))
RESPONSES_FUNCTIONS = frozenset((RESPONSES, ARESPONSES))
RERANK_FUNCTIONS = frozenset((RERANK, ARERANK))

ENDPOINTS = (
    Endpoint("litellm", None, "completion", COMPLETION, is_async=False),
    Endpoint("litellm", None, "acompletion", ACOMPLETION, is_async=True),
    Endpoint("litellm", None, "embedding", EMBEDDING, is_async=False),
    Endpoint("litellm", None, "aembedding", AEMBEDDING, is_async=True),
    Endpoint("litellm", None, "text_completion", TEXT_COMPLETION, is_async=False),
    Endpoint("litellm", None, "atext_completion", ATEXT_COMPLETION, is_async=True),
    Endpoint("litellm", None, "responses", RESPONSES, is_async=False),
    Endpoint("litellm", None, "aresponses", ARESPONSES, is_async=True),
    Endpoint("litellm", None, "rerank", RERANK, is_async=False),
    Endpoint("litellm", None, "arerank", ARERANK, is_async=True),
)
