"""The Ollama calls traced (the table only: ``instrument_ollama()`` imports neither SDK nor codec).

``ollama.chat`` / ``generate`` / ``embed`` are methods of a default ``Client`` bound when ``ollama`` is imported,
so wrapping the class alone misses them when ``ollama`` was imported first: they are wrapped as module functions
too. A call through both wrappers makes one span (the engine's nested-call key); ``uninstrument_ollama()`` binds
them afresh to the default client (``OllamaCodec.uninstrumented``). ``AsyncClient``'s methods are ``async def``:
awaiting ``chat(stream=True)`` returns the async generator the engine proxies.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

METHODS = ("chat", "generate", "embed")

ENDPOINTS = (
    *(Endpoint("ollama._client", "Client", m, m, is_async=False) for m in METHODS),
    *(Endpoint("ollama._client", "AsyncClient", m, m, is_async=True) for m in METHODS),
    *(Endpoint("ollama", None, m, m, is_async=False) for m in METHODS),
)
