"""Async evaluators of an offline run, each on its own event loop in a daemon thread, abandoned when it blocks.

An ``async def evaluate`` that calls ``time.sleep(60)`` (or any blocking code) stops the loop it runs on; on the
run's own loop no timeout could fire and every other evaluation would stall with it. So each async evaluator
gets a private loop on a daemon thread (:class:`EvaluatorLoop`), and the run's loop only awaits a future:
``asyncio.timeout`` fires on time whatever the evaluator does. When an evaluation times out and its loop does
not answer a ping within :data:`PROBE_WAIT_S`, the loop is blocked: it is retired at once (its daemon thread is
left to finish, or not, on its own and never delays exit) and the evaluator's next evaluation gets a fresh loop.
A loop wrongly taken for blocked (too slow to answer under load) only costs a new loop: the old one still runs
what it holds.

Why one loop per evaluator and not one per evaluation: async clients (the judge's ``AsyncOpenAI``, a user's
``httpx.AsyncClient``) keep connections that belong to the loop that opened them, so an evaluator keeps one loop
for the whole run while it behaves; and a blocking evaluator stalls only its own evaluations, never another's.
For the same reason those clients are closed on their own loop at the end of the run (:meth:`OnOwnLoop.aclose`),
before it stops: a loop closed under an open client leaves its keep-alive connections to the garbage collector
(``ResourceWarning: unclosed transport``), and the server holds them until then.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from evaltrace._internal.daemon_pool import UserAbort
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.schema import EvalCase, EvaluationResult, Trace

__all__ = ["CLOSE_WAIT_S", "PROBE_WAIT_S", "EvaluatorLoop", "OnOwnLoop", "clients_of"]

PROBE_WAIT_S = 0.1
"""How long a loop may take to answer a ping after a timeout before it counts as blocked (a live one: < 1 ms)."""
CLOSE_WAIT_S = 1.0
"""How long closing an evaluator's clients on its loop may take before the loop is stopped regardless (a loop
blocked by the evaluator never runs the closing; closing sockets takes milliseconds)."""

_CLIENT_ATTRIBUTES = ("judge", "embedder")
"""Where catalogue evaluators keep the objects that own async HTTP clients (each with ``async aclose()``)."""


def clients_of(evaluator: Any) -> list[Any]:
    """The distinct judges and embedders with an ``async aclose()`` an evaluator (or one of its ``parts``) holds."""
    parts = getattr(evaluator, "parts", None)
    holders = [evaluator, *(parts.values() if isinstance(parts, dict) else ())]
    found: dict[int, Any] = {}
    for holder in holders:
        for attribute in _CLIENT_ATTRIBUTES:
            owner = getattr(holder, attribute, None)
            if inspect.iscoroutinefunction(getattr(owner, "aclose", None)):
                found.setdefault(id(owner), owner)
    return list(found.values())


async def _close_each(closers: list[Callable[[], Awaitable[Any]]]) -> None:
    # Runs on the evaluator's loop, where the clients' connections live. One failing close never stops the others.
    for close in closers:
        with handle_internal_errors("closing an evaluator's HTTP client"):
            await close()


async def _contained(call: Callable[[], Any]) -> Any:
    # Runs on the evaluator's loop. SystemExit/KeyboardInterrupt escaping a task would stop that loop's
    # run_forever and kill its thread: make them ordinary exceptions, named in the failed result.
    with suppress_instrumentation():
        try:
            produced = call()
            return await produced if inspect.isawaitable(produced) else produced
        except (SystemExit, KeyboardInterrupt) as exc:
            raise UserAbort(exc) from exc


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        # Stopped by close(): cancel what is left (the cancellations of timed-out evaluations) and close.
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _stop(loop: asyncio.AbstractEventLoop) -> None:
    try:
        loop.call_soon_threadsafe(loop.stop)
    except RuntimeError:  # already closed
        pass


class EvaluatorLoop:
    """An event loop on a daemon thread for one async evaluator; replaced when found blocked.

    Args:
        name: Thread name (the evaluator's name is useful in a thread dump).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retired = 0
        self._started = 0

    @property
    def retired(self) -> int:
        """Loops given up on because they were blocked."""
        return self._retired

    def _current(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._started += 1
                thread = threading.Thread(
                    target=_serve, args=(self._loop,), name=f"evaltrace-{self._name}-{self._started}", daemon=True
                )
                thread.start()
            return self._loop

    def _retire_if_blocked(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # retired already (the evaluations queued on a blocked loop all time out)
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # closed meanwhile
            return
        # Waits on the run's loop, but only after a timeout and for PROBE_WAIT_S at most: a live loop answers
        # at once, and a blocked one is retired here, once, so the evaluations after it do not queue behind it.
        if answered.wait(PROBE_WAIT_S):
            return
        with self._lock:
            if self._loop is loop:
                _stop(loop)  # stops once it unblocks, if ever; its thread is a daemon, so exit never waits for it
                self._loop = None
                self._retired += 1

    async def run(self, call: Callable[[], Any]) -> Any:
        """Run ``call()`` (returning an awaitable or a value) on this evaluator's loop and await its outcome."""
        loop = self._current()
        future = asyncio.run_coroutine_threadsafe(_contained(call), loop)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # Timed out (or the run is cancelled): the cancellation reaches the task when its loop next runs.
            # A loop that does not even answer a ping is blocked: the next evaluation gets a new loop.
            future.cancel()
            self._retire_if_blocked(loop)
            raise

    def close(self) -> None:
        """Stop the current loop (a blocked one stops when it unblocks); nothing is joined."""
        with self._lock:
            if self._loop is not None:
                _stop(self._loop)
                self._loop = None

    async def aclose(self, closers: list[Callable[[], Awaitable[Any]]]) -> None:
        """Await each of ``closers`` on the current loop (for :data:`CLOSE_WAIT_S` at most), then stop it.

        Args:
            closers: What closes the clients opened on this loop (``Judge.aclose``...); errors are logged.
        """
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return  # never started, or closed already: no client was opened on a loop of ours still running
        try:
            if closers:
                closing = asyncio.wrap_future(
                    asyncio.run_coroutine_threadsafe(_contained(lambda: _close_each(closers)), loop)
                )
                done, _ = await asyncio.wait({closing}, timeout=CLOSE_WAIT_S)
                if not done:
                    closing.cancel()  # the loop is blocked (or the close stuck): exit does not wait for it
                else:
                    with handle_internal_errors("closing an evaluator's HTTP client"):
                        closing.result()
        finally:
            _stop(loop)


class OnOwnLoop:
    """An async evaluator proxied onto its :class:`EvaluatorLoop`, with the same name and version.

    Args:
        inner: The async evaluator.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.loop = EvaluatorLoop(str(getattr(inner, "name", type(inner).__name__)))

    @property
    def name(self) -> str:
        """The evaluator's name."""
        return str(getattr(self.inner, "name", None) or type(self.inner).__name__)

    @property
    def version(self) -> str | None:
        """The evaluator's version."""
        version = getattr(self.inner, "version", None)
        return None if version is None else str(version)

    async def evaluate(self, trace: Trace, case: EvalCase | None) -> EvaluationResult:
        """Evaluate on the evaluator's own loop."""
        result: EvaluationResult = await self.loop.run(lambda: self.inner.evaluate(trace, case))
        return result

    async def aclose(self) -> None:
        """Close the evaluator's judge and embedder clients of this loop on it (bounded), then stop the loop."""
        await self.loop.aclose([owner.aclose for owner in clients_of(self.inner)])
