"""The lane worker's call and the job's publication claim take their lock without ``with`` (s20-evrec2), as before.

``Worker.call`` (the lane's lock around counting the call) and ``_job_publish.claim`` (the context's live lock around
the claim) now take it with ``acquire()`` and a ``finally: release()``. The old two are kept verbatim below and given
the same calls: for ``Worker.call`` (which also takes ``min(slow_s, timeout_s)`` without its call), a script of
evaluator calls (stamped and not, every answer kind, an exception,
calls the supervisor demoted mid-call, counted or not) with the clock pinned, compared after each call on what it
returned or raised, the worker's fields, the lane's per-evaluator averages, recent-call bits, warm set and slow
marks, and the demoted call's outcome; ``note_call`` runs under the lock, which is free after every call. For
``claim``: its answer and the job's ``published`` list for every state of a job, the lock free after, and a claim
waiting while another thread holds the lock.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import importlib
import itertools
import threading
import types
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from evaltrace.evaluation import EvaluatorSpec, _fast_lane
from evaltrace.evaluation._fast_lane import Demoted, DemotedCall, FastLane, Worker
from evaltrace.evaluation._job_publish import claim
from evaltrace.evaluation._job_types import Job, new_progress
from evaltrace.evaluation.evaluator import evaluator
from evaltrace.evaluation.runner import call_evaluator, call_evaluator_stamped
from evaltrace.schema import EvaluationResult, Trace

evaluator_module = importlib.import_module("evaltrace.evaluation.evaluator")
T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)
IDS = itertools.count()


class _Clock:
    """``time`` for the code under test: ``monotonic()`` steps through a fixed script of increments."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.at = 100.0
        self.steps = itertools.cycle([0.001, 0.02, 0.0005, 0.03, 0.05, 0.002, 0.0001, 0.04])

    def monotonic(self) -> float:
        self.at += next(self.steps)
        return self.at


CLOCK = _Clock()
time = CLOCK  # what the old code below reads: time.monotonic()


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fast_lane, "time", CLOCK)
    monkeypatch.setattr(
        evaluator_module,
        "dt",
        types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda tz=None: T0), UTC=dt.UTC),
    )
    monkeypatch.setattr(evaluator_module, "evaluation_id", lambda: f"eval_{next(IDS):06d}")


# ---- the old code, verbatim (s19: evaluation/_fast_lane.py Worker.call, evaluation/_job_publish.py claim) ----------


class _OldWorker(Worker):
    __slots__ = ()

    def call(
        self,
        evaluator: Any,
        trace: Any,
        job: Any,
        progress: Any,
        timeout_s: float | None = None,
        started: dt.datetime | None = None,
    ) -> tuple[Any, Exception | None]:
        lane = self.lane
        self.job, self.progress, self.evaluator = job, progress, evaluator
        self.limit_s = lane.slow_s if timeout_s is None else min(lane.slow_s, timeout_s)
        since = self.since = time.monotonic()
        self.stamped = False
        try:  # neither call raises for the evaluator's sake
            if started is None:
                outcome = call_evaluator(evaluator, trace)
            else:
                produced, exc, self.stamped = call_evaluator_stamped(evaluator, trace, started)
                outcome = produced, exc
        finally:
            took_s = self.took_s = time.monotonic() - since
            with lane.lock:  # the supervisor (the dispatcher thread) counts demoted calls under it too
                demoted = self.demoted
                self.since = None
                # A call demoted for running too long was counted then (once: its end is the same slow call);
                # one the job's age (or shutdown) demoted is counted now, as any.
                if demoted is None or not demoted.counted:
                    lane.note_call(evaluator, took_s)
        if demoted is None:
            return outcome
        demoted.call_returned()  # counted stuck if the loop gave up on it meanwhile
        produced, exc = outcome
        try:  # the loop awaits it (unless its timeout or a cancellation gave up on it first)
            if exc is not None:
                demoted.set_exception(exc)
            else:
                demoted.set_result(produced)
        except concurrent.futures.InvalidStateError:
            pass
        raise Demoted


