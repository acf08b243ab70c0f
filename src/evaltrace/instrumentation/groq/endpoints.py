"""The Groq methods the engine wraps: ``chat.completions.create`` on the sync and async clients."""

from __future__ import annotations

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint

_COMPLETIONS = "groq.resources.chat.completions"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(_COMPLETIONS, "Completions", "create", sc.OP_CHAT, False),
    Endpoint(_COMPLETIONS, "AsyncCompletions", "create", sc.OP_CHAT, True),
)
