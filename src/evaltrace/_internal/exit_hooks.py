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
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (imported first: its exit hook must be older than ours)
import signal
import threading
from collections.abc import Callable
from types import FrameType

SIGTERM_EXIT_CODE = 128 + signal.SIGTERM


def drain_before_executors_stop(drain: Callable[[], None]) -> None:
    """Run ``drain`` at interpreter exit while thread pools still accept work (fallback: ``atexit``)."""
    register: Callable[[Callable[[], None]], None] | None = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(drain)
            return
        except RuntimeError:  # the interpreter is already shutting down
            pass
    atexit.register(drain)


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM during the drain kills at once, as the sender presumably wants.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise SystemExit(SIGTERM_EXIT_CODE)


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
