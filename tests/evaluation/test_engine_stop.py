"""``Engine.stop`` strands no job: each one handed to the engine is finished, or cut short and counted.

The interleavings a shutdown can meet are forced with events, on the engine itself with a scripted runner:
a job the fast lane hands to the loop after ``cancel_all``, one handed after the loop stopped, a job still
running on the loop when ``stop`` comes, and a job submitted after ``stop``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evaltrace.evaluation._engine import Engine
from evaltrace.evaluation._fast_lane import Worker

from .conftest import wait_until


class ScriptedRunner:
    """A job runner that records how each job ended: ``ran`` (finished), ``cancelled`` (on the loop), ``cut``.

    Job ``"lane:<name>"`` runs on the fast lane: it waits for ``gates[name]`` and then hands itself to the loop
    (as a retryable failure does). Every job on the loop waits for ``release`` (an evaluation still running).
    """

    def __init__(self) -> None:
        self.ended: dict[str, list[str]] = {}
        self.gates: dict[str, threading.Event] = {}
        self.on_lane: dict[str, threading.Event] = {}
        self.release = asyncio.Event()
        self.lock = threading.Lock()

    def _end(self, job: str, how: str) -> None:
        with self.lock:
            self.ended.setdefault(job, []).append(how)

    async def run(self, job: str, progress: Any = None) -> None:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self._end(job, "cancelled")
            raise
        self._end(job, "ran")

    def fast_eligible(self, job: str, is_slow: Callable[[Any], bool]) -> bool:
        return job.startswith("lane:")

    def run_now(self, job: str, worker: Worker) -> None:
        name = job.removeprefix("lane:")
        self.on_lane[name].set()
        assert self.gates[name].wait(10)
        worker.lane.hand_off([(job, "progress")])

    def cancel_now(self, job: str, progress: Any) -> None:
        self._end(job, "cut")

    def hold_deadline(self, job: str) -> float:
        return float("inf")

    def lane_failed(self) -> None:
        raise AssertionError("the lane's machinery failed")

    def slow_after_s(self) -> float:
        return 60.0  # never demote: the scripted calls are not evaluator calls

    def lane_job(self, name: str) -> str:
        self.gates[name] = threading.Event()
        self.on_lane[name] = threading.Event()
        return f"lane:{name}"


@pytest.fixture
def engine() -> Iterator[tuple[Engine, ScriptedRunner]]:
    runner = ScriptedRunner()
    engine = Engine(sync_workers=1, max_async_concurrency=4)
    engine.start(runner.run, fast=runner)
    try:
        yield engine, runner
    finally:
        for gate in runner.gates.values():
            gate.set()
        engine.stop(1.0)


def _ended_once(runner: ScriptedRunner, job: str) -> bool:
    with runner.lock:
        return len(runner.ended.get(job, [])) == 1


def test_a_job_the_lane_hands_to_the_loop_after_cancel_all_is_cut_short(
    engine: tuple[Engine, ScriptedRunner],
) -> None:
    eng, runner = engine
    job = runner.lane_job("late")
    eng.submit(job)
    assert runner.on_lane["late"].wait(5)
    eng.cancel_all()  # the shutdown deadline: the loop's tasks were cancelled before this job reached it
    runner.gates["late"].set()
    assert wait_until(lambda: _ended_once(runner, job))
    eng.stop(1.0)
    assert runner.ended[job] in (["cut"], ["cancelled"])


def test_a_job_the_lane_hands_over_after_stop_is_cut_short(engine: tuple[Engine, ScriptedRunner]) -> None:
    eng, runner = engine
    job = runner.lane_job("after-stop")
    eng.submit(job)
    assert runner.on_lane["after-stop"].wait(5)
    eng.stop(0.5)  # the loop is closed by the time the lane hands the job over
    runner.gates["after-stop"].set()
    assert wait_until(lambda: _ended_once(runner, job))
    assert runner.ended[job] == ["cut"]


def test_a_job_still_running_on_the_loop_at_stop_is_cancelled_not_dropped(
    engine: tuple[Engine, ScriptedRunner],
) -> None:
    eng, runner = engine
    eng.submit("on-loop")
    assert wait_until(lambda: len(eng._tasks) == 1)
    eng.stop(1.0)  # no cancel_all before: the task would be left pending on a stopped loop
    assert runner.ended.get("on-loop") == ["cancelled"]


def test_a_job_submitted_after_stop_is_cut_short(engine: tuple[Engine, ScriptedRunner]) -> None:
    eng, runner = engine
    eng.submit("first")  # the threads run
    assert wait_until(lambda: len(eng._tasks) == 1)
    eng.stop(1.0)
    eng.submit("too-late")
    assert runner.ended.get("too-late") == ["cut"]
    assert runner.ended.get("first") == ["cancelled"]
