"""The daemon thread that finds the completion buffer's due traces (split from :mod:`.completion`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from evaltrace._internal.errors import ErrorEpisode


class CompletionTimer:
    """One daemon thread calling ``tick`` every ``interval_s`` while there is anything to watch.

    Started on first use; in a forked child the owner creates a new one (the parent's thread is gone).
    """

    def __init__(self, tick: Callable[[], bool], interval_s: float = 0.1) -> None:
        self._tick = tick
        self._interval = interval_s
        self._failing = ErrorEpisode("starting the trace completion timer (tried again with the next span)")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        """Something to watch arrived: start the thread if needed and wake it from its idle wait.

        Never raises: a thread that cannot start (``can't start new thread``) is logged, and the next poke tries
        again; meanwhile ``force_flush()`` and ``shutdown()`` still evaluate the traces due (they tick themselves).
        """
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stop.is_set():
                    thread = threading.Thread(target=self._run, name="evaltrace-trace-completion", daemon=True)
                    try:
                        thread.start()
                    except RuntimeError:  # logged once per episode: this is tried again at every span's end
                        self._failing.failed()
                        return  # _wake left clear: the thread that starts later waits for its own poke
                    self._failing.ok()
                    self._thread = thread  # only once it runs: else no later poke would start one
        if not self._wake.is_set():
            self._wake.set()

    def is_current(self) -> bool:
        """Whether the caller is this timer's thread."""
        return self._thread is threading.current_thread()

    def stop(self, timeout_s: float) -> None:
        """Stop the thread (waits at most ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            # Tick until nothing is left to watch, then sleep until poke(): an idle process never wakes up.
            self._wake.clear()
            busy = self._tick()
            if busy:
                self._wake.set()
                self._stop.wait(self._interval)
