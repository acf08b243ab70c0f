"""Evaluators that misbehave run apart from the others, and what they cost is counted.

Two kinds of offender take a shared resource from everyone:

- a *sync* evaluator whose call outlasts its timeout (it hangs) holds one of the shared pool's threads, and the
  other evaluators' calls queue behind it;
- an *async* evaluator that blocks its event loop (``time.sleep``, a blocking client in ``async def``) stops every
  coroutine on that loop (see ``_user_loop``).

Once seen, an offender is *isolated*: it gets threads (:class:`EvaluatorThreads`) or a loop (``UserLoop``) of its
own, and the shared ones go on serving the others. Every evaluator's timeout counts its own running time, from when
its call actually starts: never the wait for a shared thread or loop that another evaluator holds. On an
offender's own threads or loop its timeout counts from the call's submission: there it waits only behind itself,
which is its own cost, and the wait stays bounded when it hangs for ever.

What each offender cost is in ``stats()["isolation"]`` (see :meth:`Offenders.snapshot`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from evaltrace._internal import forks
from evaltrace._internal.daemon_pool import DaemonExecutor, TimedFuture, stuck_calls
from evaltrace.evaluation.runner import Overloaded, TimedOut, call_in_thread, evaluator_name
from evaltrace.schema import EvalCase, Trace

logger = logging.getLogger("evaltrace.evaluation")

MAX_OWN_POOLS = 16
"""Isolated evaluators with threads (sync; later ones share the last pool) or a loop (async) of their own."""
_RETRY_S = 0.1  # how often a caller waiting for an owed thread tries to start it again


@dataclass
class OffenderCost:
    """What one isolated evaluator cost the others, and how much of its work ran apart.

    Attributes:
        isolated: It runs on threads (sync) or a loop (async) of its own.
        reason: ``hung`` (a sync call outlasted its timeout) or ``blocked_loop`` (async code blocked its loop).
        blocked_s: Seconds it held a shared thread or loop while others could have used it (as seen when it was
            caught: the calls that timed out on a shared thread, the loop stalls it caused).
        stalls: Times it was caught holding a shared thread past its timeout or blocking the shared loop.
        others_moved: Other evaluations restarted on a fresh loop because it blocked theirs.
        calls_moved: Its calls that ran on its own threads or loop instead of the shared ones.
    """

    isolated: bool = True
    reason: str = ""
    blocked_s: float = 0.0
    stalls: int = 0
    others_moved: int = 0
    calls_moved: int = 0


class Offenders:
    """The process's isolated evaluators (by ``id(evaluator)``) and their costs; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[int, tuple[str, OffenderCost]] = {}
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock; the offenders stay offenders (the same evaluators run there)."""
        self._lock = threading.Lock()

    def isolated(self, key: int) -> bool:
        """Whether the evaluator ``key`` is isolated (one dict lookup: called on every call routed)."""
        return key in self._by_key

    def isolate(self, key: int, name: str, reason: str, blocked_s: float = 0.0, others_moved: int = 0) -> bool:
        """Record that ``key`` was caught misbehaving; True the first time (the caller then warns once)."""
        with self._lock:
            entry = self._by_key.get(key)
            first = entry is None
            if entry is None:
                entry = self._by_key[key] = (name, OffenderCost(reason=reason))
            cost = entry[1]
            cost.blocked_s += blocked_s
            cost.stalls += 1
            cost.others_moved += others_moved
        return first

    def moved(self, key: int, calls: int = 1) -> None:
        """``calls`` of the isolated evaluator ``key`` ran on its own threads or loop."""
        with self._lock:
            entry = self._by_key.get(key)
            if entry is not None:
                entry[1].calls_moved += calls

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{evaluator name: OffenderCost fields}`` (``blocked_s`` rounded to milliseconds)."""
        with self._lock:
            out: dict[str, dict[str, Any]] = {}
            for name, cost in self._by_key.values():
                fields = asdict(cost)
                fields["blocked_s"] = round(fields["blocked_s"], 3)
                out[name] = fields
            return out


class _Rerouted(Exception):
    """The call reached a shared thread after its evaluator was isolated: it runs on the evaluator's own."""


