"""The dispatcher routes, supervises and hands over every job as it did before s18-evdisp.

``Engine._dispatch`` now runs ``_next``, ``FastLane.busy``, ``_to_lane`` and ``_supervise`` inline (one frame per
batch). The dispatcher as it was is kept here verbatim (``OldEngine``); both run the same scripts on the test
thread, deterministically: a scripted inbox (jobs, "empty now" reads that end a batch or time a supervision wait
out, actions that stop or cancel the engine or the lane, make the lane busy, start an evaluator call on its worker,
turn a send down), a lane whose worker is a plain ``Worker`` without a thread (the supervisor's reads are then the
script's), a fixed clock, and a runner that answers ``fast_eligible`` and ``hold_deadline`` per job (or raises:
our own failure, which turns the lane off). Every call the dispatcher makes (inbox reads, the coalescing sleep,
eligibility and slow checks, lane submits, worker starts, hold deadlines, hand-offs to the loop, sends, cuts,
lane failures) is recorded in order, and the lane's and the engine's state compared after each script.
"""

from __future__ import annotations

import queue
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from evaltrace._internal.daemon_pool import StuckCalls
from evaltrace.evaluation import _engine, _fast_lane
from evaltrace.evaluation._engine import _BATCH, _COALESCE_S, _STOP, Engine
from evaltrace.evaluation._fast_lane import FastLane, Worker

NOW = 1000.0


class OldEngine(Engine):
    """``Engine`` with its dispatcher as on main before s18-evdisp (verbatim)."""

    def _dispatch(self) -> None:
        while True:
            first = self._next()
            if first is None:
                continue
            if first is _STOP:
                return
            # Let a burst accumulate: one wake-up of the loop per batch instead of one per span keeps the
            # worker threads from taking the GIL off the application thread on every span end.
            time.sleep(_COALESCE_S)
            batch = [first]
            stop = False
            while len(batch) < _BATCH:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            if self._stopped or self._cancelled:  # past stop's or cancel_all's sweep: nothing new starts
                self._cut_short([(job, None) for job in batch])
                batch = []
            elif self.lane is not None:
                batch = self._to_lane(self.lane, batch)
            if batch and not self._send(self._start_batch, batch):  # the loop is closing: nothing runs any more
                self._cut_short([(job, None) for job in batch])
                self._drain_inbox()
                return
            if stop:
                return
            # This thread then waits for the next job: its locals must not keep the last batch's spans alive
            # meanwhile (a trace held in its session would otherwise pin its spans until the next span ends).
            first = item = None
            batch = []

    def _next(self) -> Any:
        """The next job (or ``_STOP``); None after supervising the busy fast lane when none came in time."""
        lane = self.lane
        if lane is None or not lane.busy():
            return self._inbox.get()
        try:  # the lane has work: wake up to supervise it even when no job arrives
            return self._inbox.get(timeout=lane.tick_s)
        except queue.Empty:
            self._supervise(lane)
            return None

    def _to_lane(self, lane: FastLane, batch: list[Any]) -> list[Any]:
        """Queue the fast lane's jobs of ``batch`` there; return the others (for the loop)."""
        fast_runner = self._fast
        assert fast_runner is not None  # set with the lane
        if self._lane_off:
            return batch
        fast: list[Any] = []
        rest: list[Any] = []
        try:  # our own failure here (a thread that cannot start, ...) must not stop the dispatcher
            eligible, is_slow = fast_runner.fast_eligible, lane.is_slow
            for job in batch:
                (fast if eligible(job, is_slow) else rest).append(job)
            if fast and not lane.submit(fast):  # queues nothing when it raises
                rest += fast  # the lane was stopped: _start_batch (or _send's refusal) cuts them short
        except Exception:
            self._lane_failed(lane, "routing evaluation jobs to the fast lane")
            return batch
        self._supervise(lane)
        return rest

    def _supervise(self, lane: FastLane) -> None:
        try:
            lane.supervise()
        except Exception:
            self._lane_failed(lane, "supervising the fast lane")


class Job:
    def __init__(self, name: str, rng: random.Random) -> None:
        self.name = name
        self.eligible = rng.random() < 0.7
        self.raises = rng.random() < 0.04  # fast_eligible raises: our own failure, the lane turns off
        self.evaluator = rng.choice(("a", "b", "c"))
        # The hold deadline: far, close (the job leaves the lane), or raising (supervision fails).
        self.deadline = rng.choice((NOW + 3600.0, NOW + 3600.0, NOW + 0.1, None))

    def __repr__(self) -> str:
        return self.name


