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
from evaltrace._internal.engine.codec import NO_SUMMARY, PLAIN, Codec
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.engine.stream import AsyncStreamProxy, StreamState, SyncStreamProxy
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

_OUTCOMES = {
    EndpointKind.CHAT: chat_outcome,
    EndpointKind.RESPONSES: responses_outcome,
    EndpointKind.EMBEDDINGS: embeddings_outcome,
}
_SUMMARIES = {EndpointKind.CHAT: chat_summary, EndpointKind.RESPONSES: responses_summary}


class OpenAICodec(Codec):
    """``openai``'s client, and any OpenAI-compatible server (the provider name follows the base URL's host)."""

    provider = "openai"
    label = "OpenAI"
    cache_plain_types = True

    # The hot path's hooks are the module functions themselves: no method frame in between.
    server_of = staticmethod(registry.server_of)  # type: ignore[assignment]
    provider_for = staticmethod(provider_for_host)
    request_attributes = staticmethod(build.request_attributes)  # type: ignore[assignment]  # LLMCall: per call

    def operation(self, kind: Hashable) -> str:
        """``embeddings`` or ``chat`` (chat completions and Responses alike)."""
        return sc.OP_EMBEDDINGS if kind is EndpointKind.EMBEDDINGS else sc.OP_CHAT

    def start_attributes(self, kind: Hashable) -> dict[str, Any]:
        """``openai.api.type`` and Langfuse's observation type, fixed per endpoint kind."""
        return build.KIND_ATTRS[kind]  # type: ignore[index]

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """A ChatCompletion / Response / CreateEmbeddingResponse -> ``Outcome``."""
        return _OUTCOMES[kind](result, capture)  # type: ignore[index]

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Response model and token counts, read without the content."""
        read = _SUMMARIES.get(kind)  # type: ignore[call-overload]
        return read(result) if read is not None else Summary.of(self.outcome(kind, result, False))

    def failure(self, kind: Hashable, result: Any) -> tuple[str, str] | None:
        """A Response with status ``failed`` (the SDK raised nothing)."""
        return responses_failure(result) if kind is EndpointKind.RESPONSES else None

    def accumulator(self, kind: Hashable) -> Accumulator:
        """The Responses or the chat completions accumulator."""
        return ResponsesAccumulator() if kind is EndpointKind.RESPONSES else ChatAccumulator()

    def finish(self, call: Call, kind: Hashable, result: Any) -> Any:
        """End ``call``; the common case (a parsed body of a type seen before) skips every isinstance check."""
        if type(result) not in self._plain_types:
            special = self.finish_special(call, kind, result)
            if special is not PLAIN:
                return special
            if len(self._plain_types) < 64:  # bounded: a handful of response model classes in practice
                self._plain_types.add(type(result))
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
        """Raw responses, streaming responses and streams; ``PLAIN`` for a parsed response body."""
        if registry.is_raw_response(result):
            # with_raw_response: openai caches parse(), so reading it here gives the user the same object.
            parsed = registry.parse_raw_response(result)
            traced = self.finish(call, kind, parsed)
            if traced is not parsed:
                registry.replace_parsed(result, parsed, traced)
            return result
        if registry.is_streaming_response(result):
            # with_streaming_response: the body is the user's to read; we do not consume it.
            call.finish(Outcome, _no_summary)
            return result
        sync_stream, async_stream = registry.stream_types()
        if isinstance(result, sync_stream):
            call.hold_request()  # written with the response, when the stream ends
            return SyncStreamProxy(result, StreamState(call, self.accumulator(kind)))
        if isinstance(result, async_stream):
            call.hold_request()
            return AsyncStreamProxy(result, StreamState(call, self.accumulator(kind)))
        return PLAIN


def _no_summary() -> Summary:
    return NO_SUMMARY


CODEC = OpenAICodec()
