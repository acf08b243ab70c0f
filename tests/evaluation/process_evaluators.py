"""Evaluators for the process-engine tests: module-level names, so the evaluation process can import them."""

from __future__ import annotations

import threading
import time

from evaltrace.evaluation import evaluator
from evaltrace.schema import EvaluationResult, Trace


@evaluator(name="mentions_paris")
def mentions_paris(trace: Trace) -> bool:
    return "Paris" in (trace.output.final_answer or "")


@evaluator(name="answer_length")
def answer_length(trace: Trace) -> EvaluationResult:
    answer = trace.output.final_answer or ""
    return EvaluationResult(
        evaluator="answer_length",
        passed=len(answer) >= 10,
        score=min(1.0, len(answer) / 40),
        reason=f"{len(answer)} characters for {trace.input}",
    )


@evaluator(name="slow")
def slow(trace: Trace) -> bool:
    time.sleep(0.3)  # long enough to be in flight when a test kills the child or shuts down
    return True


@evaluator(name="unpicklable")
def unpicklable(trace: Trace) -> EvaluationResult:
    # A lock in the detail: the result cannot be pickled back to the application.
    return EvaluationResult(evaluator="unpicklable", passed=True, detail={"raw": threading.Lock()})


HANG_S = 3.0


@evaluator(name="hangs")
def hangs(trace: Trace) -> bool:
    # Run inline (on the child's loop): no timeout can interrupt it, the child stays alive and silent.
    time.sleep(HANG_S)
    return True


JUDGE_URL_ENV = "EVALTRACE_TEST_JUDGE_URL"


@evaluator(name="judged_in_child")
async def judged_in_child(trace: Trace) -> EvaluationResult:
    """An LLM judge called in the evaluation process; its server's address comes from the environment."""
    import os

    from evaltrace.evaluators import LLMJudge
    from evaltrace.evaluators.judge import Judge

    judge = Judge("judge-model", base_url=os.environ[JUDGE_URL_ENV], api_key="test-key", max_retries=0)
    return await LLMJudge("Gives a way to get help", judge=judge).evaluate(trace)
