"""The fast lane: span-level jobs of sync evaluators run to the end on one worker thread, no asyncio.

Most live evaluations are cheap deterministic checks on one span. On the event loop each one cost a task, a
hop to the thread pool and back, and the loop's wake-ups: several times the check itself. Here a daemon
thread takes the dispatcher's batches and, per job, maps the span, calls each evaluator, publishes the result
and forwards the enriched copy (``JobRunner.run_now``), one job after the other.

What the loop gave for free is kept by demotion. The dispatcher thread calls :meth:`FastLane.supervise`
while the lane has work (every ``tick_s``); when the worker has been inside one evaluator call for ``slow_s``
(a slow judge, a hung check) the job is *demoted*: it goes to the loop with what it has done so far, the call
still running becomes a future the loop awaits under the evaluator's timeout and the hold rule, the worker
thread is left to finish that call alone (a daemon: it never blocks exit) and a new worker takes the lane's
queue. The evaluator is marked slow for ``slow_ttl_s``: its jobs go to the loop (thread pool, timeouts,
parallelism) meanwhile. At shutdown past the deadline (:meth:`cancel`) the job in the stuck call is cut
short the same way as on the loop: counted, its span forwarded with what finished.

In a child forked from the process the lane starts empty; its worker starts with the child's first job.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from evaltrace._internal import forks
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation.runner import call_evaluator

_STOP = object()


class Demoted(Exception):
    """Raised in a worker whose job went to the loop while it was in an evaluator call: the worker ends."""


class LaneRunner(Protocol):
    """What the lane needs from the job runner."""

    def run_now(self, job: Any, worker: Worker) -> None:
        """Run ``job`` to the end on this thread, or hand it to the loop (then ``Demoted`` may be raised)."""

    def cancel_now(self, job: Any, progress: Any) -> None:
        """Cut ``job`` short (shutdown): count it, forward its span with what finished."""


class Worker:
    """One lane thread and what it is doing (read by the supervisor)."""

    __slots__ = ("batch", "demoted", "evaluator", "job", "lane", "position", "progress", "since")

    def __init__(self, lane: FastLane) -> None:
        self.lane = lane
        self.batch: list[Any] | None = None
        self.position = 0
        self.job: Any = None
        self.progress: Any = None
        self.evaluator: Any = None
        self.since: float | None = None  # monotonic start of the evaluator call in progress; None between calls
        self.demoted: concurrent.futures.Future[Any] | None = None

    def call(self, evaluator: Any, trace: Any, job: Any, progress: Any) -> tuple[Any, Exception | None]:
        """Call ``evaluator`` on ``trace`` where the supervisor can see it; raise ``Demoted`` if it was demoted.

        Returns:
            ``(output, None)`` or ``(None, exception)``.
        """
        self.job, self.progress, self.evaluator = job, progress, evaluator
        self.since = time.monotonic()
        outcome = call_evaluator(evaluator, trace)
        with self.lane.lock:
            demoted = self.demoted
            self.since = None
        if demoted is None:
            return outcome
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
    """Run span-level jobs of sync evaluators on a worker thread; demote slow ones to the loop.

    Args:
        runner: Runs and cuts short jobs.
        hand_off: Called with ``[(job, progress)]`` to run on the loop (from the supervising thread).
        slow_s: An evaluator call longer than this is demoted.
        slow_ttl_s: How long an evaluator seen slow has its jobs sent to the loop.
    """

    def __init__(
        self,
        runner: LaneRunner,
        hand_off: Callable[[list[tuple[Any, Any]]], None],
        slow_s: float = 0.2,
        slow_ttl_s: float = 10.0,
    ) -> None:
        self._runner = runner
        self.hand_off = hand_off
        self.slow_s = slow_s
        self.tick_s = slow_s / 2
        self._slow_ttl_s = slow_ttl_s
        self._init()
        forks.reinit_after_fork(self)

    def _init(self) -> None:
        self.lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker: Worker | None = None
        self._serial = 0
        self._slow: dict[int, float] = {}  # id(evaluator) -> monotonic time it was seen slow
        self.cancelled = False
        self.demoted = 0  # jobs the supervisor took to the loop (diagnostics and tests)

    def _reinit_after_fork(self) -> None:
        """In a forked child: an empty lane (the parent's jobs are the parent's), no worker until the first job."""
        cancelled = self.cancelled
        self._init()
        self.cancelled = cancelled

    # --- routing --------------------------------------------------------------------------------------------

    def is_slow(self, evaluator: Any) -> bool:
        """Whether ``evaluator`` was seen slow lately (its jobs then go to the loop)."""
        seen = self._slow.get(id(evaluator))
        if seen is None:
            return False
        if time.monotonic() - seen > self._slow_ttl_s:
            self._slow.pop(id(evaluator), None)
            return False
        return True

    def submit(self, batch: list[Any]) -> None:
        """Queue ``batch`` (from the dispatcher thread) for the worker."""
        if self._worker is None:
            with self.lock:
                if self._worker is None:
                    self._start_worker_locked()
        self._queue.put(batch)

    def busy(self) -> bool:
        """Whether the lane has work (queued or running): the dispatcher then supervises it."""
        worker = self._worker
        return not self._queue.empty() or (worker is not None and worker.batch is not None)

    def _start_worker_locked(self) -> None:
        worker = Worker(self)
        self._worker = worker
        self._serial += 1
        threading.Thread(
            target=self._work, args=(worker,), name=f"evaltrace-eval-lane-{self._serial}", daemon=True
        ).start()

    # --- the worker -----------------------------------------------------------------------------------------

    def _work(self, me: Worker) -> None:
        runner = self._runner
        while True:
            batch = self._queue.get()
            if batch is _STOP:
                return
            me.batch = batch
            for position, job in enumerate(batch):
                me.position = position
                try:
                    if self.cancelled:
                        runner.cancel_now(job, None)
                    else:
                        runner.run_now(job, me)
                except Demoted:
                    return  # the supervisor took this job and the rest of the batch; a new worker runs the lane
                except Exception:
                    log_internal_error("running an evaluation job on the fast lane")
            me.batch = None

    # --- supervision (the dispatcher thread) ----------------------------------------------------------------

    def supervise(self) -> None:
        """Demote the job of a worker stuck in one evaluator call for ``slow_s`` (any time after ``cancel``)."""
        worker = self._worker
        if worker is None:
            return
        since = worker.since
        if since is None or (not self.cancelled and time.monotonic() - since < self.slow_s):
            return
        with self.lock:
            # The same call as read above (not a new one begun meanwhile), still running, on the current worker.
            if worker.since != since or worker.demoted is not None or self._worker is not worker:
                return
            worker.demoted = concurrent.futures.Future()
            job, progress, evaluator = worker.job, worker.progress, worker.evaluator
            rest = worker.batch[worker.position + 1 :] if worker.batch is not None else []
            worker.batch = None
            self._start_worker_locked()
        self.demoted += 1
        self._slow[id(evaluator)] = time.monotonic()
        if rest:
            self._queue.put(rest)
        progress.inflight = worker.demoted
        progress.started = since
        if self.cancelled:
            self._runner.cancel_now(job, progress)
        else:
            self.hand_off([(job, progress)])

    def cancel(self) -> None:
        """Shutdown past its deadline: cut short the job in progress and every queued one."""
        self.cancelled = True
        self.supervise()

    def stop(self) -> None:
        """End the worker once the queue is empty."""
        if self._worker is not None:
            self._queue.put(_STOP)
