"""The Mistral methods the engine wraps: ``chat``, ``fim``, ``agents`` and ``beta.conversations``, and ``embeddings``.

mistralai 2.x and later keep the resources in ``mistralai.client``; 1.x had them at the top level. Rows whose
module or class a version lacks are skipped at patch time (``beta.conversations`` came in 1.8).

Operations (docs/providers/mistral.md says why):

* ``chat.*``: ``chat``;
* ``fim.*`` (fill in the middle: a prompt and a suffix, no conversation): ``text_completion``;
* ``agents.*`` (one chat completion with an agent's preset model, instructions and tools): ``chat``, with
  ``gen_ai.agent.id``;
* ``beta.conversations.start`` / ``append`` / ``restart`` and their streams (the Agents API: the server runs the agent, its
  built-in tools and handoffs, and keeps the conversation): ``invoke_agent``.

A method that always streams (``stream``, ``*_stream`` and their async twins: the request carries no ``stream``
argument to read) has the kind :class:`Streamed` of its twin's, so its spans get ``gen_ai.request.stream``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint

AGENTS = "mistral.agents"
"""Endpoint kind of ``agents.complete`` / ``stream``: a chat completion by agent id."""

CONVERSATION = "mistral.conversation"
"""Endpoint kind of ``beta.conversations.start`` / ``append`` / ``restart`` (and streams): an agent invocation."""


class Streamed(NamedTuple):
    """Endpoint kind of a method that always streams; ``of`` is the kind of its non-streaming twin."""

    of: str


def base_kind(kind: Hashable) -> Hashable:
    """The kind without its streaming mark (what every codec hook but ``start_attributes`` tells apart)."""
    return kind.of if isinstance(kind, Streamed) else kind


def _kind(kind: str, method: str) -> str | Streamed:
    return Streamed(kind) if "stream" in method else kind


_CHAT_MODULES = ("mistralai.client.chat", "mistralai.chat")
_EMBEDDINGS_MODULES = ("mistralai.client.embeddings", "mistralai.embeddings")
_FIM_MODULES = ("mistralai.client.fim", "mistralai.fim")
_AGENTS_MODULES = ("mistralai.client.agents", "mistralai.agents")
_CONVERSATIONS_MODULES = ("mistralai.client.conversations", "mistralai.conversations")
_COMPLETIONS = (("complete", False), ("complete_async", True), ("stream", False), ("stream_async", True))
_CONVERSATIONS = (
    ("start", False),
    ("start_async", True),
    ("append", False),
    ("append_async", True),
    ("start_stream", False),
    ("start_stream_async", True),
    ("append_stream", False),
    ("append_stream_async", True),
    ("restart", False),
    ("restart_async", True),
    ("restart_stream", False),
    ("restart_stream_async", True),
)

ENDPOINTS: tuple[Endpoint, ...] = (
    *(
        Endpoint(module, "Chat", method, _kind(sc.OP_CHAT, method), is_async)
        for module in _CHAT_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Embeddings", method, sc.OP_EMBEDDINGS, is_async)
        for module in _EMBEDDINGS_MODULES
        for method, is_async in (("create", False), ("create_async", True))
    ),
    *(
        Endpoint(module, "Fim", method, _kind(sc.OP_TEXT_COMPLETION, method), is_async)
        for module in _FIM_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Agents", method, _kind(AGENTS, method), is_async)
        for module in _AGENTS_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Conversations", method, _kind(CONVERSATION, method), is_async)
        for module in _CONVERSATIONS_MODULES
        for method, is_async in _CONVERSATIONS
    ),
)