EMPTY = object()  # the inbox is empty at this read
# An item is there when the dispatcher asks ``qsize()`` (s20-evapp3), and the one other reader of the inbox (stop()'s
# drain) takes it before the dispatcher's ``get_nowait()``: to the old dispatcher, whose one read was get_nowait(),
# the inbox was empty at that read.
RACED = object()


class Act:
    def __init__(self, name: str, do: Callable[[Any], None]) -> None:
        self.name = name
        self.do = do


class Inbox:
    """The engine's inbox, scripted: each read logs itself and takes the next entry."""

    def __init__(self, script: list[Any], setup: Any) -> None:
        self.items = list(script)
        self.setup = setup
        self.peeked = False  # qsize() found entries: the get_nowait() that follows is the same read
        self.asked: list[int] = []  # what qsize() answered, in order

    def _take(self, blocking: bool, nowait: bool = False) -> Any:
        while self.items:
            item = self.items.pop(0)
            if isinstance(item, Act):
                self.setup.log.append(("act", item.name))
                item.do(self.setup)
                continue
            if item is EMPTY or item is RACED:
                if blocking:  # a blocking read waits for the next entry
                    continue
                raise queue.Empty
            return item
        if nowait:
            raise queue.Empty
        return _STOP  # the script's end: the dispatcher stops (a supervision wait too, never an endless one)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        self.setup.log.append(("get", timeout))
        return self._take(timeout is None)

    def get_nowait(self) -> Any:
        if self.peeked:
            self.peeked = False
        else:
            self.setup.log.append(("get_nowait",))
        return self._take(False, nowait=True)

    def qsize(self) -> int:
        """Since s20-evapp3 the dispatcher asks ``qsize()`` within a batch, then reads that many with ``get_nowait()``.

        A ``qsize()`` is a read of the script, logged as ``get_nowait()`` alone was: the actions before the entry run
        here (where that read ran them); an empty read or the script's end answers 0 (taken, as that read took it);
        otherwise the entries up to the next action or empty read are there, and the first ``get_nowait()`` after
        this is the same read (not logged again), each further one a read of its own, as before.
        """
        self.setup.log.append(("get_nowait",))
        while self.items and isinstance(self.items[0], Act):
            act = self.items.pop(0)
            self.setup.log.append(("act", act.name))
            act.do(self.setup)
        if not self.items or self.items[0] is EMPTY:
            if self.items:
                self.items.pop(0)
            self.asked.append(0)
            return 0
        count = 0
        for item in self.items:
            if isinstance(item, Act) or item is EMPTY:
                break
            count += 1
        self.peeked = True
        self.asked.append(count)
        return count

    def put(self, item: Any) -> None:  # the engine's _drain_inbox never runs here (recorded instead)
        raise AssertionError("not expected")


class Runner:
    def __init__(self, setup: Any) -> None:
        self.setup = setup

    def fast_eligible(self, job: Job, is_slow: Callable[[Any], bool]) -> bool:
        self.setup.log.append(("eligible", job.name))
        if job.raises:
            raise RuntimeError("our own failure")
        slow = is_slow(job.evaluator)
        self.setup.log.append(("slow", job.evaluator, slow))
        return job.eligible and not slow

    def lane_failed(self) -> None:
        self.setup.log.append(("lane_failed",))

    def slow_after_s(self) -> float:
        return 0.2

    def run_now(self, job: Any, worker: Worker) -> None:
        raise AssertionError("no worker thread runs here")

    def cancel_now(self, job: Any, progress: Any) -> None:
        self.setup.log.append(("cancel_now", repr(job), progress is not None))

    def hold_deadline(self, job: Job) -> float:
        self.setup.log.append(("hold_deadline", job.name))
        if job.deadline is None:
            raise RuntimeError("our own failure")
        return job.deadline


class ScriptLane(FastLane):
    """A lane whose workers are plain ``Worker`` objects: no thread takes its batches (the script's state stays)."""

    setup: Any

    def _start_worker_locked(self, pending: list[Any] | None = None) -> None:
        self.setup.log.append(("start_worker", [repr(job) for job in pending or ()]))
        if self.setup.fail_start:
            raise RuntimeError("can't start new thread")
        self._serial += 1
        self._worker = Worker(self, pending)


