"""The Mistral methods the engine wraps: ``chat`` (complete, stream, sync and async) and ``embeddings``.

mistralai 2.x and later keep the resources in ``mistralai.client``; 1.x had them at the top level. Rows whose
module or class a version lacks are skipped at patch time.
"""

from __future__ import annotations

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint

_CHAT_MODULES = ("mistralai.client.chat", "mistralai.chat")
_EMBEDDINGS_MODULES = ("mistralai.client.embeddings", "mistralai.embeddings")

ENDPOINTS: tuple[Endpoint, ...] = (
    *(
        Endpoint(module, "Chat", method, sc.OP_CHAT, is_async)
        for module in _CHAT_MODULES
        for method, is_async in (
            ("complete", False),
            ("complete_async", True),
            ("stream", False),
            ("stream_async", True),
        )
    ),
    *(
        Endpoint(module, "Embeddings", method, sc.OP_EMBEDDINGS, is_async)
        for module in _EMBEDDINGS_MODULES
        for method, is_async in (("create", False), ("create_async", True))
    ),
)
