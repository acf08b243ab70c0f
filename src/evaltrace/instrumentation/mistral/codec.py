"""The Mistral codec the engine runs: request and response readers (``request``, ``response``, ``stream``)."""

from __future__ import annotations

import importlib
from collections.abc import Hashable
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Accumulator, Codec, Server
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.engine.values import host_port
from evaltrace._internal.openai.response import chat_summary
from evaltrace.instrumentation.mistral import conversations, request, response
from evaltrace.instrumentation.mistral.endpoints import AGENTS, CONVERSATION, Streamed, base_kind
from evaltrace.instrumentation.mistral.stream import MistralStreamAccumulator


def _stream_types() -> tuple[type[Any], ...]:
    """``EventStream`` / ``EventStreamAsync`` of the installed SDK (mistralai 2.x and later, then 1.x)."""
    for name in ("mistralai.client.utils.eventstreaming", "mistralai.utils.eventstreaming"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.EventStream, module.EventStreamAsync
    return ()


_OPERATIONS: dict[Hashable, str] = {AGENTS: sc.OP_CHAT, CONVERSATION: sc.OP_INVOKE_AGENT}
_STREAMED: dict[str, Any] = {sc.GEN_AI_REQUEST_STREAM: True}

# Imported with the codec, i.e. once the SDK is (the engine loads the codec with its first patch).
_STREAM_TYPES = _stream_types()


class MistralCodec(Codec):
    """``mistralai`` chat, FIM, agents, conversations and embeddings calls -> GenAI spans (provider ``mistral_ai``)."""

    provider = "mistral_ai"
    label = "Mistral"
    cache_plain_types = True

    def server_of(self, instance: Any) -> Server:
        """Host and port of the client's ``server_url`` (the SDK's default server when none was given)."""
        config = getattr(instance, "sdk_configuration", None)
        try:
            url = config.get_server_details()[0] if config is not None else None
        except Exception:  # an invalid server name: the SDK raises it to the user when the call starts
            return None, None
        return host_port(url) if isinstance(url, str) and url else (None, None)

    def start_attributes(self, kind: Hashable) -> dict[str, Any]:
        """``gen_ai.request.stream`` on the calls of the methods that always stream (see ``endpoints.Streamed``)."""
        return _STREAMED if isinstance(kind, Streamed) else {}

    def operation(self, kind: Hashable) -> str:
        """``chat`` for ``agents.*`` (a chat completion by agent id), ``invoke_agent`` for conversations."""
        kind = base_kind(kind)
        return _OPERATIONS.get(kind, str(kind))

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> dict[str, Any]:
        """Request parameters, and with ``capture`` the messages and tools (see ``request``, ``conversations``)."""
        kind = base_kind(kind)
        if kind == CONVERSATION:
            return conversations.request_attributes(params, capture, max_len)
        attrs = request.request_attributes(self.operation(kind), params, capture, max_len)
        if kind == AGENTS:
            agent = params.get("agent_id")
            if isinstance(agent, str) and agent:
                attrs[sc.GEN_AI_AGENT_ID] = agent
        return attrs

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A chat / FIM / agents completion, an embeddings or a conversation response -> Outcome."""
        kind = base_kind(kind)
        if kind == sc.OP_EMBEDDINGS:
            return response.embeddings_outcome(result, capture)
        if kind == CONVERSATION:
            return conversations.outcome(result, capture)
        return response.chat_outcome(result, capture)

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Model and token counts, for metrics (embeddings report no output tokens)."""
        kind = base_kind(kind)
        if kind == sc.OP_EMBEDDINGS:
            return Summary.of(response.embeddings_outcome(result, False))
        if kind == CONVERSATION:
            return Summary.of(conversations.outcome(result, False))
        return chat_summary(result)

    def is_stream(self, kind: Hashable, result: Any) -> bool:
        """``*.stream`` / ``*_stream`` (and async) return the SDK's ``EventStream`` / ``EventStreamAsync``."""
        return isinstance(result, _STREAM_TYPES)

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh stream accumulator: ``CompletionEvent``s (chat, fim, agents) or ``ConversationEvents``."""
        kind = base_kind(kind)
        if kind == CONVERSATION:
            return conversations.ConversationStreamAccumulator()
        return MistralStreamAccumulator()

    def error_type(self, error: BaseException) -> str:
        """The API's error type (see ``response.error_type``)."""
        return response.error_type(error)


CODEC = MistralCodec()
