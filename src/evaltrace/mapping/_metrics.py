"""Trace metrics from LLM spans: token and cost sums, and streaming latency, rate and completion."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace.mapping import conventions
from evaltrace.mapping._spans import number
from evaltrace.schema import TraceMetrics

# Each model-call span with its attributes, read once into a plain dict (``_spans.plain_attrs``).
Read = tuple[ReadableSpan, dict[str, Any]]


def build_metrics(llm_spans: list[Read]) -> TraceMetrics:
    """Return the metrics of a trace's LLM spans (in start order), each with its attributes.

    Sums are None when no span reports the value. Streaming: first/last chunk latency from the first streamed
    call, ``tokens_per_second`` the mean over streamed calls, chunks summed, ``stream_completed`` true only if
    every streamed call completed.
    """
    # Each streamed call's timing: evaltrace's and the GenAI attributes, else a foreign convention's record
    # (OpenInference's first-token event, OpenLLMetry's chunk events, the Vercel AI SDK's ``ai.response.msTo*``).
    timings = [(a, t) for s, a in llm_spans if (t := _timing(s, a)) is not None]
    spans = [a for _, a in llm_spans]
    first = timings[0][1] if timings else None
    ttfc = first.first_chunk_s if first else None
    ttlc = first.last_chunk_s if first else None
    rates = [t.output_tokens_per_second for _, t in timings if t.output_tokens_per_second is not None]
    completed = [v for a, _ in timings if isinstance(v := a.get(sc.EVALTRACE_STREAM_COMPLETED), bool)]
    chunks = [t.chunks for _, t in timings if t.chunks is not None]
    return TraceMetrics(
        token_input=_sum_int(spans, sc.GEN_AI_USAGE_INPUT_TOKENS),
        token_output=_sum_int(spans, sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        token_thinking=_sum_int(spans, sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
        cost_usd=_sum(spans, sc.EVALTRACE_COST_USD),
        cost_thinking_usd=_thinking_cost(spans),
        latency_first_token_ms=None if ttfc is None else round(ttfc * 1000),
        latency_last_token_ms=None if ttlc is None else round(ttlc * 1000),
        tokens_per_second=sum(rates) / len(rates) if rates else None,
        stream_chunks=sum(chunks) if chunks else None,
        stream_completed=all(completed) if completed else None,
    )


def _timing(span: ReadableSpan, span_attrs: dict[str, Any]) -> conventions.StreamTiming | None:
    """The streaming figures of one model call, None when it was not streamed (or recorded nothing of it)."""
    ttfc_keys = conventions.usage_keys(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)  # ours, then pydantic-ai's alias
    if any(key in span_attrs for key in ttfc_keys) or sc.EVALTRACE_STREAM_CHUNKS in span_attrs:
        chunks = number(span_attrs, sc.EVALTRACE_STREAM_CHUNKS)
        return conventions.StreamTiming(
            first_chunk_s=_first_number(span_attrs, ttfc_keys),
            last_chunk_s=number(span_attrs, sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK),
            chunks=None if chunks is None else int(chunks),
            output_tokens_per_second=number(span_attrs, sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND),
        )
    events = span.events
    output = _first_number(span_attrs, conventions.usage_keys(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) if events else None
    return conventions.stream_timing(span_attrs, events, span.start_time or 0, output)


def _sum(spans: Iterable[dict[str, Any]], key: str) -> float | None:
    keys = conventions.usage_keys(key)
    values = [v for s in spans if (v := _first_number(s, keys)) is not None]
    return sum(values) if values else None


def _first_number(span: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    """The span's own key, else a foreign convention's alias (``llm.token_count.prompt``, ...)."""
    for key in keys:
        value = number(span, key)
        if value is not None:
            return value
    return None


def _thinking_cost(spans: list[dict[str, Any]]) -> float | None:
    """``_sum`` of the thinking cost, where a priced span without one and without reasoning tokens adds 0.0.

    The instrumentation writes ``evaltrace.cost_thinking_usd`` only when reasoning tokens were billed. A span
    with a cost and reasoning tokens but no thinking cost (a cost the user gave, its split unknown) says nothing:
    its thinking cost is unknown, never 0.0.
    """
    total = _sum(spans, sc.EVALTRACE_COST_THINKING_USD)
    if total is None and any(
        number(s, sc.EVALTRACE_COST_USD) is not None and not number(s, sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)
        for s in spans
    ):
        return 0.0
    return total


def _sum_int(spans: Iterable[dict[str, Any]], key: str) -> int | None:
    total = _sum(spans, key)
    return None if total is None else int(total)
