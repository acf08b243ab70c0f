"""What the header of ``evaltrace traces show`` says about a whole trace: tokens, cost, session, user, errors.

Tokens and cost follow :func:`evaltrace.exporters.store_values.trace_usage`, the rule ``traces list`` uses too:
summed over the spans that carry them, leaving out a span when one of its descendants carries them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv
from evaltrace.exporters.store_values import NO_USAGE, span_usage, trace_usage

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


def _first_text(spans: Sequence[ReadableSpan], keys: Sequence[str]) -> str | None:
    for span in spans:
        for key in keys:
            value = (span.attributes or {}).get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _is_app_error(span: ReadableSpan) -> bool:
    kind = (span.attributes or {}).get(semconv.EVALTRACE_SPAN_KIND)
    return span.status.status_code is StatusCode.ERROR and kind != semconv.KIND_EVALUATION


def trace_totals(spans: Sequence[ReadableSpan]) -> TraceTotals:
    """Totals of one trace's spans (any order)."""
    ids = [(span, f"{span.context.span_id:016x}") for span in spans if span.context is not None]
    usage = trace_usage(
        [(span_id, usage) for span, span_id in ids if (usage := span_usage(span.attributes or {})) != NO_USAGE],
        ((span_id, None if span.parent is None else f"{span.parent.span_id:016x}") for span, span_id in ids),
    )
    return TraceTotals(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost,
        session_id=_first_text(spans, _SESSION_KEYS),
        user_id=_first_text(spans, _USER_KEYS),
        error_spans=sum(_is_app_error(s) for s in spans),
    )
