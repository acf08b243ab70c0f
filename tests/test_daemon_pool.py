"""DaemonExecutor: tasks submitted together each get a thread, so one that hangs never holds the others back."""

from __future__ import annotations

import threading

import pytest

from evaltrace._internal.daemon_pool import DaemonExecutor


def test_tasks_submitted_at_once_do_not_queue_behind_a_hanging_one() -> None:
    pool = DaemonExecutor(4, thread_name_prefix="test-pool")
    release = threading.Event()
    try:
        assert pool.submit(lambda: None).result(timeout=10) is None  # one thread now exists and idles
        # Submitted back to back, before that thread wakes up to take one: the pool must not count it as free
        # for each of them (it will be busy with the first, which hangs).
        hanging = pool.submit(release.wait)
        quick = [pool.submit(lambda i=i: i) for i in range(3)]
        # Before the fix the three queued behind the one idle thread, which the first task then held.
        assert [f.result(timeout=10) for f in quick] == [0, 1, 2]
        assert not hanging.done()
    finally:
        release.set()
        pool.shutdown(wait=False)


def test_a_thread_that_cannot_start_queues_nothing_and_the_next_submit_starts_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Thread.start`` failing (``can't start new thread``; injected: a thread limit cannot be set in a test).

    The submit raises and queues nothing: the task never runs later behind its caller's back, and no thread that
    does not exist is counted idle, so once threads can start again the next task gets one and runs.
    """
    real = threading.Thread.start
    failing = [True]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("test-pool"):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    pool = DaemonExecutor(1, thread_name_prefix="test-pool")
    ran: list[str] = []
    try:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            pool.submit(ran.append, "refused")
        failing[0] = False
        assert pool.submit(ran.append, "later").result(timeout=10) is None
        assert pool.submit(lambda: None).result(timeout=10) is None  # the one thread takes the next task too
        assert ran == ["later"]
    finally:
        pool.shutdown(wait=False)


def test_a_thread_started_before_an_interrupt_in_its_start_is_counted_and_no_second_one_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C landing in ``Thread.start()`` after the OS thread started (injected: start, then the interrupt).

    The interrupt reaches the caller unchanged and queues nothing; the thread that runs is counted, so the pool
    never starts a second one past its size (nor counts the first's tasks against threads it does not know).
    """
    real = threading.Thread.start
    interrupt = [True]

    def start(thread: threading.Thread) -> None:
        real(thread)
        if interrupt[0] and thread.name.startswith("interrupt-pool"):
            interrupt[0] = False
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)
    pool = DaemonExecutor(1, thread_name_prefix="interrupt-pool")
    ran: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            pool.submit(ran.append, "interrupted")
        for word in ("later", "again", "more"):
            assert pool.submit(ran.append, word).result(timeout=10) is None
        assert ran == ["later", "again", "more"]
        assert [t.name for t in threading.enumerate() if t.name.startswith("interrupt-pool")] == ["interrupt-pool-1"]
    finally:
        pool.shutdown(wait=False)
