"""The lane worker's loop does what it did before it took one lock pass per job (s17-evlane).

``FastLane._work`` now counts a finished job out and takes the next one in one locked step, and runs the job
inline instead of in ``_run``. The loop as it was is kept here verbatim (``OldLane``) and both run the same
scripted batches: a job that finishes, one handed to the loop, one whose runner raises (our own bug: logged, the
lane goes on), one cut short after ``cancel``, and one whose evaluator call the supervisor demotes (the worker ends,
a new one takes the rest of its batch). What each job saw on the lane (which worker, ``worker.job``, the rest of its
batch, the lane's outstanding count), how each ended, and the lane's counters must be the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation import evaluator
from evaltrace.evaluation._fast_lane import _STOP, Demoted, FastLane, Worker

from .conftest import wait_until


class OldLane(FastLane):
    """``FastLane`` with its worker loop as on main before s17-evlane (verbatim)."""

    def _work(self, me: Worker) -> None:
        while True:
            with self.lock:
                job = me.pending.popleft() if me.pending else None
                me.job = job
            if job is None:
                batch = self._queue.get()
                if batch is _STOP:
                    return
                with self.lock:
                    me.pending.extend(batch)
                continue
            self._run(me, job)
            if me.demoted is not None:
                return  # the supervisor took this job and the rest; a new worker runs the lane

    def _run(self, me: Worker, job: Any) -> None:
        try:
            if self.cancelled:
                self._runner.cancel_now(job, None)
            else:
                self._runner.run_now(job, me)
        except Demoted:
            return  # the job is the loop's now (and no longer counted here)
        except BaseException:  # the runner finishes its job whatever happens: only our own bug gets here
            log_internal_error("running an evaluation job on the fast lane")
        with self.lock:
            me.job = None
            self._finished_locked(1)


class Progress:
    inflight: Any = None
    started: float | None = None


class Runner:
    """Runs scripted jobs: ``ok*`` finish, ``loop*`` hand themselves to the loop, ``bug*`` raise, ``slow*`` call
    an evaluator that waits for ``release`` (the test demotes it meanwhile)."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []
        self.ended: list[tuple[str, str]] = []
        self.in_call = threading.Event()
        self.release = threading.Event()
        self.lane: FastLane | None = None

    def _saw(self, job: str, worker: Worker) -> None:
        lane = worker.lane
        with lane.lock:
            self.seen.append((job, worker.job == job, tuple(worker.pending), lane._outstanding, lane._worker is worker))

    def run_now(self, job: str, worker: Worker) -> None:
        self._saw(job, worker)
        if job.startswith("loop"):
            worker.lane.hand_off([(job, "progress")])
        elif job.startswith("bug"):
            raise RuntimeError("a bug of ours")
        elif job.startswith("abort"):
            raise KeyboardInterrupt  # a BaseException: logged, the lane goes on
        elif job.startswith("slow"):

            @evaluator(name="waits")
            def wait(trace: Any) -> bool:
                self.in_call.set()
                assert self.release.wait(10)
                return True

            worker.call(wait, None, job, Progress())  # raises Demoted once the test demoted it
        self.ended.append((job, "ran"))

    def cancel_now(self, job: str, progress: Any) -> None:
        self.ended.append((job, "cut" if progress is None else "cut-in-call"))

    def hold_deadline(self, job: str) -> float:
        return time.monotonic() + 3600.0


def _drive(lane_type: type[FastLane], batches: list[list[str]], demote: bool, cancel_after: int | None) -> Any:
    runner = Runner()
    handed: list[tuple[str, Any]] = []
    lane = lane_type(runner, lambda items: handed.extend((job, type(p).__name__) for job, p in items), slow_s=0.05)
    runner.lane = lane
    for number, batch in enumerate(batches):
        assert lane.submit(batch)
        if demote and any(job.startswith("slow") for job in batch):
            assert runner.in_call.wait(10)
            time.sleep(0.06)  # past slow_s: the supervisor demotes the call
            lane.supervise()
            runner.release.set()
        if cancel_after is not None and number == cancel_after:
            assert wait_until(lambda: not lane.busy())
            lane.cancelled = True
        assert wait_until(lambda: not lane.busy())
    lane.stop(5.0)
    return runner.seen, sorted(runner.ended), sorted(handed), lane._outstanding, lane.demoted, lane.moved, lane._serial


SCRIPTS = {
    "plain": ([["ok1", "ok2", "ok3"], ["ok4"], ["ok5", "ok6"]], False, None),
    "mixed": ([["ok1", "loop1", "bug1", "ok2"], ["abort1", "ok3", "loop2"], ["bug2"]], False, None),
    "cancelled": ([["ok1", "ok2"], ["ok3", "ok4"], ["ok5"]], False, 0),
    "demoted": ([["ok1", "slow1", "ok2", "ok3"], ["ok4", "loop1"]], True, None),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_worker_loop_runs_every_job_as_before(script: str) -> None:
    batches, demote, cancel_after = SCRIPTS[script]
    old = _drive(OldLane, batches, demote, cancel_after)
    new = _drive(FastLane, batches, demote, cancel_after)
    assert new == old
    seen, ended, handed, outstanding, demoted, _, serial = new
    assert outstanding == 0
    assert EXPECTED[script] == (sorted(job for job, *_ in seen), ended, handed, demoted, serial)


EXPECTED: dict[str, tuple[Any, ...]] = {
    "plain": (["ok1", "ok2", "ok3", "ok4", "ok5", "ok6"], [(f"ok{n}", "ran") for n in range(1, 7)], [], 0, 1),
    "mixed": (
        ["abort1", "bug1", "bug2", "loop1", "loop2", "ok1", "ok2", "ok3"],
        [("loop1", "ran"), ("loop2", "ran"), ("ok1", "ran"), ("ok2", "ran"), ("ok3", "ran")],
        [("loop1", "str"), ("loop2", "str")],
        0,
        1,
    ),
    "cancelled": (
        ["ok1", "ok2"],
        [("ok1", "ran"), ("ok2", "ran"), ("ok3", "cut"), ("ok4", "cut"), ("ok5", "cut")],
        [],
        0,
        1,
    ),
    "demoted": (  # slow1 went to the loop mid-call with its progress; a second worker ran the rest
        ["loop1", "ok1", "ok2", "ok3", "ok4", "slow1"],
        [("loop1", "ran"), ("ok1", "ran"), ("ok2", "ran"), ("ok3", "ran"), ("ok4", "ran")],
        [("loop1", "str"), ("slow1", "Progress")],
        1,
        2,
    ),
}
