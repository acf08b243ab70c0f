"""Where a backfill's results go: evaluation spans in the local store, scores to the sinks, ids that upsert.

Each result becomes what live evaluation makes of a late result: a child ``evaluation {name}`` span of the
evaluated span (:func:`evaltrace.evaluation.spans.evaluation_span`), which the store reads as one row per
(trace, span, evaluator), and a :class:`~evaltrace.schema.Score` (:func:`evaltrace.evaluation.convert.result_to_score`).
Both ids derive from :func:`evaltrace.schema.score_id`, so a second backfill of the same traces replaces the
first one's span, row and score instead of adding new ones. The application's own spans are never rewritten.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from evaltrace.evaluation.convert import result_to_score
from evaltrace.evaluation.spans import evaluation_span
from evaltrace.schema import EvaluationResult, Score, score_id

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.backfill.units import Target
    from evaltrace.evaluation.evaluator import EvaluatorSpec

__all__ = ["result_span", "result_score", "session_score_id"]

logger = logging.getLogger("evaltrace.backfill")


def session_score_id(session_id: str, evaluator: str, version: str | None) -> str:
    """The deterministic id of a session-scope score (one per session and evaluator version)."""
    return score_id(f"session:{session_id}", None, evaluator, version)


def _hex(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None  # stored and decoded spans always have one
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def _target_score_id(target: Target, scope: str, result: EvaluationResult) -> str:
    trace_hex, span_hex = _hex(target.span)
    if target.session_id is not None:
        return session_score_id(target.session_id, result.evaluator, result.evaluator_version)
    return score_id(trace_hex, span_hex if scope == "span" else None, result.evaluator, result.evaluator_version)


def result_span(target: Target, scope: str, result: EvaluationResult) -> ReadableSpan | None:
    """The ``evaluation {name}`` span of ``result``, with an id fixed by its score id (a re-run replaces it)."""
    fixed = int(uuid.UUID(_target_score_id(target, scope, result)).hex[:16], 16) or 1
    return evaluation_span(target.span, result, span_id=fixed, trace_scope=scope != "span")


def result_score(target: Target, scope: str, spec: EvaluatorSpec, result: EvaluationResult) -> Score | None:
    """The score of ``result`` (None for a result that is not a judgement, or one its ScoreConfig refuses).

    Span scope scores the span (Langfuse's observation), trace scope the trace (the root span id in metadata,
    as live trace-level evaluation does), session scope the session.
    """
    trace_hex, span_hex = _hex(target.span)
    observation = span_hex if scope == "span" else None
    try:
        score = result_to_score(result, trace_hex, observation, spec.config, span_id=span_hex)
    except ValueError as exc:  # ScoreValidationError, or a value the Score model refuses
        logger.warning("evaltrace: score rejected, not stored: %s", exc)
        return None
    if score is None or target.session_id is None:
        return score
    data: dict[str, Any] = score.model_dump()
    data.update(
        id=session_score_id(target.session_id, result.evaluator, result.evaluator_version),
        trace_id=None,
        observation_id=None,
        session_id=target.session_id,
    )
    return Score.model_validate(data)
