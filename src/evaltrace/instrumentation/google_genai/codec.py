"""The google-genai codec: the engine's hooks over ``request`` / ``response`` / ``stream`` (pure translators).

``gen_ai.provider.name`` is ``gcp.vertex_ai`` for a Vertex AI client and ``gcp.gemini`` for the Gemini Developer
API: the client says which (``vertexai=True``), not the host, which may be a proxy. ``error.type`` of an
``APIError`` is the API's status (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``...), else the exception class.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

from evaltrace._internal.engine.codec import Accumulator, Codec, Endpoint, Server
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.semconv import GEN_AI_REQUEST_STREAM, KIND_TASK, OP_CHAT, OP_CREATE_CACHE, OP_EMBEDDINGS
from evaltrace.instrumentation.google_genai import endpoints, interaction_stream, interactions
from evaltrace.instrumentation.google_genai.endpoints import GEMINI, VERTEX, Kind
from evaltrace.instrumentation.google_genai.request import cache_attributes, request_attributes
from evaltrace.instrumentation.google_genai.response import (
    cache_outcome,
    embedding_outcome,
    response_outcome,
    response_summary,
)
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator


class GoogleGenAICodec(Codec):
    """google-genai's ``models.generate_content`` / ``generate_content_stream`` / ``embed_content``, ``caches.create``."""

    provider: ClassVar[str] = GEMINI
    label: ClassVar[str] = "Google Gen AI"
    cache_plain_types: ClassVar[bool] = True

    def operation(self, kind: Hashable) -> str:
        """``generate_content``, ``embeddings``, ``create_cache``, or ``chat`` (the Interactions API)."""
        return kind.operation if isinstance(kind, Kind) else str(kind)

    def span_kind(self, kind: Hashable) -> str:
        """``task`` for ``caches.create`` (it answers nothing: not an LLM step), else the engine's."""
        if self.operation(kind) == OP_CREATE_CACHE:
            return KIND_TASK
        return super().span_kind(kind)

    def provider_for(self, host: str | None) -> str:
        """``gcp.vertex_ai`` for a Vertex AI host (metrics and pricing read it); a proxy is named by ``route``."""
        if host is not None and host.endswith("aiplatform.googleapis.com"):
            return VERTEX
        return GEMINI

    def provider_of(self, kind: Hashable, model: str | None, host: str | None) -> str:
        """``gcp.vertex_ai`` for a Vertex AI client's calls whatever their host (``route`` says so in the kind)."""
        if isinstance(kind, Kind) and kind.provider == VERTEX:
            return VERTEX
        return self.provider_for(host)

    def server_of(self, instance: Any) -> Server:
        """The host and port of the client's base URL."""
        return endpoints.server_of(instance)

    def route(self, endpoint: Endpoint, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The endpoint's kind, naming Vertex AI when the client is a Vertex one; an interaction's body and stream."""
        kind = endpoint.kind
        if isinstance(kind, Kind) and endpoints.is_vertex(instance):
            kind = kind._replace(provider=VERTEX)
        if (
            isinstance(kind, Kind) and kind.operation == OP_CHAT
        ):  # the Interactions API: the body, and whether this request streams
            params = interactions.body_of(kwargs)
            if params is None:
                return None  # an agent interaction: not traced (see ``interactions``)
            return kind._replace(stream=params.get("stream") is True), params
        return kind, kwargs

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> Any:
        """The request's parameters, and with ``capture`` its contents, instructions and tools."""
        operation = self.operation(kind)
        if operation == OP_CREATE_CACHE:
            return cache_attributes(params, capture, max_len)
        if operation == OP_CHAT:
            return interactions.request_attributes(params, capture, max_len)
        attrs = request_attributes(operation, params, capture, max_len)
        if isinstance(kind, Kind) and kind.stream:
            attrs[GEN_AI_REQUEST_STREAM] = True
        return attrs

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A response (or an embedding response, or a ``CachedContent``) -> Outcome."""
        operation = self.operation(kind)
        if operation == OP_EMBEDDINGS:
            return embedding_outcome(result, capture)
        if operation == OP_CREATE_CACHE:
            return cache_outcome(result)
        if operation == OP_CHAT:
            return interactions.interaction_outcome(result, capture)
        return response_outcome(result, capture)

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Model and token counts, read without the content."""
        operation = self.operation(kind)
        if operation == OP_EMBEDDINGS:
            return Summary.of(embedding_outcome(result, False))
        if operation == OP_CREATE_CACHE:
            return Summary(getattr(result, "model", None))  # no token counts: the cache's are not a call's usage
        if operation == OP_CHAT:
            return interactions.summary_of(result)
        return response_summary(result)

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        """A ``generate_content_stream`` result: a generator (sync) or an async generator (``client.aio``).

        A streamed interaction is the SDK's ``Stream`` / ``AsyncStream`` (its ``generator``); a raw-response
        accessor's result (``with_raw_response``) is not proxied.
        """
        if not isinstance(kind, Kind) or not kind.stream:
            return False
        return kind.operation != OP_CHAT or hasattr(result, "generator")

    def failure(self, kind: Hashable, result: Any) -> tuple[str, str] | None:
        """A ``failed`` interaction (HTTP 200, nothing raised)."""
        if self.operation(kind) == OP_CHAT:
            return interactions.failure_of(result)
        return None

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh accumulator for one stream."""
        if self.operation(kind) == OP_CHAT:
            return interaction_stream.InteractionStreamAccumulator()
        return GenerateContentAccumulator()

    def error_type(self, error: BaseException) -> str:
        """The API's error status (``google.genai.errors.APIError.status``), else the exception class name."""
        status = getattr(error, "status", None)
        if isinstance(status, str) and status:
            return status
        return type(error).__qualname__


CODEC = GoogleGenAICodec()
