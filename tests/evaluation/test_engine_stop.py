"""``Engine.stop`` strands no job: each one handed to the engine is finished, or cut short and counted.

The interleavings a shutdown can meet are forced with events, on the engine itself with a scripted runner:
a job the fast lane hands to the loop after ``cancel_all``, one handed after the loop stopped, a job still
running on the loop when ``stop`` comes, a job submitted after ``stop``, a batch the dispatcher routes while
``stop`` runs (to the lane, or to a loop that is stopping or closed), and jobs waiting on the lane at ``stop``.
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
        self.routing: dict[str, tuple[threading.Event, threading.Event]] = {}  # job -> (entered, gate)

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
        held = self.routing.get(job)
        if held is not None:  # the dispatcher holds this job's batch until the test lets it go
            entered, gate = held
            entered.set()
            assert gate.wait(10)
        return job.startswith("lane:")

    def hold_routing(self, job: str) -> tuple[threading.Event, threading.Event]:
        """Make the dispatcher wait, with ``job``'s batch in hand, until the returned gate is set."""
        held = self.routing[job] = (threading.Event(), threading.Event())
        return held

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
        for _, gate in runner.routing.values():
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


def _stop_in_thread(eng: Engine, timeout_s: float) -> threading.Thread:
    stopping = threading.Thread(target=eng.stop, args=(timeout_s,))
    stopping.start()
    return stopping


def test_a_batch_the_dispatcher_routes_to_the_lane_while_stop_runs_is_not_stranded(
    engine: tuple[Engine, ScriptedRunner],
) -> None:
    eng, runner = engine
    warm = runner.lane_job("warm")  # the lane has a worker when stop comes
    eng.submit(warm)
    assert runner.on_lane["warm"].wait(5)
    runner.gates["warm"].set()
    job = runner.lane_job("routed")
    runner.gates["routed"].set()
    entered, gate = runner.hold_routing(job)
    eng.submit(job)
    assert entered.wait(5)  # the dispatcher has the batch in hand and has not given it to the lane yet
    stopping = _stop_in_thread(eng, 5.0)
    assert wait_until(lambda: eng._stopped)
    gate.set()  # was: the lane got the batch behind its stop marker and never ran, cut or counted it
    stopping.join(10)
    assert not stopping.is_alive()
    assert runner.ended.get(job) == ["cut"]
    assert eng.lane is not None and not eng.lane.busy()


def test_jobs_waiting_on_the_lane_at_stop_are_cut_short_before_stop_returns(
    engine: tuple[Engine, ScriptedRunner],
) -> None:
    eng, runner = engine
    running, waiting = runner.lane_job("running"), [runner.lane_job(f"waiting-{i}") for i in range(3)]
    for job in (running, *waiting):
        eng.submit(job)
    assert runner.on_lane["running"].wait(5)
    assert eng.lane is not None and wait_until(lambda: eng.lane is not None and eng.lane._outstanding == 4)
    stopping = _stop_in_thread(eng, 0.2)  # the running job outlasts its wait: stop returns without it
    stopping.join(10)
    assert not stopping.is_alive()
    for job in waiting:  # was: left on the lane, run (or not) after the exporters had shut down
        assert runner.ended.get(job) == ["cut"]
    runner.gates["running"].set()
    assert wait_until(lambda: _ended_once(runner, running))
    assert runner.ended[running] == ["cut"]  # handed to a stopped engine: cut short
    assert not eng.lane.busy()


def test_a_batch_dispatched_once_the_loop_is_closed_is_cut_short(engine: tuple[Engine, ScriptedRunner]) -> None:
    eng, runner = engine
    entered, gate = runner.hold_routing("held")
    eng.submit("held")
    assert entered.wait(5)
    eng.stop(0.1)  # the dispatcher's join gives up; the loop winds down and closes
    assert eng.loop.is_closed()
    gate.set()  # was: "loop closed" logged and the batch dropped, uncounted
    assert wait_until(lambda: _ended_once(runner, "held"))
    assert runner.ended["held"] == ["cut"]


def test_a_batch_sent_while_the_loop_stops_still_runs_and_is_cut_short(
    engine: tuple[Engine, ScriptedRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    eng, runner = engine
    entered, gate = runner.hold_routing("in-transit")
    eng.submit("in-transit")
    assert entered.wait(5)
    stop_loop = eng.loop.stop
    first = [True]

    def stop_then_send() -> None:
        # On the loop thread, as the loop stops: the dispatcher sends its batch now, before the loop is closed.
        stop_loop()
        if first[0]:
            first[0] = False
            gate.set()
            eng._dispatcher.join(5)

    monkeypatch.setattr(eng.loop, "stop", stop_then_send)
    eng.stop(0.1)
    assert not eng._dispatcher.is_alive()
    assert runner.ended.get("in-transit") == ["cut"]  # was: scheduled, then discarded by loop.close()
