"""Jobs of inline sync evaluators on the loop begin at once, outside a task, and become a task only when they wait.

Each test turns the fast lane off (``_lane_off``, as a failure of its machinery does), so that every job runs on the
evaluation loop, the path these jobs take when their evaluator looks slow (and under callgrind).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from evaltrace.evaluation import EvaluatorSpec, RetryableEvaluatorError, evaluator
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, Pipeline, wait_until


def _on_the_loop(p: Pipeline) -> Pipeline:
    p.processor._engine._lane_off = True
    return p


def test_an_inline_sync_job_ends_in_its_first_step_with_no_task_and_the_same_enriched_span(
    make_pipeline: MakePipeline,
) -> None:
    tasks: list[object] = []

    @evaluator(name="cheap")
    def cheap(trace: Trace) -> bool:
        tasks.append(asyncio.current_task())
        return True

    # Enriched however loaded the machine is: the hold is wall-clock time.
    p = _on_the_loop(make_pipeline([EvaluatorSpec(cheap, inline=True)], hold_timeout_s=600))
    for _ in range(3):
        with p.tracer.start_as_current_span("s"):
            pass
    p.flush()
    assert tasks == [None, None, None]  # run by the loop's callback itself: no task was made for them
    assert len(p.processor._engine._tasks) == 0
    spans = p.by_name("s")
    assert len(spans) == 3
    for span in spans:
        attributes = span.attributes or {}
        assert attributes["evaltrace.eval.cheap.passed"] is True
        assert attributes["evaltrace.eval.cheap.outcome"] == "pass"
        assert [event.name for event in span.events] == ["gen_ai.evaluation.result"]
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"], stats["enriched"], stats["internal_errors"]) == (3, 3, 3, 0)


def test_an_inline_job_that_waits_for_a_retry_goes_on_in_a_task_and_is_retried(make_pipeline: MakePipeline) -> None:
    calls: list[object] = []

    @evaluator(name="flaky")
    def flaky(trace: Trace) -> bool:
        calls.append(asyncio.current_task())
        if len(calls) == 1:
            raise RetryableEvaluatorError("rate limited")
        return True

    p = _on_the_loop(make_pipeline([EvaluatorSpec(flaky, inline=True)], max_retries=2, hold_timeout_s=600))
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert calls[0] is None and isinstance(calls[1], asyncio.Task)  # the back-off made it a task; it went on there
    assert len(calls) == 2
    assert (p.one("s").attributes or {})["evaltrace.eval.flaky.passed"] is True
    stats = p.processor.stats()
    assert (stats["retries"], stats["passed"], stats["errors"], stats["enriched"]) == (1, 1, 0, 1)
    # Its task is discarded by its done callback, a loop iteration after the job (and the flush waiting on it) ended.
    assert wait_until(lambda: len(p.processor._engine._tasks) == 0)


class _Later:
    """A sync ``evaluate`` returning an awaitable: awaited under the evaluator's timeout (which needs a task)."""

    name = "later"
    version = None

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def evaluate(self, trace: Trace, case: Any) -> Any:
        async def later() -> EvaluationResult:
            await asyncio.sleep(self.sleep_s)
            return EvaluationResult(evaluator=self.name, passed=True)

        return later()


def test_a_sync_inline_evaluate_returning_an_awaitable_is_awaited_under_its_timeout(
    make_pipeline: MakePipeline,
) -> None:
    p = _on_the_loop(make_pipeline([EvaluatorSpec(_Later(0.0), inline=True)]))
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    attributes = p.one("s").attributes or {}
    assert attributes["evaltrace.eval.later.passed"] is True

    slow = _on_the_loop(make_pipeline([EvaluatorSpec(_Later(5.0), inline=True, timeout_s=0.05)], hold_timeout_s=30))
    with slow.tracer.start_as_current_span("t"):
        pass
    slow.flush()
    attributes = slow.one("t").attributes or {}
    assert (attributes["evaltrace.eval.later.outcome"], attributes["evaltrace.eval.later.error_type"]) == (
        "error",
        "timeout",
    )
    assert slow.processor.stats()["timed_out"] == 1


def test_shutdown_during_an_eager_jobs_back_off_cuts_it_short_and_counts_it(make_pipeline: MakePipeline) -> None:
    calls: list[float] = []

    @evaluator(name="always_busy")
    def always_busy(trace: Trace) -> bool:
        calls.append(time.monotonic())
        raise RetryableEvaluatorError("busy")

    p = _on_the_loop(
        make_pipeline([EvaluatorSpec(always_busy, inline=True)], max_retries=3, retry_backoff_s=30, hold_timeout_s=60)
    )
    with p.tracer.start_as_current_span("s"):
        pass
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
        time.sleep(0.005)
    assert calls, "the evaluator never ran"
    p.processor.shutdown(500)
    attributes = p.one("s").attributes or {}
    assert attributes["evaltrace.eval.always_busy.outcome"] == "not_evaluated"
    assert attributes["evaltrace.eval.always_busy.skip_reason"] == "shutdown"
    stats = p.processor.stats()
    assert (stats["cancelled"], stats["unflushed_jobs"]) == (1, 1)
    assert stats["not_evaluated_by_reason"] == {"shutdown": 1}


_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def test_a_context_variable_one_eager_job_sets_is_not_seen_by_the_next(make_pipeline: MakePipeline) -> None:
    seen: list[str] = []

    @evaluator(name="marks")
    def marks(trace: Trace) -> bool:
        seen.append(_SEEN.get())
        _SEEN.set("set by an earlier job")
        return True

    p = _on_the_loop(make_pipeline([EvaluatorSpec(marks, inline=True)]))
    for _ in range(3):
        with p.tracer.start_as_current_span("s"):
            pass
    p.flush()
    assert seen == ["unset", "unset", "unset"]  # each job in a context of its own, as each task had
