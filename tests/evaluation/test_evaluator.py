from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from evaltrace.evaluation import (
    Evaluator,
    FunctionEvaluator,
    RetryableEvaluatorError,
    SkipEvaluation,
    arun_evaluator,
    evaluator,
    run_evaluator,
)
from evaltrace.evaluation.runner import RunOptions
from evaltrace.schema import EvalCase, EvaluationResult, Trace

from .helpers import make_trace


@pytest.mark.parametrize(
    ("returned", "passed", "score", "label"),
    [
        (True, True, None, None),
        (False, False, None, None),
        (0.7, True, 0.7, None),
        (0.2, False, 0.2, None),
        (1, True, 1.0, None),
        ("relevant", True, None, "relevant"),
        ("Fail", False, None, "Fail"),
    ],
)
@pytest.mark.parametrize("is_async", [False, True])
def test_function_outputs_are_coerced(
    returned: Any, passed: bool, score: float | None, label: str | None, is_async: bool
) -> None:
    if is_async:

        async def judge(trace: Trace) -> Any:
            return returned

    else:

        def judge(trace: Trace) -> Any:
            return returned

    ev = evaluator(name="judge", version="v1", threshold=0.5)(judge)
    result = run_evaluator(ev, make_trace())
    assert result.status == "completed"
    assert result.passed is passed
    assert result.score == score
    assert result.detail.get("label") == label
    assert result.evaluator == "judge"
    assert result.evaluator_version == "v1"
    assert (result.run_id, result.case_id, result.variant_name) == ("live", "c1", "svc")


def test_pass_labels_and_case_argument() -> None:
    seen: list[EvalCase | None] = []

    @evaluator(pass_labels={"correct"})
    def grade(trace: Trace, case: EvalCase | None) -> str:
        seen.append(case)
        return "partially_correct"

    case = EvalCase(id="k", input={"q": "?"})
    result = run_evaluator(grade, make_trace(), case)
    assert seen == [case]
    assert result.passed is False
    assert isinstance(grade, Evaluator)
    assert isinstance(grade, FunctionEvaluator) and grade.name == "grade"


@pytest.mark.parametrize("is_async", [False, True])
def test_exception_becomes_failed_result(is_async: bool) -> None:
    def boom(trace: Trace) -> bool:
        raise ValueError("no answer")

    async def aboom(trace: Trace) -> bool:
        raise ValueError("no answer")

    result = run_evaluator(evaluator(aboom if is_async else boom), make_trace())
    assert result.status == "failed"
    assert result.passed is False
    assert result.error is not None and result.error.type == "exception"
    assert "no answer" in result.error.message
    assert result.detail["error_type"] == "ValueError"


@pytest.mark.parametrize("is_async", [False, True])
def test_timeout_becomes_failed_result(is_async: bool) -> None:
    release = threading.Event()

    def slow(trace: Trace) -> bool:
        release.wait(5)
        return True

    async def aslow(trace: Trace) -> bool:
        await asyncio.sleep(5)
        return True

    try:
        result = run_evaluator(evaluator(aslow if is_async else slow), make_trace(), timeout_s=0.05)
    finally:
        release.set()
    assert result.status == "failed"
    assert result.error is not None and result.error.type == "timeout"
    assert result.detail["error_type"] == "timeout"


class _NotAResult:
    name = "bad"
    version = None

    def evaluate(self, trace: Trace, case: EvalCase | None) -> Any:
        return {"passed": True}


def test_invalid_output_becomes_failed_result() -> None:
    result = run_evaluator(_NotAResult(), make_trace())
    assert result.status == "failed"
    assert result.detail["error_type"] == "invalid_output"
    with pytest.raises(TypeError):
        evaluator(lambda trace: [1]).evaluate(make_trace(), None)


@pytest.mark.parametrize("is_async", [False, True])
async def test_retryable_errors_are_retried(is_async: bool) -> None:
    calls = {"n": 0}
    retries: list[int] = []

    def flaky(trace: Trace) -> bool:
        calls["n"] += 1
        if calls["n"] < 3:
            raise RetryableEvaluatorError("rate limited")
        return True

    async def aflaky(trace: Trace) -> bool:
        return flaky(trace)

    ev = evaluator(name="flaky")(aflaky if is_async else flaky)
    result = await arun_evaluator(
        ev, make_trace(), options=RunOptions(max_retries=3, initial_backoff_s=0.001), on_retry=lambda: retries.append(1)
    )
    assert result.passed is True and calls["n"] == 3 and len(retries) == 2


def test_retries_give_up_and_plain_errors_are_not_retried() -> None:
    calls = {"n": 0}

    @evaluator
    def always(trace: Trace) -> bool:
        calls["n"] += 1
        raise RetryableEvaluatorError("down")

    assert run_evaluator(always, make_trace(), max_retries=2).status == "failed"
    assert calls["n"] == 3

    @evaluator
    def plain(trace: Trace) -> bool:
        calls["n"] += 1
        raise RuntimeError("bug")

    calls["n"] = 0
    assert run_evaluator(plain, make_trace(), max_retries=2).status == "failed"
    assert calls["n"] == 1


def test_evaluation_result_returned_as_is_and_stamped() -> None:
    @evaluator(name="custom", version="v2")
    def custom(trace: Trace) -> EvaluationResult:
        return EvaluationResult(evaluator="custom", passed=True, score=0.9, reason="fine", evaluator_type="llm_judge")

    result = run_evaluator(custom, make_trace())
    assert result.evaluator_type == "llm_judge"
    assert result.reason == "fine"
    assert result.evaluator_version == "v2"
    assert result.finished_at >= result.started_at


async def test_run_evaluator_inside_a_running_loop() -> None:
    assert run_evaluator(evaluator(lambda trace: True), make_trace()).passed is True


def test_skip_evaluation_gives_a_skipped_result() -> None:
    @evaluator
    def needs_reference(trace: Trace) -> bool:
        raise SkipEvaluation("no expected answer")

    result = run_evaluator(needs_reference, make_trace())
    assert (result.status, result.reason, result.error) == ("skipped", "no expected answer", None)
