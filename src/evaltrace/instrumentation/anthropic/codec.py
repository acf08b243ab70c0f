"""The Anthropic codec: ``messages.create`` / ``stream`` / ``parse`` (and ``beta.messages``) on the engine.

The translation is in ``evaltrace._internal.anthropic`` (``registry``: endpoint rows and the only code that names
anthropic internals; ``call``: request -> attributes; ``response``: a ``Message`` -> ``Outcome``;
``accumulate``: stream events -> ``Outcome``). This module says how a result is finished, and silences the SDK's
own span inside the calls we trace (anthropic >= 2 traces its calls itself).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from evaltrace._internal.anthropic import registry
from evaltrace._internal.anthropic.accumulate import MessagesAccumulator
from evaltrace._internal.anthropic.call import request_attributes
from evaltrace._internal.anthropic.response import message_outcome, message_summary
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import NO_SUMMARY, PLAIN, Codec
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.engine.stream import AsyncStreamProxy, StreamState, SyncStreamProxy
from evaltrace._internal.openai import registry as openai_registry


class AnthropicCodec(Codec):
    """``anthropic``'s client: every call is a ``chat`` span of provider ``anthropic``."""

    provider = "anthropic"
    label = "Anthropic"
    cache_plain_types = True

    # The module functions themselves, not methods calling them: no extra frame per call.
    server_of = staticmethod(openai_registry.server_of)  # type: ignore[assignment]  # same client layout as openai's
    request_attributes = staticmethod(request_attributes)  # type: ignore[assignment]
    prepare = staticmethod(registry.suppress_sdk_span)  # type: ignore[assignment]
    deferred_request = staticmethod(registry.helper_request)

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A ``Message`` -> ``Outcome``."""
        return message_outcome(result, capture)

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Response model and token counts of a ``Message``."""
        return message_summary(result)

    def accumulator(self, kind: Hashable) -> MessagesAccumulator:
        """A fresh accumulator of stream events."""
        return MessagesAccumulator()

    def finish(self, call: Call, kind: Hashable, result: Any) -> Any:
        """End the span for a Message, or hand it to a stream proxy; return what the user gets."""
        if type(result) not in self._plain_types:
            special = self.finish_special(call, kind, result)
            if special is not PLAIN:
                return special
            if len(self._plain_types) < 64:  # bounded: a handful of response model classes in practice
                self._plain_types.add(type(result))
        call.finish_result(result, message_outcome, message_summary)
        return result

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Streams, raw and streaming responses; ``PLAIN`` for a ``Message``."""
        sync_stream, async_stream = registry.stream_types()
        if isinstance(result, sync_stream):
            call.record_request()  # the response follows when the stream ends
            return SyncStreamProxy(result, StreamState(call, MessagesAccumulator()))
        if isinstance(result, async_stream):
            call.record_request()
            return AsyncStreamProxy(result, StreamState(call, MessagesAccumulator()))
        if registry.is_raw_response(result):
            # with_raw_response: anthropic caches parse(), so reading it here gives the user the same object.
            parsed = result.parse()
            traced = self.finish(call, kind, parsed)
            if traced is not parsed:
                openai_registry.replace_parsed(result, parsed, traced)
            return result
        if registry.is_api_response(result):
            call.finish(Outcome, _no_summary)  # the body is the user's to read: the span has the request only
            return result
        return PLAIN

    def uninstrumented(self) -> None:
        """Let every client whose SDK span we silenced look its tracer up again."""
        registry.restore_sdk_span()


def _no_summary() -> Summary:
    return NO_SUMMARY


CODEC = AnthropicCodec()
