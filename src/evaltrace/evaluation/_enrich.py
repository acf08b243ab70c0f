"""The evaluated span's ``evaltrace.eval.*`` attributes and its result events' attributes, built in one pass.

:func:`enrich_attributes` writes what :func:`~evaltrace.evaluation.convert.span_result_attributes` gives straight
into the enriched copy's attribute dict and builds each ``gen_ai.evaluation.result`` event's attributes as
:func:`~evaltrace.evaluation.convert.evaluation_event_attributes` does, in the same loop: this runs once per evaluated
span. ``tests/evaluation/test_enriched_copy_fused.py`` holds it to the two builders' output.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evaltrace._internal import semconv
from evaltrace.evaluation.convert import (
    _EVAL_ERRORS,
    _EVAL_FAILED,
    _EVAL_LABEL_FAIL,
    _EVAL_LABEL_PASS,
    _EVAL_NOT_EVALUATED,
    _EVALTRACE_JUDGE_TRACE_ID,
    _GEN_AI_EVALUATION_EXPLANATION,
    _GEN_AI_EVALUATION_NAME,
    _GEN_AI_EVALUATION_SCORE_LABEL,
    _GEN_AI_EVALUATION_SCORE_VALUE,
    _GEN_AI_RESPONSE_ID,
    _KEYS,  # the same dict convert fills (never rebound there)
    _NO_VERDICT,
    LABEL_KEY,
    _keys_of,
    capped,
    error_type,
    evaluation_event_attributes,
    result_outcome,
)
from evaltrace.schema import EvaluationResult


def enrich_attributes(  # noqa: C901  (one frame per evaluated span, on purpose)
    attributes: dict[str, Any], results: Iterable[EvaluationResult], response_id: str | None, provenance: bool
) -> list[dict[str, Any]]:
    """Write ``span_result_attributes(results)`` into ``attributes``; return each result's event attributes.

    Exactly ``attributes.update(span_result_attributes(results))`` and ``[evaluation_event_attributes(result,
    response_id, provenance=provenance) for result in results]``, in one pass (the enriched copy of every evaluated
    span): a judgement of exactly :class:`EvaluationResult` is read from its ``__dict__`` once (each pydantic
    attribute read is a ``__getattr__``-hooked lookup, ~300 instructions) and its keys and values written straight
    into ``attributes`` (no second dict merged into it). Any other result (a subclass, an error, a skip, a field
    missing from a ``model_construct``-ed one) goes through the two builders' own code.
    """
    built: list[dict[str, Any]] = []
    judged = False
    any_failed = False
    errors: list[str] = []
    not_evaluated: list[str] = []
    kept = _KEYS
    for result in results:
        if type(result) is EvaluationResult:
            fields = result.__dict__
            try:
                status = fields["status"]
                name = fields["evaluator"]
                passed = True if fields["passed"] else False
                score = fields["score"]
                reason = fields["reason"]
                detail = fields["detail"]
                metadata = fields["metadata"]
                if provenance:
                    version = fields["evaluator_version"]
                    kind = fields["evaluator_type"]
            except KeyError:  # a model_construct-ed result without a field: the builders raise what they raised
                status = None
        else:
            status = None
        if status is None or status in _NO_VERDICT:
            verdict = _enrich_one(attributes, result, kept, errors, not_evaluated)
            if verdict is not None:
                judged = True
                any_failed = any_failed or not verdict
            built.append(evaluation_event_attributes(result, response_id, provenance=provenance))
            continue
        # A judgement: span_result_attributes' judgement branch, then evaluation_event_attributes' (same order).
        outcome_key, score_key, passed_key, _, _ = kept.get(name) or _keys_of(name)
        attributes[outcome_key] = "pass" if passed else "fail"
        judged = True
        if not passed:
            any_failed = True
        if score is not None:
            score = float(score)
            attributes[score_key] = score
        attributes[passed_key] = passed
        own = detail.get(LABEL_KEY)
        event: dict[str, Any] = {
            _GEN_AI_EVALUATION_NAME: name,
            _GEN_AI_EVALUATION_SCORE_LABEL: (
                capped(own) if isinstance(own, str) and own else _EVAL_LABEL_PASS if passed else _EVAL_LABEL_FAIL
            ),
        }
        if score is not None:
            event[_GEN_AI_EVALUATION_SCORE_VALUE] = score
        if reason:
            event[_GEN_AI_EVALUATION_EXPLANATION] = capped(reason)
        if response_id:
            event[_GEN_AI_RESPONSE_ID] = response_id
        if metadata:  # judge_trace_id() of it
            judge = metadata.get(semconv.JUDGE_TRACE_ID_KEY)
            if isinstance(judge, str) and judge:
                event[_EVALTRACE_JUDGE_TRACE_ID] = judge
        if provenance:
            if version:
                event[semconv.EVALTRACE_EVALUATOR_VERSION] = version
            if kind:
                event[semconv.EVALTRACE_EVALUATOR_TYPE] = kind
        built.append(event)
    if judged:
        attributes[_EVAL_FAILED] = any_failed
    if errors:
        attributes[_EVAL_ERRORS] = tuple(errors)
    if not_evaluated:
        attributes[_EVAL_NOT_EVALUATED] = tuple(not_evaluated)
    return built


def _enrich_one(
    attributes: dict[str, Any],
    result: EvaluationResult,
    kept: dict[str, tuple[str, str, str, str, str]],
    errors: list[str],
    not_evaluated: list[str],
) -> bool | None:
    """One result's part of :func:`span_result_attributes` (its loop body), written into ``attributes``.

    Returns:
        Whether a judgement passed; None for a result that is not one.
    """
    name = result.evaluator
    outcome_key, score_key, passed_key, error_key, skip_key = kept.get(name) or _keys_of(name)
    if result.status in _NO_VERDICT:
        outcome = result_outcome(result)
        attributes[outcome_key] = outcome
        if outcome == "error":
            errors.append(name)
            attributes[error_key] = error_type(result) or semconv.ERROR_TYPE_OTHER
        else:  # not_evaluated or pending
            not_evaluated.append(name)
            if result.reason:
                attributes[skip_key] = capped(result.reason)
        return None
    passed = True if result.passed else False
    attributes[outcome_key] = "pass" if passed else "fail"
    if result.score is not None:
        attributes[score_key] = float(result.score)
    attributes[passed_key] = passed
    return passed
