"""Evaluation results as they are read back from spans, one row per (span, evaluator) with one outcome.

Shared by the HTML report, ``evaltrace traces show`` and the local store's writer; it imports nothing heavier
than the span type, so the terminal waterfall does not load the report (and its pydantic schema).

Scores are read from the three places the evaluation pipeline writes them: ``gen_ai.evaluation.result`` span
events and ``evaltrace.eval.<name>.*`` attributes on the evaluated span, and child ``evaluation {name}`` spans
for results that came after the span was exported. Each row has one outcome: ``pass``, ``fail``, ``error``
(the evaluation itself failed), ``not_evaluated`` (skipped, with its reason) or None for a foreign result that
carries only a label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OUTCOMES", "ScoreRow", "late_score", "outcome_counts", "span_scores", "trace_verdict"]

OUTCOMES = (
    semconv.OUTCOME_PASS,
    semconv.OUTCOME_FAIL,
    semconv.OUTCOME_ERROR,
    semconv.OUTCOME_NOT_EVALUATED,
    semconv.OUTCOME_PENDING,
)
_NOT_EVALUATED_LABELS = (semconv.EVAL_LABEL_NOT_EVALUATED, semconv.EVAL_LABEL_SKIPPED)
_NOT_EVALUATED_LABELS = (semconv.EVAL_LABEL_NOT_EVALUATED, semconv.EVAL_LABEL_SKIPPED)


@dataclass
class ScoreRow:
    """One evaluation result on one span."""

    span_id: str
    span_name: str
    name: str
    score: float | None = None
    label: str | None = None
    passed: bool | None = None
    """True/False for a judgement only; None for an error, a skip or a label-only result."""
    explanation: str | None = None
    """The evaluator's reason; for ``not_evaluated`` the skip reason, for ``error`` the failure message."""
    outcome: str | None = None
    """``pass`` / ``fail`` / ``error`` / ``not_evaluated`` / ``pending``; None when only a label is known."""
    error_type: str | None = None
    """``error.type`` of an evaluation that errored."""


def hex_id(value: int, width: int) -> str:
    """A trace (32) or span (16) id as lower-case hex, zero-padded."""
    return format(value, f"0{width}x")


def as_number(value: Any) -> float | None:
    """A recorded int or float as a float; None for anything else (bools included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def as_text(value: Any) -> str | None:
    """A recorded non-empty string; None for anything else."""
    return value if isinstance(value, str) and value else None


def _row(rows: dict[str, ScoreRow], span_id: str, span_name: str, name: str) -> ScoreRow:
    return rows.setdefault(name, ScoreRow(span_id, span_name, name))


def _fill_from_result(row: ScoreRow, attributes: Mapping[str, Any]) -> None:
    """Fill ``row`` from ``gen_ai.evaluation.result`` attributes (an event, or a child evaluation span)."""
    row.score = as_number(attributes.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE, row.score))
    row.label = as_text(attributes.get(semconv.GEN_AI_EVALUATION_SCORE_LABEL)) or row.label
    row.explanation = as_text(attributes.get(semconv.GEN_AI_EVALUATION_EXPLANATION)) or row.explanation
    row.error_type = as_text(attributes.get(semconv.ERROR_TYPE)) or row.error_type


def _fill_from_attribute(row: ScoreRow, suffix: str, value: Any) -> None:
    """Fill ``row`` from one ``evaltrace.eval.<name><suffix>`` attribute."""
    if suffix == semconv.EVALTRACE_EVAL_SCORE_SUFFIX:
        row.score = as_number(value)
    elif suffix == semconv.EVALTRACE_EVAL_PASSED_SUFFIX and isinstance(value, bool):
        row.passed = value
    elif suffix == semconv.EVALTRACE_EVAL_OUTCOME_SUFFIX and value in OUTCOMES:
        row.outcome = value
    elif suffix == semconv.EVALTRACE_EVAL_ERROR_TYPE_SUFFIX:
        row.error_type = as_text(value) or row.error_type
    elif suffix == semconv.EVALTRACE_EVAL_SKIP_REASON_SUFFIX:
        row.explanation = row.explanation or as_text(value)


def _settle(row: ScoreRow) -> ScoreRow:
    """Decide the row's outcome from what was found; only a judgement keeps ``passed`` (and a score)."""
    if row.outcome is None:
        if row.error_type is not None:
            row.outcome = semconv.OUTCOME_ERROR  # before ``passed``: older traces wrote passed=False for errors
        elif row.label in _NOT_EVALUATED_LABELS:
            row.outcome = semconv.OUTCOME_NOT_EVALUATED
        elif row.passed is not None:
            row.outcome = semconv.OUTCOME_PASS if row.passed else semconv.OUTCOME_FAIL
        elif row.label in (semconv.EVAL_LABEL_PASS, semconv.EVAL_LABEL_FAIL):
            row.outcome = row.label
    if row.outcome in (semconv.OUTCOME_PASS, semconv.OUTCOME_FAIL):
        row.passed = row.outcome == semconv.OUTCOME_PASS
    elif row.outcome is not None:
        row.passed = None
        row.score = None
    return row