def old_claim(job: Job, spec: EvaluatorSpec, result: EvaluationResult, lock: Any) -> bool:
    with lock:
        if job.abandoned:
            return False
        done = job.published
        if isinstance(done, list):
            done.append((spec, result))
        else:
            job.published = [(spec, result)]
    return True


# ---- the lane ----------------------------------------------------------------------------------------------------


class _Runner:
    def run_now(self, job: Any, worker: Worker) -> None:
        raise AssertionError("the test calls the worker directly")

    def cancel_now(self, job: Any, progress: Any) -> None:
        raise AssertionError("the test calls the worker directly")


def _lock_free(lock: Any) -> bool:
    """Whether another thread can take ``lock`` now (it is released, not only by this thread)."""
    got: list[bool] = []

    def take() -> None:
        ok = lock.acquire(blocking=False)
        got.append(ok)
        if ok:
            lock.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(30)
    return got == [True]


def _answer(produced: Any) -> Any:
    if isinstance(produced, EvaluationResult):
        return ("result", type(produced), list(produced.__dict__.items()), sorted(produced.__pydantic_fields_set__))
    if isinstance(produced, BaseException):
        return ("exc", type(produced), produced.args)
    return ("other", produced)


TIMEOUTS: list[Any] = [
    None,
    0.05,
    float("0.2"),
    30.0,
    1,
    float("nan"),
    None,
    0,
]  # below, at (its own object), past slow_s


def _script(worker_type: type[Worker]) -> list[Any]:
    """Run the call script on a new lane with a ``worker_type`` worker: what was seen after each call."""
    global IDS
    IDS = itertools.count()
    CLOCK.reset()
    lane = FastLane(_Runner(), lambda batch: None, slow_s=0.2, slow_ttl_s=1e9, slow_call_s=0.01)
    under_lock: list[bool] = []
    note_call = lane.note_call

    def noting(evaluator: Any, took_s: float) -> None:
        under_lock.append(lane.lock.locked())
        note_call(evaluator, took_s)

    lane.note_call = noting  # type: ignore[method-assign]
    worker = worker_type(lane)
    trace = Trace(run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0)
    progress = new_progress(trace)
    demote: list[DemotedCall | None] = [None]

    def answers(value: Any) -> Any:
        def check(trace: Any) -> Any:
            worker.demoted = demote[0]  # the supervisor demoting the call while it runs
            if isinstance(value, BaseException):
                raise value
            return value

        return check

    evaluators = [evaluator(name=f"e{i}")(answers(value)) for i, value in enumerate([True, False, 0.5, "bad", None])]
    evaluators.append(evaluator(name="raises")(answers(ValueError("boom"))))
    names = {id(check): check.name for check in evaluators}  # the lane keys its figures by id()
    seen: list[Any] = []
    for step in range(60):
        check = evaluators[step % len(evaluators)]
        started = T0 if step % 3 else None
        timeout_s = TIMEOUTS[step % len(TIMEOUTS)]
        demote[0] = DemotedCall(check, counted=bool(step % 2)) if step % 7 == 5 else None
        worker.demoted = None
        try:
            produced, exc = worker.call(check, trace, f"job{step}", progress, timeout_s, started)
            outcome: Any = ("returned", _answer(produced), _answer(exc))
        except Demoted:
            future = demote[0]
            assert future is not None
            outcome = ("demoted", _answer(future.result(0) if future.exception(0) is None else future.exception(0)))
        assert _lock_free(lane.lock)
        seen.append(
            (
                outcome,
                (
                    worker.job,
                    worker.evaluator is check,
                    repr(worker.limit_s),
                    worker.limit_s is lane.slow_s,
                    worker.since,
                ),
                (worker.took_s, worker.stamped),
                {names[key]: value for key, value in lane._cost.items()},
                {names[key]: value for key, value in lane._recent.items()},
                sorted(names[key] for key in lane._warm),
                {names[key]: value for key, value in lane._slow.items()},
            )
        )
    assert under_lock and all(under_lock)
    seen.append(len(under_lock))
    return seen


