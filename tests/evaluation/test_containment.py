"""Evaluators cannot take the live pipeline down: BaseExceptions, blocked event loops, hung threads."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline


@evaluator(name="fine")
def fine(trace: Trace) -> bool:
    return True


@evaluator(name="fine_async")
async def fine_async(trace: Trace) -> bool:
    await asyncio.sleep(0.01)
    return True


def _raiser(kind: type[BaseException], is_async: bool) -> Any:
    if is_async:

        async def raise_async(trace: Trace) -> bool:
            raise kind("from the evaluator")

        return evaluator(name="raiser")(raise_async)

    def raise_sync(trace: Trace) -> bool:
        raise kind("from the evaluator")

    return evaluator(name="raiser")(raise_sync)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt])
def test_base_exceptions_from_evaluators_are_contained(
    make_pipeline: MakePipeline, kind: type[BaseException], is_async: bool
) -> None:
    p = make_pipeline([_raiser(kind, is_async), fine, fine_async])
    for name in ("first", "second"):  # the pipeline still works after the first one
        with p.tracer.start_as_current_span(name):
            pass
    p.flush()
    for name in ("first", "second"):
        out = p.one(name)
        assert out.attributes["evaltrace.eval.fine.passed"] is True
        assert out.attributes["evaltrace.eval.fine_async.passed"] is True
        assert out.attributes["evaltrace.eval.raiser.outcome"] == "error"
        assert "evaltrace.eval.raiser.passed" not in out.attributes
        event = next(e for e in out.events if e.attributes["gen_ai.evaluation.name"] == "raiser")
        assert event.attributes["error.type"] == kind.__name__


def test_an_async_evaluator_blocking_its_loop_does_not_stall_the_others(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="blocker")
    async def blocker(trace: Trace) -> bool:
        release.wait(10)  # blocking call inside async code: the loop it runs on cannot turn
        return True

    @evaluator(name="patient")
    async def patient(trace: Trace) -> bool:
        await asyncio.sleep(0.05)
        return True

    p = make_pipeline([EvaluatorSpec(blocker, timeout_s=5.0), patient], hold_timeout_s=30)
    try:
        with p.tracer.start_as_current_span("blocked"):
            pass
        # The other evaluation, and a later span's, complete while the blocker still holds its loop.
        with p.tracer.start_as_current_span("later"):
            pass
        deadline = time.monotonic() + 10
        user_loop = p.processor._engine.user_loop
        while user_loop.stalls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert user_loop.stalls >= 1
    finally:
        release.set()  # the blocker finishes within its timeout: a slow evaluator is not an error
    p.flush()
    for name in ("blocked", "later"):
        out = p.one(name)
        assert out.attributes["evaltrace.eval.patient.passed"] is True
        assert out.attributes["evaltrace.eval.blocker.passed"] is True


def test_a_hung_sync_evaluator_costs_a_thread_not_the_pool(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(30)
        return True

    # One worker thread: without abandoning, the first stuck evaluation would hold it and starve the rest.
    p = make_pipeline([EvaluatorSpec(stuck, timeout_s=0.1), fine], sync_workers=1)
    try:
        for i in range(4):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        p.flush()
        for i in range(4):
            out = p.one(f"s{i}")
            assert out.attributes["evaltrace.eval.fine.passed"] is True
            assert out.attributes["evaltrace.eval.stuck.outcome"] == "error"
        assert p.processor._engine.pool.abandoned >= 1
    finally:
        release.set()


def test_evaluation_queue_overflow_is_counted_and_logged_once(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    release = threading.Event()

    @evaluator(name="gate")
    def gate(trace: Trace) -> bool:
        release.wait(10)
        return True

    p = make_pipeline([gate], max_queue_size=2, hold_timeout_s=30)
    with caplog.at_level(logging.WARNING, logger="evaltrace.evaluation"):
        for i in range(10):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        release.set()
        p.flush()
    stats = p.processor.stats()
    assert stats["dropped"] == 8
    assert len(p.spans()) == 10  # dropped from evaluation, never from export
    messages = [r.getMessage() for r in caplog.records if "evaluation queue" in r.getMessage()]
    assert len(messages) == 2, messages  # the episode's start, then its end with the total
    assert "8 evaluation(s) lost" in messages[1]


def test_an_evaluators_own_timeout_error_is_not_our_timeout(make_pipeline: MakePipeline) -> None:
    @evaluator(name="client_timeout")
    def client_timeout(trace: Trace) -> bool:
        raise TimeoutError("judge endpoint read timeout")

    p = make_pipeline([EvaluatorSpec(client_timeout, timeout_s=30)])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    out = p.one("s")
    assert out.attributes["evaltrace.eval.client_timeout.error_type"] == "TimeoutError"
    assert p.processor.stats()["timed_out"] == 0


def test_two_sinks_of_one_kind_keep_their_own_counters_and_dead_letter_files(
    make_pipeline: MakePipeline, tmp_path: Any
) -> None:
    from evaltrace.evaluation import JsonlScoreSink

    first, second = JsonlScoreSink(tmp_path / "a.jsonl"), JsonlScoreSink(tmp_path / "b.jsonl")
    p = make_pipeline([fine], sinks=[first, second])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    sinks = p.processor.stats()["sinks"]
    assert set(sinks) == {"jsonl", "jsonl-2"}
    assert sinks["jsonl"]["successes"] == sinks["jsonl-2"]["successes"] == 1


def test_shutdown_keeps_its_deadline_with_a_stuck_evaluator_and_a_hung_sink(
    make_pipeline: MakePipeline, tmp_path: Any
) -> None:
    from collections.abc import Sequence

    from evaltrace.evaluation import SinkResult
    from evaltrace.schema import Score

    release = threading.Event()

    class HungSink:
        name = "hung"

        def export(self, batch: Sequence[Score]) -> SinkResult:
            release.wait(30)
            return SinkResult.success()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

        def shutdown(self) -> None:
            return None

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(30)
        return True

    p = make_pipeline([fine, EvaluatorSpec(stuck, timeout_s=None)], sinks=[HungSink()], sink_schedule_delay_s=0.01)
    try:
        with p.tracer.start_as_current_span("s"):
            pass
        time.sleep(0.2)  # the "fine" score reaches the hung sink
        started = time.monotonic()
        p.processor.shutdown(2_000)
        assert time.monotonic() - started < 3.0  # the deadline (2 s) and a margin, not 30 s
        stats = p.processor.stats()
        assert stats["unflushed_jobs"] == 1
        assert stats["sinks"]["hung"]["dead_lettered"] == 1  # the in-flight score, kept for replay
        (out,) = p.spans()  # forwarded with what finished; the stuck evaluation is "not evaluated", no verdict
        assert out.attributes["evaltrace.eval.fine.passed"] is True
        assert out.attributes["evaltrace.eval.stuck.outcome"] == "not_evaluated"
        assert "evaltrace.eval.stuck.passed" not in out.attributes
        assert out.attributes["evaltrace.eval.stuck.skip_reason"] == "shutdown"  # the skip reason code
    finally:
        release.set()


class _Abort(BaseException):
    """A user's own BaseException (as gevent.Timeout is): neither an Exception nor SystemExit/KeyboardInterrupt."""


