"""What evaltrace does when the process ends: drain before executors stop, and treat SIGTERM as an exit.

Interpreter exit runs, in order: ``threading``'s exit hooks (newest first; ``concurrent.futures`` registers one
that stops every ``ThreadPoolExecutor`` from taking work), then the joins of non-daemon threads, then ``atexit``
handlers. A drain registered with ``atexit`` alone therefore runs after the executors are closed, and every
evaluation still queued fails with "cannot schedule new futures after interpreter shutdown", as does any async
HTTP client that resolves a host name through the loop's default executor. :func:`drain_before_executors_stop`
registers the drain among ``threading``'s exit hooks, after ``concurrent.futures``' own (so it runs first);
``threading._register_atexit`` is private CPython API (3.9+), so when it is missing the drain falls back to
``atexit``, where evaluators that need a ``ThreadPoolExecutor`` fail as values (never as verdicts).

A SIGTERM under Python's default disposition kills the process at once: no ``finally``, no ``atexit``, every
span and score in memory lost. :func:`exit_on_sigterm` makes it raise ``SystemExit(143)`` in the main thread
instead (only when no other handler is installed), so the same drain and shutdown as a clean exit run.

A SIGTERM once the exit has begun (a ``SystemExit`` raised there is printed as "Exception ignored" with a
traceback and cannot change the exit status, which is already decided) is noted instead: the drain or ``atexit``
handler in progress finishes (evaltrace's within its deadline), the ``atexit`` handlers run, then the process ends
with status 143 (``os._exit``, after flushing logging and the std streams). Non-daemon threads are not waited for
then: SIGTERM asked the process to end. A SIGTERM while the ``atexit`` handlers already run skips those
registered before ``configure()`` (logging is still flushed): running them from a handler would run the others twice
on Pythons whose ``atexit`` iterates over a copy of its list.

Python runs signal handlers in the main thread only, but the kernel hands a process-directed signal to any thread
that does not block it. A SIGTERM taken by one of evaltrace's threads only sets a flag: a main thread blocked in
``time.sleep``, ``Thread.join`` or ``Queue.get`` is not woken, and the exit waits until that call returns (seen:
the full 60 s of a sleep, in about one run in ten on a loaded machine). :func:`start_thread` therefore starts each
of evaltrace's threads with SIGTERM blocked (threads they start inherit it), unless ``configure(handle_sigterm=False)``
said to leave SIGTERM alone. A child process inherits the mask of the thread that started it: a fork (``os.fork``,
``multiprocessing``'s fork) from one of these threads unblocks SIGTERM in the child; an ``exec`` from an evaluator
(``subprocess``) keeps it blocked in the program started (docs/reliability.md says so and how to opt out).
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (imported first: its exit hook must be older than ours)
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

SIGTERM_EXIT_CODE = 128 + signal.SIGTERM


class _Phase:
    """Where the interpreter's exit is, as far as SIGTERM is concerned (one per process)."""

    RUNNING = "running"  # the application runs: SIGTERM raises SystemExit(143)
    DRAINING = "draining"  # evaltrace's exit drain runs (a threading exit hook)
    JOINING = "joining"  # after the drain, before atexit: other exit hooks, joins of non-daemon threads
    AT_EXIT = "at_exit"  # atexit handlers run, evaltrace's shutdown among them
    FINAL = "final"  # the atexit handlers registered since this module was imported have run

    def __init__(self) -> None:
        self.phase = self.RUNNING
        self.terminated = False  # a SIGTERM arrived once the exit had begun
        self.finishing = False  # _finish() runs the atexit handlers itself


_exit = _Phase()


def drain_before_executors_stop(drain: Callable[[], None]) -> None:
    """Run ``drain`` at interpreter exit while thread pools still accept work (fallback: ``atexit``)."""
    register: Callable[[Callable[[], None]], None] | None = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(lambda: _run_drain(drain, then=_Phase.JOINING))
            return
        except RuntimeError:  # the interpreter is already shutting down
            pass
    atexit.register(lambda: _run_drain(drain, then=_Phase.AT_EXIT))


def shutdown_at_exit(shutdown: Callable[[], None]) -> None:
    """Run ``shutdown`` among the ``atexit`` handlers (a SIGTERM meanwhile lets it finish, see the module doc)."""
    atexit.register(lambda: _run_shutdown(shutdown))


