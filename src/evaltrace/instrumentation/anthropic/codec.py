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
from evaltrace._internal.engine.codec import PLAIN, Codec
from evaltrace._internal.engine.stainless import server_of


class AnthropicCodec(Codec):
    """``anthropic``'s client: every call is a ``chat`` span of provider ``anthropic``."""

    provider = "anthropic"
    label = "Anthropic"
    cache_plain_types = True

    # The module functions themselves, not methods calling them: no extra frame per call.
    server_of = staticmethod(server_of)  # type: ignore[assignment]
    request_attributes = staticmethod(request_attributes)  # type: ignore[assignment]
    prepare = staticmethod(registry.suppress_sdk_span)  # type: ignore[assignment]
    deferred_request = staticmethod(registry.helper_request)

    def finish(self, call: Call, kind: Hashable, result: Any) -> Any:
        """End the span for a Message, or hand it to a stream proxy; return what the user gets."""
        if type(result) not in self._plain_types:
            special = self.special(call, kind, result)
            if special is not PLAIN:
                return special
        call.finish_result(result, message_outcome, message_summary)
        return result

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Streams, raw and streaming responses (anthropic's, as every Stainless SDK's).

        A sync stream gets ``EventStreamProxy``, whose ``for`` loop skips ``Stream.__iter__``'s frame per event.
        """
        from evaltrace._internal.anthropic.stream import EventStreamProxy  # imports wrapt: on the first stream

        return registry.SDK.finish_special(self, call, kind, result, EventStreamProxy)

    def accumulator(self, kind: Hashable) -> MessagesAccumulator:
        """A fresh accumulator of stream events."""
        return MessagesAccumulator()

    def uninstrumented(self) -> None:
        """Let every client whose SDK span we silenced look its tracer up again."""
        registry.restore_sdk_span()


CODEC = AnthropicCodec()
