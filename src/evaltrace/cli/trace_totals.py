"""What the header of ``evaltrace traces show`` says about a whole trace: tokens, cost, session, user, errors.

Tokens and cost are summed over the spans that carry them, leaving out a span when one of its descendants
carries them too: an agent span that repeats the sum of its model calls is not counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv

__all__ = ["TraceTotals", "trace_totals"]

_SESSION_KEYS = (semconv.SESSION_ID, semconv.LANGFUSE_SESSION_ID)
_USER_KEYS = (semconv.USER_ID, semconv.LANGFUSE_USER_ID)


@dataclass(frozen=True)
class TraceTotals:
    """Sums and identities of one trace; None where no span says."""

    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    session_id: str | None
    user_id: str | None
    error_spans: int
    """Spans with an ERROR status, evaluation spans excluded (their error is the evaluator's, not the app's)."""


def _number(attributes: Mapping[str, Any], key: str) -> float | None:
    value = attributes.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _first_text(spans: Sequence[ReadableSpan], keys: Sequence[str]) -> str | None:
    for span in spans:
        for key in keys:
            value = (span.attributes or {}).get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _leaf_sum(spans: Sequence[ReadableSpan], key: str) -> float | None:
    """Sum of ``key`` over the spans carrying it that have no descendant carrying it."""
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    carriers = {sid for sid, s in by_id.items() if _number(s.attributes or {}, key) is not None}
    if not carriers:
        return None
    covered: set[int] = set()  # carriers with a carrying descendant
    for sid in carriers:
        parent = by_id[sid].parent
        seen: set[int] = set()
        while parent is not None and parent.span_id in by_id and parent.span_id not in seen:
            seen.add(parent.span_id)  # a corrupt store could hold a parent cycle
            covered.add(parent.span_id)
            parent = by_id[parent.span_id].parent
    return sum(_number(by_id[sid].attributes or {}, key) or 0.0 for sid in carriers - covered)


def _is_app_error(span: ReadableSpan) -> bool:
    kind = (span.attributes or {}).get(semconv.EVALTRACE_SPAN_KIND)
    return span.status.status_code is StatusCode.ERROR and kind != semconv.KIND_EVALUATION


def trace_totals(spans: Sequence[ReadableSpan]) -> TraceTotals:
    """Totals of one trace's spans (any order)."""
    tokens_in = _leaf_sum(spans, semconv.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = _leaf_sum(spans, semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
    cost = _leaf_sum(spans, semconv.EVALTRACE_COST_USD)
    if cost is None:
        cost = _leaf_sum(spans, semconv.GEN_AI_USAGE_COST)
    return TraceTotals(
        input_tokens=None if tokens_in is None else int(tokens_in),
        output_tokens=None if tokens_out is None else int(tokens_out),
        cost_usd=cost,
        session_id=_first_text(spans, _SESSION_KEYS),
        user_id=_first_text(spans, _USER_KEYS),
        error_spans=sum(_is_app_error(s) for s in spans),
    )
