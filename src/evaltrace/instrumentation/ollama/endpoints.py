"""The Ollama calls traced (the table only: ``instrument_ollama()`` imports neither SDK nor codec).

Every ``chat`` / ``generate`` / ``embed`` of the ``ollama`` client, whoever calls it, posts through the client's
``_request(cls, "POST", path, json=body, stream=...)``: ``Client.chat``, ``AsyncClient.chat``, and the module
functions ``ollama.chat`` / ``generate`` / ``embed``, which are methods of a default client bound when ``ollama``
is imported (so ``from ollama import chat`` taken before ``instrument_ollama()`` holds the SDK's own bound method,
which still calls the patched ``_request``). Wrapping ``_request`` alone therefore traces every path, whatever the
import order, with one span per call; the codec's ``route`` picks the LLM calls by path and leaves the rest
(``pull``, ``list``, ``web_search``...) untraced. ``AsyncClient._request`` is ``async def``: awaiting it with
``stream=True`` returns the async generator the engine proxies.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

PATHS = {"/api/chat": "chat", "/api/generate": "generate", "/api/embed": "embed"}
"""The request path of each traced call -> its kind (the client method's name)."""

ENDPOINTS = (
    Endpoint("ollama._client", "Client", "_request", "_request", is_async=False),
    Endpoint("ollama._client", "AsyncClient", "_request", "_request", is_async=True),
)
