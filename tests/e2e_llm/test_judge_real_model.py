"""evaltrace's judge evaluators against a real (weak: 135M parameters) model: verdicts or clean failures, never raises.

The model is SmolLM2-135M-Instruct on llama-cpp-python's OpenAI-compatible server (scripts/e2e_llm.sh). Its
judgements are often malformed or out of shape; what must hold is the structure of both outcomes.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from evaltrace.evaluators import (
    BYOP,
    Completeness,
    ContextRelevancy,
    FactCheck,
    Faithfulness,
    LanguageMismatch,
    LLMJudge,
    Summarization,
    Toxicity,
)
from evaltrace.evaluators._base import passes
from evaltrace.schema import EvalCase, EvaluationResult, ExpectedBehavior, Trace, TraceOutput

from .conftest import MODEL, CountingJudge, counting_judge
from .report import OUTCOMES

pytestmark = pytest.mark.e2e_llm

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
CONTEXTS = ["Paris is the capital and largest city of France.", "France is a country in Western Europe."]
BYOP_PROMPT = "Question: {question}\nAnswer: {actual_answer}\nIs the answer correct? Reply with true or false."


def qa_trace() -> Trace:
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    return Trace(
        run_id="e2e",
        case_id="capital",
        variant_name="smollm2",
        started_at=now,
        finished_at=now,
        input={"question": QUESTION, "contexts": CONTEXTS},
        output=TraceOutput(final_answer=ANSWER),
    )


def qa_case() -> EvalCase:
    return EvalCase(id="capital", expected=ExpectedBehavior(facts={"expected_answer": "Paris"}))


def evaluators(judge: Any) -> list[Any]:
    return [
        LLMJudge("helpfulness", judge=judge, scale=(1, 5)),
        BYOP(BYOP_PROMPT, judge=judge),
        Faithfulness(judge),
        ContextRelevancy(judge),
        FactCheck(judge),
        Completeness(judge),
        Toxicity(judge),
        LanguageMismatch(judge, detector="judge"),
        Summarization(judge),
    ]


def check_judge_record(record: dict[str, Any], usage: list[dict[str, Any] | None]) -> None:
    """detail["judge"] is what the server did: our model name, a sha256 prompt hash, the server's token counts."""
    assert record["model"] == MODEL and record["cached"] is False
    assert re.fullmatch(r"[0-9a-f]{64}", record["prompt_hash"])
    assert record["attempts"] == len(usage) == len(record["finish_reasons"]) and record["attempts"] in (1, 2)
    assert set(record["finish_reasons"]) <= {"stop", "length"}
    assert all(u is not None for u in usage)
    assert record["input_tokens"] == sum(u["prompt_tokens"] for u in usage if u) > 0
    assert record["output_tokens"] == sum(u["completion_tokens"] for u in usage if u) > 0


def check_result(evaluator: Any, result: EvaluationResult, usage: list[dict[str, Any] | None]) -> str:
    """Assert the structure of a completed or a failed judgement; return a line for the summary."""
    assert result.evaluator == evaluator.name
    assert result.status in ("completed", "failed"), result
    check_judge_record(result.detail["judge"], usage)
    if result.status == "completed":
        assert result.error is None and result.score is not None
        # A score on a scale (llm_judge 1-5) stays on it; every other judge scores in [0, 1].
        low, high = getattr(evaluator, "scale", (0.0, 1.0))
        assert low <= result.score <= high
        assert result.passed is passes(result.score, evaluator.threshold, evaluator.direction)
        return f"{evaluator.name}: completed, score {result.score:.2f}, attempts {len(usage)}"
    # A clean failure: the model's raw replies (both attempts: one retry after an unusable reply) and the reason.
    assert result.passed is False and result.score is None
    assert result.error is not None and result.error.type == "exception"
    assert result.error.message.startswith("judge failed: unparseable judge reply after retry")
    raw = result.detail["raw_replies"]
    assert isinstance(raw, list) and len(raw) == 2 and all(isinstance(r, str) for r in raw)
    why = result.error.message.removeprefix("judge failed: unparseable judge reply after retry: ")
    first = " ".join(raw[0].split())[:60]
    reasons = "/".join(str(r) for r in result.detail["judge"]["finish_reasons"])
    return f"{evaluator.name}: failed cleanly (finish {reasons}): {' '.join(why.split())[:90]}; first reply {first!r}"


async def test_judge_evaluators_complete_or_fail_cleanly(judge: CountingJudge) -> None:
    trace, case = qa_trace(), qa_case()
    outcomes: dict[str, int] = {"completed": 0, "failed": 0}
    for evaluator in evaluators(judge.judge):
        before = len(judge.calls)
        result = await evaluator.evaluate(trace, case)  # never raises: that is the point
        OUTCOMES.append(check_result(evaluator, result, judge.calls.usage[before:]))
        outcomes[result.status] += 1
    OUTCOMES.append(f"judge evaluators: {outcomes['completed']} completed, {outcomes['failed']} failed cleanly")
    assert sum(outcomes.values()) == len(evaluators(judge.judge))


async def test_reply_cut_at_the_token_limit_fails_cleanly(base_url: str) -> None:
    # Eight tokens cannot hold a claims list: a truncated (malformed) JSON reply from the real server, twice.
    short = counting_judge(base_url, max_tokens=8)
    try:
        result = await Faithfulness(short.judge).evaluate(qa_trace())
    finally:
        await short.judge.aclose()
    line = check_result(Faithfulness(short.judge), result, short.calls.usage)
    assert result.status == "failed", line
    assert all(u is not None and u["completion_tokens"] <= 8 for u in short.calls.usage)
    OUTCOMES.append(f"max_tokens=8 -> {line}")


async def test_same_judgement_twice_costs_one_call(judge: CountingJudge) -> None:
    evaluator = BYOP(BYOP_PROMPT, judge=judge.judge)
    first = await evaluator.evaluate(qa_trace())
    assert first.status == "completed", f"the model gave no true/false twice: {first.detail.get('raw_replies')}"
    calls = len(judge.calls)
    assert calls == first.detail["judge"]["attempts"]
    second = await evaluator.evaluate(qa_trace())
    assert len(judge.calls) == calls  # served from the cache: the server saw nothing
    assert (
        second.detail["judge"]["cached"] is True
        and second.detail["judge"]["prompt_hash"] == (first.detail["judge"]["prompt_hash"])
    )
    assert (second.passed, second.score) == (first.passed, first.score)
    assert second.cost_usd in (None, 0.0)
    OUTCOMES.append(f"cache: 2 identical byop judgements -> {calls} server call(s), answer {first.passed}")


async def test_identical_judgements_in_flight_share_one_call(judge: CountingJudge) -> None:
    evaluator = BYOP(BYOP_PROMPT, judge=judge.judge)
    first, second = await asyncio.gather(evaluator.evaluate(qa_trace()), evaluator.evaluate(qa_trace()))
    assert first.status == second.status == "completed"
    assert len(judge.calls) == first.detail["judge"]["attempts"]
    assert {first.detail["judge"]["cached"], second.detail["judge"]["cached"]} == {False, True}
