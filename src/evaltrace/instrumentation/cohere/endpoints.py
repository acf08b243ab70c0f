"""The Cohere methods traced (the table only: ``instrument_cohere()`` imports neither SDK nor codec).

``ClientV2`` and ``AsyncClientV2`` inherit ``chat`` / ``chat_stream`` from ``V2Client`` / ``AsyncV2Client``, which
are also what ``client.v2`` returns: wrapping those two classes traces every way of reaching the v2 chat, once.
``chat_stream`` is a generator function (``async def ... yield`` on the async client): calling it returns the
stream without awaiting anything, so both are wrapped as sync callables whose result the engine proxies.
``client.with_raw_response.chat`` (``RawV2Client.chat``, whose ``HttpResponse`` holds the response in ``data``) is
traced too; ``V2Client.chat`` calls it, and that nested call makes no second span. The raw ``chat_stream`` (a
context manager) is not traced. ``embed`` and ``rerank`` are wrapped the same way (``V2Client`` and the raw client
its methods call, one span). The v1 ``cohere.Client`` chat is ``BaseCohere.chat`` / ``chat_stream`` (and their
``AsyncBaseCohere`` twins): ``ClientV2`` subclasses ``Client`` too, but its ``chat`` is ``V2Client``'s, first in
its MRO, so a call is wrapped by one row only. The v1 raw ``chat`` (``RawBaseCohere.chat``, which
``BaseCohere.chat`` calls, one span) is wrapped too: ``cohere.Client`` binds ``self.chat`` when it is made, so a
client made before ``instrument_cohere()`` reaches only the raw one (as a v2 client reaches ``RawV2Client.chat``).
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

CHAT = "chat"
CHAT_STREAM = "chat_stream"
EMBED = "embed"
RERANK = "rerank"
V1_CHAT = "v1_chat"
V1_CHAT_STREAM = "v1_chat_stream"
_MODULE = "cohere.v2.client"
_RAW = "cohere.v2.raw_client"
_V1 = "cohere.base_client"
_V1_RAW = "cohere.raw_base_client"

ENDPOINTS = (
    Endpoint(_MODULE, "V2Client", "chat", CHAT, is_async=False),
    Endpoint(_MODULE, "V2Client", "chat_stream", CHAT_STREAM, is_async=False),
    Endpoint(_MODULE, "AsyncV2Client", "chat", CHAT, is_async=True),
    Endpoint(_MODULE, "AsyncV2Client", "chat_stream", CHAT_STREAM, is_async=False),
    Endpoint(_RAW, "RawV2Client", "chat", CHAT, is_async=False),
    Endpoint(_RAW, "AsyncRawV2Client", "chat", CHAT, is_async=True),
    *(
        Endpoint(module, cls, method, method, is_async=is_async)
        for method in (EMBED, RERANK)
        for module, cls, is_async in (
            (_MODULE, "V2Client", False),
            (_MODULE, "AsyncV2Client", True),
            (_RAW, "RawV2Client", False),
            (_RAW, "AsyncRawV2Client", True),
        )
    ),
    Endpoint(_V1, "BaseCohere", "chat", V1_CHAT, is_async=False),
    Endpoint(_V1, "BaseCohere", "chat_stream", V1_CHAT_STREAM, is_async=False),
    Endpoint(_V1, "AsyncBaseCohere", "chat", V1_CHAT, is_async=True),
    Endpoint(_V1, "AsyncBaseCohere", "chat_stream", V1_CHAT_STREAM, is_async=False),
    Endpoint(_V1_RAW, "RawBaseCohere", "chat", V1_CHAT, is_async=False),
    Endpoint(_V1_RAW, "AsyncRawBaseCohere", "chat", V1_CHAT, is_async=True),
)
