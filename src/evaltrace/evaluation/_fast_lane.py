"""The fast lane: span-level jobs of sync evaluators run to the end on one worker thread, no asyncio.

Most live evaluations are cheap deterministic checks on one span. On the event loop each one cost a task, a
hop to the thread pool and back, and the loop's wake-ups: several times the check itself. Here a daemon
thread takes the dispatcher's batches and, per job, maps the span, calls each evaluator, publishes the result
and forwards the enriched copy (``JobRunner.run_now``), one job after the other.

One after the other only suits cheap calls, so the lane keeps what the loop gave for free:

- An evaluator whose calls take ``slow_call_s`` or more (a running average) is marked slow for
  ``slow_ttl_s``: its jobs go to the loop (thread pool, timeouts, parallelism) meanwhile. It takes two slow calls
  among its last three: a single one is as likely the thread kept off the CPU or the GIL (a loaded machine, a
  collection) as the evaluator, and a cheap evaluator sent to the loop for ``slow_ttl_s`` costs several times the
  CPU there, enough to miss hold deadlines under load. A call the supervisor demotes for running ``slow_s``
  counts as one slow call, and a second such demotion within ``slow_ttl_s`` marks the evaluator slow whatever
  calls came between: each costs a thread, so one that hangs on one call in three must not pile them up.
- The dispatcher thread calls :meth:`FastLane.supervise` while the lane has work (every ``tick_s``). A call
  running for ``slow_s`` (or its evaluator's timeout, if shorter) is *demoted*: its job goes to the loop with
  what it has done so far, the call still running becomes a future the loop awaits under the evaluator's
  timeout and the hold rule, the worker thread is left to finish that call alone (a daemon: it never blocks
  exit) and a new worker takes the rest of the lane's work.
- Hold rule: when the oldest job on the lane comes within ``hold_margin_s`` of its hold deadline, every job waiting
  on the lane goes to the loop (whose hold timer forwards each span by its deadline), and the running job too
  if it is inside an evaluator call.

A demoted call counts against the stuck-thread cap (``daemon_pool.stuck_calls``) only once the loop gives up on
it (its timeout passed, or shutdown cut it short) while it still runs: a slow call within its timeout never counts.

At shutdown past the deadline (:meth:`cancel`) the job in the stuck call is cut short the same way as on the
loop: counted, its span forwarded with what finished. :meth:`FastLane.stop` (once the dispatcher, the only thread
that submits, has ended) cuts short every job still waiting on the lane, refuses later batches (the caller cuts
them short) and waits, bounded, for the job running.

In a child forked from the process the lane starts empty; its worker starts with the child's first job.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from evaltrace._internal import forks
from evaltrace._internal.daemon_pool import stuck_calls
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation.runner import call_evaluator, call_evaluator_stamped

_STOP = object()


def take_all(waiting: queue.SimpleQueue[Any] | queue.Queue[Any], stop: object) -> tuple[list[Any], bool]:
    """Everything ``waiting`` holds now, without blocking, and whether the ``stop`` marker was among it."""
    items: list[Any] = []
    saw_stop = False
    while True:
        try:
            item = waiting.get_nowait()
        except queue.Empty:
            return items, saw_stop
        if item is stop:
            saw_stop = True
        else:
            items.append(item)


_SMOOTHING = 0.25  # weight of the newest call in an evaluator's running average call time


class Demoted(Exception):
    """Raised in a worker whose job went to the loop while it was in an evaluator call: the worker ends."""


class DemotedCall(concurrent.futures.Future[Any]):
    """The outcome of an evaluator call the lane demoted, which the loop awaits; it knows when the call returns.

    The thread is counted stuck only from :meth:`give_up` (the loop's timeout passed, or the job was cut short)
    until the call returns, whichever order the two come in.
    """

    def __init__(self, evaluator: Any, counted: bool) -> None:
        super().__init__()
        self._key = id(evaluator)
        self.counted = counted  # the supervisor counted the call as it demoted it (it overran); else when it returns
        self._state_lock = threading.Lock()
        self._returned = False
        self._stuck = False

    def give_up(self) -> None:
        """Nobody waits for the call any more: counted stuck until it returns (if it has not already)."""
        with self._state_lock:
            if self._returned or self._stuck:
                return
            self._stuck = True
        stuck_calls.stuck(self._key)

    def call_returned(self) -> None:
        """The worker thread's call returned: its thread is no longer stuck."""
        with self._state_lock:
            self._returned = True
            was_stuck, self._stuck = self._stuck, False
        if was_stuck:
            stuck_calls.returned(self._key)


class LaneRunner(Protocol):
    """What the lane needs from the job runner."""

    def run_now(self, job: Any, worker: Worker) -> None:
        """Run ``job`` to the end on this thread, or hand it to the loop (then ``Demoted`` may be raised)."""

    def cancel_now(self, job: Any, progress: Any) -> None:
        """Cut ``job`` short (shutdown): count it, forward its span with what finished."""

    def hold_deadline(self, job: Any) -> float:
        """``time.monotonic()`` by which ``job``'s span must be forwarded (the hold rule)."""
        ...


class Worker:
    """One lane thread and what it is doing (read by the supervisor, changed under the lane's lock)."""

    __slots__ = ("demoted", "evaluator", "job", "lane", "limit_s", "pending", "progress", "since", "stamped", "took_s")

    def __init__(self, lane: FastLane, pending: list[Any] | None = None) -> None:
        self.lane = lane
        self.pending: deque[Any] = deque(pending or ())  # the rest of the batch being worked through
        self.job: Any = None  # the job running on this thread (None between jobs)
        self.progress: Any = None
        self.evaluator: Any = None
        self.since: float | None = None  # monotonic start of the evaluator call in progress; None between calls
        self.limit_s = lane.slow_s  # that call is demoted once it has run this long
        self.took_s = 0.0  # how long the last call ran
        self.stamped = False  # the last call's output is its stamped result (see call())
        self.demoted: DemotedCall | None = None

    def call(
        self,
        evaluator: Any,
        trace: Any,
        job: Any,
        progress: Any,
        timeout_s: float | None = None,
        started: dt.datetime | None = None,
    ) -> tuple[Any, Exception | None]:
        """Call ``evaluator`` on ``trace`` where the supervisor can see it; raise ``Demoted`` if it was demoted.

        The call is demoted after ``slow_s``, or after ``timeout_s`` when that is shorter. Any exception the
        evaluator raises is returned (a ``BaseException`` wrapped in ``UserAbort``), never raised here.
        With ``started`` (the call's start, as ``stamp`` takes it), a function evaluator's True/False answer comes
        back stamped already (``runner.call_evaluator_stamped``): ``self.stamped`` tells (False otherwise).

        Returns:
            ``(output, None)`` or ``(None, exception)``.
        """
        lane = self.lane
        self.job, self.progress, self.evaluator = job, progress, evaluator
        slow_s = lane.slow_s
        # min(slow_s, timeout_s) without its call (~400 instructions): the same object, as min keeps the first.
        self.limit_s = timeout_s if timeout_s is not None and timeout_s < slow_s else slow_s
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
            # The supervisor counts demoted calls under this lock too. acquire()/finally, not ``with`` (two bound
            # methods per call, ~1k): safe here, a lane thread never runs a signal handler (only the main thread).
            lock = lane.lock
            lock.acquire()
            try:
                demoted = self.demoted
                self.since = None
                # A call demoted for running too long was counted then (once: its end is the same slow call);
                # one the job's age (or shutdown) demoted is counted now, as any.
                if demoted is None or not demoted.counted:
                    lane.note_call(evaluator, took_s)
            finally:
                lock.release()
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


class FastLane:
    """Run span-level jobs of sync evaluators on a worker thread; send slow or late ones to the loop.

    Args:
        runner: Runs and cuts short jobs.
        hand_off: Called with ``[(job, progress)]`` to run on the loop (from any thread); ``progress`` is None
            for a job the lane has not begun.
        slow_s: An evaluator call longer than this is demoted.
        slow_ttl_s: How long an evaluator seen slow has its jobs sent to the loop.
        slow_call_s: An evaluator whose calls take this long on average is seen slow (default: ``slow_s / 10``,
            at least 2 ms).
        hold_margin_s: A job this close to its hold deadline leaves the lane (default: ``slow_s``).
    """

    def __init__(
        self,
        runner: LaneRunner,
        hand_off: Callable[[list[tuple[Any, Any]]], None],
        slow_s: float = 0.2,
        slow_ttl_s: float = 10.0,
        slow_call_s: float | None = None,
        hold_margin_s: float | None = None,
    ) -> None:
        self._runner = runner
        self.hand_off = hand_off
        self.slow_s = slow_s
        self.tick_s = slow_s / 2
        self.slow_call_s = max(0.002, slow_s / 10) if slow_call_s is None else slow_call_s
        self.hold_margin_s = slow_s if hold_margin_s is None else hold_margin_s
        self._slow_ttl_s = slow_ttl_s
        self._init()
        forks.reinit_after_fork(self)

    def _init(self) -> None:
        self.lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker: Worker | None = None
        self._serial = 0
        self._outstanding = 0  # jobs submitted and not yet finished here or handed to the loop
        self._slow: dict[int, float] = {}  # id(evaluator) -> monotonic time it was seen slow
        self._cost: dict[int, float] = {}  # id(evaluator) -> running average call time (s)
        self._warm: set[int] = set()  # id(evaluator) of evaluators past their first call
        self._recent: dict[int, int] = {}  # id(evaluator) -> its last three counted calls, a bit set per slow one
        self._overran: dict[int, float] = {}  # id(evaluator) -> monotonic time a call of it last overran slow_s
        self.cancelled = False
        self.stopped = False
        self._idle = threading.Condition(self.lock)  # notified when _outstanding reaches 0
        self.demoted = 0  # jobs the supervisor took to the loop mid-call (diagnostics and tests)
        self.moved = 0  # waiting jobs the supervisor sent to the loop to keep their hold deadline

    def _reinit_after_fork(self) -> None:
        """In a forked child: an empty lane (the parent's jobs are the parent's), no worker until the first job."""
        cancelled, stopped = self.cancelled, self.stopped
        self._init()
        self.cancelled, self.stopped = cancelled, stopped

    # --- routing --------------------------------------------------------------------------------------------

    def is_slow(self, evaluator: Any) -> bool:
        """Whether ``evaluator`` was seen slow lately (its jobs then go to the loop)."""
        seen = self._slow.get(id(evaluator))
        if seen is None:
            return False
        if time.monotonic() - seen > self._slow_ttl_s:
            with self.lock:
                if self._slow.get(id(evaluator)) == seen:  # not marked again meanwhile
                    del self._slow[id(evaluator)]
                    self._cost.pop(id(evaluator), None)
                    self._recent.pop(id(evaluator), None)
                    self._overran.pop(id(evaluator), None)
            return False
        return True

    def note_call(self, evaluator: Any, took_s: float) -> None:
        """Fold one call's duration into ``evaluator``'s average; mark it slow when that reaches ``slow_call_s``.

        Called under ``self.lock`` (a worker and the supervisor both count calls).

        Only with a second slow call among its last three: a call's duration is wall time, and on a loaded machine
        (or behind a busy application thread holding the GIL) a 50 µs check now and then takes 100 ms or more,
        which alone lifts the average past ``slow_call_s`` for a few calls. Marked slow for it, a cheap evaluator's
        jobs would take the loop's pool path for ``slow_ttl_s``, several times the CPU per job, and at load miss
        their hold deadlines by the hundred. A slow evaluator is marked one call later, while the supervisor's
        demotion and the job-age check keep the hold rule.
        """
        key = id(evaluator)
        if key not in self._warm:
            # A first call pays one-time costs (imports, caches, the first model build): counted, it would mark
            # a cheap evaluator slow for the next ``slow_ttl_s`` after start-up. A slow one is marked by its
            # next calls; meanwhile the job-age check keeps the hold rule.
            self._warm.add(key)
            return
        average = self._cost.get(key)
        average = took_s if average is None else average + _SMOOTHING * (took_s - average)
        self._cost[key] = average
        recent = ((self._recent.get(key, 0) << 1) | (took_s >= self.slow_call_s)) & 0b111
        self._recent[key] = recent
        if average >= self.slow_call_s and recent.bit_count() >= 2:
            self._slow[key] = time.monotonic()

    def submit(self, batch: list[Any]) -> bool:
        """Queue ``batch`` (from the dispatcher thread) for the worker; nothing is queued if this raises.

        Returns:
            False, queuing nothing, once :meth:`stop` began: the caller cuts the batch short.
        """
        with self.lock:
            if self.stopped:
                return False
            if self._worker is None:
                self._start_worker_locked()
            self._outstanding += len(batch)  # before the worker can take it: busy() never misses it
            self._queue.put(batch)  # under the lock: stop() finds it, never behind its _STOP
        return True

    def busy(self) -> bool:
        """Whether the lane has work (queued or running): the dispatcher then supervises it."""
        # Engine._dispatch reads ``_outstanding > 0`` inline (a frame per batch fewer): change both together.
        return self._outstanding > 0

    def _start_worker_locked(self, pending: list[Any] | None = None) -> None:
        worker = Worker(self, pending)
        self._serial += 1
        threading.Thread(
            target=self._work, args=(worker,), name=f"evaltrace-eval-lane-{self._serial}", daemon=True
        ).start()
        self._worker = worker  # only once it runs: a failed start leaves the previous state

    # --- the worker -----------------------------------------------------------------------------------------

    def _work(self, me: Worker) -> None:
        # One pass of the lock per job: a finished job is counted out and the next one taken in the same locked
        # step (the two steps back to back, as the supervisor could always have seen them). The job runs inline
        # here, not in a method of its own: a frame per job fewer.
        lock = self.lock
        pending = me.pending
        runner = self._runner
        with lock:
            job = me.job = pending.popleft() if pending else None
        while True:
            if job is None:
                batch = self._queue.get()
                if batch is _STOP:
                    return
                with lock:
                    pending.extend(batch)
                    job = me.job = pending.popleft() if pending else None
                continue
            try:
                if self.cancelled:
                    runner.cancel_now(job, None)
                else:
                    runner.run_now(job, me)
            except Demoted:
                return  # the job is the loop's now (and no longer counted here); a new worker runs the lane
            except BaseException:  # the runner finishes its job whatever happens: only our own bug gets here
                log_internal_error("running an evaluation job on the fast lane")
            with lock:
                me.job = None
                self._finished_locked(1)
                if me.demoted is not None:
                    return  # the supervisor took this job and the rest; a new worker runs the lane
                job = me.job = pending.popleft() if pending else None

    def _finished_locked(self, jobs: int) -> None:
        """``jobs`` are no longer the lane's (done, handed to the loop, or cut short); under the lock."""
        self._outstanding -= jobs
        if self._outstanding <= 0:
            self._idle.notify_all()

    # --- supervision (the dispatcher thread) ----------------------------------------------------------------

    def supervise(self) -> None:
        """Demote a call that ran too long, and send jobs that would miss their hold deadline to the loop."""
        worker = self._worker
        if worker is None:
            return
        now = time.monotonic()
        since = worker.since
        late = False
        if not self.cancelled:
            with self.lock:
                job = worker.job
                oldest = job if job is not None else (worker.pending[0] if worker.pending else None)
            late = oldest is not None and self._runner.hold_deadline(oldest) - now <= self.hold_margin_s
            if late:
                self._move_waiting(worker)
        overran = since is not None and now - since >= worker.limit_s
        if since is None or not (self.cancelled or late or overran):
            return
        failed: BaseException | None = None
        with self.lock:
            # The same call as read above (not a new one begun meanwhile), still running, on the current worker.
            if worker.since != since or worker.demoted is not None or self._worker is not worker:
                return
            rest = list(worker.pending)
            worker.pending.clear()
            try:
                self._start_worker_locked(rest)  # the rest of the batch first, then the lane's queue
            except BaseException as exc:  # the worker goes on after its call: only the rest of its batch leaves
                self._finished_locked(len(rest))
                failed = exc
            else:
                job, progress, evaluator = worker.job, worker.progress, worker.evaluator
                worker.demoted = demoted = DemotedCall(evaluator, counted=overran)
                self._finished_locked(1)
                if overran:  # not when only the job's age moved it: the lane's backlog is not this evaluator's doing
                    self._note_overrun_locked(evaluator, now, now - since)
        if failed is not None:
            # Outside the lock: handing off may cut the jobs short, which forwards downstream (an exporter's I/O).
            self.hand_off([(waiting, None) for waiting in rest])
            raise failed
        self.demoted += 1
        progress.inflight = demoted
        progress.started = since
        if self.cancelled:
            demoted.give_up()  # nobody will await it: its thread is stuck until the call returns
            self._runner.cancel_now(job, progress)
        else:
            self.hand_off([(job, progress)])

    def _note_overrun_locked(self, evaluator: Any, now: float, took_s: float) -> None:
        """Count a call demoted for running ``took_s`` (``slow_s`` or more); under the lock.

        A slow call as any (two among the last three mark the evaluator slow), and a second overrun within
        ``slow_ttl_s`` marks it slow whatever calls came between: each overrun costs a thread (the call runs on
        alone, a new worker takes the lane), so an evaluator that hangs on one call in three, never two slow
        calls among three, would pile threads up. One overrun alone does not: at load a ~50 µs call now and then
        takes 100-330 ms of wall time, past the demotion, and a cheap evaluator sent to the loop for ``slow_ttl_s``
        costs several times the CPU per job there.
        """
        key = id(evaluator)
        self._warm.add(key)  # counted even as its first call: a hang is no start-up cost
        self.note_call(evaluator, took_s)
        last = self._overran.get(key)
        if last is not None and now - last <= self._slow_ttl_s:
            self._slow[key] = now
        self._overran[key] = now

    def _move_waiting(self, worker: Worker) -> None:
        """Send every job waiting on the lane to the loop (each begins there, under its hold timer)."""
        moved: list[Any] = []
        with self.lock:
            moved.extend(worker.pending)
            worker.pending.clear()
            batches, stop = take_all(self._queue, _STOP)
            for batch in batches:
                moved.extend(batch)
            self._finished_locked(len(moved))
        if stop:
            self._queue.put(_STOP)
        if moved:
            self.moved += len(moved)
            self.hand_off([(job, None) for job in moved])

    def evacuate(self) -> None:
        """The lane is being turned off: send every job waiting on it to the loop (the running one finishes)."""
        worker = self._worker
        if worker is not None:
            self._move_waiting(worker)
        else:
            self._move_waiting(Worker(self))

    def cancel(self) -> None:
        """Shutdown past its deadline: cut short the job in progress and every queued one."""
        self.cancelled = True
        self.supervise()

    def stop(self, timeout_s: float) -> None:
        """Cut short every job waiting on the lane, end the worker, wait up to ``timeout_s`` for the running job.

        A job still in an evaluator call after that is cut short too (:meth:`cancel`).

        Call it once nothing submits any more (the dispatcher has ended); a later :meth:`submit` queues nothing.
        The wait lets the spans of jobs cut short reach the downstream processors before they shut down.
        """
        waiting: list[Any] = []
        with self.lock:
            self.stopped = True
            worker = self._worker
            if worker is not None:
                waiting.extend(worker.pending)
                worker.pending.clear()
            for batch in take_all(self._queue, _STOP)[0]:
                waiting.extend(batch)
            if worker is not None:
                self._queue.put(_STOP)
        for job in waiting:  # counted out one by one: a failure cutting one short leaves the others' count right
            try:
                self._runner.cancel_now(job, None)
            except Exception:
                log_internal_error("cutting an evaluation job short at shutdown")
            finally:
                with self.lock:
                    self._finished_locked(1)
        with self.lock:
            idle = self._idle.wait_for(lambda: self._outstanding <= 0, timeout=max(0.0, timeout_s))
        if not idle:  # the running job is in a call that outlasts the wait: cut short (the call runs on alone)
            self.cancel()
