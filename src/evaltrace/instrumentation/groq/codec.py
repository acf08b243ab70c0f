"""The Groq codec the engine runs: ``chat.completions.create`` / ``embeddings.create`` -> GenAI spans.

Groq's SDK is OpenAI's shape (a Stainless client), so the request, the completion and the chunks go through the
OpenAI codec's readers (in ``request``, ``response`` and ``stream``). What Groq adds is read there:

* ``message.reasoning`` / ``delta.reasoning``: a modelled field (with ``reasoning_format="parsed"``), not an
  extra, so it is read explicitly; ``reasoning_format="raw"`` puts ``<think>`` blocks in the content, which the
  shared readers already move to a ``reasoning`` part;
* usage in ``x_groq.usage`` on the last stream chunk (the chunk's own ``usage`` is empty), and a response's
  hardware-cache statistics ``x_groq.usage.{dram,sram}_cached_tokens`` as ``groq.usage.*`` attributes (they are not
  the billed ``prompt_tokens_details.cached_tokens``, so they are neither cache reads nor priced);
* ``executed_tools`` (the built-in tools of ``compound`` models) as ``server_tool_call`` parts, each followed by a
  ``server_tool_call_response`` part with its ``output`` once it has one;
* ``x_groq.error`` on a stream chunk: the call failed inside a stream the SDK did not raise for;
* the request's ``documents`` and ``citation_options`` and the answer's ``annotations`` (``grounding``), a compound
  model's ``usage_breakdown`` (``usage``), and a stream's ``service_tier`` wherever it comes (on the first or last
  chunk, or in ``x_groq``: groq's chunk declares none).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import Accumulator, Codec, Server
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.engine.stainless import server_of
from evaltrace._internal.error_body import code_in_body
from evaltrace._internal.openai.response import chat_summary, embeddings_outcome
from evaltrace.instrumentation.groq.request import STAINLESS, request_attributes
from evaltrace.instrumentation.groq.response import PROVIDER, completion_outcome
from evaltrace.instrumentation.groq.stream import GroqStreamAccumulator


def error_type(error: BaseException) -> str:
    """``error.type`` of a Groq error: the API's error code (``model_not_found``, ``tool_use_failed``), else its class.

    An HTTP error's body is ``{"error": {...}}``; an error the API sent inside a stream is the inner object itself.
    """
    return code_in_body(getattr(error, "body", None), ("code", "type")) or type(error).__qualname__


class GroqCodec(Codec):
    """``groq`` chat completions and embeddings -> GenAI spans (provider ``groq``), read by the OpenAI readers."""

    provider = PROVIDER
    label = "Groq"
    cache_plain_types = True

    def server_of(self, instance: Any) -> Server:
        """Host and port of the client's ``base_url``."""
        return server_of(instance)

    def request_attributes(self, kind: Hashable, params: dict[str, Any], capture: bool, max_len: int) -> dict[str, Any]:
        """The OpenAI chat or embeddings request's attributes, plus Groq's ``reasoning_format``."""
        return request_attributes(params, capture, max_len, str(kind))

    def outcome(self, kind: Hashable, result: Any, capture: bool) -> Outcome:
        """ChatCompletion (see ``completion_outcome``) / CreateEmbeddingResponse -> Outcome."""
        if kind == sc.OP_EMBEDDINGS:
            return embeddings_outcome(result, capture)
        return completion_outcome(result, capture)

    def summary(self, kind: Hashable, result: Any) -> Summary:
        """Model and token counts, for metrics."""
        if kind == sc.OP_EMBEDDINGS:
            return Summary.of(embeddings_outcome(result, False))
        return chat_summary(result)

    def finish_special(self, call: Call, kind: Hashable, result: Any) -> Any:
        """Streams proxied; ``with_raw_response`` read as a plain call; ``with_streaming_response`` left unread.

        A ``with_streaming_response`` body is the user's to read: its span has the request and the timing only.
        groq's ``with_raw_response`` returns an ``APIResponse`` (no legacy response): ``engine.stainless`` tells it
        from ``with_streaming_response``'s by the request's raw-response header.
        """
        return STAINLESS.finish_special(self, call, kind, result)

    def accumulator(self, kind: Hashable) -> Accumulator:
        """A fresh stream accumulator."""
        return GroqStreamAccumulator()

    def error_type(self, error: BaseException) -> str:
        """Groq's error code (see ``error_type``)."""
        return error_type(error)


CODEC = GroqCodec()
