"""Each judge- and embedding-based evaluator: the inputs its prompt carries and the score computed from replies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaltrace.evaluators import (
    BYOP,
    AnswerRelevancy,
    AnswerRelevancySentences,
    CitationAccuracy,
    Completeness,
    ContextMRR,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    FactCheck,
    FactualAccuracy,
    FairnessBias,
    Groundedness,
    Hallucination,
    Judge,
    LanguageMismatch,
    LLMJudge,
    SemanticSimilarity,
    SemanticSimilaritySentences,
    Sexism,
    SourceQuality,
    Stereotypes,
    Summarization,
    Toxicity,
)
from evaltrace.evaluators.embeddings import cosine

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI, letter_vector

Q = "Who designed the Eiffel Tower?"
A = "Gustave Eiffel's company designed it. It opened in 1889."
EA = "The tower was designed by engineers of Gustave Eiffel's company."
CTX = ["The Eiffel Tower opened in 1889.", "Bananas are yellow.", "Eiffel's company designed the tower."]


def trace(**kwargs: Any) -> Any:
    return build_trace(kwargs.pop("answer", A), question=Q, contexts=CTX, **kwargs)


def case() -> Any:
    return build_case(facts={"expected_answer": EA, "opened": 1889})


def reply(payload: Any) -> str:
    return json.dumps(payload)


RELEVANCE = reply(
    {"verdicts": [{"index": 1, "relevant": False}, {"index": 2, "relevant": True}, {"index": 3, "relevant": True}]}
)


@pytest.mark.parametrize(
    ("evaluator_cls", "score", "reason"),
    [
        (ContextPrecision, (1 / 2 + 2 / 3) / 2, "average precision"),
        (ContextRelevancy, 2 / 3, "2/3 chunks relevant"),
        (ContextMRR, 1 / 2, "rank 2"),
    ],
)
async def test_context_metrics(
    fake_openai: FakeOpenAI, judge: Judge, evaluator_cls: Any, score: float, reason: str
) -> None:
    fake_openai.script(RELEVANCE)
    result = await evaluator_cls(judge).evaluate(trace(), case())
    assert result.score == pytest.approx(score) and reason in result.reason
    prompt = fake_openai.prompts()[0]
    assert (
        Q in prompt and EA in prompt and "[1] The Eiffel Tower opened in 1889." in prompt and "[3] Eiffel's" in prompt
    )
    assert result.detail["relevant_ranks"] == [2, 3]


async def test_context_metrics_share_one_judgement(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(RELEVANCE)
    for cls in (ContextPrecision, ContextRelevancy, ContextMRR):
        assert (await cls(judge).evaluate(trace(), case())).status == "completed"
    assert len(fake_openai.chat_requests) == 1


async def test_context_precision_short_verdict_list_counts_missing_as_irrelevant(
    fake_openai: FakeOpenAI, judge: Judge
) -> None:
    fake_openai.script(reply({"verdicts": [{"relevant": True}]}))
    result = await ContextRelevancy(judge).evaluate(trace(), case())
    assert result.score == pytest.approx(1 / 3) and result.detail["relevant"] == [True, False, False]


async def test_context_recall(fake_openai: FakeOpenAI, judge: Judge) -> None:
    statements = [
        {"statement": "designed by Eiffel's company", "attributed": True},
        {"statement": "engineers", "attributed": "no"},
    ]
    fake_openai.script(reply({"statements": statements}))
    result = await ContextRecall(judge).evaluate(trace(), case())
    assert result.score == 0.5 and not result.passed and EA in fake_openai.prompts()[0]


async def test_hallucination(fake_openai: FakeOpenAI, judge: Judge) -> None:
    facts = [
        {"fact": "designed by Eiffel's company", "status": "supported"},
        {"fact": "opened 1889", "status": "Supported"},
        {"fact": "it is blue", "status": "contradicted"},
        {"fact": "it has 3 floors", "status": "unsupported"},
    ]
    fake_openai.script(reply({"facts": facts}))
    result = await Hallucination(judge).evaluate(trace())
    assert result.score == 0.5 and result.detail["hallucination_rate"] == 0.5
    assert [f["fact"] for f in result.detail["hallucinated"]] == ["it is blue", "it has 3 floors"]


async def test_fact_check(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(
        reply({"answer": "Gustave Eiffel's company", "evaluation_score": 0.9, "evaluation_summary": "ok"})
    )
    result = await FactCheck(judge).evaluate(trace())
    assert result.score == 0.9 and result.passed and result.detail["judge_answer"] == "Gustave Eiffel's company"
    assert Q in fake_openai.prompts()[0] and A in fake_openai.prompts()[0]


@pytest.mark.parametrize(
    ("cls", "dimension", "level", "score", "passed"),
    [
        (Completeness, "completeness", "good", 0.8, True),
        (CitationAccuracy, "citation_accuracy", "Acceptable", 0.6, True),
        (SourceQuality, "source_quality", "poor", 0.3, False),
    ],
)
async def test_rubric_levels(
    fake_openai: FakeOpenAI, judge: Judge, cls: Any, dimension: str, level: str, score: float, passed: bool
) -> None:
    fake_openai.script(reply({"level": level, "reason": "because"}))
    result = await cls(judge).evaluate(trace(), case())
    assert (result.score, result.passed, result.detail["level"]) == (score, passed, level.lower())
    prompt = fake_openai.prompts()[0]
    assert f"Dimension: {dimension}" in prompt and "claims" not in prompt.split("Reply with JSON")[1]


async def test_factual_accuracy_claims(fake_openai: FakeOpenAI, judge: Judge) -> None:
    claims = [
        {"claim": "designed by Eiffel's company", "verified": True, "importance": 3},
        {"claim": "opened 1890", "verified": False, "importance": 1, "correct_value": "1889"},
    ]
    fake_openai.script(reply({"level": "good", "reason": "one wrong date", "claims": claims}))
    result = await FactualAccuracy(judge).evaluate(trace(), case())
    # The score is the importance-weighted mean of the verified claims (metrics reference); the level is kept.
    assert result.score == pytest.approx(0.75) and result.detail["claims_score"] == pytest.approx(0.75)
    assert result.detail["level_score"] == 0.8 and result.passed
    assert result.detail["factual_claims"][1]["correct_value"] == "1889"
    prompt = fake_openai.prompts()[0]
    assert "- opened: 1889" in prompt and '"claims"' in prompt


async def test_rubric_unknown_level_is_retried(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"level": "superb"}), reply({"level": "excellent"}))
    result = await Completeness(judge).evaluate(trace())
    assert result.score == 1.0 and result.detail["judge"]["attempts"] == 2


@pytest.mark.parametrize(
    ("scale", "raw", "score"),
    [((0.0, 1.0), 0.8, 0.8), ((1.0, 5.0), 4, 0.75), ((1.0, 5.0), 1, 0.0), ((1.0, 10.0), "10", 1.0)],
)
async def test_llm_judge_scales(fake_openai: FakeOpenAI, judge: Judge, scale: Any, raw: Any, score: float) -> None:
    fake_openai.script(reply({"score": raw, "reason": "fine"}))
    result = await LLMJudge(rubric="Mentions the year it opened", judge=judge, scale=scale).evaluate(trace(), case())
    # The score stays on the judge's scale (data-model.md: `score: 4`); the normalised one is kept beside it.
    assert result.score == pytest.approx(float(raw)) and result.detail["normalized_score"] == pytest.approx(score)
    assert result.passed is (score >= 0.7)
    prompt = fake_openai.prompts()[0]
    assert "Mentions the year it opened" in prompt and f"from {scale[0]:g} (worst) to {scale[1]:g}" in prompt
    assert Q in prompt and EA in prompt and A in prompt and "[2] Bananas" in prompt


async def test_llm_judge_out_of_scale_retries_and_presets(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"score": 7}), reply({"score": 5}))
    evaluator = LLMJudge(rubric="helpfulness", judge=judge, scale=(1, 5))
    result = await evaluator.evaluate(trace())
    assert result.score == 5.0 and result.detail["normalized_score"] == 1.0
    assert evaluator.name == "llm_judge_helpfulness"
    assert "Helpfulness:" in fake_openai.prompts()[0]
    with pytest.raises(ValueError):
        LLMJudge(rubric="x", judge=judge, scale=(5, 1))


@pytest.mark.parametrize(
    ("text", "passed"), [("True.", True), ("false - it does not", False), ('{"result": true}', True)]
)
async def test_byop(fake_openai: FakeOpenAI, judge: Judge, text: str, passed: bool) -> None:
    fake_openai.script(text)
    evaluator = BYOP("Q: {question}\nA: {actual_answer}\nRef: {expected_answer}\nIs A right? {unknown}", judge=judge)
    result = await evaluator.evaluate(trace(), case())
    assert result.passed is passed
    assert fake_openai.prompts()[0] == f"Q: {Q}\nA: {A}\nRef: {EA}\nIs A right? {{unknown}}"
    assert "response_format" not in fake_openai.chat_requests[0]
    assert evaluator.version.startswith("v1.0.0+byop.v")


async def test_byop_without_boolean_fails(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script("maybe", "perhaps")
    result = await BYOP("{actual_answer}", judge=judge).evaluate(trace())
    assert result.status == "failed" and result.detail["raw_replies"] == ["maybe", "perhaps"]


@pytest.mark.parametrize(("q", "a", "passed"), [("en", "en-US", True), ("en", "fr", False)])
async def test_language_mismatch(fake_openai: FakeOpenAI, judge: Judge, q: str, a: str, passed: bool) -> None:
    fake_openai.script(reply({"question_language": q, "answer_language": a}))
    result = await LanguageMismatch(judge).evaluate(trace())
    assert result.passed is passed and result.detail["answer_language"] == a[:2]


async def test_toxicity(fake_openai: FakeOpenAI, judge: Judge) -> None:
    categories = {
        "hate_speech": 0.1,
        "harassment": 0.4,
        "violence": 0.0,
        "sexual_content": 0.0,
        "profanity": 0.2,
        "identity_attack": 0.0,
    }
    fake_openai.script(reply({"categories": categories, "content_warnings": ["harassment"]}))
    result = await Toxicity(judge).evaluate(trace())
    assert result.score == 0.4 and not result.passed and result.detail["direction"] == "lower"
    assert result.detail["toxicity_categories"] == categories and "harassment" in result.reason


async def test_toxicity_missing_category_is_retried(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"categories": {"hate_speech": 0.0}}), reply({"categories": {"hate_speech": 0.0}}))
    result = await Toxicity(judge).evaluate(trace())
    assert result.status == "failed"


@pytest.mark.parametrize(
    ("cls", "criterion"), [(FairnessBias, "protected attribute"), (Sexism, "Sexism"), (Stereotypes, "Stereotypes")]
)
async def test_bias(fake_openai: FakeOpenAI, judge: Judge, cls: Any, criterion: str) -> None:
    fake_openai.script(reply({"score": 0.1, "instances": []}))
    result = await cls(judge).evaluate(trace())
    assert result.score == 0.1 and result.passed and criterion in fake_openai.prompts()[0]


async def test_summarization(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"coverage": 0.6, "faithfulness": 1.0, "reason": "misses the date"}))
    result = await Summarization(judge).evaluate(trace(), case())
    assert result.score == pytest.approx(0.8) and result.passed
    assert result.detail == {**result.detail, "coverage": 0.6, "faithfulness": 1.0}


async def test_answer_relevancy(fake_openai: FakeOpenAI, judge: Judge, embedder: Any) -> None:
    questions = ["Who designed the Eiffel Tower?", "When did it open?"]
    fake_openai.script(reply({"questions": questions, "noncommittal": False}))
    result = await AnswerRelevancy(judge, embedder=embedder, n=2).evaluate(trace())
    expected = [cosine(letter_vector(Q), letter_vector(q)) for q in questions]
    assert result.score == pytest.approx(sum(expected) / 2)
    assert result.detail["similarities"] == pytest.approx(expected)
    prompt = fake_openai.prompts()[0]
    assert "Write 2 different questions" in prompt and A in prompt and Q not in prompt


async def test_answer_relevancy_noncommittal(fake_openai: FakeOpenAI, judge: Judge, embedder: Any) -> None:
    fake_openai.script(reply({"questions": ["What?"], "noncommittal": True}))
    result = await AnswerRelevancy(judge, embedder=embedder).evaluate(trace())
    assert result.score == 0.0 and not result.passed


async def test_embedding_evaluators_with_openai_embedder(fake_openai: FakeOpenAI, embedder: Any) -> None:
    result = await SemanticSimilarity(embedder).evaluate(trace(), case())
    assert result.score == pytest.approx(cosine(letter_vector(A), letter_vector(EA)))
    assert result.evaluator_type == "embedding" and result.detail["threshold"] == 0.75
    again = await SemanticSimilarity(embedder).evaluate(trace(), case())
    assert again.score == result.score and len(fake_openai.embedding_requests) == 1  # vectors cached
    assert fake_openai.embedding_requests[0]["encoding_format"] == "float"


async def test_cosine_of_equal_vectors_is_exactly_one(fake_openai: FakeOpenAI, embedder: Any) -> None:
    # Found against a real server: unclamped, these vectors' cosine is 1.0000000000000002, a score above 1.
    fake_openai.embed = lambda text: [0.1, 0.7]
    result = await SemanticSimilarity(embedder).evaluate(trace(), case())
    assert result.status == "completed" and result.score == 1.0
    assert cosine([0.1, 0.7], [-0.1, -0.7]) == -1.0


def test_embedders_may_be_plain_callables() -> None:
    import asyncio

    sentences = ["Gustave Eiffel's company designed it.", "It opened in 1889."]
    ea_sentences = [EA]
    result = asyncio.run(
        SemanticSimilaritySentences(lambda texts: [letter_vector(t) for t in texts]).evaluate(trace(), case())
    )
    best = [cosine(letter_vector(s), letter_vector(ea_sentences[0])) for s in sentences]
    assert result.score == pytest.approx(sum(best) / 2) and result.detail["min"] == pytest.approx(min(best))
    assert result.evaluator == "semantic_similarity_sentences"


async def test_groundedness_and_sentence_relevancy() -> None:
    def vectors(texts: list[str]) -> list[list[float]]:
        return [letter_vector(t) for t in texts]

    sentences = ["Gustave Eiffel's company designed it.", "It opened in 1889."]
    grounded = await Groundedness(vectors).evaluate(trace())
    best = [max(cosine(letter_vector(s), letter_vector(c)) for c in CTX) for s in sentences]
    assert grounded.score == pytest.approx(min(best)) and grounded.detail["per_sentence"] == pytest.approx(best)
    relevancy = await AnswerRelevancySentences(vectors).evaluate(trace())
    assert relevancy.score == pytest.approx(max(cosine(letter_vector(Q), letter_vector(s)) for s in sentences))


async def test_embedder_failure_is_a_failed_result() -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")

    result = await SemanticSimilarity(broken).evaluate(trace(), case())
    assert result.status == "failed" and "embedding service down" in result.reason
    wrong_count = await SemanticSimilarity(lambda texts: [[1.0]]).evaluate(trace(), case())
    assert wrong_count.status == "failed"
    assert (await SemanticSimilarity(broken).evaluate(trace(), None)).status == "skipped"


async def test_concurrent_identical_judgements_make_one_call(fake_openai: FakeOpenAI, judge: Judge) -> None:
    import asyncio

    fake_openai.delay_s = 0.02
    fake_openai.script(RELEVANCE)
    results = await asyncio.gather(
        *(cls(judge).evaluate(trace(), case()) for cls in (ContextPrecision, ContextRelevancy, ContextMRR))
    )
    assert [r.score for r in results] == pytest.approx([(1 / 2 + 2 / 3) / 2, 2 / 3, 1 / 2])
    assert len(fake_openai.chat_requests) == 1
    assert sorted(r.detail["judge"]["cached"] for r in results) == [False, True, True]


async def test_cached_values_are_not_shared_objects(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.script(reply({"claims": [{"claim": "x", "supported": True}]}))
    from evaltrace.evaluators import Faithfulness

    first = await Faithfulness(judge).evaluate(trace())
    first.detail["claims"][0]["supported"] = False
    second = await Faithfulness(judge).evaluate(trace())
    assert second.detail["claims"][0]["supported"] is True and second.score == 1.0


async def test_embedding_model_is_recorded(fake_openai: FakeOpenAI, judge: Judge, embedder: Any) -> None:
    fake_openai.script(reply({"TP": [], "FP": [], "FN": []}))
    from evaltrace.evaluators import AnswerCorrectness

    correctness = await AnswerCorrectness(judge, embedder=embedder).evaluate(trace(), case())
    assert correctness.detail["embedding_model"] == "embed-model" and correctness.detail["f1"] == 0.0
    similarity = await SemanticSimilarity(lambda texts: [letter_vector(t) for t in texts]).evaluate(trace(), case())
    assert similarity.detail["embedding_model"] == "function"
