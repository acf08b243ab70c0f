"""Pure, provider-independent: the response half of a span, built from an ``Outcome``, and a stream's timings.

``Call`` runs them once the call has returned (a stream's when it ends) and sets their output in one write
(``deferred_attributes.set_built``), together with the request's attributes the codec built. They read only
their arguments and never write them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from evaltrace import pricing
from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, outcome_attributes
from evaltrace._internal.openai.encode import cost_split_json, encoded, messages_json, text_answer, text_size

Attributes = dict[str, Any]
OutcomeFn = Callable[[], Outcome]
ExtraFn = Callable[[Outcome], Attributes]


def response_attributes(
    make_outcome: OutcomeFn,
    extra: ExtraFn | None,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """Response fields, output content (when ``capture``) and cost of one call.

    The price comes from ``pricing.price_of``, which resolves each (provider, model) once and caches it. Not
    written: Langfuse's ``usage_details``, which Langfuse derives from the ``gen_ai.usage.*`` counts to the same
    values (conventions.md 4.2), and the thinking cost of a call without reasoning tokens (the mapping reads 0.0).
    """
    return outcome_attributes_of(make_outcome(), extra, capture, max_len, request_model, provider)


def outcome_attributes_of(
    outcome: Outcome,
    extra: ExtraFn | None,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """``response_attributes`` of an ``Outcome`` made already."""
    attrs = outcome_attributes(outcome)
    output = outcome.output_messages
    if capture and output is not None:
        parts = output[0]["parts"] if len(output) == 1 else None
        if parts and len(parts) == 1 and parts[0]["type"] == "text" and type(text := parts[0]["content"]) is str:
            # One choice answering in text (the common reply): its size and its list value are that text.
            answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES] = text_answer(output, text, max_len)
            if list_values.is_bare_text(text, max_len):
                attrs[sc.OUTPUT_VALUE] = text  # text_attributes' answer for it, without its calls and dict
            elif list_values.is_plain(text):
                attrs.update(list_values.text_attributes(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, text or None, max_len))
            else:  # a structured (JSON) answer: the message, which Langfuse would otherwise show as a bare value
                attrs.update(list_values.json_output_attributes(answer))  # decided: not parsed a second time
        else:
            size = text_size(output)
            answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES] = (
                encoded(output, size, max_len) if size >= 0 else messages_json(output, max_len)
            )
            attrs.update(list_values.output_attributes(output, answer, max_len))
    usage = outcome.usage
    if usage is not None:
        model = outcome.response_model or request_model
        writes = usage.cache_write_tokens
        split = pricing.cost_split_at(
            pricing.price_of(model, provider) if model else None,
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            writes if isinstance(writes, int) else None,
        )
        if split is not None:  # the details' values, no dict: (input, cached, output, reasoning, writes, total)
            attrs[sc.EVALTRACE_COST_USD] = split[5]
            if usage.reasoning_tokens:  # absent means none: the mapping reads a priced span without it as 0.0
                attrs[sc.EVALTRACE_COST_THINKING_USD] = split[3]
            attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS] = cost_split_json(split, max_len)
    if outcome.attributes:
        attrs.update(outcome.attributes)
    if extra is not None:
        attrs.update(extra(outcome))
    return attrs


def result_attributes(
    outcome_of: Callable[[Any, bool], Outcome],
    result: Any,
    capture: bool,
    max_len: int,
    request_model: str | None,
    provider: str,
) -> Attributes:
    """``response_attributes`` of a parsed response body, its ``Outcome`` made here by ``outcome_of``."""
    return outcome_attributes_of(outcome_of(result, capture), None, capture, max_len, request_model, provider)


def chunk_times(
    span_start_ns: Any, start: float, first: float | None, first_wall_ns: int, last: float | None
) -> tuple[float | None, float | None]:
    """(time to first chunk, time to last chunk) in seconds, measured from the span's own start stamp.

    ``span_start_ns`` is the span's ``start_time`` (wall-clock ns, None for a span that records nothing). The first
    chunk's wall-clock stamp is read on the same clock as the span's start and end stamps, so the time to first
    chunk can never exceed the span's duration (a ``perf_counter`` taken before the span started counted the
    span's start, on-start processors included, and drifted from the span's clock). The time to the last chunk
    adds the monotonic gap from the first chunk to it. ``start``, ``first`` and ``last`` are ``perf_counter``
    stamps: the fallback when the span has no start stamp, or no chunk carried content.
    """
    if first is None:
        return None, (last - start if last is not None else None)
    if isinstance(span_start_ns, int):
        ttfc = max(0.0, (first_wall_ns - span_start_ns) / 1e9)
    else:
        ttfc = first - start
    return ttfc, (ttfc + (last - first) if last is not None else None)


def stream_attributes(
    reason: str,
    chunks: int,
    times: tuple[float | None, float | None],
    first_wall_ns: int,
    first: float | None,
    last: float | None,
    outcome: Outcome,
) -> Attributes:
    """Stream attributes from the timestamps the proxy took on the application thread (``times``: ``chunk_times``)."""
    attrs: Attributes = {
        sc.EVALTRACE_STREAM_COMPLETED: reason == sc.STREAM_END_EXHAUSTED,
        sc.EVALTRACE_STREAM_END_REASON: reason,
        sc.EVALTRACE_STREAM_CHUNKS: chunks,
    }
    first_seconds, last_seconds = times
    if first_seconds is not None:
        attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first_seconds
        stamp = dt.datetime.fromtimestamp(first_wall_ns / 1e9, tz=dt.UTC)
        attrs[sc.LANGFUSE_OBSERVATION_COMPLETION_START_TIME] = stamp.isoformat(timespec="microseconds")
    if last_seconds is not None:
        attrs[sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK] = last_seconds
    output = outcome.usage.output_tokens if outcome.usage is not None else None
    if output is not None and first is not None and last is not None and last > first:
        attrs[sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND] = output / (last - first)
    return attrs
