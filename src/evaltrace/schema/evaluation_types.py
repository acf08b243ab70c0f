"""Typed evaluation records: quality, relevance, factual accuracy, toxicity and length (evaluation-data-models).

Each is an :class:`~evaltrace.schema.Evaluation` with the fields of its kind; like every Evaluation, fields it does
not know land in ``metadata`` rather than being dropped. :func:`evaluation_record` loads a mapping as the record
of its ``evaluator_name`` (a plain Evaluation for any other name), which is how MultiEvaluationResult and
EvaluationBatch load their evaluations; :func:`record_class` says which record an evaluator's results become.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from evaltrace.schema.evaluation import Evaluation

__all__ = [
    "FactualAccuracyEvaluation",
    "LengthEvaluation",
    "QualityEvaluation",
    "RelevanceEvaluation",
    "ToxicityEvaluation",
    "evaluation_record",
    "record_class",
    "typed_fields",
]

Unit = Field(default=None, ge=0.0, le=1.0)


class QualityEvaluation(Evaluation):
    """Overall quality, with a score per quality dimension (relevance, coherence, clarity, ...)."""

    dimensions: dict[str, float] = Field(default_factory=dict)


class RelevanceEvaluation(Evaluation):
    """Relevance of a response to its query, with three sub-scores in [0, 1] (None: not measured)."""

    query_intent_match: float | None = Unit
    topic_alignment: float | None = Unit
    information_completeness: float | None = Unit


class FactualAccuracyEvaluation(Evaluation):
    """Factual correctness: the claims checked, citation accuracy and whether anything was hallucinated.

    When not given, ``hallucination_detected`` is derived from the claims: True when a claim is marked not
    verified (``verified: false``, or ``supported: false``).
    """

    factual_claims: list[dict[str, Any]] = Field(default_factory=list)
    citation_accuracy: float | None = Unit
    hallucination_detected: bool = False

    @model_validator(mode="before")
    @classmethod
    def _derive_hallucination(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("hallucination_detected") is None:
            claims = data.get("factual_claims") or []
            data = {**data, "hallucination_detected": any(claim_refuted(c) for c in claims if isinstance(c, dict))}
        return data


class ToxicityEvaluation(Evaluation):
    """Toxicity and safety: a score per category, the overall toxicity and content warnings."""

    toxicity_categories: dict[str, float] = Field(default_factory=dict)
    overall_toxicity: float | None = Unit
    content_warnings: list[str] = Field(default_factory=list)


class LengthEvaluation(Evaluation):
    """Whether a response's length suits it: its counts, the expected range and the assessment."""

    character_count: int | None = Field(default=None, ge=0)
    word_count: int | None = Field(default=None, ge=0)
    sentence_count: int | None = Field(default=None, ge=0)
    expected_length_range: dict[str, int] = Field(default_factory=dict)
    length_appropriateness: Literal["too_short", "appropriate", "too_long"] | None = None


_BY_NAME: dict[str, type[Evaluation]] = {
    "quality": QualityEvaluation,
    "agent_rubric": QualityEvaluation,
    "rubric": QualityEvaluation,
    "relevance": RelevanceEvaluation,
    "answer_relevancy": RelevanceEvaluation,
    "factual_accuracy": FactualAccuracyEvaluation,
    "fact_check": FactualAccuracyEvaluation,
    "toxicity": ToxicityEvaluation,
    "length": LengthEvaluation,
}


def claim_refuted(claim: dict[str, Any]) -> bool:
    """True for a claim its checker marked false (``verified`` or ``supported`` is False)."""
    return claim.get("verified", claim.get("supported")) is False


def record_class(*names: str | None) -> type[Evaluation]:
    """The record type of the first name (evaluator type or name) that has one; Evaluation otherwise."""
    for name in names:
        if name and name in _BY_NAME:
            return _BY_NAME[name]
    return Evaluation


def evaluation_record(data: dict[str, Any]) -> Evaluation:
    """Load ``data`` as its typed record: by ``evaluator_name``, else by the typed fields it holds.

    A record named after its evaluator (``facts``) rather than its kind is recognised by its own fields
    (``factual_claims``, ``dimensions``, ...); anything else is a plain Evaluation.

    Raises:
        pydantic.ValidationError: The mapping is not a valid record of that kind.
    """
    name = data.get("evaluator_name")
    record = record_class(name if isinstance(name, str) else None)
    if record is Evaluation:
        base = set(Evaluation.model_fields)
        for kind in dict.fromkeys(_BY_NAME.values()):
            if any(key in data for key in set(kind.model_fields) - base):
                record = kind
                break
    return record.model_validate(data)


def typed_fields(record: type[Evaluation], detail: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``record`` found in an EvaluationResult's ``detail`` (see ``EvaluationResult.to_evaluation``)."""
    own = set(record.model_fields) - set(Evaluation.model_fields)
    fields = {name: detail[name] for name in own if detail.get(name) is not None}
    if record is QualityEvaluation:
        fields["dimensions"] = _dimension_scores(detail.get("dimensions"))
    if record is FactualAccuracyEvaluation:
        claims = detail.get("factual_claims", detail.get("claims"))
        claims = [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []
        fields["factual_claims"] = claims
        if detail.get("citation_accuracy") is None:
            fields["citation_accuracy"] = _citation_accuracy(claims)
    return fields


def _dimension_scores(value: Any) -> dict[str, float]:
    # A dimension is a number, or (the agent rubric's form) a mapping with its "score"; unscored ones are left out.
    scores: dict[str, float] = {}
    for name, item in (value or {}).items() if isinstance(value, dict) else ():
        score = item.get("score") if isinstance(item, dict) else item
        if isinstance(score, int | float) and not isinstance(score, bool):
            scores[str(name)] = float(score)
    return scores


def _citation_accuracy(claims: list[dict[str, Any]]) -> float | None:
    cited = [c for c in claims if c.get("sources")]
    if not cited:
        return None
    return sum(not claim_refuted(c) for c in cited) / len(cited)
