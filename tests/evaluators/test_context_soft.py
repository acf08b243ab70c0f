"""Context relevancy soft recall and soft precision: question and context sentences matched by best cosine."""

from __future__ import annotations

import pytest

from evaltrace.evaluators import (
    CATALOGUE,
    ContextRelevancySoftPrecision,
    ContextRelevancySoftRecall,
    create_evaluator,
)
from evaltrace.evaluators.embeddings import cosine

from .factories import build_trace
from .fake_openai import letter_vector

Q = "Who designed the Eiffel Tower? When did it open?"
ASKED = ["Who designed the Eiffel Tower?", "When did it open?"]
CTX = ["The Eiffel Tower opened in 1889. Bananas are yellow.", "Eiffel's company designed the tower."]
SENTENCES = ["The Eiffel Tower opened in 1889.", "Bananas are yellow.", "Eiffel's company designed the tower."]


def vectors(texts: list[str]) -> list[list[float]]:
    return [letter_vector(t) for t in texts]


async def test_soft_recall_and_precision_follow_best_cosine_both_ways() -> None:
    trace = build_trace("It was Eiffel's company.", question=Q, contexts=CTX)
    recall = await ContextRelevancySoftRecall(vectors).evaluate(trace)
    precision = await ContextRelevancySoftPrecision(vectors).evaluate(trace)
    per_q = [max(cosine(letter_vector(q), letter_vector(c)) for c in SENTENCES) for q in ASKED]
    per_c = [max(cosine(letter_vector(q), letter_vector(c)) for q in ASKED) for c in SENTENCES]
    assert recall.score == pytest.approx(sum(per_q) / 2)
    assert precision.score == pytest.approx(sum(per_c) / 3)
    assert recall.detail["soft_precision"] == pytest.approx(precision.score)
    assert precision.detail["per_context_sentence"] == pytest.approx(per_c)
    assert recall.evaluator == "context_relevancy_soft_recall"
    assert precision.evaluator == "context_relevancy_soft_precision"
    assert recall.passed is (recall.score >= 0.75)


async def test_irrelevant_context_lowers_precision_not_recall() -> None:
    relevant = build_trace("x", question="Who designed the tower?", contexts=["Who designed the tower?"])
    padded = build_trace("x", question="Who designed the tower?", contexts=["Who designed the tower?", "zzz qqq xxx."])
    lean = await ContextRelevancySoftPrecision(vectors).evaluate(relevant)
    noisy = await ContextRelevancySoftPrecision(vectors).evaluate(padded)
    assert lean.score == pytest.approx(1.0) and noisy.score < lean.score
    recall = await ContextRelevancySoftRecall(vectors, threshold=0.9).evaluate(padded)
    assert recall.score == pytest.approx(1.0) and recall.passed


async def test_missing_inputs_are_not_evaluated_and_embedder_failure_is_an_error() -> None:
    no_context = await ContextRelevancySoftRecall(vectors).evaluate(build_trace("x", question=Q))
    assert no_context.status == "skipped"

    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")

    failed = await ContextRelevancySoftPrecision(broken).evaluate(build_trace("x", question=Q, contexts=CTX))
    assert failed.status == "failed" and failed.passed is not True and "embedding service down" in failed.reason


def test_catalogue_names_them_for_eval_yaml() -> None:
    assert CATALOGUE["context_relevancy_soft_recall"] is ContextRelevancySoftRecall
    built = create_evaluator("context_relevancy_soft_precision", vectors, threshold=0.5)
    assert isinstance(built, ContextRelevancySoftPrecision) and built.threshold == 0.5