def test_the_workers_call_counts_and_answers_as_before() -> None:
    new, old = _script(Worker), _script(_OldWorker)
    assert new == old
    assert any(step[0][0] == "demoted" for step in new[:-1])
    assert any(step[6] for step in new[:-1])  # an evaluator was marked slow
    assert any(step[2][1] for step in new[:-1])  # a stamped call
    assert {step[1][2] for step in new[:-1]} == {"0.05", "0.2", "0"}  # the timeout below slow_s, or slow_s
    assert new[-1] < 60  # calls counted when demoted were not counted again


# ---- the claim ---------------------------------------------------------------------------------------------------


def _job() -> Job:
    span = TracerProvider().get_tracer("t").start_span("s")
    span.end()
    return Job(span, [], [], [span], 1)  # type: ignore[list-item]


def test_the_claim_answers_and_lists_as_before() -> None:
    spec = EvaluatorSpec(evaluator(name="c")(lambda trace: True))
    results = [EvaluationResult(evaluator="c", passed=bool(i % 2)) for i in range(3)]
    for abandoned_after in (None, 0, 1, 2):
        jobs = _job(), _job()
        locks = threading.RLock(), threading.RLock()
        answers: list[list[Any]] = [[], []]
        for side, claiming in enumerate((claim, old_claim)):
            job = jobs[side]
            for i, result in enumerate(results):
                if abandoned_after == i:
                    job.abandoned = True
                answers[side].append(claiming(job, spec, result, locks[side]))
                answers[side].append(list(job.published))
                assert _lock_free(locks[side])
        assert answers[0] == answers[1]
        assert [[id(x) for x in pair] for pair in jobs[0].published] == [
            [id(x) for x in pair] for pair in jobs[1].published
        ]


def test_a_claim_waits_for_the_lock_another_thread_holds() -> None:
    lock = threading.RLock()
    job = _job()
    spec = EvaluatorSpec(evaluator(name="c")(lambda trace: True))
    result = EvaluationResult(evaluator="c", passed=True)
    held, release = threading.Event(), threading.Event()
    done = threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait(60)

    def claimer() -> None:
        claim(job, spec, result, lock)
        done.set()

    first = threading.Thread(target=holder)
    first.start()
    assert held.wait(60)
    second = threading.Thread(target=claimer)
    second.start()
    assert not done.wait(0.2)  # blocked on the lock (a claim never lists without it)
    assert job.published == ()  # nothing listed yet
    release.set()
    assert done.wait(60)
    first.join(60)
    second.join(60)
    assert job.published == [(spec, result)]


def _raising_note(worker_type: type[Worker]) -> tuple[Any, ...]:
    """A call whose ``note_call`` raises (a bug of ours): what escapes, the worker's fields, the lock free after."""
    CLOCK.reset()
    lane = FastLane(_Runner(), lambda batch: None, slow_s=0.2, slow_ttl_s=1e9, slow_call_s=0.01)

    def broken(evaluator: Any, took_s: float) -> None:
        raise RuntimeError("note_call's bug")

    lane.note_call = broken  # type: ignore[method-assign]
    worker = worker_type(lane)
    trace = Trace(run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0)
    check = evaluator(name="noted")(lambda trace: True)
    with pytest.raises(RuntimeError) as raised:
        worker.call(check, trace, "job", new_progress(trace), None, T0)
    assert _lock_free(lane.lock)  # released on this path too, as ``with`` released it
    return (str(raised.value), worker.job, worker.since, worker.took_s, worker.stamped, repr(worker.limit_s))


def test_a_note_call_that_raises_leaves_the_lock_free_and_raises_as_before() -> None:
    assert _raising_note(Worker) == _raising_note(_OldWorker)