def _run_drain(drain: Callable[[], None], *, then: str) -> None:
    _exit.phase = _Phase.DRAINING
    try:
        drain()
    finally:
        _exit.phase = then
        if then == _Phase.JOINING:
            atexit.register(_atexit_began)  # registered last, so the first atexit handler to run
    if _exit.terminated and then == _Phase.JOINING:
        _finish()


def _atexit_began() -> None:
    if _exit.phase == _Phase.JOINING:
        _exit.phase = _Phase.AT_EXIT


def _run_shutdown(shutdown: Callable[[], None]) -> None:
    _exit.phase = _Phase.AT_EXIT
    shutdown()


def _after_atexit_handlers() -> None:
    """Registered at import, before any evaltrace handler: runs after them (and after the application's later ones)."""
    if _exit.phase == _Phase.RUNNING:  # atexit runs without the threading hooks (an embedded interpreter...)
        return
    _exit.phase = _Phase.FINAL
    if _exit.terminated and not _exit.finishing:
        _exit_now()


atexit.register(_after_atexit_handlers)


def _finish() -> None:
    """Run every atexit handler (as the interpreter would, in its order), then exit with 143."""
    _exit.finishing = True
    _exit.phase = _Phase.AT_EXIT
    try:
        run: Callable[[], None] | None = getattr(atexit, "_run_exitfuncs", None)
        if run is not None:
            run()  # each runs once: atexit forgets them afterwards
    finally:
        _exit_now()


def _exit_now() -> None:
    """Exit with 143 now, with what is buffered in logging handlers and std streams written out."""
    try:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # pragma: no cover - a closed or broken stream: exit anyway
        pass
    os._exit(SIGTERM_EXIT_CODE)


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM kills at once, as the sender presumably wants.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    phase = _exit.phase
    if phase == _Phase.RUNNING:
        raise SystemExit(SIGTERM_EXIT_CODE)
    # The exit has begun: its status is decided and a SystemExit here would only print a traceback.
    _exit.terminated = True
    if phase == _Phase.JOINING:  # nothing of evaltrace's is running: run the atexit handlers and end
        _finish()
    elif phase == _Phase.FINAL:
        _exit_now()
    # DRAINING, AT_EXIT: the drain or the atexit handlers in progress finish (evaltrace's within its deadline),
    # then the process exits with 143.


_LEFT_TO_MAIN: frozenset[int] = frozenset({signal.SIGTERM}) if hasattr(signal, "pthread_sigmask") else frozenset()
_leave_to_main = True  # configure(handle_sigterm=False) turns it off


def leave_sigterm_to_main_thread(enabled: bool) -> None:
    """Whether threads started by :func:`start_thread` from now on block SIGTERM (see the module doc)."""
    global _leave_to_main
    _leave_to_main = enabled


def start_thread(thread: threading.Thread) -> None:
    """Start one of evaltrace's threads so that it never takes a SIGTERM meant for the main thread.

    The new thread inherits the signal mask of the thread that starts it, so SIGTERM is blocked here only around
    ``start()``: the thread is masked from its first instruction, with no window in which it could take the
    signal. A SIGTERM arriving meanwhile stays pending and goes to a thread that does not block it.
    """
    if not (_leave_to_main and _LEFT_TO_MAIN):
        thread.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _LEFT_TO_MAIN)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_forked_from_masked = False


def _before_fork() -> None:
    global _forked_from_masked
    _forked_from_masked = bool(
        _LEFT_TO_MAIN
        and threading.current_thread() is not threading.main_thread()
        and _LEFT_TO_MAIN <= signal.pthread_sigmask(signal.SIG_BLOCK, ())
    )


def _after_fork_in_child() -> None:
    # The forking thread is the child's only thread: with SIGTERM blocked there, nothing could ever take it.
    if _forked_from_masked:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _LEFT_TO_MAIN)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def exit_on_sigterm() -> bool:
    """Make SIGTERM a clean exit (``SystemExit(143)``) when its disposition is still the default.

    Only from the main thread, and never over a handler the application or its server (gunicorn, uvicorn...)
    installed: those exit cleanly on their own, and ours would change their behaviour.

    Returns:
        True when the handler is (now) installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is _raise_exit:
        return True
    if current is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise_exit)
    return True
