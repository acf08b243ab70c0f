"""The engine's hooks for LiteLLM: ``LiteLLMCodec`` dispatches each traced function to its readers.

``completion`` / ``acompletion`` are read in :mod:`~evaltrace.instrumentation.litellm.codec`, ``embedding`` /
``aembedding`` in :mod:`~evaltrace.instrumentation.litellm.embeddings`, ``text_completion`` / ``atext_completion``
in :mod:`~evaltrace.instrumentation.litellm.text`, ``responses`` / ``aresponses`` in
:mod:`~evaltrace.instrumentation.litellm.responses` and ``rerank`` / ``arerank`` in
:mod:`~evaltrace.instrumentation.litellm.rerank` (imported with the first rerank: it reads with the Cohere
instrumentation's functions); the provider, server and ``Router`` model group in
:mod:`~evaltrace.instrumentation.litellm.providers`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, NamedTuple

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import PLAIN, Codec, Endpoint
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.response import chat_summary
from evaltrace.instrumentation.litellm import embeddings, responses, text
from evaltrace.instrumentation.litellm.codec import LiteLLMChatAccumulator, error_type, outcome, request_attributes
from evaltrace.instrumentation.litellm.endpoints import (
    COMPLETION,
    EMBEDDING_FUNCTIONS,
    RERANK_FUNCTIONS,
    RESPONSES_FUNCTIONS,
    SYNC_FUNCTIONS,
    TEXT_FUNCTIONS,
)
from evaltrace.instrumentation.litellm.providers import UNKNOWN_PROVIDER, bind, model_group, resolve

if TYPE_CHECKING:
    from evaltrace._internal.engine.call import Call

Attributes = dict[str, Any]


class Route(NamedTuple):
    """The kind of a LiteLLM call: the function called and the provider LiteLLM sends it to (part of the shape)."""

    function: str
    provider: str


class LiteLLMCodec(Codec):
    """LiteLLM's chat, embeddings, text completion, Responses and rerank functions, named after each model's provider."""

    provider = UNKNOWN_PROVIDER
    label = "LiteLLM"

    def operation(self, kind: Hashable) -> str:
        """``chat`` (``completion``, ``responses``), ``embeddings``, ``text_completion`` or ``rerank``."""
        function = kind.function if isinstance(kind, Route) else COMPLETION
        if function in EMBEDDING_FUNCTIONS:
            return sc.OP_EMBEDDINGS
        if function in RERANK_FUNCTIONS:
            return sc.OP_RERANK
        return sc.OP_TEXT_COMPLETION if function in TEXT_FUNCTIONS else sc.OP_CHAT

    def span_kind(self, kind: Hashable) -> str:
        """``task`` for a rerank (it answers nothing: not an LLM step, as the Cohere rerank span), else the engine's."""
        if isinstance(kind, Route) and kind.function in RERANK_FUNCTIONS:
            return sc.KIND_TASK
        return super().span_kind(kind)

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Name positional arguments; resolve the provider and server of the call (see ``resolve``)."""
        function = str(endpoint.kind)
        params = bind(args, kwargs, function)
        provider, server = resolve(params)
        return Route(function, provider), params, server

    def provider_of(self, kind: Hashable, model: str | None, host: str | None) -> str:
        """The provider ``route`` resolved (the span's shape is cached per ``Route``, which names it)."""
        return kind.provider if isinstance(kind, Route) else UNKNOWN_PROVIDER

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
        """OpenAI-shaped request attributes of the call's operation, and the ``Router`` model group it was sent by."""
        function = kind.function if isinstance(kind, Route) else COMPLETION
        if function in EMBEDDING_FUNCTIONS:
            attrs = embeddings.request_attributes(params, capture, max_len)
        elif function in TEXT_FUNCTIONS:
            attrs = text.request_attributes(params, capture, max_len)
        elif function in RESPONSES_FUNCTIONS:
            attrs = responses.request_attributes(params, capture, max_len)
        elif function in RERANK_FUNCTIONS:
            from evaltrace.instrumentation.litellm import rerank

            attrs = rerank.request_attributes(params, capture, max_len)
        else:
            attrs = request_attributes(params, capture, max_len)
        if "metadata" in params or "litellm_metadata" in params:
            group = model_group(params)
            if group is not None:
                attrs[sc.LITELLM_ROUTER_MODEL_GROUP] = group
        return attrs

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """The call's response: ``ModelResponse``, ``EmbeddingResponse``, ``RerankResponse``... of its function."""
        function = kind.function if isinstance(kind, Route) else COMPLETION
        if isinstance(kind, Route) and function in RERANK_FUNCTIONS:
            from evaltrace._internal import settings
            from evaltrace.instrumentation.litellm import rerank

            return rerank.outcome(result, kind.provider, capture, settings.get().max_attribute_length)
        if function in EMBEDDING_FUNCTIONS:
            return embeddings.outcome(result, capture)
        if function in TEXT_FUNCTIONS:
            return text.outcome(result, capture)
        if function in RESPONSES_FUNCTIONS:
            return responses.outcome(result, capture)
        return outcome(result, capture)

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Model and token counts of a response."""
        function = kind.function if isinstance(kind, Route) else COMPLETION
        if isinstance(kind, Route) and function in RERANK_FUNCTIONS:
            from evaltrace.instrumentation.litellm import rerank

            return rerank.summary(result, kind.provider)
        if function in EMBEDDING_FUNCTIONS:
            return embeddings.summary(result)
        if function in TEXT_FUNCTIONS:
            return Summary.of(text.outcome(result, False))
        if function in RESPONSES_FUNCTIONS:
            return responses.summary(result)
        return chat_summary(result)

    def failure(self, kind: Hashable, result: Any) -> tuple[str, str] | None:
        """A ``ResponsesAPIResponse`` whose ``status`` is ``failed`` (LiteLLM raised nothing); else None."""
        if isinstance(kind, Route) and kind.function in RESPONSES_FUNCTIONS:
            return responses.failure(result)
        return None

    def error_type(self, error: BaseException) -> str:
        """The provider's error code, else the class of LiteLLM's exception (see ``error_type``)."""
        return error_type(error)

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """A stream is proxied sync after ``completion``, async after ``acompletion`` (and so for text).

        LiteLLM's stream classes are both sync and async iterators, so their class cannot tell. Each stream's
        accumulator is made here, from the stream (the chat and text ones read it): no ``accumulator`` hook.
        """
        name = type(result).__name__
        function = kind.function if isinstance(kind, Route) else COMPLETION
        is_async = function not in SYNC_FUNCTIONS
        if name not in _STREAM_TYPES:
            if function in RESPONSES_FUNCTIONS and responses.is_stream(result):
                return call.stream(result, responses.ResponsesAccumulator(), is_async=is_async)
            return PLAIN
        if name == _TEXT_STREAM:
            return call.stream(result, text.TextAccumulator(*text.inner_streams(result)), is_async=is_async)
        return call.stream(result, LiteLLMChatAccumulator(result), is_async=is_async)


_TEXT_STREAM = "TextCompletionStreamWrapper"
_STREAM_TYPES = frozenset(("CustomStreamWrapper", _TEXT_STREAM))

CODEC = LiteLLMCodec()
