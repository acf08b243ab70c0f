"""Typed evaluation records (quality dimensions, relevance sub-scores, factual accuracy), unknown fields kept in
metadata, and MultiEvaluationResult as evaluation-data-models writes it (its example loads, summary_score kept)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from evaltrace.schema import (
    Evaluation,
    EvaluationBatch,
    EvaluationResult,
    FactualAccuracyEvaluation,
    MultiEvaluationResult,
    QualityEvaluation,
    RelevanceEvaluation,
    evaluation_record,
)

# The MultiEvaluationResult example of evaluation-data-models.txt, as published: evaluations without their own
# target, and a summary score that is not the weighted average of the scores shown.
SPEC_MULTI_EXAMPLE = """
{
  "target_event_id": "evt_12345",
  "evaluations": [
    {"evaluator_name": "factual_accuracy", "score": 0.92},
    {"evaluator_name": "relevance", "score": 0.88},
    {"evaluator_name": "toxicity", "score": 0.05}
  ],
  "summary_score": 0.89,
  "summary_method": "weighted_average",
  "weights": {"factual_accuracy": 0.5, "relevance": 0.3, "toxicity": 0.2}
}
"""


def test_the_specs_multi_example_loads_with_its_summary_score_kept() -> None:
    multi = MultiEvaluationResult.model_validate_json(SPEC_MULTI_EXAMPLE)
    assert multi.summary_score == 0.89  # as given: not replaced by our own average
    assert multi.compute_summary() == pytest.approx(0.92 * 0.5 + 0.88 * 0.3 + 0.05 * 0.2)
    assert [e.target_event_id for e in multi.evaluations] == ["evt_12345"] * 3
    assert [type(e).__name__ for e in multi.evaluations] == [
        "FactualAccuracyEvaluation",
        "RelevanceEvaluation",
        "ToxicityEvaluation",
    ]
    again = MultiEvaluationResult.model_validate_json(multi.model_dump_json())
    assert again == multi and again.summary_score == 0.89
    assert MultiEvaluationResult(target_event_id="t", evaluations=multi.evaluations).summary_score is not None


def test_quality_dimensions_and_relevance_sub_scores_survive_a_round_trip() -> None:
    quality = evaluation_record({
        "target_event_id": "t",
        "evaluator_name": "quality",
        "score": 0.876,
        "dimensions": {"relevance": 0.85, "coherence": 0.92, "clarity": 0.78},
    })  # fmt: skip
    assert isinstance(quality, QualityEvaluation) and quality.dimensions["coherence"] == 0.92
    relevance = evaluation_record({
        "target_event_id": "t",
        "evaluator_name": "relevance",
        "score": 0.88,
        "query_intent_match": 0.92,
        "topic_alignment": 0.85,
        "information_completeness": 0.87,
    })  # fmt: skip
    assert isinstance(relevance, RelevanceEvaluation)
    subs = (relevance.query_intent_match, relevance.topic_alignment, relevance.information_completeness)
    assert subs == (0.92, 0.85, 0.87)
    batch = EvaluationBatch.model_validate_json(EvaluationBatch(evaluations=[quality, relevance]).model_dump_json())
    assert batch.evaluations == [quality, relevance]  # typed fields are written, not cut to the base model
    with pytest.raises(ValidationError, match="topic_alignment"):
        RelevanceEvaluation(target_event_id="t", evaluator_name="relevance", topic_alignment=1.5)


def test_unknown_fields_are_kept_in_metadata_not_dropped() -> None:
    custom = {
        "evaluation_id": "eval_med_001",
        "target_event_id": "t",
        "evaluator_name": "medical_accuracy",
        "score": 0.85,
        "medical_fields": {"diagnosis_accuracy": 0.9, "disclaimer_present": True},
        "risk_level": "low",
        "metadata": {"evaluator_model": "m", "risk_level": "given in metadata wins"},
    }
    loaded = Evaluation.model_validate(custom)
    assert loaded.metadata == {
        "evaluator_model": "m",
        "risk_level": "given in metadata wins",
        "medical_fields": {"diagnosis_accuracy": 0.9, "disclaimer_present": True},
    }
    again = Evaluation.model_validate_json(loaded.model_dump_json())
    assert again == loaded
    typed = evaluation_record({"target_event_id": "t", "evaluator_name": "quality", "style": "terse"})
    assert typed.metadata == {"style": "terse"}


def test_factual_accuracy_reports_hallucination_and_citation_accuracy() -> None:
    result = EvaluationResult(
        evaluator="facts",
        evaluator_type="factual_accuracy",
        passed=False,
        score=0.5,
        detail={
            "factual_claims": [
                {"claim": "Paris is the capital of France", "verified": True, "sources": ["a"]},
                {"claim": "Its population is 12 million", "verified": False, "sources": ["b"]},
                {"claim": "It is in Europe", "verified": True},
            ]
        },
    )
    record = result.to_evaluation("span-1")
    assert isinstance(record, FactualAccuracyEvaluation)
    assert record.hallucination_detected is True
    assert record.citation_accuracy == 0.5  # of the two claims citing a source, one was refuted
    assert len(record.factual_claims) == 3
    clean = result.model_copy(update={"detail": {"factual_claims": [{"claim": "x", "verified": True}]}})
    checked = clean.to_evaluation("span-1")
    assert isinstance(checked, FactualAccuracyEvaluation)
    assert (checked.hallucination_detected, checked.citation_accuracy) == (False, None)  # nothing cited
    given = result.model_copy(update={"detail": {"citation_accuracy": 0.8, "hallucination_detected": False}})
    stated = given.to_evaluation("s")
    assert isinstance(stated, FactualAccuracyEvaluation)
    assert (stated.citation_accuracy, stated.hallucination_detected) == (0.8, False)
    spec_example = FactualAccuracyEvaluation.model_validate_json(
        json.dumps({
            "target_event_id": "t",
            "evaluator_name": "factual_accuracy",
            "score": 0.75,
            "factual_claims": [{"claim": "Paris is the capital of France", "verified": True, "confidence": 0.99}],
            "citation_accuracy": 0.8,
            "hallucination_detected": False,
        })
    )  # fmt: skip
    assert (spec_example.citation_accuracy, spec_example.hallucination_detected) == (0.8, False)


def test_a_rubric_result_becomes_a_quality_record_with_its_dimension_scores() -> None:
    result = EvaluationResult(
        evaluator="agent_rubric",
        passed=True,
        score=0.8,
        detail={
            "dimensions": {
                "factual_accuracy": {"score": 0.9, "passed": True, "weight": 0.3},
                "completeness": {"score": 0.7, "passed": True, "weight": 0.25},
                "tool_efficiency": {"score": None, "status": "skipped"},  # not scored: left out
            }
        },
    )
    record = result.to_evaluation("trace-1")
    assert isinstance(record, QualityEvaluation)
    assert record.dimensions == {"factual_accuracy": 0.9, "completeness": 0.7}
