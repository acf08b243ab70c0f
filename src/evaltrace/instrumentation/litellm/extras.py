"""What LiteLLM keeps beside the OpenAI shape: a stream's unyielded usage and provider model, redacted thinking.

Split from :mod:`evaltrace.instrumentation.litellm.codec`, which reads these once per response or per stream (a
redacted block: once per chunk that carries one), never per ordinary chunk.
"""

from __future__ import annotations

import functools
from typing import Any

# A redacted thinking block (Anthropic's ``redacted_thinking``): encrypted, nothing readable, but it was there
# (and billed as output). The part the Anthropic and Bedrock instrumentations write for it.
_REDACTED_TYPE = "redacted_thinking"


def redacted_part() -> dict[str, Any]:
    """The ``reasoning`` part of a redacted thinking block (a new dict: parts are mutable)."""
    return {"type": "reasoning", "content": "", "redacted": True}


def redacted_count(blocks: Any) -> int:
    """How many of LiteLLM's ``thinking_blocks`` (dicts, or typed dicts) are redacted."""
    if type(blocks) is not list:
        return 0
    return sum(1 for block in blocks if isinstance(block, dict) and block.get("type") == _REDACTED_TYPE)


def add_redacted(message: dict[str, Any], count: int) -> None:
    """Put ``count`` redacted parts after the message's leading reasoning part(s), before the answer.

    LiteLLM gives the readable thinking joined as ``reasoning_content`` (one part, first) whole or streamed, and the
    redacted blocks in ``thinking_blocks`` only: the order is the same for a response and its stream.
    """
    if count <= 0:
        return
    parts = message["parts"]
    at = 0
    while at < len(parts) and parts[at].get("type") == "reasoning":
        at += 1
    parts[at:at] = [redacted_part() for _ in range(count)]


@functools.cache
def _total_usage() -> Any:
    """LiteLLM's ``calculate_total_usage`` (its stream total over the chunks it kept), None if it has none."""
    try:
        from litellm.litellm_core_utils.streaming_handler import calculate_total_usage
    except ImportError:
        return None
    return calculate_total_usage


def reported_usage(stream: Any) -> Any:
    """The usage the provider reported over a LiteLLM stream, as LiteLLM totals it; None when none was reported.

    ``CustomStreamWrapper.chunks`` keeps every chunk that carried usage, also those it did not yield (a stream
    called without ``stream_options={"include_usage": True}``): Anthropic reports its input tokens when the
    message starts and its output tokens when it ends, OpenAI-compatible servers in a last chunk. LiteLLM itself
    totals them with ``calculate_total_usage`` for its callbacks. With no chunk of usage there is no total: the
    stream's ``_hidden_params["usage"]`` then holds LiteLLM's token-count estimate, which no provider reported.
    """
    chunks = getattr(stream, "chunks", None)
    total = _total_usage()
    if total is None or type(chunks) is not list:
        return None
    if not any(getattr(chunk, "usage", None) is not None for chunk in chunks):
        return None
    try:
        return total(chunks=chunks)
    except Exception:  # LiteLLM's streaming internals, not a public API: no total beats losing the whole record
        return None


def provider_model(stream: Any) -> str | None:
    """The model the provider named in a LiteLLM stream, as LiteLLM kept it; None when it kept none.

    LiteLLM writes its own model name (the request's, its provider prefix removed: ``gpt-4o-mini``) into every chunk
    it yields, where the response it returns unstreamed names the provider's (``gpt-4o-mini-2024-07-18``). It keeps
    the provider's on the ``CustomStreamWrapper`` (``_provider_response_model``: the last non-empty ``model`` of the
    provider's chunks, which it also copies into each chunk's ``_hidden_params``). A private attribute, read once
    per stream; a LiteLLM without it leaves the chunks' model as the span's.
    """
    model = getattr(stream, "_provider_response_model", None)
    return model if isinstance(model, str) and model else None


def kept_model_and_usage(stream: Any, model: str | None, usage: Any) -> tuple[str | None, Any]:
    """``(model, usage)`` of a stream's accumulator, with what LiteLLM kept on ``stream`` (its ``CustomStreamWrapper``).

    The provider's model (``provider_model``) stands for ``model`` when LiteLLM kept one; the usage LiteLLM kept from
    the caller (``reported_usage``) stands for ``usage`` only when no usage chunk was folded (``usage`` is None).
    Shared by the chat and the text-completion accumulators, each of which reads its stream once.
    """
    kept = provider_model(stream)
    return (model if kept is None else kept), (reported_usage(stream) if usage is None else usage)


def finish_dropped(source: Any, finishes: list[Any]) -> bool:
    """Whether LiteLLM ended an ``n`` > 1 stream past choices whose finish chunk it dropped.

    ``source``: LiteLLM's ``CustomStreamWrapper`` (None when unknown); ``finishes``: each folded choice's finish
    reason. LiteLLM keeps one finish reason per stream (``received_finish_reason``) and yields only the finish chunk
    of the choice that set it; once it has one it ends the stream at the next chunk without content, so the choices
    left without a finish are not known to have finished, nor to have been cut: their finish is unknown. True when
    LiteLLM saw a finish, some choice carries one and some choice none.
    """
    if getattr(source, "received_finish_reason", None) is None:
        return False
    return any(f is not None for f in finishes) and any(f is None for f in finishes)


def drop_unknown_finishes(messages: list[dict[str, Any]] | None, finishes: list[Any]) -> None:
    """Leave the finish reason out of the output messages of the choices whose finish LiteLLM dropped.

    The shared ``output_message`` writes ``error`` for a missing finish (a cut stream's), which would contradict the
    stream's ``exhausted`` end; the v1.41 schema requires the field but the conventions' main deprecates it for
    ``gen_ai.response.finish_reasons``, which holds the finishes that arrived. ``finishes`` in the messages' order.
    """
    for message, finish in zip(messages or (), finishes, strict=False):
        if finish is None:
            message.pop("finish_reason", None)
