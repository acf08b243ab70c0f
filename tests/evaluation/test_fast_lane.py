"""The fast lane: span-level sync evaluations run on one worker thread; slow calls are demoted to the loop."""

from __future__ import annotations

import threading
from typing import Any

from evaltrace.evaluation import EvaluatorSpec, RetryableEvaluatorError, evaluator
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, wait_until


@evaluator(name="fine")
def fine(trace: Trace) -> bool:
    return True


def test_a_slow_evaluation_is_demoted_and_keeps_the_hold_rule(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="slow")
    def slow(trace: Trace) -> bool:
        release.wait(10)
        return True

    p = make_pipeline([slow], hold_timeout_s=0.2)
    try:
        with p.tracer.start_as_current_span("s"):
            pass
        # Forwarded as is at the hold deadline while the evaluator still runs (on the lane thread it began on).
        assert wait_until(lambda: len(p.by_name("s")) == 1)
        assert "evaltrace.eval.slow.passed" not in (p.one("s").attributes or {})
    finally:
        release.set()
    p.flush()
    (child,) = p.by_name("evaluation slow")
    assert child.attributes is not None and child.attributes["evaltrace.eval.slow.passed"] is True
    stats = p.processor.stats()
    assert (stats["passed"], stats["held_timeout"], stats["evaluation_spans"]) == (1, 1, 1)


def test_jobs_behind_a_hung_evaluation_are_not_held_up(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(30)
        return True

    p = make_pipeline([EvaluatorSpec(stuck, timeout_s=20, predicate=lambda a: a.get("stuck") is True), fine])
    try:
        with p.tracer.start_as_current_span("hung", attributes={"stuck": True}):
            pass
        for i in range(3):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        # The three later spans are evaluated and forwarded while the first evaluation is still stuck.
        assert wait_until(lambda: all(len(p.by_name(f"s{i}")) == 1 for i in range(3)))
        for i in range(3):
            assert p.one(f"s{i}").attributes["evaltrace.eval.fine.passed"] is True  # type: ignore[index]
        assert not release.is_set()
    finally:
        release.set()
    p.flush()
    assert p.one("hung").attributes["evaltrace.eval.stuck.passed"] is True  # type: ignore[index]
    assert p.processor.stats()["passed"] == 5


def test_a_hung_evaluation_on_the_lane_times_out_as_an_error(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(30)
        return True

    p = make_pipeline([EvaluatorSpec(stuck, timeout_s=0.3, inline=True), fine])
    try:
        with p.tracer.start_as_current_span("s"):
            pass
        p.flush()
        attributes = p.one("s").attributes or {}
        assert attributes["evaltrace.eval.stuck.outcome"] == "error"
        assert attributes["evaltrace.eval.fine.passed"] is True
        stats = p.processor.stats()
        assert (stats["errors"], stats["timed_out"], stats["passed"]) == (1, 1, 1)
        lane = p.processor._engine.lane
        assert lane is not None and lane.demoted == 1
    finally:
        release.set()


def test_a_retryable_failure_on_the_lane_is_retried(make_pipeline: MakePipeline) -> None:
    calls: list[int] = []

    @evaluator(name="flaky")
    def flaky(trace: Trace) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RetryableEvaluatorError("judge busy")
        return True

    p = make_pipeline([flaky], max_retries=2)
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert p.one("s").attributes["evaltrace.eval.flaky.passed"] is True  # type: ignore[index]
    stats = p.processor.stats()
    assert (len(calls), stats["retries"], stats["passed"], stats["errors"]) == (2, 1, 1, 0)


def test_errors_and_skips_on_the_lane_are_never_verdicts(make_pipeline: MakePipeline) -> None:
    from evaltrace.evaluation import SkipEvaluation

    @evaluator(name="broken")
    def broken(trace: Trace) -> bool:
        raise ValueError("bug in the check")

    @evaluator(name="not_here")
    def not_here(trace: Trace) -> bool:
        raise SkipEvaluation("no expected answer")

    @evaluator(name="wrong_type")
    def wrong_type(trace: Trace) -> Any:
        return object()

    p = make_pipeline([broken, not_here, wrong_type])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    attributes = p.one("s").attributes or {}
    assert attributes["evaltrace.eval.broken.outcome"] == "error"
    assert attributes["evaltrace.eval.not_here.outcome"] == "not_evaluated"
    assert attributes["evaltrace.eval.wrong_type.outcome"] == "error"
    stats = p.processor.stats()
    assert (stats["errors"], stats["skipped"], stats["passed"], stats["failed"]) == (2, 1, 0, 0)


class ReturnsAwaitable:
    """A sync ``evaluate`` that returns an awaitable: the loop awaits it."""

    name = "deferred_answer"
    version = None

    def evaluate(self, trace: Trace, case: Any) -> Any:
        async def later() -> EvaluationResult:
            return EvaluationResult(evaluator=self.name, passed=True)

        return later()


def test_a_sync_evaluate_returning_an_awaitable_is_awaited_on_the_loop(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([ReturnsAwaitable()])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert p.one("s").attributes["evaltrace.eval.deferred_answer.passed"] is True  # type: ignore[index]


def test_shutdown_cuts_a_stuck_lane_job_short_and_counts_it(make_pipeline: MakePipeline) -> None:
    release = threading.Event()
    started = threading.Event()

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        started.set()
        release.wait(30)
        return True

    p = make_pipeline([EvaluatorSpec(stuck, timeout_s=60), fine], hold_timeout_s=60)
    try:
        with p.tracer.start_as_current_span("s"):
            pass
        assert started.wait(5)
        p.processor.shutdown(500)
        attributes = p.one("s").attributes or {}
        assert attributes["evaltrace.eval.stuck.outcome"] == "not_evaluated"
        stats = p.processor.stats()
        assert stats["unflushed_jobs"] == 1
        assert stats["not_evaluated_by_reason"]["shutdown"] >= 1
    finally:
        release.set()
