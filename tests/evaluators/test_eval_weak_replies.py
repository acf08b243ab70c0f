"""Replies of the kind a weak judge model gives (prose, refusals, wrong shapes, odd field values) never raise.

Each judge evaluator either reaches a verdict in [0, 1] or returns ``failed`` with the raw replies. The real-model
counterpart is tests/e2e_llm (scripts/e2e_llm.sh).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from evaltrace.evaluators import (
    BYOP,
    AgentRubric,
    AnswerCorrectness,
    AnswerRelevancy,
    CitationAccuracy,
    Completeness,
    ContextMRR,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    FactCheck,
    FactualAccuracy,
    FairnessBias,
    Faithfulness,
    Hallucination,
    Judge,
    LanguageMismatch,
    LLMJudge,
    SourceQuality,
    Summarization,
    Toxicity,
)
from evaltrace.evaluators.judge import extract_json

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

GARBAGE = [
    "",
    "I'm sorry, but I can't help with that request.",
    "null",
    "[]",
    '"true"',
    '{"score": "high", "level": "very good", "reason": null}',
    '{"score": NaN, "evaluation_score": Infinity, "coverage": -1, "faithfulness": 2}',
    '{"claims": "none", "facts": {}, "verdicts": [], "statements": [1, 2], "questions": []}',
    '{"claims": [{"claim": "x", "supported": "perhaps"}], "verdicts": [{"index": "first", "relevant": "maybe"}]}',
    '{"TP": [], "FP": [], "FN": [], "questions": [null], "categories": ["hate_speech"]}',
    '{"level": "good", "claims": [{"claim": "x", "verified": "no", "importance": "high"}, {"importance": null}]}',
    '{"facts": [{"fact": "x", "status": null}], "question_language": 7, "answer_language": "??"}',
    '{"result": "maybe", "score": [0.5], "level": ["good"]}',
    # Real SmolLM2-135M replies (scripts/e2e_llm.sh): a verdict without its flag, an object missing a key.
    '{"verdicts": [{"index": 2, "relevant": true}, {"reason": "..."}]}',
    '{"answer_language": "en", "reason": "..."}',
    "[" * 3000,  # a looping model nests deeper than json's recursion limit
    '{"a": ' * 3000,
]

Factory = Callable[[Judge, Any], Any]
FACTORIES: dict[str, Factory] = {
    "answer_correctness": lambda j, e: AnswerCorrectness(j, embedder=e),
    "answer_relevancy": lambda j, e: AnswerRelevancy(j, embedder=e),
    "faithfulness": lambda j, e: Faithfulness(j),
    "hallucination": lambda j, e: Hallucination(j),
    "context_precision": lambda j, e: ContextPrecision(j),
    "context_recall": lambda j, e: ContextRecall(j),
    "context_relevancy": lambda j, e: ContextRelevancy(j),
    "context_mrr": lambda j, e: ContextMRR(j),
    "fact_check": lambda j, e: FactCheck(j),
    "factual_accuracy": lambda j, e: FactualAccuracy(j),
    "completeness": lambda j, e: Completeness(j),
    "citation_accuracy": lambda j, e: CitationAccuracy(j),
    "source_quality": lambda j, e: SourceQuality(j),
    "llm_judge": lambda j, e: LLMJudge("helpfulness", judge=j, scale=(1, 5)),
    "byop": lambda j, e: BYOP("Is this right? {actual_answer}", judge=j),
    "language_mismatch": lambda j, e: LanguageMismatch(j),
    "toxicity": lambda j, e: Toxicity(j),
    "fairness_bias": lambda j, e: FairnessBias(j),
    "summarization": lambda j, e: Summarization(j),
    "agent_rubric": lambda j, e: AgentRubric(j),
}


def test_deep_nesting_is_not_json() -> None:
    with pytest.raises(ValueError, match="reply is not JSON"):
        extract_json("[" * 3000)


@pytest.mark.parametrize("factory", FACTORIES.values(), ids=FACTORIES.keys())
async def test_weak_replies_complete_or_fail_cleanly(
    fake_openai: FakeOpenAI, judge: Judge, embedder: Any, factory: Factory
) -> None:
    evaluator = factory(judge, embedder)
    case = build_case(facts={"expected_answer": "Engineers of Gustave Eiffel's company."})

    def garbage_for(body: dict[str, Any]) -> str:
        # Each trace carries its garbage's index, so all of them can be judged at once (distinct prompts).
        return GARBAGE[int(re.search(r"note (\d+)", json.dumps(body["messages"])).group(1))]  # type: ignore[union-attr]

    fake_openai.responder = garbage_for
    traces = [
        build_trace(
            f"Gustave Eiffel's company designed it (note {i}). It opened in 1889.",
            question=f"Who designed the Eiffel Tower (note {i})?",  # context prompts show no answer
            contexts=["The Eiffel Tower opened in 1889.", "Eiffel's company designed the tower."],
        )
        for i in range(len(GARBAGE))
    ]
    results = await asyncio.gather(*(evaluator.evaluate(trace, case) for trace in traces))
    for garbage, result in zip(GARBAGE, results, strict=True):
        assert result.status in ("completed", "failed"), (garbage[:60], result)
        if result.status == "completed":
            assert result.score is not None and 0.0 <= result.score <= 1.0, (garbage[:60], result.score)
        elif "judge" in result.detail and "raw_replies" in result.detail:
            assert result.error is not None and result.detail["raw_replies"] == [garbage, garbage]
        else:  # a composite reports its failed parts
            assert result.error is not None, (garbage[:60], result)


async def test_claims_with_word_importance_and_string_flags_are_scored(fake_openai: FakeOpenAI, judge: Judge) -> None:
    claims = [
        {"claim": "designed by Eiffel's company", "verified": "yes", "importance": "high"},
        {"claim": "opened 1890", "verified": "no", "importance": None},
        {"claim": "is in Paris", "verified": "unclear", "importance": -2},
    ]
    fake_openai.script(json.dumps({"level": "good", "reason": "-", "claims": claims}))
    trace = build_trace("It was Eiffel's company, in 1890, in Paris.", question="Who designed the Eiffel Tower?")
    result = await FactualAccuracy(judge).evaluate(trace)
    # Unusable weights count as 1; only the "yes" claim is verified ("no" used to count as verified: bool("no")).
    assert result.status == "completed" and result.detail["claims_score"] == pytest.approx(1 / 3)