class Setup:
    def __init__(self, engine_type: type[Engine], script: list[Any], slow: dict[str, float]) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.fail_start = False
        self.send_ok = True
        engine = self.engine = engine_type(sync_workers=1, max_async_concurrency=1)
        runner = Runner(self)
        engine._fast = runner  # type: ignore[assignment]
        lane = self.lane = ScriptLane(runner, self.hand_off, slow_s=0.2)
        lane.setup = self
        lane._slow.update({id(name): at for name, at in slow.items()})  # is_slow keys by id()
        engine.lane = lane
        engine._inbox = Inbox(script, self)  # type: ignore[assignment]
        engine._send = self.send  # type: ignore[method-assign]
        engine._cut_short = self.cut_short  # type: ignore[method-assign]
        engine._drain_inbox = self.drain  # type: ignore[method-assign]

    def hand_off(self, items: list[tuple[Any, Any]]) -> None:
        self.log.append(("hand_off", [(repr(job), progress is not None) for job, progress in items]))

    def send(self, callback: Callable[[list[Any]], None], items: list[Any]) -> bool:
        self.log.append(("send", callback.__name__, [repr(job) for job in items], self.send_ok))
        return self.send_ok

    def cut_short(self, items: list[tuple[Any, Any]]) -> None:
        self.log.append(("cut_short", [(repr(job), progress) for job, progress in items]))

    def drain(self) -> None:
        self.log.append(("drain",))

    def state(self) -> tuple[Any, ...]:
        lane, engine = self.lane, self.engine
        worker = lane._worker
        return (
            lane._outstanding,
            lane.demoted,
            lane.moved,
            lane._serial,
            lane.stopped,
            lane.cancelled,
            sorted(lane._slow.values()),
            sorted(lane._overran.values()),
            engine._lane_off,
            None if worker is None else (repr(worker.job), list(map(repr, worker.pending)), worker.since),
            None if worker is None or worker.demoted is None else worker.demoted.counted,
            [repr(batch) for batch in _fast_lane.take_all(lane._queue, _fast_lane._STOP)[0]],
        )


class FakeTime:
    """``time`` as the engine and the lane read it: a fixed clock, a logged sleep."""

    def __init__(self) -> None:
        self.setup: Setup | None = None

    def monotonic(self) -> float:
        return NOW

    def sleep(self, seconds: float) -> None:
        assert self.setup is not None
        self.setup.log.append(("sleep", seconds))


def _busy(setup: Setup) -> None:
    setup.lane._outstanding += 2


def _idle(setup: Setup) -> None:
    setup.lane._outstanding = 0


def _in_call(since: float) -> Callable[[Setup], None]:
    def start(setup: Setup) -> None:  # the lane's worker is in an evaluator call of the first job it holds
        worker = setup.lane._worker
        if worker is None or worker.demoted is not None:
            return
        if worker.job is None and worker.pending:
            worker.job = worker.pending.popleft()
        if worker.job is not None:
            worker.since = since
            worker.evaluator = "a"

            class Progress:
                inflight: Any = None
                started: Any = None

            worker.progress = Progress()

    return start


def _take_batches(setup: Setup) -> None:  # the worker takes what was queued to it (its pending, not yet begun)
    worker = setup.lane._worker
    if worker is not None and worker.demoted is None:
        batches, _ = _fast_lane.take_all(setup.lane._queue, _fast_lane._STOP)
        for batch in batches:
            worker.pending.extend(batch)


def _set(name: str, value: Any) -> Callable[[Setup], None]:
    def do(setup: Setup) -> None:
        setattr(setup, name, value)

    return do


def _flag(where: str, name: str) -> Callable[[Setup], None]:
    def do(setup: Setup) -> None:
        setattr(setup.engine if where == "engine" else setup.lane, name, True)

    return do


ACTIONS = [
    (6, lambda: Act("busy", _busy)),
    (2, lambda: Act("idle", _idle)),
    (5, lambda: Act("take", _take_batches)),
    (3, lambda: Act("call", _in_call(NOW - 0.05))),
    (2, lambda: Act("long call", _in_call(NOW - 5.0))),
    (1, lambda: Act("send refused", _set("send_ok", False))),
    (1, lambda: Act("start fails", _set("fail_start", True))),
    (1, lambda: Act("start works", _set("fail_start", False))),
    (1, lambda: Act("engine stopped", _flag("engine", "_stopped"))),
    (1, lambda: Act("engine cancelled", _flag("engine", "_cancelled"))),
    (1, lambda: Act("lane stopped", _flag("lane", "stopped"))),
    (1, lambda: Act("lane cancelled", _flag("lane", "cancelled"))),
]


def _script(seed: int) -> tuple[list[Any], dict[str, float]]:
    rng = random.Random(seed)
    script: list[Any] = []
    weights = [weight for weight, _ in ACTIONS]
    for number in range(rng.randint(1, 40)):
        roll = rng.random()
        if roll < 0.55:
            script.append(Job(f"j{number}", rng))
        elif roll < 0.8:
            script.append(EMPTY)
        elif roll < 0.83:
            script.append(_STOP)
        else:
            script.append(rng.choices(ACTIONS, weights)[0][1]())
    slow = {name: NOW - rng.choice((1.0, 20.0)) for name in rng.sample(("a", "b", "c"), rng.randint(0, 2))}
    return script, slow


