"""The event loop that async evaluators run on: apart from the pipeline's loop, and replaced when user code blocks it.

The processor's own loop orchestrates every job (hold deadlines, forwarding, child evaluation spans). If user
coroutines ran there, one ``async def evaluate`` that calls ``time.sleep`` or a blocking HTTP client would stall
every evaluation and every span waiting to be forwarded, and shutdown could not cancel anything. So async
evaluators run here, on a loop in a daemon thread of its own, and a watchdog checks its heartbeat: when the loop
has not turned for ``stall_s`` on two consecutive looks (one look may be a loaded machine; a watchdog that
woke late itself does not count), the coroutine running on it is the one blocking it. The watchdog then moves
every *other* evaluator's evaluation to a fresh loop (they start again there; an evaluator is a pure function of
its input, like a retry) and the blocked loop becomes the blocking evaluator's own: its calls run there from then on
(``_isolation``: a loop per offender, its cost counted), so it can never again stall anyone else's. Its blocking call
may still finish within its timeout; if not, the caller's timeout abandons it. Its calls already queued on that
loop are timed from submission from then on, and while its loop has not turned for a call's timeout, the call
times out at once rather than being queued behind the block (which may never end).

An evaluation's timeout counts from when its coroutine starts running (:meth:`UserLoop.run_timed`), never its
wait for a loop another evaluator blocks; on an offender's own loop it counts from submission (it waits only
behind itself there, and a loop it blocks for ever so never holds its later calls for ever).

In a child forked from the process, the parent's loops are never run: the child's first evaluation starts a new
loop and a new watchdog (see ``_internal/forks.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from evaltrace._internal import forks
from evaltrace._internal.daemon_pool import UserAbort, thread_started
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace.evaluation._isolation import MAX_OWN_POOLS, Offenders
from evaltrace.evaluation.runner import TimedOut, evaluator_name

logger = logging.getLogger("evaltrace.evaluation")

_BEAT_S = 0.05
# How long a stopped loop lets its cancelled coroutines clean up before it closes: the time exit_hooks gives a
# thread at interpreter exit (EXIT_JOIN_S), so a wind-down that close() started at exit ends before finalization.
_WIND_DOWN_S = 0.8  # (with its last turns, under EXIT_JOIN_S)
_LAST_TURN_S = 0.05


def _refuse(future: concurrent.futures.Future[Any]) -> None:
    """Fail a run that will never start or finish on its loop (unless it already has an outcome)."""
    try:
        future.set_exception(RuntimeError("the evaluation loop is closed"))
    except concurrent.futures.InvalidStateError:  # done meanwhile (moved, cancelled, finished)
        pass


class _Moved(Exception):
    """The loop this run was on is blocked by another evaluator: start again on the new loop."""


class _Run:
    __slots__ = ("future", "key", "loop", "make", "own", "started", "submitted", "task")

    def __init__(self, make: Callable[[], Awaitable[Any]], loop: _Loop, key: int | None, own: bool) -> None:
        self.make = make
        self.loop = loop
        self.key = key  # id(evaluator); None: unknown (``run``)
        self.own = own  # on its evaluator's own loop (an offender's)
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.task: asyncio.Task[Any] | None = None
        self.submitted = time.monotonic()
        self.started: float | None = None  # set by the coroutine's first step, on the user loop


class _Loop:
    """One user loop in its daemon thread, with a heartbeat the watchdog reads."""

    def __init__(self, serial: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.beat = time.monotonic()
        self.runs: set[_Run] = set()
        self.retired = False
        self.closing = False  # stopped: runs still queued are refused (see ``_wind_down``)
        self.thread = threading.Thread(target=self._main, name=f"evaltrace-async-eval-{serial}", daemon=True)
        try:
            self.thread.start()
        except BaseException as exc:
            if isinstance(exc, RuntimeError) or not thread_started(self.thread):
                self.loop.close()  # can't start new thread: the loop (its selector and self-pipe) is not leaked
            else:  # interrupted (Ctrl-C) after it started: the loop nobody will use stops (and closes itself)
                self.stop()
            raise

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._tick)
        try:
            self.loop.run_forever()
        finally:
            self._wind_down()

    def _wind_down(self) -> None:
        """Cancel the coroutines still here and let them run their cleanup (bounded), then close the loop.

        Closing with tasks pending would drop them unfinished: their ``finally`` blocks (closing a client, ending a
        span) never run, and collecting them later logs "Task was destroyed but it is pending" and "coroutine was
        never awaited" into the application's logs. The tasks pending at the stop are cancelled; tasks their
        cleanup starts run on, and async generators left suspended are closed, all within ``_WIND_DOWN_S``; what
        is left then is cancelled once more and the loop closes. Runs submitted after the stop are refused, and a
        run whose task never finished gets an error, so no caller waits on it for ever.
        """
        self.closing = True  # on this thread, before the loop runs again: a stop() landing now is ignored
        loop = self.loop
        try:
            deadline = time.monotonic() + _WIND_DOWN_S
            for task in asyncio.all_tasks(loop):
                task.cancel()
            while True:  # again while cleanups start new tasks (those run on, uncancelled, until the deadline)
                pending = asyncio.all_tasks(loop)
                left = deadline - time.monotonic()
                if not pending or left <= 0:
                    break
                loop.run_until_complete(asyncio.wait(pending, timeout=left))
            gens = loop.create_task(loop.shutdown_asyncgens())
            loop.run_until_complete(asyncio.wait({gens}, timeout=max(deadline - time.monotonic(), _LAST_TURN_S)))
            rest = asyncio.all_tasks(loop)
            if rest:  # past the deadline: cancelled, with one short turn to take it (one that ignores it is left)
                for task in rest:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(rest, timeout=_LAST_TURN_S))
        except Exception:
            log_internal_error("cancelling the async evaluations still running when their loop stopped")
        finally:
            loop.close()
            for run in tuple(self.runs):  # a tuple of a set is taken whole under the GIL
                _refuse(run.future)

    def _tick(self) -> None:
        self.beat = time.monotonic()
        self.loop.call_later(_BEAT_S, self._tick)

    def stop(self) -> None:
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stop_unless_winding_down)
            except RuntimeError:  # closed meanwhile
                pass

    def _stop_unless_winding_down(self) -> None:
        # On the loop's thread. A stop that lands during the wind-down (close() racing a retired loop's own stop)
        # would end the wind-down's wait early and leave its tasks pending: it has already stopped.
        if not self.closing:
            self.loop.stop()


class _StallJudge:
    """Whether a loop is blocked, not merely descheduled: a stall seen on two consecutive looks of a timely watchdog.

    A healthy loop's thread can miss its heartbeat past ``stall_s`` when the machine is loaded or a collection
    pauses the process: then the watchdog usually wakes late too (its lateness is discounted: that look does not
    count), and on its next look the loop has turned. A loop blocked by user code keeps the same heartbeat across
    both looks while the watchdog wakes on time.
    """

    def __init__(self, stall_s: float) -> None:
        self._stall_s = stall_s
        self._suspect: tuple[object, float] | None = None  # (loop, its heartbeat) stalled at the previous look

    def look(self, loop: object, beat: float, now: float, late_s: float) -> bool:
        """One look at ``loop`` whose last heartbeat was ``beat``; ``late_s``: how late the watchdog woke."""
        if now - beat <= self._stall_s or late_s > self._stall_s / 2:
            self._suspect = None  # turning; or the watchdog itself was descheduled: the process, not the loop
            return False
        suspect = self._suspect
        if suspect is not None and suspect[0] is loop and suspect[1] == beat:
            self._suspect = None
            return True
        self._suspect = (loop, beat)
        return False


class UserLoop:
    """Run async evaluators' coroutines off the pipeline's loop, containing any that block their loop.

    Args:
        stall_s: How long the shared loop may go without turning before its blocking evaluator is isolated and the
            other evaluations are moved (short: they may be waiting behind it meanwhile).
        offenders: Where isolated evaluators and their cost are recorded.
    """

    def __init__(self, stall_s: float = 0.25, offenders: Offenders | None = None) -> None:
        self._stall_s = stall_s
        self.offenders = offenders if offenders is not None else Offenders()
        self._lock = threading.Lock()
        self._serial = 0
        self._current: _Loop | None = None  # None: no loop (yet) in this process (a forked child)
        self._own: dict[int, _Loop] = {}  # id(evaluator) -> the offender's own loop
        self._names: dict[int, str] = {}  # id(evaluator) -> its name (for the warning and the counters)
        self._watchdog: threading.Thread | None = None
        self.moved = 0  # evaluations restarted on a fresh loop (for tests and stats)
        self.stalls = 0
        self.internal_errors = 0  # our own failures in the watchdog (counted in stats(); it keeps watching)
        self._watch_failing = ErrorEpisode("watching or replacing the blocked async evaluators' loop (tried again)")
        self._closed = threading.Event()
        # The loop (a 50 ms heartbeat) and its watchdog start with the first async evaluation: an application
        # with no async evaluator never wakes for them.
        forks.reinit_after_fork(self)

    def _new_loop(self) -> _Loop:
        self._serial += 1
        return _Loop(self._serial)

    def _started_locked(self) -> _Loop:
        """The current loop, started with the watchdog when there is none; call with the lock held.

        Raises:
            RuntimeError: The loop's thread cannot start (``can't start new thread``): nothing is left half-made,
                the next call tries again. A watchdog that cannot start is logged and tried again with the next
                call; the loop runs the evaluations meanwhile (unwatched, not refused).
        """
        if self._current is None:
            self._current = self._new_loop()
        if (self._watchdog is None or not self._watchdog.is_alive()) and not self._closed.is_set():
            # not alive: it died (a bug of ours past ``_watch``'s own guard): blocking detection comes back
            watchdog = threading.Thread(target=self._watch, name="evaltrace-async-eval-watchdog", daemon=True)
            try:
                watchdog.start()
            except RuntimeError:
                log_internal_error("starting the async evaluators' watchdog (tried again with the next call)")
            else:
                self._watchdog = watchdog  # only once it runs: else no later call would start one
        return self._current

    def _reinit_after_fork(self) -> None:
        """In a forked child: new lock, counters at zero; the first run starts a new loop and watchdog.

        The parent's loops are kept inert (their threads are not here); the runs on them are the parent's. A
        closed UserLoop stays closed.
        """
        self._lock = threading.Lock()
        self.moved = 0
        self.stalls = 0
        self.internal_errors = 0
        if self._closed.is_set():
            closed = threading.Event()
            closed.set()
            self._closed = closed
            return
        self._closed = threading.Event()
        if self._current is not None:
            forks.keep_inherited(self._current)
        for own in self._own.values():
            forks.keep_inherited(own)
        self._current = None
        self._own = {}
        self._watchdog = None

    async def run(self, make: Callable[[], Awaitable[Any]]) -> Any:
        """Await ``make()`` run on the user loop, from the pipeline's loop; cancellation reaches the coroutine."""
        return await self.run_timed(None, make, None)

    async def run_timed(self, evaluator: Any, make: Callable[[], Awaitable[Any]], timeout_s: float | None) -> Any:
        """Await ``make()`` (``evaluator``'s coroutine) on its loop; cancellation reaches the coroutine.

        Raises:
            TimedOut: The coroutine ran ``timeout_s`` from its start (on an offender's own loop: from submission).
        """
        key = None
        if evaluator is not None:
            key = id(evaluator)
            if key not in self._names:
                self._names[key] = evaluator_name(evaluator)
        while True:
            if timeout_s is not None and self._own_loop_stalled(key, timeout_s):
                raise TimedOut  # it would wait behind its own block past its timeout: not queued to a dead loop
            run = self._submit(make, key)
            outcome = asyncio.wrap_future(run.future)
            try:
                while not outcome.done():
                    wait_s: float | None = None
                    if timeout_s is not None:
                        since = run.submitted if run.own else run.started
                        if since is None:  # not started: look again in a while (its clock has not started)
                            wait_s = max(0.05, timeout_s)
                        else:
                            wait_s = since + timeout_s - time.monotonic()
                            if wait_s <= 0:
                                break
                    await asyncio.wait({outcome}, timeout=wait_s)
            except asyncio.CancelledError:  # shutdown: stop the coroutine where it runs
                self._cancel(run)
                raise
            if outcome.done():
                try:
                    return outcome.result()
                except _Moved:
                    continue
            outcome.cancel()
            self._cancel(run)
            raise TimedOut

    def close(self) -> None:
        """Stop the watchdog and the loops (a loop blocked by user code ends with its daemon thread).

        Never waits: each loop winds down on its own thread (``_Loop._wind_down``). A loop with evaluations in
        flight is given, at interpreter exit, the bounded time ``exit_hooks`` gives such threads to end, since one
        still cleaning up as the interpreter finalizes can abort the process.
        """
        self._closed.set()
        with self._lock:
            loops = [*([self._current] if self._current is not None else []), *self._own.values()]
            busy = [holder.thread for holder in loops if holder.runs]
        for holder in loops:
            holder.stop()
        if busy:
            from evaltrace._internal.exit_hooks import join_before_exit  # only with evaluations in flight

            for thread in busy:
                join_before_exit(thread)

    # --- internals ----------------------------------------------------------------------------------------

    def _own_loop_stalled(self, key: int | None, timeout_s: float) -> bool:
        """Whether ``key``'s own loop has not turned for ``timeout_s``: a call queued there now would time out.

        Queuing it anyway would leave its start (holding the trace) on a loop that may never run it again.
        """
        if key is None:
            return False
        own = self._own.get(key)
        return own is not None and time.monotonic() - own.beat > timeout_s

    def _submit(self, make: Callable[[], Awaitable[Any]], key: int | None) -> _Run:
        with self._lock:
            own = self._own.get(key) if key is not None else None
            holder = own if own is not None else self._started_locked()
            run = _Run(make, holder, key, own is not None)
            holder.runs.add(run)
        if own is not None and key is not None:
            self.offenders.moved(key)
        try:
            holder.loop.call_soon_threadsafe(self._start, run)
        except RuntimeError:  # its loop was closed (at close()): the run never starts
            _refuse(run.future)
        return run

    def _start(self, run: _Run) -> None:
        if run.future.done():  # moved or cancelled before it started
            return
        if run.loop.closing:  # submitted as the loop stopped: never started, so nothing is left half-run
            _refuse(run.future)
            return
        task = run.loop.loop.create_task(self._guarded(run))
        run.task = task
        task.add_done_callback(lambda done: self._finish(run, done))

    @staticmethod
    async def _guarded(run: _Run) -> Any:
        run.started = time.monotonic()  # its first step: its timeout counts from here
        try:
            return await run.make()
        except (SystemExit, KeyboardInterrupt) as exc:  # would stop this loop's run_forever
            raise UserAbort(exc) from exc

    def _finish(self, run: _Run, task: asyncio.Task[Any]) -> None:
        with self._lock:
            run.loop.runs.discard(run)
            retire = run.loop.retired and not run.loop.runs
            if run.future.done():
                pass
            elif task.cancelled():
                run.future.cancel()
            elif task.exception() is not None:
                run.future.set_exception(task.exception())
            else:
                run.future.set_result(task.result())
        if retire:  # the blocking evaluation was the last one on a replaced loop
            run.loop.stop()

    def _cancel(self, run: _Run) -> None:
        with self._lock:  # a run whose loop never turns again (blocked for ever) is not kept
            run.loop.runs.discard(run)
        task = run.task
        if task is not None and not run.loop.loop.is_closed():
            try:
                run.loop.loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass

    def _watch(self) -> None:
        judge = _StallJudge(self._stall_s)
        while True:
            interval = self._stall_s / 4 if self._busy() else self._stall_s
            asleep = time.monotonic()
            if self._closed.wait(interval):
                return
            now = time.monotonic()
            holder = self._current
            busy = holder is not None and bool(holder.runs)
            try:
                if holder is not None and judge.look(
                    holder, holder.beat if busy else now, now, now - asleep - interval
                ):
                    self._replace(holder)
            except Exception:  # a bug of ours: logged, and the watchdog keeps watching (else detection is off for good)
                self.internal_errors += 1
                self._watch_failing.failed()

    def _busy(self) -> bool:
        """Whether the shared loop has evaluations (else the watchdog looks less often: nothing to block)."""
        holder = self._current
        return holder is not None and bool(holder.runs)

    def _replace(self, blocked: _Loop) -> None:
        culprit = asyncio.current_task(blocked.loop)
        stalled_s = time.monotonic() - blocked.beat
        with self._lock:
            if self._current is not blocked or self._closed.is_set():  # closed: a new loop would never be stopped
                return
            blocking = next((run for run in blocked.runs if run.task is not None and run.task is culprit), None)
            key = blocking.key if blocking is not None else None
            try:
                self._current = self._new_loop()
            except RuntimeError:  # can't start new thread: nothing changed; the next looks see the stall and retry
                self.internal_errors += 1
                self._watch_failing.failed()
                return
            self._watch_failing.ok()
            if key is not None and key not in self._own and len(self._own) >= MAX_OWN_POOLS:
                key = None  # bounded: past that many offenders, one more is contained as before (not isolated)
            if key is not None:  # the blocked loop becomes its evaluator's own: its calls go there from now on
                self._own[key] = blocked
                others = [run for run in blocked.runs if run.key != key]
                for run in blocked.runs:  # its calls already queued there wait only behind itself now: timed from
                    if run.key == key:  # submission, or a loop blocked for ever would hold them (and a slot) for ever
                        run.own = True
            else:  # not known whose: the blocking coroutine is left alone on the old loop, which then retires
                blocked.retired = True
                others = [run for run in blocked.runs if run.task is None or run.task is not culprit]
            for run in others:
                blocked.runs.discard(run)
                if not run.future.done():
                    run.future.set_exception(_Moved())
            self.moved += len(others)
            self.stalls += 1
            mine = len(blocked.runs) if key is not None else 0  # its runs left there now run on its own loop
        for run in others:
            self._cancel(run)  # runs when (if) the blocked loop turns again: no work done twice
        if key is not None:
            name = self._names.get(key, "async evaluator")
            first = self.offenders.isolate(key, name, "blocked_loop", stalled_s, len(others))
            self.offenders.moved(key, mine)
            if first:
                logger.warning(
                    "evaltrace: async evaluator %r blocked its event loop for %.2f s (it calls blocking code); it "
                    "runs on a loop of its own from now on, and %d other evaluation(s) moved to a new loop",
                    name,
                    stalled_s,
                    len(others),
                )
            return
        logger.warning(
            "evaltrace: an async evaluator blocked its event loop for over %.2f s (it calls blocking code); "
            "%d other evaluation(s) moved to a new loop",
            self._stall_s,
            len(others),
        )