_SUFFIXES = (
    semconv.EVALTRACE_EVAL_SCORE_SUFFIX,
    semconv.EVALTRACE_EVAL_PASSED_SUFFIX,
    semconv.EVALTRACE_EVAL_OUTCOME_SUFFIX,
    semconv.EVALTRACE_EVAL_ERROR_TYPE_SUFFIX,
    semconv.EVALTRACE_EVAL_SKIP_REASON_SUFFIX,
)


def span_scores(span: ReadableSpan) -> list[ScoreRow]:
    """The evaluation results carried by ``span`` (events and ``evaltrace.eval.*`` attributes), one per evaluator."""
    assert span.context is not None
    span_id = hex_id(span.context.span_id, 16)
    rows: dict[str, ScoreRow] = {}
    for event in span.events:
        attributes = event.attributes or {}
        name = attributes.get(semconv.GEN_AI_EVALUATION_NAME)
        if event.name == semconv.GEN_AI_EVALUATION_RESULT_EVENT and isinstance(name, str):
            _fill_from_result(_row(rows, span_id, span.name, name), attributes)
    prefix = semconv.EVALTRACE_EVAL_PREFIX
    for key, value in (span.attributes or {}).items():
        if not key.startswith(prefix):
            continue
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(prefix) + len(suffix):
                _fill_from_attribute(_row(rows, span_id, span.name, key[len(prefix) : -len(suffix)]), suffix, value)
                break
    return [_settle(row) for row in rows.values()]


def outcome_counts(rows: Sequence[ScoreRow]) -> dict[str, int]:
    """Count ``rows`` by outcome (``"other"`` for label-only results); outcomes with no row are left out."""
    counts: dict[str, int] = {}
    for row in rows:
        key = row.outcome or "other"
        counts[key] = counts.get(key, 0) + 1
    return counts


def trace_verdict(rows: Sequence[ScoreRow]) -> str:
    """The trace's evaluation badge, from the outcomes of its evaluation results.

    ``fail`` if any evaluation failed, else ``error`` if any errored, else ``pending`` if any is still running,
    else ``pass`` if at least one passed, else ``not_evaluated``. An error comes before a pass because the errored evaluator might have failed the trace; skips and
    label-only results never make a verdict, so a trace nothing judged is ``not_evaluated``, never ``pass``.
    """
    seen = {row.outcome for row in rows}
    for outcome in (semconv.OUTCOME_FAIL, semconv.OUTCOME_ERROR, semconv.OUTCOME_PENDING, semconv.OUTCOME_PASS):
        if outcome in seen:
            return outcome
    return semconv.OUTCOME_NOT_EVALUATED


def late_score(span: ReadableSpan, parent_name: str) -> ScoreRow | None:
    """A child ``evaluation {name}`` span: a result that arrived after its span was exported."""
    attributes = span.attributes or {}
    name = attributes.get(semconv.GEN_AI_EVALUATION_NAME)
    if attributes.get(semconv.EVALTRACE_SPAN_KIND) != semconv.KIND_EVALUATION or not isinstance(name, str):
        return None
    if span.parent is None:
        return None
    row = ScoreRow(hex_id(span.parent.span_id, 16), parent_name, name)
    _fill_from_result(row, attributes)
    for suffix in _SUFFIXES:
        key = semconv.EVALTRACE_EVAL_PREFIX + name + suffix
        if key in attributes:
            _fill_from_attribute(row, suffix, attributes[key])
    return _settle(row)
