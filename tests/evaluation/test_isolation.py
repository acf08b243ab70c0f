"""An evaluator's ``timeout_s`` counts its own running time, never time spent waiting behind another evaluator.

A misbehaving evaluator (an async one that blocks its event loop, a sync one that hangs) is moved off what the
others share (its own loop, its own threads) and what it cost is counted in ``stats()["isolation"]``; a healthy
evaluator configured beside it reports no false timeout.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import threading
import time
import weakref

import pytest

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation._isolation import MAX_OWN_POOLS, EvaluatorThreads, Offenders
from evaltrace.evaluation._user_loop import UserLoop
from evaltrace.evaluation.runner import TimedOut
from evaltrace.schema import Trace

from .conftest import MakePipeline
from .helpers import make_trace


def test_an_async_evaluator_blocking_its_loop_on_every_span_gives_a_healthy_one_no_timeout(
    make_pipeline: MakePipeline,
) -> None:
    @evaluator(name="blocker")
    async def blocker(trace: Trace) -> bool:
        time.sleep(0.4)  # blocking call in async code, on every span
        return True

    @evaluator(name="healthy")
    async def healthy(trace: Trace) -> bool:
        await asyncio.sleep(0.01)
        return True

    p = make_pipeline([EvaluatorSpec(blocker, timeout_s=30), EvaluatorSpec(healthy, timeout_s=2.0)], hold_timeout_s=60)
    for i in range(10):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    assert p.processor.force_flush(60_000)
    stats = p.processor.stats()
    assert stats["evaluators"]["healthy"]["errors"] == 0, stats["evaluators"]
    assert stats["evaluators"]["healthy"]["passed"] == 10
    assert stats["evaluators"]["blocker"]["passed"] == 10  # slow is not an error: within its own timeout
    for i in range(10):
        assert p.one(f"s{i}").attributes["evaltrace.eval.healthy.passed"] is True
    isolated = stats["isolation"]["blocker"]
    assert isolated["isolated"] is True
    assert isolated["blocked_s"] >= 0.2  # the stall seen when it was caught
    assert isolated["others_moved"] >= 1 and isolated["calls_moved"] >= 1
    assert "healthy" not in stats["isolation"]


def test_a_hung_sync_evaluator_in_a_burst_gives_a_healthy_one_no_timeout(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="hung")
    def hung(trace: Trace) -> bool:
        release.wait(30)
        return True

    @evaluator(name="healthy")
    def healthy(trace: Trace) -> bool:
        time.sleep(0.005)
        return True

    p = make_pipeline([EvaluatorSpec(hung, timeout_s=2.0), EvaluatorSpec(healthy, timeout_s=1.0)], hold_timeout_s=60)
    try:
        for i in range(50):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
        assert p.processor.force_flush(60_000)
        stats = p.processor.stats()
    finally:
        release.set()
    assert stats["evaluators"]["healthy"]["errors"] == 0, stats["evaluators"]
    assert stats["evaluators"]["healthy"]["passed"] == 50
    hung_stats = stats["evaluators"]["hung"]
    assert hung_stats["timed_out"] + hung_stats.get("not_evaluated_by_reason", {}).get("overloaded", 0) == 50
    isolated = stats["isolation"]["hung"]
    assert isolated["isolated"] is True
    assert isolated["calls_moved"] >= 1
    assert "healthy" not in stats["isolation"]


def test_a_call_abandoned_on_the_pool_offenders_share_past_the_bound_is_counted_once() -> None:
    # Past MAX_OWN_POOLS offenders the last own pool is shared: one stuck call there is one stuck call.
    threads = EvaluatorThreads(1, Offenders())
    release = threading.Event()
    try:
        pools = [threads._own_pool(key) for key in range(MAX_OWN_POOLS + 2)]
        shared_by_three = pools[-1]
        assert pools[-3] is shared_by_three
        started = threading.Event()
        future = shared_by_three.submit(lambda: (started.set(), release.wait(60)))
        assert started.wait(30)
        shared_by_three.abandon(future)
        assert threads.abandoned == 1
    finally:
        release.set()
        threads.shutdown(wait=False)


class _Payload:
    """Stands for the trace a call holds (weakly referenceable, to see whether anything keeps it)."""


def test_an_async_offenders_calls_queued_behind_its_block_time_out_and_later_ones_are_not_queued_to_its_dead_loop() -> (
    None
):
    # Its loop blocked for good becomes its own; a call of it already queued there used to wait for ever (with an
    # async slot), and every later call left its start, holding the trace, on that loop.
    runner = UserLoop(stall_s=5.0)  # long: the second call is surely queued before the block is noticed
    blocking = threading.Event()
    release = threading.Event()

    class Offender:
        name = "blocks its loop"

    offender = Offender()

    async def block() -> str:
        blocking.set()
        release.wait(120)  # blocking code in a coroutine: the whole loop stops
        return "late"

    async def quick(payload: _Payload) -> str:
        return "never runs"

    async def main() -> float:
        blocker = asyncio.ensure_future(runner.run_timed(offender, block, None))
        assert await asyncio.to_thread(blocking.wait, 30)
        queued = time.monotonic()
        with pytest.raises(TimedOut):  # queued behind the block: timed out once the block makes it its own loop
            await asyncio.wait_for(runner.run_timed(offender, lambda: quick(_Payload()), 1.0), 60)
        waited = time.monotonic() - queued
        assert runner.offenders.isolated(id(offender))
        payload = _Payload()
        held = weakref.ref(payload)
        with pytest.raises(TimedOut):  # its loop has not turned for longer than the timeout: not queued there
            await runner.run_timed(offender, lambda p=payload: quick(p), 1.0)  # type: ignore[misc]
        del payload
        gc.collect()
        assert held() is None  # nothing (no start waiting on the dead loop) holds its trace
        release.set()
        assert await asyncio.wait_for(blocker, 60) == "late"
        return waited

    try:
        waited = asyncio.run(main())
    finally:
        release.set()
        runner.close()
    assert waited < 55


def test_a_whole_process_pause_is_not_taken_for_an_async_evaluator_blocking_its_loop() -> None:
    # At load 10 or in a long collection the loop's thread can miss its heartbeat past stall_s while nothing blocks
    # it: the process was not running. Here it is stopped outright (SIGSTOP, 1 s, four times); the watchdog, late
    # itself, must not restart the healthy evaluation on a new loop or name anyone.
    runner = UserLoop(stall_s=0.25)
    done = threading.Event()

    class Healthy:
        name = "healthy"

    healthy = Healthy()

    async def work() -> str:
        while not done.is_set():  # healthy: it awaits, the loop turns
            await asyncio.sleep(0.05)
        return "ok"

    async def main() -> str:
        task = asyncio.ensure_future(runner.run_timed(healthy, work, 600))
        await asyncio.sleep(0.5)  # its evaluation is running on the loop (awaiting) when the process stops
        pid = os.getpid()
        for _ in range(4):
            stopper = subprocess.Popen(["sh", "-c", f"kill -STOP {pid}; sleep 1; kill -CONT {pid}"])
            assert await asyncio.to_thread(stopper.wait, 60) == 0
            await asyncio.sleep(0.3)
        done.set()
        return await asyncio.wait_for(task, 60)

    try:
        assert asyncio.run(main()) == "ok"
    finally:
        done.set()
        runner.close()
    assert (runner.stalls, runner.moved) == (0, 0)
    assert not runner.offenders.isolated(id(healthy))


def test_a_call_queued_behind_a_hung_one_runs_once_its_replacement_thread_can_start_with_no_later_submit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The hung call's replacement thread cannot start (``can't start new thread``, injected) when it is let go.

    The call queued behind it (its timeout counts from its start, so nothing times it out) is not left waiting for
    some later submit: its own wait tries the owed thread again, and it runs once threads can start. The failure
    is logged as an internal error, once.

    The pool's other thread stays live (busy with a held call) throughout, so the queued call may still be served:
    with no live thread left it is refused at once instead (see ``test_engine_start.py::
    test_a_sync_evaluation_queued_behind_a_hung_one_whose_replacement_cannot_start_is_an_error_at_once``).
    """
    real = threading.Thread.start
    failing = [False]
    attempts: list[str] = []

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("evaltrace-eval-") and thread.name[15:].isdigit():
            attempts.append(thread.name)
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    caplog.set_level(logging.ERROR, logger="evaltrace")
    threads = EvaluatorThreads(2, Offenders())
    release = threading.Event()
    began = threading.Event()
    hold = threading.Event()
    held_began = threading.Event()

    @evaluator(name="holds")
    def holds(trace: Trace) -> bool:
        held_began.set()
        hold.wait(60)
        return True

    @evaluator(name="hangs")
    def hangs(trace: Trace) -> bool:
        began.set()
        release.wait(60)
        return True

    @evaluator(name="queued")
    def queued(trace: Trace) -> bool:
        return True

    async def main() -> None:
        held = asyncio.ensure_future(threads.call_timed(holds, make_trace(), None, None))
        assert await asyncio.to_thread(held_began.wait, 30)  # the pool's other thread: live, busy until the end
        hung = asyncio.ensure_future(threads.call_timed(hangs, make_trace(), None, 0.3))
        assert await asyncio.to_thread(began.wait, 30)  # with the held one, it fills the pool
        failing[0] = True
        waiting = asyncio.ensure_future(threads.call_timed(queued, make_trace(), None, None))
        with pytest.raises(TimedOut):
            await hung  # let go: its replacement cannot start
        assert attempts
        failing[0] = False  # threads can start again; nothing else is submitted
        output, _ = await asyncio.wait_for(waiting, 30)
        assert output.passed is True
        assert not held.done()  # served by the replacement, not by the held call's thread
        hold.set()
        assert (await asyncio.wait_for(held, 30))[0].passed is True

    try:
        asyncio.run(main())
    finally:
        hold.set()
        release.set()
        threads.shutdown(wait=False)
    logged = [r for r in caplog.records if "replacement for an abandoned evaluator thread" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
