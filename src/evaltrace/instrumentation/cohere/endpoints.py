"""The Cohere v2 chat methods traced (the table only: ``instrument_cohere()`` imports neither SDK nor codec).

``ClientV2`` and ``AsyncClientV2`` inherit ``chat`` / ``chat_stream`` from ``V2Client`` / ``AsyncV2Client``, which
are also what ``client.v2`` returns: wrapping those two classes traces every way of reaching the v2 chat, once.
``chat_stream`` is a generator function (``async def ... yield`` on the async client): calling it returns the
stream without awaiting anything, so both are wrapped as sync callables whose result the engine proxies.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

CHAT = "chat"
CHAT_STREAM = "chat_stream"
_MODULE = "cohere.v2.client"

ENDPOINTS = (
    Endpoint(_MODULE, "V2Client", "chat", CHAT, is_async=False),
    Endpoint(_MODULE, "V2Client", "chat_stream", CHAT_STREAM, is_async=False),
    Endpoint(_MODULE, "AsyncV2Client", "chat", CHAT, is_async=True),
    Endpoint(_MODULE, "AsyncV2Client", "chat_stream", CHAT_STREAM, is_async=False),
)
