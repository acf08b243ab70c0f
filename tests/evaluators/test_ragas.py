"""Ragas: the harmonic mean of our faithfulness, answer relevancy, context precision and context recall."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaltrace.evaluators import CATALOGUE, Judge, Ragas, create_evaluator
from evaltrace.evaluators.embeddings import cosine

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI, letter_vector

Q = "Who designed the Eiffel Tower?"
A = "Gustave Eiffel's company designed it."
EA = "Engineers of Gustave Eiffel's company designed the tower."
CTX = ["Bananas are yellow.", "Eiffel's company designed the tower."]

REPLIES = {
    '"claims"': {"claims": [{"claim": "Eiffel's company designed it", "supported": True}]},
    '"questions"': {"questions": ["Who designed the Eiffel Tower?", "Which company built it?"], "noncommittal": False},
    '"verdicts"': {"verdicts": [{"index": 1, "relevant": False}, {"index": 2, "relevant": True}]},
    '"statements"': {
        "statements": [
            {"statement": "designed by Eiffel's company", "attributed": True},
            {"statement": "by engineers", "attributed": False},
        ]
    },
}


def by_prompt(body: dict[str, Any]) -> str:
    """Answer each part's prompt with its own reply (the parts run concurrently, so order is not fixed)."""
    text = json.dumps(body["messages"])
    for marker, payload in REPLIES.items():
        if marker.replace('"', '\\"') in text:
            return json.dumps(payload)
    raise AssertionError(f"unexpected prompt: {text[:200]}")


def trace(**kwargs: Any) -> Any:
    return build_trace(A, question=Q, contexts=CTX, **kwargs)


def case() -> Any:
    return build_case(facts={"expected_answer": EA})


async def test_ragas_is_the_harmonic_mean_of_its_four_parts(
    fake_openai: FakeOpenAI, judge: Judge, embedder: Any
) -> None:
    fake_openai.responder = by_prompt
    result = await Ragas(judge, embedder=embedder).evaluate(trace(), case())
    relevancy = sum(cosine(letter_vector(Q), letter_vector(q)) for q in REPLIES['"questions"']["questions"]) / 2
    parts = {"faithfulness": 1.0, "answer_relevancy": relevancy, "context_precision": 0.5, "context_recall": 0.5}
    expected = 4 / sum(1 / v for v in parts.values())
    assert result.status == "completed" and result.evaluator == "ragas"
    assert result.score == pytest.approx(expected) and not result.passed
    assert {n: p["score"] for n, p in result.detail["parts"].items()} == pytest.approx(parts)
    assert result.detail["weakest"] in {"context_precision", "context_recall"}
    assert result.cost_usd is not None and result.cost_usd > 0
    lenient = await Ragas(judge, embedder=embedder, threshold=0.5).evaluate(trace(), case())
    assert lenient.passed and lenient.score == pytest.approx(expected)


async def test_ragas_without_expected_answer_is_not_evaluated(
    fake_openai: FakeOpenAI, judge: Judge, embedder: Any
) -> None:
    fake_openai.responder = by_prompt
    result = await Ragas(judge, embedder=embedder).evaluate(trace(), None)
    assert result.status == "skipped" and result.score is None and not result.passed
    assert "context_recall" in result.reason


async def test_a_part_whose_judge_fails_makes_ragas_an_error_not_a_low_score(
    fake_openai: FakeOpenAI, judge: Judge, embedder: Any
) -> None:
    def broken_recall(body: dict[str, Any]) -> Any:
        if '\\"statements\\"' in json.dumps(body["messages"]):
            return {"status": 500, "message": "judge down"}
        return by_prompt(body)

    fake_openai.responder = broken_recall
    result = await Ragas(judge, embedder=embedder).evaluate(trace(), case())
    assert result.status == "failed" and result.score is None and result.error is not None
    assert "context_recall" in result.reason


def test_catalogue_and_options() -> None:
    assert CATALOGUE["ragas"] is Ragas
    assert create_evaluator("ragas", threshold=0.6, embedder=lambda texts: [[1.0]] * len(texts)).threshold == 0.6
    with pytest.raises(ValueError, match="threshold"):
        Ragas(threshold=1.5, embedder=lambda texts: [[1.0]] * len(texts))
