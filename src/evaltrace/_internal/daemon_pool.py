"""A thread pool for user code that can be walked away from: daemon threads, abandonable tasks, no exit join.

``concurrent.futures.ThreadPoolExecutor`` is the wrong home for evaluators: its threads are joined at
interpreter exit (so one evaluator stuck in ``time.sleep(1e9)`` keeps the process alive for ever), it refuses
work once the interpreter starts shutting down (so evaluations still queued at exit fail with "cannot schedule
new futures after interpreter shutdown"), and a ``SystemExit`` raised by user code comes back out of the
future as a ``BaseException`` that kills whatever awaits it.

:class:`DaemonExecutor` fixes the three: its threads are daemons and are never joined at exit; it accepts work
until :meth:`shutdown`; user ``BaseException`` s (``SystemExit``, ``KeyboardInterrupt``) reach the future
wrapped in :class:`UserAbort`, an ordinary ``Exception``. A caller that gives up on a running task (a timeout)
calls :meth:`abandon`: the thread is left to finish on its own and a replacement is started, so stuck tasks
cost threads, never capacity, up to ``max_abandoned`` at once.

Threads walked away from are capped per process by :data:`stuck_calls` (:class:`StuckCalls`): the thread pool
counts a task abandoned at its timeout while it runs, the fast lane a call whose timeout passed on the loop, each
until the call returns. Once ``limit`` threads are stuck, an evaluator holding at least its fair share of them
(``limit // evaluators with stuck threads``, and at least :data:`MIN_STUCK_TO_REFUSE`) gets no new thread: its
calls are not evaluated (``overloaded``) until one returns. One evaluator hanging for ever so costs about
``limit`` threads, not one more per timeout, and an evaluator that hung once is never refused because another
one fills the cap.

In a child forked from the process, the pool starts empty (no threads, nothing queued or running: the parent's
tasks are the parent's) and grows again on the child's first :meth:`submit`; see ``_internal/forks.py``.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from evaltrace._internal import forks
from evaltrace._internal.errors import ErrorEpisode

T = TypeVar("T")

DEFAULT_MAX_STUCK_THREADS = 32
MIN_STUCK_TO_REFUSE = 2
"""An evaluator with fewer stuck threads than this is never refused: one transient hang does not disable it."""


class StuckCalls:
    """Per process: threads left running a user call nobody waits for, by the callable (evaluator) they run.

    Args:
        limit: Stuck threads at which a callable holding its fair share of them gets no new one.
    """

    def __init__(self, limit: int = DEFAULT_MAX_STUCK_THREADS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._by_key: dict[int, int] = {}
        self._total = 0
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: the parent's stuck threads do not exist here."""
        self._lock = threading.Lock()
        self._by_key = {}
        self._total = 0

    @property
    def total(self) -> int:
        """Threads stuck now, all callables together."""
        return self._total

    def stuck(self, key: int) -> None:
        """A thread running ``key``'s call was walked away from (timed out, demoted)."""
        with self._lock:
            self._by_key[key] = self._by_key.get(key, 0) + 1
            self._total += 1

    def returned(self, key: int) -> None:
        """A call counted by :meth:`stuck` returned: its thread is free again."""
        with self._lock:
            left = self._by_key.get(key, 0) - 1
            if left < 0:  # never counted (or counted in the parent before a fork): nothing to free
                return
            if left:
                self._by_key[key] = left
            else:
                del self._by_key[key]
            self._total -= 1

    def refuses(self, key: int) -> bool:
        """Whether a new call of ``key`` must not start: the cap is reached and ``key`` holds its share of it.

        Its share is ``limit // holders`` (the callables with stuck threads), at least
        :data:`MIN_STUCK_TO_REFUSE`: the one filling the cap is refused, not one that hung once besides it. Past
        the cap, each holder can so add at most its share: the total stays under about ``2 * limit`` plus
        ``MIN_STUCK_TO_REFUSE`` per evaluator.
        """
        if self._total < self.limit:  # the usual case: one comparison, no lock
            return False
        with self._lock:
            mine = self._by_key.get(key, 0)
            return mine >= max(MIN_STUCK_TO_REFUSE, self.limit // max(1, len(self._by_key)))

    def of(self, key: int) -> int:
        """Threads stuck in ``key``'s calls."""
        return self._by_key.get(key, 0)


stuck_calls = StuckCalls()
"""The process's count of stuck evaluator threads (the thread pool's abandoned tasks, the fast lane's demoted calls)."""


def thread_started(thread: threading.Thread, wait_s: float = 1.0) -> bool:
    """Whether ``thread``, whose ``start()`` raised, runs anyway; call from the ``except`` block of ``start()``.

    ``start()`` raising ``RuntimeError`` (``can't start new thread``) started nothing. A ``KeyboardInterrupt``
    (Ctrl-C) can land while ``start()`` waits for the OS thread it has already created: that thread runs, and
    replacing it would start a second one on the same state. Its ident may not be set yet at that moment, so a
    thread with none is waited for up to ``wait_s`` (only on that interrupted path) before being taken as not
    started.
    """
    if thread.ident is not None:
        return True
    started: threading.Event | None = getattr(thread, "_started", None)  # CPython's: set once the thread runs
    return started is not None and started.wait(wait_s)


_STARTING = "starting a pool thread (the task waits for a busy thread of the pool; tried again at each submit)"
_SERVED = "is no longer needed (the tasks that waited for a busy thread were served)"
_NOT_OWED = "is no longer needed (the tasks that waited for it were served or refused)"
_Growth = Literal["started", "idle", "held"]


class UserAbort(Exception):
    """User code raised ``SystemExit``/``KeyboardInterrupt`` (or another ``BaseException``) in a pool thread."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


class TimedFuture(concurrent.futures.Future[T]):
    """A future that knows when its task began running (``started``: ``time.monotonic()``, None until then).

    A timeout that counts the call's own running time, not its wait for a thread, starts from there.
    """

    def __init__(self) -> None:
        super().__init__()
        self.started: float | None = None


class _Item:
    __slots__ = ("abandoned", "args", "fn", "future", "kwargs")

    def __init__(self, future: concurrent.futures.Future[Any], fn: Callable[..., Any], args: Any, kwargs: Any):
        self.future = future
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.abandoned = False


class DaemonExecutor(concurrent.futures.Executor):
    """An executor of daemon threads whose running tasks can be abandoned.

    Args:
        max_workers: Threads working at once on tasks nobody gave up on.
        thread_name_prefix: Name prefix of the worker threads.
        max_abandoned: Abandoned tasks whose threads are replaced; past it, new work waits for a thread.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "evaltrace", max_abandoned: int = 64) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._max_abandoned = max_abandoned
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0
        self._abandoned = 0
        self._running: dict[concurrent.futures.Future[Any], _Item] = {}
        self._shutdown = False
        self._serial = 0
        self._owed = False  # an abandoned task's replacement could not start: queued tasks wait for it
        self._caught_up = False  # an idle thread was found since the last start failure: a next one is a new episode
        self.internal_errors = 0  # threads that could not start (every failure; logged once per episode)
        self._replacing = ErrorEpisode("starting a replacement for an abandoned evaluator thread (tried again)")
        self._starting = ErrorEpisode(_STARTING)
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: no thread exists, so count none (else ``submit`` would wait for idle ghosts).

        The parent's queued and running tasks are dropped without a trace: their futures are the parent's. A pool
        shut down before the fork stays shut down.
        """
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0
        self._abandoned = 0
        self._running = {}
        self._owed = False
        self._caught_up = False
        self.internal_errors = 0
        self._replacing = ErrorEpisode("starting a replacement for an abandoned evaluator thread (tried again)")
        self._starting = ErrorEpisode(_STARTING)

    @property
    def abandoned(self) -> int:
        """Tasks given up on whose threads have not returned yet."""
        return self._abandoned

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> TimedFuture[T]:
        """Schedule ``fn(*args, **kwargs)``.

        When the new thread it needs cannot start (``can't start new thread``) while the pool has a live thread
        (one not abandoned: busy now, it takes queued work when its task returns, or is let go at its timeout and
        replaced), the task is queued behind it, as past ``max_workers``: it runs, its caller's timeout counts as
        usual, and the fault is logged once per episode; each later submit tries to start a thread again. Should the
        last live thread be abandoned while its replacement cannot start, the tasks queued then are refused at once
        (their futures fail with that ``RuntimeError``), never left waiting for a thread that may never come.
        Every failed start is counted in :attr:`internal_errors`. Nothing is logged while the pool's lock is held.

        Raises:
            RuntimeError: After :meth:`shutdown`, or when the thread it needs cannot start and no live thread could
                ever take it (none, or all abandoned to hung tasks): then nothing is queued, so ``fn`` never runs
                later behind its caller's back (a judge call nobody awaits, uncounted), and the next submit tries
                to start a thread again.
        """
        future: TimedFuture[T] = TimedFuture()
        waits: Exception | None = None  # the start failure it waits behind a live thread for (logged after the lock)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._queued += 1
            try:
                grown = self._grow_locked()
            except Exception as exc:
                self.internal_errors += 1
                if self._threads - self._abandoned <= 0:  # no thread could ever take it: refused, nothing queued
                    self._queued -= 1
                    raise
                waits = exc  # a live thread takes it once free (or its replacement, if it hangs)
                grown = None
            except BaseException:  # Ctrl-C: reaches the caller unchanged, nothing queued
                self._queued -= 1
                raise
            self._queue.put(_Item(future, fn, args, kwargs))  # under the lock: a thread takes it after the counts
            caught_up, self._caught_up = self._caught_up, self._caught_up and waits is None
        if waits is not None:
            if caught_up:  # the last episode's waiting tasks were all served since: this is a fault of its own
                self._starting.ok(_SERVED)
            self._starting.failed(exc=waits)
        elif grown == "started":
            self._started()
        return future

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Give up on ``future``: cancel it if it has not started, else let its thread go and replace it.

        When the replacement cannot start and no live thread is left, the tasks queued are refused at once (their
        futures fail with the start's ``RuntimeError``): nothing could take them, and their callers' timeouts count
        from their start. Logged after the lock is released.
        """
        if future.cancel():
            return
        refused: list[_Item] = []
        with self._lock:
            item = self._running.get(future)
            if item is None or item.abandoned:
                return
            item.abandoned = True
            self._abandoned += 1
            try:
                grown: _Growth | None = self._grow_locked()
                failure: Exception | None = None
            except Exception as exc:  # no replacement now (a thread cannot start): the waiting callers retry it
                self.internal_errors += 1
                self._owed = True
                grown, failure = None, exc
                if self._threads - self._abandoned <= 0:  # no live thread is left to take what is queued
                    refused = self._take_queued_locked()
        if failure is not None:
            self._refuse(refused, failure)
            self._replacing.failed(exc=failure)
        elif grown == "started":
            self._started()

    def _started(self) -> None:
        """A thread started (call after releasing the lock): it ends either fault's episode (one int test otherwise)."""
        self._starting.ok()
        self._replacing.ok()

    def _take_queued_locked(self) -> list[_Item]:
        """Empty the queue of tasks (shutdown's ``None`` markers stay), uncounted: the caller refuses them."""
        taken: list[_Item] = []
        markers = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                markers += 1
            else:
                taken.append(item)
        for _ in range(markers):
            self._queue.put(None)
        self._queued -= len(taken)
        return taken

    @staticmethod
    def _refuse(items: list[_Item], failure: Exception) -> None:
        """Fail queued tasks no thread can ever take with ``failure``'s error (outside the lock: done callbacks run)."""
        for item in items:
            if item.future.set_running_or_notify_cancel():  # a task its caller cancelled stays cancelled
                error = RuntimeError(f"{failure} (no live thread of the pool was left to take this queued task)")
                error.__cause__ = failure
                item.future.set_exception(error)

    @property
    def owes_thread(self) -> bool:
        """Whether a thread this pool needs could not start: its queued tasks wait until :meth:`retry_growth`."""
        return self._owed and not self._shutdown

    def retry_growth(self) -> None:
        """Start the thread owed since a replacement could not start; never raises (tried again at the next call).

        Called by the caller that let the hung call go, until it succeeds: else a task queued behind the hung call
        would wait for some later submit, and its timeout (counted from its start) would never run out.
        """
        with self._lock:
            if not self._owed or self._shutdown:
                return
            try:
                grown = self._grow_locked()
            except Exception as exc:
                self.internal_errors += 1
                failure: Exception | None = exc
            else:
                failure = None
        if failure is not None:
            self._replacing.failed(exc=failure)
            return
        if grown == "started":
            self._started()
        else:  # the queued tasks were served or refused meanwhile: nothing started, nothing "works again"
            self._replacing.ok(_NOT_OWED)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; optionally cancel queued tasks. ``wait`` joins nothing: the threads are daemons."""
        with self._lock:
            self._shutdown = True
            threads = self._threads
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    with self._lock:
                        self._queued -= 1
                    item.future.cancel()
        for _ in range(threads):
            self._queue.put(None)

    # --- workers -------------------------------------------------------------------------------------------

    def _grow_locked(self) -> _Growth:
        # A new thread when queued tasks outnumber idle threads (an idle thread that has not yet taken a task
        # is counted once, not once per submit: else tasks queue behind one thread that may hang) and the
        # working (not abandoned) ones are below the limit. Logs nothing: the callers log once the lock is free.
        working = self._threads - self._abandoned
        if self._idle >= self._queued:
            self._owed = False  # none needed (any more)
            self._caught_up = True  # whatever waited for a thread was served
            return "idle"
        if working >= self._max_workers or self._abandoned > self._max_abandoned:
            self._owed = False
            return "held"
        self._serial += 1
        name = f"{self._prefix}-{self._serial}"
        # Counted only once it runs (it waits for this lock before touching the counts): a thread that cannot start
        # must not be counted idle, or tasks would queue for ever behind a thread that does not exist.
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        try:
            thread.start()
        except BaseException as exc:
            if isinstance(exc, RuntimeError) or not thread_started(thread):
                raise
            self._threads += 1  # interrupted after it started: it runs, so it is counted (else counts go negative)
            self._idle += 1
            raise
        self._threads += 1
        self._idle += 1
        self._owed = False
        self._caught_up = False  # the episode, if any, ends as "works again" (logged by the caller)
        return "started"

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                with self._lock:
                    self._threads -= 1
                    self._idle -= 1
                return
            with self._lock:
                self._idle -= 1
                self._queued -= 1
                self._running[item.future] = item
            self._run(item)
            with self._lock:
                del self._running[item.future]
                if item.abandoned:
                    self._abandoned -= 1
                # An abandoned task's replacement took this thread's place: a surplus thread leaves.
                if self._threads - self._abandoned > self._max_workers:
                    self._threads -= 1
                    return
                self._idle += 1

    @staticmethod
    def _run(item: _Item) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        if isinstance(item.future, TimedFuture):
            item.future.started = time.monotonic()
        try:
            result = item.fn(*item.args, **item.kwargs)
        except Exception as exc:
            item.future.set_exception(exc)
        except BaseException as exc:  # user code's SystemExit / KeyboardInterrupt must not escape as such
            item.future.set_exception(UserAbort(exc))
        else:
            item.future.set_result(result)
