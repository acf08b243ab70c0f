"""EvaluationResult → telemetry attributes and backend scores.

Outputs: ``gen_ai.evaluation.result`` event attributes, ``evaltrace.eval.*`` span attributes and
:class:`~evaltrace.schema.Score` objects.

Label values written to ``gen_ai.evaluation.score.label`` (the spec asks implementations to document them):
the evaluator's own label when it returned one (``detail["label"]``, e.g. a string from a function
evaluator), ``"skipped"`` for an evaluation that did not apply, otherwise ``"pass"`` or ``"fail"`` from
``passed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evaltrace._internal import semconv
from evaltrace.evaluation.runner import ERROR_TYPE_KEY
from evaltrace.schema import EvaluationResult, Score, ScoreConfig, score_id

LABEL_KEY = "label"
SPAN_ID_KEY = "span_id"
_LLM_TYPE_MARKERS = ("llm", "judge")


def result_label(result: EvaluationResult) -> str:
    """Return the label for ``result``: its own label if it has one, else ``"pass"``/``"fail"``."""
    label = result.detail.get(LABEL_KEY)
    if isinstance(label, str) and label:
        return label
    if result.status == "skipped":
        return semconv.EVAL_LABEL_SKIPPED
    return semconv.EVAL_LABEL_PASS if result.passed else semconv.EVAL_LABEL_FAIL


def error_type(result: EvaluationResult) -> str | None:
    """Return the OTel ``error.type`` of a failed evaluation (None when it did not fail)."""
    if result.status != "failed":
        return None
    specific = result.detail.get(ERROR_TYPE_KEY)
    if isinstance(specific, str) and specific:
        return specific
    return result.error.type if result.error is not None else "evaluation_failed"


def evaluation_event_attributes(result: EvaluationResult, response_id: str | None = None) -> dict[str, Any]:
    """Return the attributes of one ``gen_ai.evaluation.result`` event (span event or log record).

    Args:
        result: The evaluation result.
        response_id: ``gen_ai.response.id`` of the evaluated span, when it has one.

    Returns:
        ``gen_ai.evaluation.name``, ``.score.value`` (a double, when the result has a score),
        ``.score.label``, ``.explanation`` (the reason, when non-empty), ``gen_ai.response.id`` and
        ``error.type`` (only when the evaluation itself failed).
    """
    attributes: dict[str, Any] = {
        semconv.GEN_AI_EVALUATION_NAME: result.evaluator,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: result_label(result),
    }
    if result.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
    if result.reason:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = result.reason
    if response_id:
        attributes[semconv.GEN_AI_RESPONSE_ID] = response_id
    failure = error_type(result)
    if failure is not None:
        attributes[semconv.ERROR_TYPE] = failure
    return attributes


def eval_attribute(name: str, suffix: str) -> str:
    """Return ``evaltrace.eval.<name><suffix>``."""
    return f"{semconv.EVALTRACE_EVAL_PREFIX}{name}{suffix}"


def span_result_attributes(results: Iterable[EvaluationResult]) -> dict[str, Any]:
    """Return ``evaltrace.eval.<name>.score`` / ``.passed`` for each result and ``evaltrace.eval.failed``.

    ``evaltrace.eval.failed`` is True when any result did not pass, including evaluations that errored;
    skipped evaluations are left out.
    """
    attributes: dict[str, Any] = {}
    any_failed = False
    for result in results:
        if result.status == "skipped":  # not a verdict: neither passed nor failed
            continue
        if result.score is not None:
            attributes[eval_attribute(result.evaluator, semconv.EVALTRACE_EVAL_SCORE_SUFFIX)] = float(result.score)
        attributes[eval_attribute(result.evaluator, semconv.EVALTRACE_EVAL_PASSED_SUFFIX)] = result.passed
        any_failed = any_failed or not result.passed
    attributes[semconv.EVALTRACE_EVAL_FAILED] = any_failed
    return attributes


def annotator_kind(result: EvaluationResult) -> str:
    """Return Phoenix's ``annotator_kind``: ``LLM`` for judge evaluators, ``CODE`` for the rest."""
    kind = result.evaluator_type.lower()
    return "LLM" if any(marker in kind for marker in _LLM_TYPE_MARKERS) else "CODE"


def score_metadata(result: EvaluationResult, span_id: str | None = None) -> dict[str, Any]:
    """Return the metadata stored with a score (what a backend user needs to find the evaluation)."""
    metadata: dict[str, Any] = {
        SPAN_ID_KEY: span_id,
        "evaluation_id": result.evaluation_id,
        "evaluator_version": result.evaluator_version,
        "evaluator_type": result.evaluator_type or None,
        "annotator_kind": annotator_kind(result),
        "passed": result.passed,
        LABEL_KEY: result_label(result),
    }
    if result.metadata:
        metadata.update(result.metadata)
    return {key: value for key, value in metadata.items() if value is not None}


def result_to_score(
    result: EvaluationResult,
    trace_id: str,
    observation_id: str | None,
    config: ScoreConfig | None = None,
    *,
    span_id: str | None = None,
) -> Score | None:
    """Convert a result to a Score on the evaluated span (None for results that are not judgements).

    Failed and skipped evaluations produce no score: a 0 would read as a real verdict in a backend's
    dashboards; they stay visible on the span, in the log event and in ``stats()``. Without a config a
    result with a score is NUMERIC, a result with only an evaluator label is CATEGORICAL (value = label,
    conventions.md 7), anything else BOOLEAN from ``passed``; with a config it must satisfy the config.

    Args:
        result: The result.
        trace_id: 32-hex trace id.
        observation_id: 16-hex span id for a span score; None for a trace score.
        config: ScoreConfig to satisfy, if any.
        span_id: Evaluated span id recorded in metadata (defaults to ``observation_id``).

    Raises:
        ScoreValidationError: The result violates ``config``.
    """
    if result.status != "completed":
        return None
    metadata = score_metadata(result, span_id or observation_id)
    label = result.detail.get(LABEL_KEY)
    if config is None and result.score is None and isinstance(label, str) and label:
        # Adapter: schema's to_score() has no label-only form, so the CATEGORICAL score is built here.
        return Score(
            id=score_id(trace_id, observation_id, result.evaluator, result.evaluator_version),
            name=result.evaluator,
            data_type="CATEGORICAL",
            string_value=label,
            trace_id=trace_id,
            observation_id=observation_id,
            comment=result.reason or None,
            source="EVAL",
            timestamp=result.finished_at,
            metadata=metadata,
        )
    return result.to_score(trace_id=trace_id, observation_id=observation_id, config=config, metadata=metadata)


def response_id_of(attributes: Mapping[str, Any] | None) -> str | None:
    """Return ``gen_ai.response.id`` from span attributes when present."""
    if not attributes:
        return None
    value = attributes.get(semconv.GEN_AI_RESPONSE_ID)
    return value if isinstance(value, str) and value else None
