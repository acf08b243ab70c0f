"""The Groq methods the engine wraps: ``chat.completions.create`` and ``embeddings.create``, sync and async."""

from __future__ import annotations

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint

_COMPLETIONS = "groq.resources.chat.completions"
_EMBEDDINGS = "groq.resources.embeddings"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(_COMPLETIONS, "Completions", "create", sc.OP_CHAT, False),
    Endpoint(_COMPLETIONS, "AsyncCompletions", "create", sc.OP_CHAT, True),
    Endpoint(_EMBEDDINGS, "Embeddings", "create", sc.OP_EMBEDDINGS, False),
    Endpoint(_EMBEDDINGS, "AsyncEmbeddings", "create", sc.OP_EMBEDDINGS, True),
)
