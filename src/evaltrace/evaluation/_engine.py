"""The evaluation workers: one asyncio loop thread that orchestrates every job, a thread pool for sync work.

The application thread hands a job over with :meth:`Engine.submit`: one ``SimpleQueue.put`` (a C call, no
Python-level lock). A dispatcher thread moves jobs onto the loop in batches, so the application never pays
for waking the loop. On the loop each job is a task; synchronous evaluators and the span→Trace mapping run in
the pool (``sync_workers`` threads), async evaluators on the loop under a semaphore
(``max_async_concurrency``). Admission (the bounded queue) is counted by the caller, not here.

In a child forked from the process the engine gets a new loop, inbox and semaphore, forgets the parent's jobs
(the parent runs them), and starts its threads with the child's first job (see ``_internal/forks.py``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from evaltrace._internal import forks
from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._user_loop import UserLoop

JobRunner = Callable[[Any], Coroutine[Any, Any, None]]
_STOP = object()
_BATCH = 256
_COALESCE_S = 0.001


class Engine:
    """Run job coroutines on a private event loop in a daemon thread.

    Call :meth:`start` with the job coroutine function before submitting.

    Args:
        sync_workers: Size of the thread pool for synchronous work.
        max_async_concurrency: Async evaluations allowed at once (the semaphore lives on the loop).
    """

    def __init__(self, sync_workers: int, max_async_concurrency: int) -> None:
        self._run_job: JobRunner | None = None
        self._max_async = max_async_concurrency
        # Daemon threads, not ThreadPoolExecutor's: those are joined at interpreter exit (a hung evaluator would
        # keep the process alive) and refuse work once exit begins (evaluations drained at exit would fail).
        self.pool = DaemonExecutor(sync_workers, thread_name_prefix="evaltrace-eval")
        self.loop = asyncio.new_event_loop()
        self.async_slots = asyncio.Semaphore(max_async_concurrency)
        # Async evaluators run there, never on self.loop: user code that blocks cannot stall the pipeline.
        self.user_loop = UserLoop()
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_lock = threading.Lock()
        self._running = False  # the threads were started in this process
        self._stopped = False
        self._loop_thread, self._dispatcher = self._new_threads()
        forks.reinit_after_fork(self)

    def _new_threads(self) -> tuple[threading.Thread, threading.Thread]:
        return (
            threading.Thread(target=self._run_loop, name="evaltrace-eval-loop", daemon=True),
            threading.Thread(target=self._dispatch, name="evaltrace-eval-dispatch", daemon=True),
        )

    def start(self, run_job: JobRunner) -> None:
        """Start the loop and dispatcher threads; ``run_job`` is awaited once per submitted job."""
        self._run_job = run_job
        self._start_threads()

    def _start_threads(self) -> None:
        with self._start_lock:
            if self._running or self._stopped or self._run_job is None:
                return
            self._running = True
            self._loop_thread.start()
            self._dispatcher.start()

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new loop, inbox and semaphore; the threads start with the first job.

        The parent's jobs (queued, or tasks on its loop) are the parent's: they are neither run nor waited for
        here. The parent's loop is kept inert, never run. An engine stopped before the fork stays stopped.
        """
        self._start_lock = threading.Lock()
        if self._stopped:
            return
        forks.keep_inherited(self.loop)
        self.loop = asyncio.new_event_loop()
        self.async_slots = asyncio.Semaphore(self._max_async)
        self._inbox = queue.SimpleQueue()
        self._tasks = set()
        self._running = False
        self._loop_thread, self._dispatcher = self._new_threads()

    def submit(self, job: Any) -> None:
        """Hand ``job`` to the loop; O(1) and non-blocking."""
        if not self._running:  # the first job of a forked child
            self._start_threads()
        self._inbox.put(job)

    def cancel_all(self) -> None:
        """Cancel every running job (shutdown past its deadline); each job's cleanup still runs."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self._cancel_tasks)

    def stop(self, timeout_s: float) -> None:
        """Stop the dispatcher and the loop; do not wait for timed-out sync evaluators still in the pool."""
        with self._start_lock:
            self._stopped = True
            running = self._running
        if running:
            self._inbox.put(_STOP)
            self._dispatcher.join(timeout_s)
            try:  # also when the loop has not begun to run yet: it then stops as soon as it does
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed: the loop thread has ended
                pass
            self._loop_thread.join(timeout_s)
        elif not self.loop.is_closed():  # never ran in this process (a forked child that evaluated nothing)
            self.loop.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.user_loop.close()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def _dispatch(self) -> None:
        while True:
            first = self._inbox.get()
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
            try:
                self.loop.call_soon_threadsafe(self._start_batch, batch)
            except RuntimeError:  # loop closed: nothing can run any more
                log_internal_error("dispatching evaluation jobs after the loop stopped")
                return
            if stop:
                return

    def _start_batch(self, batch: list[Any]) -> None:
        assert self._run_job is not None  # start() ran before any submit
        for job in batch:
            task = self.loop.create_task(self._run_job(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
