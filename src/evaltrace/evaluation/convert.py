"""EvaluationResult → telemetry attributes and backend scores.

Outputs: ``gen_ai.evaluation.result`` event attributes, ``evaltrace.eval.*`` span attributes and
:class:`~evaltrace.schema.Score` objects.

Every result is shown as one *outcome* (:func:`result_outcome`): ``pass`` or ``fail`` for a judgement,
``error`` when the evaluation itself failed (timeout, unreachable judge, evaluator bug, our bug; status
``failed``), ``not_evaluated`` when it was skipped, ``pending`` while it has not run. An error or a skip is never
written, counted or shown as a pass or a fail.

Label values written to ``gen_ai.evaluation.score.label`` (the spec asks implementations to document them):
the evaluator's own label when it returned one (``detail["label"]``, e.g. a string from a function
evaluator), otherwise ``"pass"`` or ``"fail"`` from ``passed``; ``"not_evaluated"`` for an evaluation that did
not apply (with the skip reason as the explanation); no label at all for an evaluation that errored (the event
carries ``error.type`` instead: a label there would read as a verdict).

Every text an evaluator wrote (reason/explanation, skip reason, label, error type) is capped on its way out, to
the configured ``max_attribute_length`` like any captured value (:func:`capped`): a text over the cap becomes
the valid-JSON truncation marker of ``_internal.jsonutil``. The score comment sent to sinks uses the same cap.
The :class:`EvaluationResult` itself keeps the full text, for the evaluators' and the caller's own use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from evaltrace._internal import semconv, settings
from evaltrace._internal.jsonutil import capped_json, capped_text
from evaltrace.evaluation.runner import ERROR_TYPE_KEY
from evaltrace.schema import EvaluationResult, Score, ScoreConfig, score_id

LABEL_KEY = "label"
SPAN_ID_KEY = "span_id"
_LLM_TYPE_MARKERS = ("llm", "judge")

Outcome = Literal["pass", "fail", "error", "not_evaluated", "pending"]


def capped(text: str) -> str:
    """Return ``text`` capped to the configured ``max_attribute_length`` (bounded work, see ``capped_text``)."""
    return capped_text(text, settings.current.max_attribute_length)


def result_outcome(result: EvaluationResult) -> Outcome:
    """Return what ``result`` is shown as: ``pass``, ``fail``, ``error``, ``not_evaluated`` or ``pending``.

    Only a completed evaluation is a verdict; ``passed`` of any other result means nothing.
    """
    if result.status == "failed":
        return "error"
    if result.status == "skipped":
        return "not_evaluated"
    if result.status == "pending":
        return "pending"
    return "pass" if result.passed else "fail"


def skip_reason(result: EvaluationResult) -> str:
    """The reason a not-evaluated ``result`` is counted under: the one its evaluation span stores.

    Capped as the span caps it (``max_attribute_length``), so no count's key is longer than a stored reason;
    ``skipped`` for a result without one (an evaluator's own ``status="skipped"`` result with no reason), as the
    run summaries count it.
    """
    return capped(result.reason) if result.reason else semconv.EVAL_LABEL_SKIPPED


def is_judged(outcome: str) -> bool:
    """Return True for the outcomes that are verdicts (``pass``/``fail``), the only ones in a pass rate."""
    return outcome in (semconv.OUTCOME_PASS, semconv.OUTCOME_FAIL)


JUDGED = frozenset((semconv.OUTCOME_PASS, semconv.OUTCOME_FAIL))
"""The outcomes that are verdicts (what :func:`is_judged` answers True for), for hot paths that test membership."""

NO_VERDICT = frozenset(("failed", "skipped", "pending"))
"""The statuses :func:`result_outcome` does not make ``pass``/``fail`` (every other status is a judgement)."""
_NO_VERDICT = NO_VERDICT


def result_label(result: EvaluationResult) -> str | None:
    """Return the event label of ``result`` (None for an errored evaluation, which has no verdict to label)."""
    return _label(result, result_outcome(result))


def _label(result: EvaluationResult, outcome: str) -> str | None:
    if outcome == "error":
        return None
    if outcome == "not_evaluated":
        return semconv.EVAL_LABEL_NOT_EVALUATED
    if outcome == "pending":
        return semconv.OUTCOME_PENDING
    label = result.detail.get(LABEL_KEY)
    if isinstance(label, str) and label:
        return capped(label)
    return semconv.EVAL_LABEL_PASS if result.passed else semconv.EVAL_LABEL_FAIL


def error_type(result: EvaluationResult) -> str | None:
    """Return the OTel ``error.type`` of a failed evaluation (None when it did not fail)."""
    if result.status != "failed":
        return None
    specific = result.detail.get(ERROR_TYPE_KEY)
    if isinstance(specific, str) and specific:
        return capped(specific)
    return result.error.type if result.error is not None else "evaluation_failed"


# The event's keys and labels bound here: one global read each instead of a module attribute's (every result).
_GEN_AI_EVALUATION_NAME = semconv.GEN_AI_EVALUATION_NAME
_GEN_AI_EVALUATION_SCORE_LABEL = semconv.GEN_AI_EVALUATION_SCORE_LABEL
_GEN_AI_EVALUATION_SCORE_VALUE = semconv.GEN_AI_EVALUATION_SCORE_VALUE
_GEN_AI_EVALUATION_EXPLANATION = semconv.GEN_AI_EVALUATION_EXPLANATION
_GEN_AI_RESPONSE_ID = semconv.GEN_AI_RESPONSE_ID
_ERROR_TYPE = semconv.ERROR_TYPE
_EVALTRACE_JUDGE_TRACE_ID = semconv.EVALTRACE_JUDGE_TRACE_ID
_EVAL_LABEL_PASS = semconv.EVAL_LABEL_PASS
_EVAL_LABEL_FAIL = semconv.EVAL_LABEL_FAIL
_OUTCOME_PASS = semconv.OUTCOME_PASS
_OUTCOME_FAIL = semconv.OUTCOME_FAIL


def evaluation_event_attributes(
    result: EvaluationResult, response_id: str | None = None, *, provenance: bool = False
) -> dict[str, Any]:
    """Return the attributes of one ``gen_ai.evaluation.result`` event (span event or log record).

    Args:
        result: The evaluation result.
        response_id: ``gen_ai.response.id`` of the evaluated span, when it has one.
        provenance: Add ``evaltrace.evaluator.version`` and ``evaltrace.evaluator.type`` (when known). Off by
            default: the spec has no provenance attribute yet (conventions.md 1.3), so it is opt-in until it does.

    Returns:
        ``gen_ai.evaluation.name``; for a judgement ``.score.value`` (a double, when the result has a score)
        and ``.score.label``; ``.explanation`` (the reason or skip reason, when non-empty); ``gen_ai.response.id``;
        and ``error.type`` instead of score and label when the evaluation itself failed.
    """
    attributes: dict[str, Any] = {_GEN_AI_EVALUATION_NAME: result.evaluator}
    outcome: str
    if result.status in _NO_VERDICT:
        outcome = result_outcome(result)
        label = _label(result, outcome)
        if label is not None:
            attributes[_GEN_AI_EVALUATION_SCORE_LABEL] = label
    else:  # a judgement: result_outcome() and _label() of it, without their two calls (this runs for every result)
        passed = result.passed
        outcome = _OUTCOME_PASS if passed else _OUTCOME_FAIL
        own = result.detail.get(LABEL_KEY)
        attributes[_GEN_AI_EVALUATION_SCORE_LABEL] = (
            capped(own) if isinstance(own, str) and own else _EVAL_LABEL_PASS if passed else _EVAL_LABEL_FAIL
        )
        if result.score is not None:
            attributes[_GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
    if result.reason:
        attributes[_GEN_AI_EVALUATION_EXPLANATION] = capped(result.reason)
    if response_id:
        attributes[_GEN_AI_RESPONSE_ID] = response_id
    failure = error_type(result) if outcome == "error" else None
    if failure is not None:
        attributes[_ERROR_TYPE] = failure
    judge = judge_trace_id(result) if result.metadata else None  # no call for a result with no metadata
    if judge is not None:
        attributes[_EVALTRACE_JUDGE_TRACE_ID] = judge
    if provenance:
        if result.evaluator_version:
            attributes[semconv.EVALTRACE_EVALUATOR_VERSION] = result.evaluator_version
        if result.evaluator_type:
            attributes[semconv.EVALTRACE_EVALUATOR_TYPE] = result.evaluator_type
    return attributes


def judge_trace_id(result: EvaluationResult) -> str | None:
    """Return the id of the judge trace behind ``result`` (None without one: no judge, or not traced)."""
    metadata = result.metadata
    value = metadata.get(semconv.JUDGE_TRACE_ID_KEY) if metadata else None
    return value if isinstance(value, str) and value else None


def openinference_evaluation_attributes(result: EvaluationResult, *, trace_scope: bool = False) -> dict[str, Any]:
    """Return the OpenInference feedback object of ``result`` for a post-hoc carrier span (empty for no verdict).

    ``evaluations.0.evaluation.*`` (``trace.evaluations.0.evaluation.*`` for a trace-level result): ``name``,
    ``score`` (numeric), ``label``, ``explanation``, ``annotator_kind`` (``LLM``/``CODE``) and ``metadata`` (a JSON
    object: evaluation id, evaluator version, judge trace id). Only a judgement gets one, as only a judgement gets a
    score: an errored or skipped evaluation would read as a verdict in Phoenix (OpenInference spec/annotations.md).
    """
    outcome = result_outcome(result)
    if outcome not in JUDGED:
        return {}
    prefix = semconv.OI_TRACE_EVALUATION_PREFIX if trace_scope else semconv.OI_SPAN_EVALUATION_PREFIX
    attributes: dict[str, Any] = {
        prefix + semconv.OI_EVALUATION_NAME: result.evaluator,
        prefix + semconv.OI_EVALUATION_LABEL: _label(result, outcome),
        prefix + semconv.OI_EVALUATION_ANNOTATOR_KIND: annotator_kind(result),
    }
    if result.score is not None:
        attributes[prefix + semconv.OI_EVALUATION_SCORE] = float(result.score)
    if result.reason:
        attributes[prefix + semconv.OI_EVALUATION_EXPLANATION] = capped(result.reason)
    metadata = {"evaluation_id": result.evaluation_id, "evaluator_version": result.evaluator_version}
    judge = judge_trace_id(result)
    if judge is not None:
        metadata[semconv.JUDGE_TRACE_ID_KEY] = judge
    attributes[prefix + semconv.OI_EVALUATION_METADATA] = capped_json(
        {key: value for key, value in metadata.items() if value is not None}
    )
    return attributes


def eval_attribute(name: str, suffix: str) -> str:
    """Return ``evaltrace.eval.<name><suffix>``."""
    return f"{semconv.EVALTRACE_EVAL_PREFIX}{name}{suffix}"


_MAX_KEPT_NAMES = 1024
"""Evaluator names whose attribute keys :func:`_keys_of` keeps (the configured evaluators; beyond it, built anew)."""

_MAX_KEPT_NAME_LENGTH = 256
"""Longer names are never kept: the cache is module-wide and public callers may pass any name (bounded memory)."""

_KEYS: dict[str, tuple[str, str, str, str, str]] = {}


def _keys_of(name: str) -> tuple[str, str, str, str, str]:
    """``eval_attribute(name, suffix)`` of the outcome, score, passed, error type and skip reason suffixes.

    Built once per evaluator name and kept (their hashes with them): every evaluated span writes them again. The
    names are those of the configured evaluators; past :data:`_MAX_KEPT_NAMES`, or longer than
    :data:`_MAX_KEPT_NAME_LENGTH` characters, they are built anew each time.
    """
    prefix = semconv.EVALTRACE_EVAL_PREFIX + name
    keys = (
        prefix + semconv.EVALTRACE_EVAL_OUTCOME_SUFFIX,
        prefix + semconv.EVALTRACE_EVAL_SCORE_SUFFIX,
        prefix + semconv.EVALTRACE_EVAL_PASSED_SUFFIX,
        prefix + semconv.EVALTRACE_EVAL_ERROR_TYPE_SUFFIX,
        prefix + semconv.EVALTRACE_EVAL_SKIP_REASON_SUFFIX,
    )
    if len(_KEYS) < _MAX_KEPT_NAMES and len(name) <= _MAX_KEPT_NAME_LENGTH:
        _KEYS[name] = keys
    return keys


def span_result_attributes(results: Iterable[EvaluationResult]) -> dict[str, Any]:
    """Return the ``evaltrace.eval.*`` span attributes of ``results``.

    Per evaluator: ``.outcome`` always; ``.passed`` and ``.score`` only for a judgement (pass/fail);
    ``.error_type`` for an evaluation that errored; ``.skip_reason`` for one that was not evaluated. Per span:
    ``evaltrace.eval.failed`` (True when a judgement failed; written only when at least one result is a
    judgement, so a span nothing judged never reads as "not failed"), ``evaltrace.eval.errors`` and
    ``evaltrace.eval.not_evaluated`` (the evaluator names, when there are any). Attributes rather than
    events only, because Langfuse ignores span events (conventions.md 4.2) and shows attributes as metadata.
    """
    attributes: dict[str, Any] = {}
    judged = False
    any_failed = False
    errors: list[str] = []
    not_evaluated: list[str] = []
    kept = _KEYS
    for result in results:
        name = result.evaluator
        # eval_attribute()'s names, kept per evaluator (this runs for every result of every evaluated span)
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
        else:  # a judgement: result_outcome() of it without its call
            passed = True if result.passed else False
            attributes[outcome_key] = "pass" if passed else "fail"
            judged = True
            any_failed = any_failed or not passed
            if result.score is not None:
                attributes[score_key] = float(result.score)
            attributes[passed_key] = passed
    if judged:
        attributes[_EVAL_FAILED] = any_failed
    if errors:  # tuples: the immutable sequence form the SDK itself stores attribute arrays in
        attributes[_EVAL_ERRORS] = tuple(errors)
    if not_evaluated:
        attributes[_EVAL_NOT_EVALUATED] = tuple(not_evaluated)
    return attributes


_EVAL_FAILED = semconv.EVALTRACE_EVAL_FAILED
_EVAL_ERRORS = semconv.EVALTRACE_EVAL_ERRORS
_EVAL_NOT_EVALUATED = semconv.EVALTRACE_EVAL_NOT_EVALUATED


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
            string_value=capped(label),
            trace_id=trace_id,
            observation_id=observation_id,
            comment=capped(result.reason) or None,
            source="EVAL",
            timestamp=result.finished_at,
            metadata=metadata,
        )
    score = result.to_score(trace_id=trace_id, observation_id=observation_id, config=config, metadata=metadata)
    return _capped_score(score)


def _capped_score(score: Score) -> Score:
    """``score`` with its comment and label capped (validated against its config before, on the full result)."""
    update: dict[str, str] = {}
    for field in ("comment", "string_value"):
        value = getattr(score, field)
        if isinstance(value, str) and (short := capped(value)) is not value:
            update[field] = short
    return score.model_copy(update=update) if update else score


def response_id_of(attributes: Mapping[str, Any] | None) -> str | None:
    """Return ``gen_ai.response.id`` from span attributes when present."""
    if not attributes:
        return None
    value = attributes.get(semconv.GEN_AI_RESPONSE_ID)
    return value if isinstance(value, str) and value else None
