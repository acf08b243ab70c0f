"""Embedders for the similarity evaluators: a protocol, the OpenAI embeddings API, and cosine similarity."""

from __future__ import annotations

import inspect
import math
import os
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.evaluators._client import LoopClients

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors: ``embedder(texts) -> vectors`` (sync or async)."""

    def __call__(self, texts: Sequence[str], /) -> Awaitable[list[list[float]]] | list[list[float]]:
        """Return one vector per text, in order."""
        ...


async def embed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """Call ``embedder`` (sync or async) and check it returned one vector per text.

    Raises:
        ValueError: The embedder returned the wrong number of vectors.
    """
    result = embedder(list(texts))
    vectors = await result if inspect.isawaitable(result) else result
    if len(vectors) != len(texts):
        raise ValueError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
    return [list(map(float, v)) for v in vectors]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two vectors, within [-1, 1] (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    # Clamped: rounding makes equal vectors score 1.0000000000000002, which a score range [0, 1] rejects.
    return max(-1.0, min(1.0, dot / norm)) if norm else 0.0


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint, cached per (model, text), never traced."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        http_client: Any = None,
        max_concurrency: int = 4,
        timeout: float = 60.0,
        max_retries: int = 2,
        cache_size: int = 16384,
    ) -> None:
        """Create the embedder (reads ``OPENAI_*`` variables here, never while evaluating).

        Args:
            model: Embedding model; default ``EVALTRACE_EMBEDDING_MODEL`` or ``text-embedding-3-small``.
            base_url: OpenAI-compatible endpoint.
            api_key: Key; default ``OPENAI_API_KEY``.
            client: A ready ``openai.AsyncOpenAI``.
            http_client: ``httpx.AsyncClient`` for the built client.
            max_concurrency: Requests in flight at once per event loop.
            timeout: Per-request timeout in seconds.
            max_retries: The openai client's retries.
            cache_size: Vectors kept in the cache.
        """
        self._clients = LoopClients(
            client=client,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        self.model = model or os.environ.get("EVALTRACE_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def client(self) -> Any:
        """The ``openai.AsyncOpenAI`` of the first event loop to call (a fresh one once :meth:`aclose` closed it)."""
        return self._clients.primary

    async def aclose(self) -> None:
        """Close the HTTP client used on the running event loop (call it before the loop ends)."""
        await self._clients.aclose()

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text; texts seen before are served from the cache."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh: dict[str, list[float]] = {}
        if missing:
            async with self._clients.semaphore():
                with suppress_instrumentation():
                    response = await self._clients.client().embeddings.create(
                        model=self.model, input=missing, encoding_format="float"
                    )
            for item in sorted(response.data, key=lambda d: d.index):
                fresh[missing[item.index]] = self._cache[missing[item.index]] = list(item.embedding)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [fresh[t] if t in fresh else self._cache[t] for t in texts]


_default_embedder: OpenAIEmbedder | None = None


def default_embedder() -> OpenAIEmbedder:
    """Return the shared embedder built from the environment on first use."""
    global _default_embedder
    if _default_embedder is None:
        _default_embedder = OpenAIEmbedder()
    return _default_embedder


EMBEDDER_NAMES = ("local", "openai")
"""What an eval.yaml ``embedder:`` option may name: the local model, or the OpenAI-compatible API."""


def embedder_from_config(value: str | dict[str, Any]) -> Embedder:
    """Build the embedder an eval.yaml ``embedder:`` option names.

    Args:
        value: ``local`` (the packaged all-MiniLM-L6-v2), ``openai`` (the shared API embedder), or
            ``{type: local, path: <model dir or zip>, batch_size: <n>}``.

    Raises:
        ValueError: An unknown name, a mapping with unknown keys, or a local model that is not installed.
    """
    options: dict[str, Any] = {"type": value} if isinstance(value, str) else dict(value)
    kind = options.pop("type", None)
    if kind not in EMBEDDER_NAMES:
        raise ValueError(f"expected embedder local or openai (or {{type: local, path: ...}}), got {value!r}")
    if kind == "openai":
        if options:
            raise ValueError(f"expected no options for embedder openai, got {', '.join(sorted(options))}")
        return default_embedder()
    unknown = sorted(set(options) - {"path", "batch_size", "max_length"})
    if unknown:
        raise ValueError(f"expected path, batch_size or max_length for embedder local, got {unknown[0]!r}")
    # Imported here: the module is cheap, but only runs that name the local embedder need it.
    from evaltrace.evaluators.local_embeddings import LocalEmbedder

    embedder = LocalEmbedder(**options)
    embedder.check()  # a missing extra or model is a load error, not a failed result per case
    return embedder
