"""Evaluators that read the answer are "not evaluated" with skip reason ``no_answer`` when a trace has none (issue 24).

A trace has no final answer when its model call answered with tool calls only. Before, every such evaluator was
skipped with a free-text reason (or, worse, the mapping handed it an earlier turn's answer): the reason is now the
token ``no_answer``, on the span as ``evaltrace.eval.<name>.skip_reason`` and in run summaries.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.evaluators import (
    AnswerRelevancy,
    ContainsText,
    EncodingGuardrail,
    ExactMatch,
    Facts,
    JsonSchema,
    LLMJudge,
    LoopingDetection,
    NoPII,
    Regex,
)

from .factories import build_trace

NO_ANSWER = "no_answer"  # the skip reason (semconv.SKIP_NO_ANSWER)


def _deterministic() -> list[Any]:
    return [
        NoPII(),
        ContainsText("Seattle"),
        Regex(r"\d+ degrees"),
        ExactMatch("50 degrees"),
        Facts({"city": "Seattle"}),
        JsonSchema({"type": "object"}),
        EncodingGuardrail(),
        LoopingDetection(),
    ]


@pytest.mark.parametrize("evaluator", _deterministic(), ids=lambda e: type(e).__name__)
def test_deterministic_evaluators_skip_with_no_answer(evaluator: Any) -> None:
    result = evaluator.evaluate(build_trace(None, question="Weather in Seattle?"))
    assert (result.status, result.reason, result.passed, result.score) == ("skipped", NO_ANSWER, False, None)


async def test_judges_skip_with_no_answer_without_calling_the_judge(judge: Any, fake_openai: Any) -> None:
    for evaluator in (LLMJudge(rubric="Answers the question", judge=judge), AnswerRelevancy(judge=judge)):
        result = await evaluator.evaluate(build_trace(None, question="Weather in Seattle?"))
        assert (result.status, result.reason) == ("skipped", NO_ANSWER)
    assert fake_openai.chat_requests == []


def test_another_missing_field_keeps_its_own_reason() -> None:
    result = ContainsText("Seattle", field="output.thinking").evaluate(build_trace("50 degrees in Seattle."))
    assert result.status == "skipped" and result.reason == "skipped: trace has no output.thinking"
    scanned = NoPII(fields=("output.final_answer", "output.thinking")).evaluate(build_trace(None))
    assert scanned.status == "skipped" and scanned.reason != NO_ANSWER  # not only the answer was asked for
