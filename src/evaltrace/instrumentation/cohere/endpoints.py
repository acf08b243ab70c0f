"""The Cohere v2 chat methods traced (the table only: ``instrument_cohere()`` imports neither SDK nor codec).

``ClientV2`` and ``AsyncClientV2`` inherit ``chat`` / ``chat_stream`` from ``V2Client`` / ``AsyncV2Client``, which
are also what ``client.v2`` returns: wrapping those two classes traces every way of reaching the v2 chat, once.
``chat_stream`` is a generator function (``async def ... yield`` on the async client): calling it returns the
stream without awaiting anything, so both are wrapped as sync callables whose result the engine proxies.
``client.with_raw_response.chat`` (``RawV2Client.chat``, whose ``HttpResponse`` holds the response in ``data``) is
traced too; ``V2Client.chat`` calls it, and that nested call makes no second span. The raw ``chat_stream`` (a
context manager) is not traced.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

CHAT = "chat"
CHAT_STREAM = "chat_stream"
_MODULE = "cohere.v2.client"
_RAW = "cohere.v2.raw_client"

ENDPOINTS = (
    Endpoint(_MODULE, "V2Client", "chat", CHAT, is_async=False),
    Endpoint(_MODULE, "V2Client", "chat_stream", CHAT_STREAM, is_async=False),
    Endpoint(_MODULE, "AsyncV2Client", "chat", CHAT, is_async=True),
    Endpoint(_MODULE, "AsyncV2Client", "chat_stream", CHAT_STREAM, is_async=False),
    Endpoint(_RAW, "RawV2Client", "chat", CHAT, is_async=False),
    Endpoint(_RAW, "AsyncRawV2Client", "chat", CHAT, is_async=True),
)
