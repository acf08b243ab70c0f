"""The evaluation workers: one asyncio loop thread that orchestrates every job, a thread pool for sync work.

The application thread hands a job over with :meth:`Engine.submit`: one ``SimpleQueue.put`` (a C call, no
Python-level lock). A dispatcher thread moves jobs onto the loop in batches, so the application never pays
for waking the loop. Span-level jobs whose evaluators are all sync go to the fast lane instead (``_fast_lane``: one
worker thread runs each job to the end, no task; the dispatcher supervises it and demotes slow calls to the
loop). On the loop each job is a task (a job of inline sync evaluators runs its first step at once, and becomes a
task only if it has to wait: usually it does not); synchronous evaluators run in the pool (``sync_workers`` threads),
async evaluators on the user loop under a semaphore (``max_async_concurrency``). Admission (the bounded
queue) is counted by the caller, not here.

Nothing handed to the engine is stranded by :meth:`Engine.stop`: a job that reaches the loop after
:meth:`Engine.cancel_all` or ``stop`` began (the fast lane hands jobs over from its own threads at any time), or
that is submitted after it, is cut short at once (``cancel_now``: counted, its span forwarded with what finished);
tasks still running when the loop is stopped are cancelled and awaited first, never left pending on a closed loop.
The fast lane is stopped only once the dispatcher (the only thread submitting to it) has ended, and the lane's
waiting jobs are cut short then; a callback carrying jobs that reaches the loop as it stops still runs (one last
iteration, see ``_run_loop``), and one sent once the loop is closed is cut short by its sender.

In a child forked from the process the engine gets a new loop, inbox and semaphore, forgets the parent's jobs
(the parent runs them), and starts its threads with the child's first job (see ``_internal/forks.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from evaltrace._internal import forks
from evaltrace._internal.daemon_pool import thread_started
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._continued import continue_coro as _continue
from evaltrace.evaluation._fast_lane import FastLane, LaneRunner, take_all
from evaltrace.evaluation._isolation import EvaluatorThreads, Offenders
from evaltrace.evaluation._user_loop import UserLoop

JobRunner = Callable[..., Coroutine[Any, Any, None]]
_STOP = object()


class FastRunner(LaneRunner, Protocol):
    """A job runner with a fast lane: it says which jobs may take it."""

    def fast_eligible(self, job: Any, is_slow: Callable[[Any], bool]) -> bool:
        """Whether ``job`` may run on the fast lane (none of its evaluators ``is_slow``)."""
        ...

    def lane_failed(self) -> None:
        """Count a failure of the lane's machinery (the lane is then turned off)."""

    def slow_after_s(self) -> float:
        """How long one evaluator call may run on the fast lane before its job is demoted to the loop."""
        ...


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
        self._eager: Callable[[Any], bool] | None = None
        self._fast: FastRunner | None = None
        self.lane: FastLane | None = None
        self._lane_off = False  # the lane's machinery failed once: every job takes the loop from then on
        self._max_async = max_async_concurrency
        # Evaluators caught hanging a shared thread or blocking the shared loop run apart (``_isolation``).
        self.offenders = Offenders()
        # Daemon threads, not ThreadPoolExecutor's: those are joined at interpreter exit (a hung evaluator would
        # keep the process alive) and refuse work once exit begins (evaluations drained at exit would fail).
        self.pool = EvaluatorThreads(sync_workers, self.offenders)
        self.loop = asyncio.new_event_loop()
        self.async_slots = asyncio.Semaphore(max_async_concurrency)
        # Async evaluators run there, never on self.loop: user code that blocks cannot stall the pipeline.
        self.user_loop = UserLoop(offenders=self.offenders)
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_lock = threading.Lock()
        self._running = False  # both threads were started in this process
        self._loop_started = False  # the loop thread was (the dispatcher may have failed to start after it)
        self._stopped = False
        self._cancelled = False  # cancel_all ran: jobs reaching the loop from then on are cut short, not started
        # Guards the loop's closing against callbacks carrying jobs (_send): each is either run or refused.
        self._send_lock = threading.Lock()
        self._loop_closed = False
        self._loop_thread, self._dispatcher = self._new_threads()
        forks.reinit_after_fork(self)

    def _new_threads(self) -> tuple[threading.Thread, threading.Thread]:
        return (
            threading.Thread(target=self._run_loop, name="evaltrace-eval-loop", daemon=True),
            threading.Thread(target=self._dispatch, name="evaltrace-eval-dispatch", daemon=True),
        )

    def start(
        self, run_job: JobRunner, fast: FastRunner | None = None, eager: Callable[[Any], bool] | None = None
    ) -> None:
        """Make the engine ready; ``run_job`` is awaited once per submitted job.

        The loop and dispatcher threads start with the first job (:meth:`submit`): a pipeline no evaluator
        applies to (``configure()`` with none) runs no evaluation thread. With ``fast``, the jobs it calls
        eligible run on the fast lane (see ``_fast_lane``) instead. A job ``eager`` calls True for (one that
        usually runs to its end without waiting: inline sync evaluators) takes its first step at once on the loop,
        and becomes a task only if it has to wait (see :meth:`_begin`); it must never raise.
        """
        self._run_job = run_job
        self._eager = eager
        if fast is not None:
            self._fast = fast
            self.lane = FastLane(fast, self._hand_off, slow_s=fast.slow_after_s())

    def _start_threads(self) -> None:
        """Start the loop thread, then the dispatcher; ``_running`` only once both run.

        Raises:
            RuntimeError: A thread could not start (``can't start new thread`` under a thread limit). Nothing is
                left half-started: the thread that failed is replaced by a fresh one, a loop thread that did start
                keeps running (usable, wound down by :meth:`stop`), and the next :meth:`submit` tries again.
                Never ``_running`` without a dispatcher: jobs would be queued into an inbox no thread reads.
        """
        with self._start_lock:
            if self._running or self._stopped or self._run_job is None:
                return
            if not self._loop_started:
                try:
                    self._loop_thread.start()
                except BaseException as exc:
                    if isinstance(exc, RuntimeError) or not thread_started(self._loop_thread):
                        self._loop_thread = self._new_threads()[0]  # a Thread object is started at most once
                    else:  # interrupted (Ctrl-C) after it started: it runs; a second one would share its loop
                        self._loop_started = True
                    raise
                self._loop_started = True
            try:
                self._dispatcher.start()
            except BaseException as exc:
                if isinstance(exc, RuntimeError) or not thread_started(self._dispatcher):
                    self._dispatcher = self._new_threads()[1]
                else:  # interrupted after it started: both run, the next job is queued to it
                    self._running = True
                raise
            self._running = True

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
        self._loop_started = False
        self._send_lock = threading.Lock()
        self._loop_closed = False
        self._loop_thread, self._dispatcher = self._new_threads()

    def submit(self, job: Any) -> None:
        """Hand ``job`` to the loop; O(1) and non-blocking.

        Raises:
            RuntimeError: The threads cannot start; only ever before ``job`` is queued, so the caller still owns it
                (the processor gives its queue slot back and counts it ``engine_unavailable``). The next call
                tries to start them again.
        """
        if not self._running:  # the first job (of this process: a forked child starts its own)
            self._start_threads()
        self._inbox.put(job)
        if self._stopped:  # read after the put: either this or stop()'s own drain finds the job
            self._drain_inbox()

    def cancel_all(self) -> None:
        """Cancel every running job (shutdown past its deadline); each job's cleanup still runs.

        Jobs reaching the loop afterwards (handed over by the fast lane, or dispatched late) are cut short.
        """
        self._cancelled = True
        if self.lane is not None:
            self.lane.cancel()
        if self.loop.is_running():
            try:
                self.loop.call_soon_threadsafe(self._cancel_started)
            except RuntimeError:  # closed meanwhile: stop() dealt with its tasks
                pass

    def stop(self, timeout_s: float) -> None:
        """Stop the dispatcher, the fast lane and the loop, in about ``2 * timeout_s`` at most in all.

        The dispatcher first (it is the only thread submitting to the lane), then the lane (its waiting jobs are
        cut short, the running one gets what is left of ``timeout_s``), then the loop (its tasks are cancelled
        and get what is left of the total for their cleanup). Timed-out sync evaluators still in the pool are
        not waited for.
        """
        deadline = time.monotonic() + 2 * timeout_s

        def left(most: float) -> float:
            return max(0.0, min(most, deadline - time.monotonic()))

        with self._start_lock:
            self._stopped = True
            running = self._running
            loop_running = self._loop_started  # also without a dispatcher (it failed to start): wound down here
        here = threading.current_thread()  # stop() called from an evaluator or callback on one of our own threads
        if running:
            self._inbox.put(_STOP)
            if here is not self._dispatcher:  # it cannot join itself: it ends on _STOP once this call returns
                self._dispatcher.join(timeout_s)
        if self.lane is not None:  # a batch the dispatcher still routes now is refused by the lane and cut short
            self.lane.stop(left(timeout_s))
        if loop_running:
            try:  # also when the loop has not begun to run yet: it then winds down as soon as it does
                self.loop.call_soon_threadsafe(self._wind_down, left(timeout_s))
            except RuntimeError:  # closed: the loop thread has ended
                pass
            if here is not self._loop_thread:  # on the loop itself, it winds down once this callback returns
                self._loop_thread.join(left(2 * timeout_s))  # the tasks' own deadline, then their cleanup
                if self._loop_thread.is_alive():  # stalled: waking as the interpreter finalizes can abort it
                    from evaltrace._internal.exit_hooks import join_before_exit  # rare: not imported up front

                    join_before_exit(self._loop_thread)
        elif not self.loop.is_closed():  # never ran in this process (a forked child that evaluated nothing)
            with self._send_lock:
                self._loop_closed = True
            self.loop.close()
        self._drain_inbox()  # jobs submitted after the dispatcher's last look
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.user_loop.close()

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the evaluation loop's thread (an evaluator or callback running there)."""
        return threading.current_thread() is self._loop_thread

    def loop_alive(self) -> bool:
        """Whether the evaluation loop's thread still runs (stop() could not wait for it to end)."""
        return self._loop_thread.is_alive()

    def _wind_down(self, timeout_s: float) -> None:
        """On the loop, at stop: cancel the tasks still running, give them ``timeout_s`` to clean up, stop."""
        self.loop.create_task(self._finish_tasks(timeout_s))

    async def _finish_tasks(self, timeout_s: float) -> None:
        try:
            # Tasks created before this one take their first step now: a task cancelled before it would never
            # run its job's cleanup (the span would be neither forwarded nor counted).
            await asyncio.sleep(0)
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout_s)
        finally:
            self.loop.stop()

    def _drain_inbox(self) -> None:
        """Cut short every job left in the inbox (the dispatcher has stopped, or is about to)."""
        jobs, stop = take_all(self._inbox, _STOP)
        if stop and self._dispatcher.is_alive():  # not ours to take: the dispatcher still ends on it
            self._inbox.put(_STOP)
        if jobs:
            self._cut_short([(job, None) for job in jobs])

    def _cut_short(self, items: list[tuple[Any, Any]]) -> None:
        """Shutdown came first: each job is counted and its span forwarded with what finished (``cancel_now``)."""
        runner = self._fast
        for job, progress in items:
            try:
                if runner is None:
                    raise RuntimeError("no runner to cut the job short")
                runner.cancel_now(job, progress)
            except Exception:
                log_internal_error("cutting an evaluation job short at shutdown")

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            with self._send_lock:  # from here _send refuses (its caller cuts the jobs short)
                self._loop_closed = True
            try:
                # Callbacks sent between loop.stop() and now would be dropped by close(): one last iteration runs
                # them (stop() before run_forever() runs what is ready, then returns). They cut their jobs short.
                self.loop.stop()
                self.loop.run_forever()
            except Exception:
                log_internal_error("running the evaluation loop's last callbacks")
            finally:
                self.loop.close()

    def _send(self, callback: Callable[[list[Any]], None], items: list[Any]) -> bool:
        """Schedule ``callback(items)`` on the loop; False (nothing scheduled) once the loop is closing."""
        with self._send_lock:
            if self._loop_closed:
                return False
            try:
                self.loop.call_soon_threadsafe(callback, items)
            except RuntimeError:  # closed otherwise (never expected: the flag is set first)
                return False
        return True

    def _dispatch(self) -> None:  # noqa: C901  (one frame per batch, on purpose)
        # One frame per batch: waiting for the next job, the fast lane's routing and its supervision run inline
        # here (they were four method calls per batch: ``_next``, ``busy``, ``_to_lane``, ``_supervise``). The
        # same reads, calls and order as theirs (tests/evaluation/test_dispatch_same.py keeps them).
        inbox = self._inbox
        get, get_nowait, sleep, empty = inbox.get, inbox.get_nowait, time.sleep, queue.Empty
        waiting = inbox.qsize
        fast: list[Any] = []
        rest: list[Any] = []
        job: Any = None
        while True:
            lane = self.lane
            if lane is None or lane._outstanding <= 0:  # not lane.busy()
                first = get()
            else:
                try:  # the lane has work: wake up to supervise it even when no job arrives
                    first = get(timeout=lane.tick_s)
                except empty:
                    self._supervise(lane)
                    continue
            if first is _STOP:
                return
            # Let a burst accumulate: one wake-up of the loop per batch instead of one per span keeps the
            # worker threads from taking the GIL off the application thread on every span end.
            sleep(_COALESCE_S)
            batch = [first]
            stop = False
            # The inbox read until it is empty (or _STOP, or a full batch), in rounds of what qsize() says is there:
            # an empty inbox is found by qsize() (a C call), not by get_nowait()'s raised queue.Empty (its raise,
            # traceback and catch cost ~1.7k instructions, once per batch: per span while spans come one at a time).
            # The same items, read in the same order, as reading on until get_nowait() raised.
            ended = False
            while not ended and len(batch) < _BATCH:
                count = waiting()
                if not count:
                    break
                for _ in range(min(count, _BATCH - len(batch))):
                    try:
                        item = get_nowait()
                    except empty:  # taken meanwhile by the one other reader (stop()'s drain of the inbox)
                        ended = True
                        break
                    if item is _STOP:
                        stop = ended = True
                        break
                    batch.append(item)
            if self._stopped or self._cancelled:  # past stop's or cancel_all's sweep: nothing new starts
                self._cut_short([(job, None) for job in batch])
                batch = []
            else:
                lane = self.lane
                if lane is not None and not self._lane_off:  # the fast lane's jobs to it, the others to the loop
                    fast_runner = self._fast
                    assert fast_runner is not None  # set with the lane
                    fast = []
                    rest = []
                    try:  # our own failure here (a thread that cannot start, ...) must not stop the dispatcher
                        eligible, is_slow = fast_runner.fast_eligible, lane.is_slow
                        for job in batch:
                            (fast if eligible(job, is_slow) else rest).append(job)
                        if fast and not lane.submit(fast):  # queues nothing when it raises
                            rest += fast  # the lane was stopped: _start_batch (or _send's refusal) cuts them short
                    except Exception:
                        self._lane_failed(lane, "routing evaluation jobs to the fast lane")  # the batch: the loop's
                    else:
                        try:
                            lane.supervise()
                        except Exception:
                            self._lane_failed(lane, "supervising the fast lane")
                        batch = rest
            if batch and not self._send(self._start_batch, batch):  # the loop is closing: nothing runs any more
                self._cut_short([(job, None) for job in batch])
                self._drain_inbox()
                return
            if stop:
                return
            # This thread then waits for the next job: its locals must not keep the last batch's spans alive
            # meanwhile (a trace held in its session would otherwise pin its spans until the next span ends).
            first = item = job = None
            batch = fast = rest = []

    def _supervise(self, lane: FastLane) -> None:
        try:
            lane.supervise()
        except Exception:
            self._lane_failed(lane, "supervising the fast lane")

    def _lane_failed(self, lane: FastLane, what: str) -> None:
        """Turn the lane off (logged and counted once); the jobs waiting on it go to the loop."""
        if not self._lane_off:
            self._lane_off = True
            log_internal_error(f"{what} (the fast lane is turned off; evaluation continues on the loop)")
            if self._fast is not None:
                self._fast.lane_failed()
        try:
            lane.evacuate()
        except Exception:
            log_internal_error("moving the fast lane's jobs to the loop")

    def _start_batch(self, batch: list[Any]) -> None:
        assert self._run_job is not None  # start() ran before any submit
        if self._cancelled or self._stopped:  # the tasks it would start are past cancel_all or stop's sweep
            self._cut_short([(job, None) for job in batch])
            return
        run_job, eager = self._run_job, self._eager
        for index, job in enumerate(batch):
            if eager is None or not eager(job):
                self._new_task(run_job(job))
                continue
            try:
                self._begin(run_job(job))
            except BaseException:  # SystemExit from the job: the rest still start (the loop's last iteration runs them)
                for later in batch[index + 1 :]:
                    self._new_task(run_job(later))
                raise

    def _new_task(self, coro: Coroutine[Any, Any, None], context: contextvars.Context | None = None) -> None:
        task = self.loop.create_task(coro, context=context)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _begin(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a job's first step now, in a context of its own; it becomes a task only if it suspends.

        A job of inline sync evaluators usually ends in its first step: then no task, no step callback and no
        done callback is made for it (what Python 3.12's eager task factory does; 3.11 has none). A job that
        suspends (a retry's back-off) goes on in a task in the same context, registered for cancellation as
        every task is. Its first step is never cancelled (it runs to its first suspension within this callback,
        before any cancellation sent to the loop). Code that needs a current task (``asyncio.timeout``) must
        suspend first when it has none (``runner``'s awaitable path does).
        """
        context = contextvars.copy_context()
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            return
        except Exception:  # never from JobRunner.run (it catches its own); a task would only have stored it
            log_internal_error("running an evaluation job")
            return
        self._new_task(_continue(coro, yielded), context)

    def _hand_off(self, items: list[tuple[Any, Any]]) -> None:
        """Jobs the fast lane demoted: each goes on the loop with what it has done so far (cut short at shutdown)."""
        if self._cancelled or self._stopped or not self._send(self._start_resumed, items):
            self._cut_short(items)  # at shutdown (the loop may be closed): nothing can run them any more

    def _start_resumed(self, items: list[tuple[Any, Any]]) -> None:
        assert self._run_job is not None
        if self._cancelled or self._stopped:
            self._cut_short(items)
            return
        for job, progress in items:
            self._new_task(self._run_job(job, progress))

    def _cancel_started(self) -> None:
        # Called soon, not now: tasks created earlier in this loop iteration have not taken their first step, and
        # a task cancelled before it never runs its job's cleanup.
        self.loop.call_soon(self._cancel_tasks)

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
