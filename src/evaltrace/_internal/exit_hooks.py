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

Python runs signal handlers in the main thread only, but the kernel may hand a process-directed SIGTERM to any
thread. Taken by another thread, it only sets a flag: a main thread blocked in ``time.sleep``, ``Thread.join`` or
``Queue.get`` is not woken, and the exit waits until that call returns (seen: the whole 60 s of a sleep, about one
run in ten on a loaded machine). The :class:`_Forwarder` wakes it: CPython writes the number of every signal it
catches to the wakeup fd (``signal.set_wakeup_fd``), whichever thread catches it; a watcher thread reads them and,
for a SIGTERM, sends the main thread a real-time signal of its own (``SIGRTMAX``, whose Python handler does nothing).
The main thread's blocking call then returns to run the handlers of what arrived: the SIGTERM handler runs once, as
for a SIGTERM the main thread took itself (so a second SIGTERM still kills at once, at kernel level). Masking SIGTERM
in evaltrace's threads instead would be inherited by every process an evaluator starts (``subprocess``,
``multiprocessing`` spawn), which SIGTERM could then never stop. The forwarder stands aside when the wakeup fd belongs
to someone else (an asyncio loop's signal handlers; trio warns about a wakeup fd it finds set, so trio applications
may prefer ``configure(handle_sigterm=False)``) or when ``SIGRTMAX`` is the application's; a forked child has none.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (imported first: its exit hook must be older than ours)
import logging
import os
import signal
import sys
import threading
import time
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


_WAKE: int | None = getattr(signal, "SIGRTMAX", None)  # a real-time signal: no default use, nothing else sends it


def _wake(signum: int, frame: FrameType | None) -> None:
    """The wake-up signal's handler: nothing to do, its arrival already interrupted the main thread's call."""


class _Forwarder:
    """Wakes the main thread for a SIGTERM another thread caught (see the module doc); one per process."""

    def __init__(self) -> None:
        self.read_fd = -1
        self.write_fd = -1
        self.pid = 0

    def start(self) -> None:
        """Own the wakeup fd and start the watcher (main thread; nothing when the fd or the signal is taken)."""
        if self.pid == os.getpid() or _WAKE is None or not hasattr(signal, "pthread_kill"):
            return
        if signal.getsignal(_WAKE) is not signal.SIG_DFL:  # the application's (or a C library's)
            return
        read_fd, write_fd = os.pipe()
        try:
            os.set_blocking(write_fd, False)  # the C handler must never block on a full pipe
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (OSError, ValueError):
            previous = -2
        if previous != -1:  # an asyncio loop's, or none could be set: leave it as it was
            if previous >= 0:
                signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return
        signal.signal(_WAKE, _wake)
        self.read_fd, self.write_fd, self.pid = read_fd, write_fd, os.getpid()
        main = threading.main_thread().ident
        threading.Thread(target=self._watch, args=(read_fd, main, _WAKE), name="evaltrace-sigterm", daemon=True).start()

    @staticmethod
    def _watch(read_fd: int, main: int | None, wake: int) -> None:
        while True:
            try:
                data = os.read(read_fd, 256)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM in data and main is not None:
                # Whoever's handler SIGTERM has (ours, the application's), it runs in the main thread only: wake it.
                try:
                    signal.pthread_kill(main, wake)
                except (OSError, ValueError):  # pragma: no cover - the main thread is gone: the exit is under way
                    return

    def after_fork_in_child(self) -> None:
        # The pipe is shared with the parent: this process's signals must not wake the parent's main thread.
        if self.pid == 0:
            return
        try:
            current = signal.set_wakeup_fd(-1)
            if current != self.write_fd:  # someone else's since: leave it
                signal.set_wakeup_fd(current)
        except (OSError, ValueError):  # pragma: no cover - not the main thread
            pass
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
        self.read_fd = self.write_fd = -1
        self.pid = 0


_forwarder = _Forwarder()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forwarder.after_fork_in_child)


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
    _forwarder.start()
    return True


# A thread shutdown() could not wait for (an evaluation loop blocked by an evaluator) that wakes while the interpreter
# finalizes can abort the process (SIGABRT, "FATAL: exception not rethrown"). At exit such threads get this long, in
# all, to end first; one still running after it is left to the interpreter (the exit is never held up longer).
EXIT_JOIN_S = 1.0
_stalled: list[threading.Thread] = []
_stalled_lock = threading.Lock()
_join_registered = False


def join_before_exit(thread: threading.Thread) -> None:
    """At interpreter exit, give ``thread`` (with every other one passed here) at most ``EXIT_JOIN_S`` to end.

    Among ``threading``'s exit hooks, so before finalization (fallback: ``atexit``); when the exit has begun
    already (a shutdown run by an exit hook), the bounded join happens at once.
    """
    global _join_registered
    with _stalled_lock:
        _stalled.append(thread)
        if _join_registered:
            return
        register: Callable[[Callable[[], None]], None] | None = getattr(threading, "_register_atexit", None)
        try:
            if register is None:
                atexit.register(_join_stalled)
            else:
                register(_join_stalled)
            _join_registered = True
            return
        except RuntimeError:  # the interpreter is shutting down already: no hook would run before finalization
            pass
    _join_stalled()


def _join_stalled() -> None:
    global _join_registered
    with _stalled_lock:
        threads = list(_stalled)
        _stalled.clear()
        _join_registered = False
    deadline = time.monotonic() + EXIT_JOIN_S
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
