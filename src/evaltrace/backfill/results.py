"""Where a backfill's results go: evaluation spans in the local store, scores to the sinks, ids that upsert.

At span and trace scope, each result becomes what live evaluation makes of a late result: a child
``evaluation {name}`` span of the evaluated span (:func:`evaltrace.evaluation.spans.evaluation_span`), which the
store reads as one row per (trace, span, evaluator), and a :class:`~evaltrace.schema.Score`
(:func:`evaltrace.evaluation.convert.result_to_score`). Both ids derive from :func:`evaltrace.schema.score_id`, so a
second backfill of the same traces replaces the first one's span, row and score instead of adding new ones.

At session scope, a result is what live session evaluation makes of it: a session score (no span), with live's id
(:func:`evaltrace.schema.scores.session_score_id`) and a revision, which the store keeps in ``session_evals``, one
row per (session, evaluator). The application's own spans are never rewritten.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from evaltrace.evaluation._session_jobs import session_result_to_score
from evaltrace.evaluation.convert import result_to_score
from evaltrace.evaluation.spans import evaluation_span
from evaltrace.schema import EvaluationResult, Score, score_id

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.backfill.units import Target
    from evaltrace.evaluation.evaluator import EvaluatorSpec

__all__ = ["result_score", "result_span"]

logger = logging.getLogger("evaltrace.backfill")


def _hex(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None  # stored and decoded spans always have one
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def result_span(target: Target, scope: str, result: EvaluationResult) -> ReadableSpan | None:
    """The ``evaluation {name}`` span of ``result``, with an id fixed by its score id (a re-run replaces it).

    None at session scope: a session's result belongs to no trace (it is stored as a session score). On the last
    turn's root it would stay behind, a stale second verdict, once the session grew a turn and was judged again.
    """
    if target.session_id is not None:
        return None
    trace_hex, span_hex = _hex(target.span)
    fixed_id = score_id(trace_hex, span_hex if scope == "span" else None, result.evaluator, result.evaluator_version)
    fixed = int(uuid.UUID(fixed_id).hex[:16], 16) or 1
    return evaluation_span(target.span, result, span_id=fixed, trace_scope=scope != "span")


def result_score(target: Target, scope: str, spec: EvaluatorSpec, result: EvaluationResult) -> Score | None:
    """The score of ``result`` (None for a result that is not a judgement, or one its ScoreConfig refuses).

    Span scope scores the span (Langfuse's observation), trace scope the trace (the root span id in metadata,
    as live trace-level evaluation does), session scope the session, exactly as live session evaluation does
    (same id; the revision is the session's number of turns, so a grown session's verdict replaces the older one
    and a re-run of the same session replaces its own).
    """
    try:
        if target.session_id is not None:
            return session_result_to_score(result, target.session_id, target.revision, spec.config)
        trace_hex, span_hex = _hex(target.span)
        observation = span_hex if scope == "span" else None
        return result_to_score(result, trace_hex, observation, spec.config, span_id=span_hex)
    except ValueError as exc:  # ScoreValidationError, or a value the Score model refuses
        logger.warning("evaltrace: score rejected, not stored: %s", exc)
        return None
