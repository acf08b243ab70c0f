"""The fast lane: span-level sync evaluations run on one worker thread; slow calls are demoted to the loop."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, RetryableEvaluatorError, evaluator
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, wait_until


@evaluator(name="fine")
def fine(trace: Trace) -> bool:
    return True


def stuck_until(release: threading.Event) -> Any:
    """An evaluator named ``stuck`` whose calls hang until ``release`` is set (then pass)."""

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(30)
        return True

    return stuck


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
    stuck = stuck_until(release)

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
    stuck = stuck_until(release)

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


# --- regressions (review of the fast lane) ------------------------------------------------------------------


def test_an_evaluator_slow_by_its_call_time_leaves_the_lane_for_the_pool(make_pipeline: MakePipeline) -> None:
    # Each call is well under the demotion threshold, so only the slow mark by call time takes it off the
    # one-after-another lane: in the pool the spans are evaluated side by side again.
    lock = threading.Lock()
    running = [0]
    most = [0]
    overlap = threading.Event()

    @evaluator(name="judge")
    def judge(trace: Trace) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            if running[0] > 1:
                overlap.set()
        overlap.wait(0.1)
        with lock:
            running[0] -= 1
        return True

    p = make_pipeline([judge], hold_timeout_s=30, sync_workers=4)
    for i in range(12):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    p.flush()
    assert most[0] > 1
    assert p.processor.stats()["passed"] == 12


def test_jobs_queued_on_the_lane_are_forwarded_by_their_hold_deadline(make_pipeline: MakePipeline) -> None:
    release = threading.Event()
    stuck = stuck_until(release)

    p = make_pipeline(
        [EvaluatorSpec(stuck, timeout_s=20, predicate=lambda a: a.get("stuck") is True), fine], hold_timeout_s=0.4
    )
    lane = p.processor._engine.lane
    assert lane is not None
    lane.slow_s = 60.0  # no call is slow enough to demote: only the jobs' age can keep the hold rule
    try:
        with p.tracer.start_as_current_span("hung", attributes={"stuck": True}):
            pass
        for i in range(3):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        # Forwarded while the first job's call still runs on the lane thread, not queued behind it.
        assert wait_until(lambda: all(len(p.by_name(n)) == 1 for n in ("hung", "s0", "s1", "s2")))
        assert not release.is_set()
    finally:
        release.set()
    p.flush()
    assert p.processor.stats()["passed"] == 5


class Abort(BaseException):
    """What gevent.Timeout and friends look like: not an Exception."""


def test_a_base_exception_from_an_evaluator_is_an_error_and_the_lane_goes_on(make_pipeline: MakePipeline) -> None:
    calls: list[int] = []

    @evaluator(name="boom")
    def boom(trace: Trace) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise Abort("user code aborted")
        return True

    p = make_pipeline([EvaluatorSpec(boom, timeout_s=None)])
    with p.tracer.start_as_current_span("bad"):
        pass
    for i in range(3):
        with p.tracer.start_as_current_span(f"good{i}"):
            pass
    p.flush()
    attributes = p.one("bad").attributes or {}
    assert attributes["evaltrace.eval.boom.outcome"] == "error"
    assert attributes["evaltrace.eval.boom.error_type"] == "Abort"
    stats = p.processor.stats()
    assert (stats["errors"], stats["passed"], stats["timed_out"]) == (1, 3, 0)


def _sampled_out() -> EvaluatorSpec:
    @evaluator(name="sampled")
    def sampled(trace: Trace) -> bool:
        return True

    return EvaluatorSpec(sampled, sampler=lambda attributes: False)


def test_a_skipped_evaluator_is_reported_once_on_the_lane(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([fine, _sampled_out()])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    events = [e for e in p.one("s").events if (e.attributes or {}).get("gen_ai.evaluation.name") == "sampled"]
    assert len(events) == 1


def test_a_skipped_evaluator_gets_no_child_span_when_the_lane_is_late(make_pipeline: MakePipeline) -> None:
    @evaluator(name="late")
    def late(trace: Trace) -> bool:
        time.sleep(0.05)
        return True

    p = make_pipeline([late, _sampled_out()], hold_timeout_s=0.01)
    lane = p.processor._engine.lane
    assert lane is not None
    lane.slow_s = 60.0  # the job stays on the lane and finishes there after its hold deadline
    lane.hold_margin_s = -60.0
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert [s.name for s in p.spans() if s.name.startswith("evaluation")] == ["evaluation late"]


def test_a_call_past_its_timeout_under_the_demotion_threshold_is_a_timeout(make_pipeline: MakePipeline) -> None:
    @evaluator(name="judge")
    def judge(trace: Trace) -> bool:
        time.sleep(0.12)
        return False

    p = make_pipeline([EvaluatorSpec(judge, timeout_s=0.05)], hold_timeout_s=5)
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    attributes = p.one("s").attributes or {}
    assert (attributes["evaltrace.eval.judge.outcome"], attributes["evaltrace.eval.judge.error_type"]) == (
        "error",
        "timeout",
    )
    stats = p.processor.stats()
    assert (stats["failed"], stats["errors"], stats["timed_out"]) == (0, 1, 1)


class SlowThenAwaitable:
    """A sync ``evaluate`` that works past the demotion threshold, then returns an awaitable."""

    name = "slow_then_awaitable"
    version = None

    def evaluate(self, trace: Trace, case: Any) -> Any:
        time.sleep(0.3)

        async def finish() -> EvaluationResult:
            return EvaluationResult(evaluator=self.name, passed=True)

        return finish()


def test_a_demoted_call_returning_an_awaitable_is_awaited(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([SlowThenAwaitable()], hold_timeout_s=5)
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert p.one("s").attributes["evaltrace.eval.slow_then_awaitable.passed"] is True  # type: ignore[index]
    lane = p.processor._engine.lane
    assert lane is not None and lane.demoted == 1


class _PausingQueue:
    """The lane's queue, with the worker paused right after it takes a batch (the window of a preemption)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get(self, *args: Any, **kwargs: Any) -> Any:
        item = self.inner.get(*args, **kwargs)
        time.sleep(0.1)
        return item

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_lane_is_supervised_while_its_worker_takes_a_batch(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="hang")
    def hang(trace: Trace) -> bool:
        release.wait(30)
        return True

    p = make_pipeline([EvaluatorSpec(hang, timeout_s=0.5)], hold_timeout_s=0.3)
    lane = p.processor._engine.lane
    assert lane is not None
    lane._queue = _PausingQueue(lane._queue)  # type: ignore[assignment]
    try:
        with p.tracer.start_as_current_span("s"):
            pass
        # No other span arrives to wake the dispatcher: supervision alone must forward it and time it out.
        assert wait_until(lambda: len(p.by_name("s")) == 1)
        p.flush()
        assert p.processor.stats()["timed_out"] == 1
    finally:
        release.set()


