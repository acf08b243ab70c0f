"""Adapter from spans to the Trace evaluators see.

``evaltrace.mapping.trace_from_spans`` when it can, a minimal Trace from the root span otherwise (mapping not
installed, or it failed on unusual spans), so one bad span never stops evaluation.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv
from evaltrace._internal.jsonutil import loads_or_raw
from evaltrace.schema import Trace
from evaltrace.schema.trace import TraceError, TraceOutput

logger = logging.getLogger("evaltrace.evaluation")
LIVE_RUN_ID = "live"


def _time(ns: int | None) -> dt.datetime:
    return dt.datetime.fromtimestamp((ns or 0) / 1e9, dt.UTC)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def minimal_trace(root: ReadableSpan) -> Trace:
    """Build a Trace from ``root`` alone: times, ids, input/output values and error status."""
    attrs = dict(root.attributes or {})
    ctx = root.context
    trace_hex = format(ctx.trace_id, "032x") if ctx is not None else ""
    service = root.resource.attributes.get(semconv.SERVICE_NAME) if root.resource is not None else None
    started = _time(root.start_time)
    error = None
    if root.status.status_code is StatusCode.ERROR:
        error = TraceError(type="exception", message=root.status.description or "error")
    raw_input = attrs.get(semconv.INPUT_VALUE)
    parsed_input = loads_or_raw(raw_input) if isinstance(raw_input, str) else {}
    return Trace(
        run_id=str(attrs.get(semconv.EVALTRACE_RUN_ID) or LIVE_RUN_ID),
        case_id=str(attrs.get(semconv.EVALTRACE_CASE_ID) or trace_hex),
        variant_name=str(attrs.get(semconv.EVALTRACE_VARIANT) or service or ""),
        started_at=started,
        finished_at=max(started, _time(root.end_time)),
        input=parsed_input if isinstance(parsed_input, dict) else {"input": parsed_input},
        output=TraceOutput(final_answer=_text(attrs.get(semconv.OUTPUT_VALUE))),
        error=error,
        extra={"trace_id": trace_hex, "span_id": format(ctx.span_id, "016x") if ctx is not None else ""},
    )


def build_trace(spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace:
    """Return the Trace of ``root``'s subtree (``spans`` includes ``root``)."""
    try:
        from evaltrace.mapping import trace_from_spans
    except ImportError:
        return minimal_trace(root)
    try:
        return trace_from_spans(list(spans), root=root)
    except Exception:
        logger.warning("evaltrace: mapping spans to a Trace failed; evaluating a minimal trace", exc_info=True)
        return minimal_trace(root)