class _RaisingEvaluator:
    """A class-based evaluator (the plain ``evaluate`` call, not a function evaluator's fused call)."""

    name = "raiser"
    version = None

    def __init__(self, kind: type[BaseException]) -> None:
        self.kind = kind

    def evaluate(self, trace: Trace, case: Any) -> Any:
        raise self.kind()


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "loop"])
@pytest.mark.parametrize("shape", ["function", "class"])
@pytest.mark.parametrize("kind", [_Abort, GeneratorExit, asyncio.CancelledError])
def test_any_base_exception_from_an_inline_sync_evaluator_is_its_counted_error(
    make_pipeline: MakePipeline, kind: type[BaseException], shape: str, lane: bool
) -> None:
    # On the loop (the lane off, as a failure of its machinery turns it off) such an exception from an inline call
    # ended the job uncounted: evaluated 0, errors 0, the span out unenriched, the other evaluator never run; a
    # CancelledError was counted as our own shutdown. Each is that evaluator's error, as on the lane.
    raiser = _RaisingEvaluator(kind) if shape == "class" else _raiser(kind, is_async=False)
    p = make_pipeline([EvaluatorSpec(raiser, inline=True), EvaluatorSpec(fine, inline=True)], hold_timeout_s=600)
    if not lane:
        p.processor._engine._lane_off = True
    for name in ("first", "second"):
        with p.tracer.start_as_current_span(name):
            pass
    p.flush()
    for name in ("first", "second"):
        out = p.one(name)
        assert out.attributes["evaltrace.eval.fine.passed"] is True
        assert out.attributes["evaltrace.eval.raiser.outcome"] == "error"
        event = next(e for e in out.events if e.attributes["gen_ai.evaluation.name"] == "raiser")
        assert event.attributes["error.type"] == kind.__qualname__
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"], stats["errors"], stats["enriched"]) == (4, 2, 2, 2)
    assert stats["cancelled"] == 0
