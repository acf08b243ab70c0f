"""`field`: judges and text evaluators read output.final_answer, output.thinking or output.structured.<path>."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

from evaltrace.evaluators import (
    BYOP,
    AnswerCorrectness,
    AnswerRelevancy,
    ContainsText,
    Faithfulness,
    Judge,
    LLMJudge,
    NotContains,
    Regex,
    SemanticSimilarity,
    Toxicity,
)
from evaltrace.schema import Trace, TraceOutput

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

ANSWER = "Final answer text about Lyon."
THINKING = "Reasoning text weighing Marseille."
NESTED = "Structured verdict text naming Nice."


def full_trace(**output: Any) -> Trace:
    trace = build_trace(ANSWER, question="Which city?", contexts=["Lyon is in France."], thinking=THINKING)
    fields = {"final_answer": ANSWER, "thinking": THINKING, "structured": {"verdict": {"summary": NESTED}}, **output}
    return trace.model_copy(update={"output": TraceOutput(**fields)})


TOXICITY_REPLY = {
    "categories": dict.fromkeys(
        ["hate_speech", "harassment", "violence", "sexual_content", "profanity", "identity_attack"], 0.0
    )
}

# evaluator factory, scripted judge reply
JUDGES: dict[str, tuple[Callable[[Judge, str], Any], Any]] = {
    "llm_judge": (lambda j, f: LLMJudge(rubric="Names a city", judge=j, field=f), {"score": 1, "reason": "ok"}),
    "byop": (lambda j, f: BYOP("Judge this: {actual_answer}", judge=j, field=f), "true"),
    "toxicity": (lambda j, f: Toxicity(j, field=f), TOXICITY_REPLY),
    "answer_correctness": (
        lambda j, f: AnswerCorrectness(j, weights=(1.0, 0.0), expected="Lyon", field=f),
        {"TP": [{"statement": "Lyon"}], "FP": [], "FN": []},
    ),
    "faithfulness": (
        lambda j, f: Faithfulness(j, field=f),
        {"claims": [{"claim": "x", "supported": True}]},
    ),
}


def _content(reply: Any) -> str:
    return reply if isinstance(reply, str) else json.dumps(reply)


@pytest.mark.parametrize("name", sorted(JUDGES))
@pytest.mark.parametrize(
    ("field", "shown", "hidden"),
    [
        ("output.final_answer", ANSWER, THINKING),
        ("output.thinking", THINKING, ANSWER),
        ("output.structured.verdict.summary", NESTED, ANSWER),
    ],
)
async def test_judges_judge_the_given_field(
    fake_openai: FakeOpenAI, judge: Judge, name: str, field: str, shown: str, hidden: str
) -> None:
    make, reply = JUDGES[name]
    fake_openai.script(_content(reply))
    result = await make(judge, field).evaluate(full_trace(), build_case(facts={"expected_answer": "Lyon"}))
    assert result.status == "completed", result.reason
    prompt = "\n".join(m["content"] for m in fake_openai.chat_requests[0]["messages"])
    assert shown in prompt and hidden not in prompt


@pytest.mark.parametrize("name", sorted(JUDGES))
async def test_a_missing_field_skips_without_calling_the_judge(
    fake_openai: FakeOpenAI, judge: Judge, name: str
) -> None:
    make, _ = JUDGES[name]
    result = await make(judge, "output.thinking").evaluate(full_trace(thinking=None), build_case())
    assert result.status == "skipped" and result.passed is False and result.score is None
    assert result.reason == "skipped: trace has no output.thinking"
    assert fake_openai.chat_requests == []


async def test_embedding_evaluators_compare_the_given_field(fake_openai: FakeOpenAI, embedder: Any) -> None:
    evaluator = SemanticSimilarity(embedder, expected="Marseille", field="output.thinking")
    result = await evaluator.evaluate(full_trace())
    assert result.status == "completed"
    assert fake_openai.embedding_requests[0]["input"] == [THINKING, "Marseille"]
    skipped = await evaluator.evaluate(full_trace(thinking=None))
    assert skipped.status == "skipped"


def test_contains_text_on_each_field() -> None:
    trace = full_trace()
    assert ContainsText("Lyon").evaluate(trace).passed
    assert not ContainsText("Marseille").evaluate(trace).passed  # the reasoning is not the answer
    assert ContainsText("Marseille", field="output.thinking").evaluate(trace).passed
    assert ContainsText("Nice", field="output.structured.verdict.summary").evaluate(trace).passed
    assert NotContains("Marseille").evaluate(trace).passed
    missing = ContainsText("Nice", field="output.structured.verdict.missing").evaluate(trace)
    assert missing.status == "skipped" and "output.structured.verdict.missing" in missing.reason
    no_thinking = NotContains("x", field="output.thinking").evaluate(full_trace(thinking=None))
    assert no_thinking.status == "skipped" and not no_thinking.passed


@pytest.mark.parametrize("field", ["output.answer", "outptu.final_answer", "output", ""])
def test_a_field_that_cannot_exist_is_refused_at_construction(field: str) -> None:
    for make in (
        lambda: ContainsText("x", field=field),
        lambda: Regex("x", field=field),
        lambda: LLMJudge(rubric="x", judge=Judge("m", api_key="k"), field=field),
        lambda: Toxicity(Judge("m", api_key="k"), field=field),
    ):
        with pytest.raises(ValueError, match="field"):
            make()


def test_judges_that_read_the_answer_declare_field() -> None:
    # eval.yaml passes `field` to constructors that declare it: every answer-reading judge must.
    for cls in (LLMJudge, BYOP, Toxicity, AnswerCorrectness, AnswerRelevancy, Faithfulness, SemanticSimilarity):
        assert "field" in inspect.signature(cls).parameters, cls.__name__