def _run(
    engine_type: type[Engine],
    seed: int,
    monkeypatch: pytest.MonkeyPatch,
    edit: Callable[[list[Any]], list[Any]] | None = None,
    asked: list[int] | None = None,
) -> tuple[Any, ...]:
    script, slow = _script(seed)
    if edit is not None:
        script = edit(script)
    clock = FakeTime()
    monkeypatch.setattr(_engine, "time", clock)
    monkeypatch.setattr(_fast_lane, "time", clock)
    monkeypatch.setattr(sys.modules[__name__], "time", clock)  # OldEngine's (verbatim: it reads this module's)
    # A demoted call's thread never runs here, so it never returns: counted in the process's stuck_calls, it
    # stayed stuck for every later test in this xdist worker (test_stuck_threads waits for the count to fall).
    monkeypatch.setattr(_fast_lane, "stuck_calls", StuckCalls())
    setup = clock.setup = Setup(engine_type, script, slow)
    try:
        setup.engine._dispatch()
    finally:
        setup.engine.loop.close()  # never run: its threads were never started
    if asked is not None:
        asked.extend(setup.engine._inbox.asked)  # type: ignore[attr-defined]
    return setup.log, setup.state()


def test_the_scripts_reach_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts below are worth comparing: together they take every branch of the old dispatcher."""
    seen: set[str] = set()
    for seed in range(SEEDS):
        log, state = _run(OldEngine, seed, monkeypatch)
        kinds = {entry[0] for entry in log}
        seen |= kinds
        seen |= {"demoted"} if state[1] else set()
        seen |= {"moved"} if state[2] else set()
        seen |= {"lane off"} if state[8] else set()
        seen |= {"timed out"} if any(a[0] == "get" and a[1] is not None for a in log) else set()
        seen |= {"refused"} if any(a[0] == "send" and not a[3] for a in log) else set()
    assert seen >= {
        "get", "get_nowait", "sleep", "eligible", "slow", "start_worker", "hold_deadline", "hand_off", "send",
        "cut_short", "drain", "lane_failed", "cancel_now", "demoted", "moved", "lane off", "timed out", "refused",
    }  # fmt: skip


SEEDS = 3000


@pytest.mark.parametrize("block", range(6))
def test_the_dispatcher_does_what_it_did(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(block * SEEDS // 6, (block + 1) * SEEDS // 6):
        old = _run(OldEngine, seed, monkeypatch)
        new = _run(Engine, seed, monkeypatch)
        assert new == old, seed


def _raced(script: list[Any]) -> list[Any]:
    """Every other empty read of ``script`` an item another reader takes between qsize() and get_nowait()."""
    out: list[Any] = []
    count = 0
    for item in script:
        if item is EMPTY:
            count += 1
            item = RACED if count % 2 else EMPTY
        out.append(item)
    return out


def test_an_item_taken_between_qsize_and_get_nowait_ends_the_batch_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """s20-evapp3: ``qsize()`` said items were there, and stop()'s drain took one before ``get_nowait()``.

    The dispatcher's ``except queue.Empty`` ends the batch there, as the old dispatcher's empty ``get_nowait()``
    did: the same calls and state.
    """
    raced = 0
    for seed in range(SEEDS // 3):
        old = _run(OldEngine, seed, monkeypatch, _raced)
        new = _run(Engine, seed, monkeypatch, _raced)
        assert new == old, seed
        raced += sum(1 for item in _raced(_script(seed)[0]) if item is RACED)
    assert raced > 100


def test_the_dispatcher_reads_a_batch_in_rounds_of_qsize(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above are not vacuous: the new dispatcher asks ``qsize()``; it finds the inbox empty, one
    entry, and several (a round of more than one read)."""
    asked: list[int] = []
    for seed in range(200):
        _run(Engine, seed, monkeypatch, asked=asked)
    assert asked.count(0) > 50 and asked.count(1) > 50 and sum(1 for n in asked if n > 1) > 50


def test_a_burst_past_a_full_batch_is_cut_into_the_same_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """More jobs waiting than a batch holds: the round of reads stops at ``_BATCH``, as the old reads did."""

    def burst(script: list[Any]) -> list[Any]:
        return [Job(f"b{n}", random.Random(n)) for n in range(2 * _BATCH + 88)] + [EMPTY] + script

    for seed in range(20):
        asked: list[int] = []
        old = _run(OldEngine, seed, monkeypatch, burst)
        new = _run(Engine, seed, monkeypatch, burst, asked)
        assert new == old, seed
        assert max(asked) > _BATCH  # more were there than the batch had room for
