"""The OpenAI codec: chat completions, Responses and embeddings on the instrumentation engine.

The translation itself is in ``evaltrace._internal.openai`` (``registry``: the endpoint rows and the only code
that names openai internals; ``build`` / ``request``: request -> attributes; ``response``: a response ->
``Outcome``; ``accumulate``: stream chunks -> ``Outcome``), shared with the Anthropic codec and the manual LLM
spans. This module says how a result is finished: raw and streaming responses, streams, ``response.failed``.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import PLAIN, Codec
from evaltrace._internal.engine.outcome import Summary
from evaltrace._internal.engine.stainless import server_of
from evaltrace._internal.openai import build, registry
from evaltrace._internal.openai.accumulate import Accumulator, ChatAccumulator, ResponsesAccumulator
from evaltrace._internal.openai.provider import provider_for_host
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import (
    chat_outcome,
    chat_summary,
    embeddings_outcome,
    responses_failure,
    responses_outcome,
    responses_summary,
)


class OpenAICodec(Codec):
    """``openai``'s client, and any OpenAI-compatible server (the provider name follows the base URL's host).

    ``finish`` is written out for the three endpoint kinds (the hot path), so the generic ``outcome`` /
    ``summary`` / ``failure`` hooks are not needed.
    """

    provider = "openai"
    label = "OpenAI"
    cache_plain_types = True

    # The hot path's hooks are the module functions themselves: no method frame in between.
    server_of = staticmethod(server_of)  # type: ignore[assignment]
    provider_for = staticmethod(provider_for_host)
    request_attributes = staticmethod(build.request_attributes)  # type: ignore[assignment]  # LLMCall: per call

    def operation(self, kind: Hashable) -> str:
        """``embeddings`` or ``chat`` (chat completions and Responses alike)."""
        return sc.OP_EMBEDDINGS if kind is EndpointKind.EMBEDDINGS else sc.OP_CHAT

    def start_attributes(self, kind: Hashable) -> dict[str, Any]:
        """``openai.api.type`` and Langfuse's observation type, fixed per endpoint kind."""
        return build.KIND_ATTRS[kind]  # type: ignore[index]

    def accumulator(self, kind: Hashable) -> Accumulator:
        """The Responses or the chat completions accumulator."""
        return ResponsesAccumulator() if kind is EndpointKind.RESPONSES else ChatAccumulator()

    def finish(self, call: Call, kind: Hashable, result: Any) -> Any:
        """End ``call``; the common case (a parsed body of a type seen before) skips every isinstance check."""
        if type(result) not in self._plain_types:
            special = self.special(call, kind, result)
            if special is not PLAIN:
                return special
        if kind is EndpointKind.EMBEDDINGS:
            outcome = embeddings_outcome(result)  # cheap, and the vectors are not kept alive until export
            call.finish(lambda: outcome, partial(Summary.of, outcome))
        elif kind is EndpointKind.CHAT:
            # Converted into the span attributes now, in the same write as the request's.
            call.finish_result(result, chat_outcome, chat_summary)
        else:
            failure = responses_failure(result)  # a body with status "failed": the SDK raised nothing
            if failure is None:
                call.finish_result(result, responses_outcome, responses_summary)
            else:
                make_outcome = partial(responses_outcome, result, call.capture)
                call.finish_failed(make_outcome, partial(responses_summary, result), None, failure)
        return result

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Raw responses, streaming responses and streams (openai's, as every Stainless SDK's)."""
        return registry.SDK.finish_special(self, call, kind, result)


CODEC = OpenAICodec()
