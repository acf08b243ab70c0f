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
"""

from __future__ import annotations

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint

AGENTS = "mistral.agents"
"""Endpoint kind of ``agents.complete`` / ``stream``: a chat completion by agent id."""

CONVERSATION = "mistral.conversation"
"""Endpoint kind of ``beta.conversations.start`` / ``append`` / ``restart`` (and streams): an agent invocation."""

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
        Endpoint(module, "Chat", method, sc.OP_CHAT, is_async)
        for module in _CHAT_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Embeddings", method, sc.OP_EMBEDDINGS, is_async)
        for module in _EMBEDDINGS_MODULES
        for method, is_async in (("create", False), ("create_async", True))
    ),
    *(
        Endpoint(module, "Fim", method, sc.OP_TEXT_COMPLETION, is_async)
        for module in _FIM_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Agents", method, AGENTS, is_async)
        for module in _AGENTS_MODULES
        for method, is_async in _COMPLETIONS
    ),
    *(
        Endpoint(module, "Conversations", method, CONVERSATION, is_async)
        for module in _CONVERSATIONS_MODULES
        for method, is_async in _CONVERSATIONS
    ),
)