def test_a_lane_thread_that_cannot_start_sends_its_jobs_to_the_loop(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name.startswith("evaltrace-eval-lane"):
            raise RuntimeError("can't start new thread")
        real_start(self)

    p = make_pipeline([fine])
    monkeypatch.setattr(threading.Thread, "start", start)
    with p.tracer.start_as_current_span("s0"):
        pass
    assert wait_until(lambda: len(p.by_name("s0")) == 1)
    monkeypatch.setattr(threading.Thread, "start", real_start)
    for i in range(1, 4):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    p.flush()
    for i in range(4):
        assert p.one(f"s{i}").attributes["evaltrace.eval.fine.passed"] is True  # type: ignore[index]
    stats = p.processor.stats()
    assert (stats["passed"], stats["internal_errors"]) == (4, 1)


def test_a_slow_first_call_alone_does_not_mark_a_cheap_evaluator_slow(make_pipeline: MakePipeline) -> None:
    # The first call pays one-time costs (imports, caches): it must not send a cheap evaluator to the pool for
    # the next slow_ttl_s.
    calls = [0]

    @evaluator(name="warming")
    def warming(trace: Trace) -> bool:
        calls[0] += 1
        if calls[0] == 1:
            time.sleep(0.06)  # over slow_call_s (20 ms), under the 0.2 s demotion
        return True

    p = make_pipeline([warming], hold_timeout_s=30)
    for i in range(5):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
        p.flush()
    lane = p.processor._engine.lane
    assert not lane.is_slow(warming)
    assert p.processor.stats()["passed"] == 5


def _stalling(stalls: dict[int, float]) -> Any:
    """A cheap evaluator named ``stalling`` whose call number ``n`` (from 1) sleeps ``stalls[n]`` seconds."""
    calls = [0]

    @evaluator(name="stalling")
    def stalling(trace: Trace) -> bool:
        calls[0] += 1
        pause = stalls.get(calls[0])
        if pause:
            time.sleep(pause)  # what a thread kept off the CPU or the GIL for that long looks like to the lane
        return True

    return stalling


def _one_at_a_time(p: Any, count: int) -> None:
    for i in range(count):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
        p.flush()


def test_one_stalled_call_of_a_cheap_evaluator_does_not_mark_it_slow(make_pipeline: MakePipeline) -> None:
    # One 0.1 s call among instant ones (over slow_call_s, under the demotion): at load, a preempted thread. Marked
    # slow for it, every job of the evaluator took the loop's pool path for slow_ttl_s and missed its hold deadline.
    stalling = _stalling({3: 0.1})
    p = make_pipeline([stalling], hold_timeout_s=30)
    _one_at_a_time(p, 6)
    lane = p.processor._engine.lane
    assert lane is not None and not lane.is_slow(stalling) and lane.demoted == 0
    stats = p.processor.stats()
    assert (stats["passed"], stats["enriched"]) == (6, 6)


def test_one_call_stalled_past_the_demotion_is_demoted_without_marking_the_evaluator_slow(
    make_pipeline: MakePipeline,
) -> None:
    stalling = _stalling({3: 0.5})
    p = make_pipeline([stalling], hold_timeout_s=30)
    _one_at_a_time(p, 6)
    lane = p.processor._engine.lane
    assert lane is not None and lane.demoted == 1  # that call's job went on on the loop, as before
    assert not lane.is_slow(stalling)
    stats = p.processor.stats()
    assert (stats["passed"], stats["enriched"]) == (6, 6)


@pytest.mark.parametrize("stall_s", [0.1, 0.5], ids=["slow", "demoted"])
def test_two_slow_calls_in_a_row_mark_the_evaluator_slow(make_pipeline: MakePipeline, stall_s: float) -> None:
    stalling = _stalling({3: stall_s, 4: stall_s})
    p = make_pipeline([stalling], hold_timeout_s=30)
    _one_at_a_time(p, 4)
    lane = p.processor._engine.lane
    assert lane is not None and lane.is_slow(stalling)
    assert lane.demoted == (2 if stall_s > lane.slow_s else 0)
    assert p.processor.stats()["passed"] == 4


def test_an_evaluator_hanging_on_one_call_in_three_is_marked_slow_and_costs_few_threads(
    make_pipeline: MakePipeline,
) -> None:
    # S,F,F,S,F,F: never two slow calls among its last three, so the stall filter alone never marked it slow, and
    # every hanging call held the lane 0.2 s, was demoted and cost a new lane thread (20 after 4 s in the review's
    # repro). A demotion costs a thread: the second within slow_ttl_s marks the evaluator slow, whatever came between.
    release = threading.Event()
    calls = [0]

    @evaluator(name="sometimes_hangs")
    def sometimes_hangs(trace: Trace) -> bool:
        calls[0] += 1
        if calls[0] % 3 == 1:
            release.wait(30)
        return True

    before = set(threading.enumerate())  # lane threads of earlier tests' pipelines are not this one's
    try:
        # No timeout (as the review's repro): a hung call is neither cut short nor isolated, it only costs a thread.
        p = make_pipeline([sometimes_hangs], hold_timeout_s=30, evaluator_timeout_s=None)
        for i in range(12):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        assert wait_until(lambda: calls[0] == 12, timeout=20)  # every call began: 4 of them hang
        lane = p.processor._engine.lane
        assert lane is not None and lane.is_slow(sometimes_hangs)
        assert lane.demoted <= 2  # from the second demotion on, its hanging calls take the loop's pool
        lane_threads = [
            t for t in threading.enumerate() if t.name.startswith("evaltrace-eval-lane") and t not in before
        ]
        assert len(lane_threads) <= 3  # the two demoted calls' and the current worker
    finally:
        release.set()
    p.flush()
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"], stats["enriched"]) == (12, 12, 12)


def test_calls_demoted_only_for_their_jobs_age_count_as_slow_calls_when_they_return(
    make_pipeline: MakePipeline,
) -> None:
    # The hold rule demotes a call that has not overrun slow_s when its job nears the hold deadline. Such a call is
    # counted when it returns (the supervisor counts only overruns): two of them among the last three calls mark
    # the evaluator slow. Counted zero times, an evaluator whose calls outlast the hold margin stayed on the lane.
    calls = [0]

    @evaluator(name="lingering")
    def lingering(trace: Trace) -> bool:
        calls[0] += 1
        if calls[0] > 1:  # the first call warms it up (never counted)
            time.sleep(0.6)
        return True

    p = make_pipeline([lingering], hold_timeout_s=0.4, evaluator_timeout_s=None)
    lane = p.processor._engine.lane
    assert lane is not None
    lane.slow_s = 60.0  # no call overruns: only the jobs' age demotes them
    _one_at_a_time(p, 3)
    assert lane.demoted == 2
    assert lane.is_slow(lingering)
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"]) == (3, 3)
