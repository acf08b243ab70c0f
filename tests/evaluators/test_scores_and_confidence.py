"""Scores as the specifications say (issue 29): llm_judge on its scale, confidence, looping per metric.

- ``llm_judge`` on a 0-5 scale: the result's ``score`` is on the scale (data-model.md's run result shows
  ``score: 4``), as a ScoreConfig with that range expects; the normalised score is kept beside it in ``detail``.
- ``confidence`` is filled where the evaluator has one: a judge that reports it, factual accuracy from its claims.
- Looping detection applies its 0.75 threshold to each metric; a tiny answer's compression ratio stays in [0, 1].
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaltrace.evaluators import (
    AgentRubric,
    FactCheck,
    FactualAccuracy,
    Judge,
    LLMJudge,
    LoopingDetection,
    run_insights,
)
from evaltrace.schema import Rubric, RubricDimension, ScoreConfig

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def reply(payload: Any) -> str:
    return json.dumps(payload)


def judged_trace() -> Any:
    return build_trace("It opened in 1889.", question="When did the Eiffel Tower open?")


# --- llm_judge on a 0-5 scale ----------------------------------------------------------------------------------


async def test_llm_judge_score_is_on_its_scale_with_the_normalised_score_beside_it(
    fake_openai: FakeOpenAI, judge: Judge
) -> None:
    fake_openai.script(reply({"score": 4, "reason": "names the year"}))
    result = await LLMJudge("Names the opening year", judge=judge, scale=(0, 5)).evaluate(judged_trace())
    assert result.score == 4 and result.passed
    assert result.detail["normalized_score"] == pytest.approx(0.8)
    # The default threshold (0.7 of the scale) is given on the scale too, so averages compare in one unit.
    assert result.detail["threshold"] == pytest.approx(3.5) and result.detail["normalized_threshold"] == 0.7
    # A ScoreConfig with the scale's range takes the score as it is.
    config = ScoreConfig(name="llm_judge", data_type="NUMERIC", min_value=0, max_value=5)
    score = result.to_score(trace_id=TRACE_ID, config=config)
    assert score.value == 4 and score.data_type == "NUMERIC"


async def test_llm_judge_run_averages_compare_with_the_threshold_on_the_scale(
    fake_openai: FakeOpenAI, judge: Judge
) -> None:
    fake_openai.script(reply({"score": 4}), reply({"score": 5}), reply({"score": 1}), reply({"score": 3}))
    evaluator = LLMJudge("Names the opening year", judge=judge, scale=(0, 5))
    results = []
    for index in range(4):
        result = await evaluator.evaluate(build_trace(f"answer {index}", question="q"))
        results.append(result.model_copy(update={"case_id": f"c{index}"}))
    assert [r.score for r in results] == [4, 5, 1, 3] and [r.passed for r in results] == [True, True, False, False]
    (problem,) = run_insights(results).problems  # average 3.25 of 5 is below 3.5
    assert "average 3.25" in problem and "threshold 3.5" in problem
    assert run_insights(results[:2]).problems == []


def test_llm_judge_threshold_written_on_the_scale_is_refused_with_the_share() -> None:
    judge = Judge("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(ValueError, match=r"share of the scale.*for 4 on \(0, 5\) give 0\.8"):
        LLMJudge("x", judge=judge, scale=(0, 5), threshold=4)
    assert LLMJudge("x", judge=judge, scale=(0, 5), threshold=0.8).threshold == pytest.approx(4.0)


# --- confidence ------------------------------------------------------------------------------------------------


async def test_a_judge_that_reports_confidence_fills_it(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(
        reply({"score": 0.9, "reason": "fine", "confidence": 0.85}),
        reply({"answer": "1889", "evaluation_score": 1.0, "evaluation_summary": "true", "confidence": "0.6"}),
    )
    judged = await LLMJudge("Names the year", judge=judge).evaluate(judged_trace())
    assert judged.confidence == pytest.approx(0.85)
    checked = await FactCheck(judge).evaluate(judged_trace())
    assert checked.confidence == pytest.approx(0.6)
    # The Evaluation record carries it (data-model part B).
    assert judged.to_evaluation(TRACE_ID).confidence == pytest.approx(0.85)


@pytest.mark.parametrize("reported", [None, "very", 7, True])
async def test_no_or_a_malformed_confidence_leaves_it_empty_and_the_verdict_stands(
    fake_openai: FakeOpenAI, judge: Judge, reported: Any
) -> None:
    payload: dict[str, Any] = {"score": 1.0, "reason": "fine"}
    if reported is not None:
        payload["confidence"] = reported
    fake_openai.script(reply(payload))
    result = await LLMJudge("Names the year", judge=judge).evaluate(judged_trace())
    assert result.status == "completed" and result.passed and result.confidence is None
    assert result.detail["judge"]["attempts"] == 1  # an odd confidence is no reason to ask again


async def test_factual_accuracy_confidence_comes_from_its_claims(fake_openai: FakeOpenAI, judge: Judge) -> None:
    claims = [
        {"claim": "opened in 1889", "verified": True, "confidence": 0.9, "importance": 3},
        {"claim": "designed by Eiffel", "verified": True, "confidence": 0.5, "importance": 1},
        {"claim": "is 300 m tall", "verified": False, "confidence": "unsure"},  # no usable confidence
    ]
    fake_openai.script(reply({"level": "good", "reason": "mostly right", "claims": claims}))
    result = await FactualAccuracy(judge).evaluate(judged_trace(), build_case(facts={"opened": 1889}))
    # Importance-weighted mean of the stated confidences: (0.9 * 3 + 0.5 * 1) / 4.
    assert result.confidence == pytest.approx(0.8)


async def test_factual_accuracy_without_claim_confidences_has_none(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"level": "good", "reason": "ok", "claims": [{"claim": "x", "verified": True}]}))
    result = await FactualAccuracy(judge).evaluate(judged_trace(), build_case(facts={"opened": 1889}))
    assert result.status == "completed" and result.confidence is None


# --- looping detection -----------------------------------------------------------------------------------------

# One sentence (unique ratio 1.0) whose longest repeat covers 0.67 of it: within the catalogue's 0.75.
REPEATING = "the cat sat on the mat and the cat sat on the mat and the cat sat on the mat and the dog ran"
# One sentence whose repeat covers 0.82 of it: past 0.75, though every sentence is unique.
LOOPING = "The delivery will arrive on Monday morning, and the delivery will arrive on Monday morning for sure."


def test_looping_applies_the_threshold_to_each_metric() -> None:
    repeating = LoopingDetection().evaluate(build_trace(REPEATING))
    metrics = repeating.detail["metrics"]
    assert repeating.passed and metrics["repeated_substring_ratio"]["value"] == pytest.approx(0.674, abs=1e-3)
    assert {name: (m["threshold"], m["direction"]) for name, m in metrics.items()} == {
        "unique_sentence_ratio": (0.75, "higher"),
        "repeated_substring_ratio": (0.75, "lower"),
        "compression_ratio": (0.2, "higher"),
    }
    looping = LoopingDetection().evaluate(build_trace(LOOPING))
    assert not looping.passed and looping.detail["metrics"]["repeated_substring_ratio"]["passed"] is False
    assert looping.detail["metrics"]["unique_sentence_ratio"]["passed"] is True
    assert "repeated_substring_ratio past the threshold" in looping.reason
    # The score is the catalogue's primary metric.
    assert looping.score == looping.detail["unique_sentence_ratio"] == 1.0
    # A custom threshold moves both bars.
    assert LoopingDetection(threshold=0.85).evaluate(build_trace(LOOPING)).passed


@pytest.mark.parametrize("answer", ["ok", "a", "Yes.", "é!"])
def test_a_tiny_answer_gets_a_compression_ratio_within_0_and_1(answer: str) -> None:
    result = LoopingDetection().evaluate(build_trace(answer))
    assert 0.0 <= result.detail["compression_ratio"] <= 1.0
    assert result.detail["metrics"]["compression_ratio"]["passed"] is None  # too short to judge by it
    assert result.passed


async def test_an_llm_judge_on_a_scale_is_a_rubric_dimension_by_its_normalised_score(
    fake_openai: FakeOpenAI, judge: Judge
) -> None:
    fake_openai.script(reply({"score": 4, "reason": "good"}))
    rubric = Rubric(name="helpful", dimensions=[RubricDimension(name="helpful", weight=1.0)], threshold=0.7)
    dimension = LLMJudge("Helpful", judge=judge, scale=(0, 5))
    result = await AgentRubric(rubric=rubric, evaluators={"helpful": dimension}).evaluate(judged_trace())
    assert result.status == "completed" and result.score == pytest.approx(0.8) and result.passed
    assert result.detail["dimensions"]["helpful"]["score"] == 4  # the dimension's own result, on its scale