class EvaluatorThreads(concurrent.futures.Executor):
    """The sync evaluators' threads: one shared pool, and a pool of its own for each evaluator that hung.

    The timeout of a call on the shared pool counts from when a thread starts it; an isolated evaluator's
    calls go to its own pool (a call of it already queued on the shared pool is rerouted when a thread takes it)
    and their timeout counts from submission. Also an ordinary executor (``submit``: the shared pool).

    Args:
        workers: Threads of the shared pool, and of each isolated evaluator's pool.
        offenders: Where isolated evaluators are recorded.
    """

    def __init__(self, workers: int, offenders: Offenders) -> None:
        self._workers = workers
        self.shared = DaemonExecutor(workers, thread_name_prefix="evaltrace-eval")
        self.offenders = offenders
        self._own: dict[int, DaemonExecutor] = {}
        self._lock = threading.Lock()
        self._retrying: asyncio.Task[None] | None = None  # starting the shared pool's owed thread (kept referenced)
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock (each pool resets itself: no thread, nothing queued)."""
        self._lock = threading.Lock()
        self._retrying = None

    # --- the Executor interface (the shared pool) ---------------------------------------------------------

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Run ``fn(*args, **kwargs)`` on the shared pool."""
        return self.shared.submit(fn, *args, **kwargs)

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Give up on a future of the shared pool (see :meth:`DaemonExecutor.abandon`)."""
        self.shared.abandon(future)

    @property
    def abandoned(self) -> int:
        """Tasks given up on whose threads have not returned yet, all pools together."""
        return sum(pool.abandoned for pool in self._pools())

    @property
    def internal_errors(self) -> int:
        """Threads that could not start (``can't start new thread``), all pools together."""
        return sum(pool.internal_errors for pool in self._pools())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut every pool down (their threads are daemons: nothing is joined)."""
        for pool in self._pools():
            pool.shutdown(wait, cancel_futures=cancel_futures)

    def _pools(self) -> list[DaemonExecutor]:
        """The shared pool and each own pool once (past ``MAX_OWN_POOLS`` offenders, the last one is shared)."""
        with self._lock:
            own = list({id(pool): pool for pool in self._own.values()}.values())
        return [self.shared, *own]

    # --- evaluator calls ------------------------------------------------------------------------------------

    async def call_timed(
        self, evaluator: Any, trace: Trace, case: EvalCase | None, timeout_s: float | None
    ) -> tuple[Any, float]:
        """Call the sync ``evaluator``; return its output and the call's ``time.monotonic()`` start.

        Raises:
            TimedOut: The call ran ``timeout_s`` (on the shared pool: from when it started).
            Overloaded: The evaluator holds its share of the process's stuck threads (not called).
        """
        key = id(evaluator)
        if stuck_calls.refuses(key):
            raise Overloaded(evaluator)
        if not self.offenders.isolated(key):
            future = self.shared.submit(self._shared_call, evaluator, trace, case)
            try:
                return await self._await_shared(evaluator, future, timeout_s)
            except _Rerouted:
                pass  # isolated while it waited for a shared thread: its own pool from here
        return await self._await_own(evaluator, trace, case, timeout_s)

    def _shared_call(self, evaluator: Any, trace: Trace, case: EvalCase | None) -> Any:
        if self.offenders.isolated(id(evaluator)):
            raise _Rerouted
        return call_in_thread(evaluator, trace, case)

    async def _await_shared(
        self, evaluator: Any, future: TimedFuture[Any], timeout_s: float | None
    ) -> tuple[Any, float]:
        waiting = asyncio.wrap_future(future)
        try:
            while not waiting.done():
                started = future.started
                if timeout_s is None:
                    wait_s: float | None = None
                elif started is None:  # not begun: look again in a while (its clock has not started)
                    wait_s = max(0.05, timeout_s)
                else:
                    wait_s = started + timeout_s - time.monotonic()
                    if wait_s <= 0:
                        break
                await asyncio.wait({waiting}, timeout=wait_s)
        except BaseException:  # cancelled (shutdown): the call runs on, walked away from
            self._walk_away(evaluator, self.shared, future)
            raise
        if waiting.done():  # its output, its exception, or _Rerouted
            return waiting.result(), future.started if future.started is not None else time.monotonic()
        # Its own running time passed its timeout: it hangs on a shared thread. Its thread is let go (a
        # replacement serves the others) and the evaluator gets threads of its own from now on.
        ran_s = time.monotonic() - (future.started or time.monotonic())
        if self.offenders.isolate(id(evaluator), evaluator_name(evaluator), "hung", blocked_s=ran_s):
            logger.warning(
                "evaltrace: evaluator %r hung past its timeout (%.1f s) on a shared thread; it runs on threads of "
                "its own from now on, so the other evaluators never wait behind it",
                evaluator_name(evaluator),
                timeout_s,
            )
        self._walk_away(evaluator, self.shared, future)
        if self.shared.owes_thread and self._retrying is None:  # its replacement could not start: tried again
            self._retrying = asyncio.get_running_loop().create_task(self._retry_owed(self.shared))
        waiting.cancel()
        raise TimedOut

    async def _retry_owed(self, pool: DaemonExecutor) -> None:
        """Start the thread ``pool`` owes (a hung call's replacement that could not start) as soon as one can.

        The calls queued behind the hung one would otherwise wait for some later submit: their timeout counts
        from their start, so nothing would time them out.
        """
        try:
            while pool.owes_thread:
                await asyncio.sleep(_RETRY_S)
                pool.retry_growth()
        finally:
            self._retrying = None

    async def _await_own(
        self, evaluator: Any, trace: Trace, case: EvalCase | None, timeout_s: float | None
    ) -> tuple[Any, float]:
        key = id(evaluator)
        pool = self._own_pool(key)
        self.offenders.moved(key)
        submitted = time.monotonic()
        future = pool.submit(call_in_thread, evaluator, trace, case)
        deadline = asyncio.timeout(timeout_s)  # from submission: here it waits only behind itself
        try:
            async with deadline:
                produced = await asyncio.wrap_future(future)  # cancelled: a call not begun never starts
        except TimeoutError:
            if not deadline.expired():
                raise  # the evaluator's own TimeoutError: an error like any other
            self._walk_away(evaluator, pool, future)
            raise TimedOut from None
        except BaseException:
            self._walk_away(evaluator, pool, future)
            raise
        return produced, future.started if future.started is not None else submitted

    def _own_pool(self, key: int) -> DaemonExecutor:
        with self._lock:
            pool = self._own.get(key)
            if pool is None:
                if len(self._own) >= MAX_OWN_POOLS:  # bounded: the last one is shared by the rest
                    pool = next(reversed(self._own.values()))
                else:
                    pool = DaemonExecutor(self._workers, thread_name_prefix=f"evaltrace-eval-own{len(self._own) + 1}")
                self._own[key] = pool
            return pool

    @staticmethod
    def _walk_away(evaluator: Any, pool: DaemonExecutor, future: concurrent.futures.Future[Any]) -> None:
        """Nobody waits for ``future`` any more: cancel it, or let its thread go, counted stuck until it returns."""
        if future.done():
            return
        pool.abandon(future)
        if not future.cancelled():
            key = id(evaluator)
            stuck_calls.stuck(key)
            future.add_done_callback(lambda _: stuck_calls.returned(key))
