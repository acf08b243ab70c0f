"""DaemonExecutor: tasks submitted together each get a thread, so one that hangs never holds the others back."""

from __future__ import annotations

import logging
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


def test_a_task_whose_thread_cannot_start_waits_for_a_live_busy_thread_and_runs_logged_once_per_episode(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``Thread.start`` failing for the new thread only (injected), while the pool's one thread is busy.

    The task is queued behind the busy thread rather than refused: it runs once that thread's task returns, as past
    ``max_workers``. The fault is logged once for the episode (not once per task) and its end once, when a thread
    starts again. Before, each such task raised ``can't start new thread`` (an evaluation ``error``, no verdict)
    although a thread would have served it a moment later.
    """
    real = threading.Thread.start
    failing = [False]
    refused: list[str] = []

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("busy-pool"):
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    caplog.set_level(logging.INFO, logger="evaltrace")
    pool = DaemonExecutor(4, thread_name_prefix="busy-pool")
    release = threading.Event()
    began = threading.Event()
    ran: list[str] = []
    try:
        busy = pool.submit(lambda: (began.set(), release.wait(60), ran.append("busy")))
        assert began.wait(30)  # the pool's one thread holds it
        failing[0] = True
        waiting = [pool.submit(ran.append, word) for word in ("first", "second", "third")]
        assert len(refused) == 3  # each submit tried to start a thread
        assert not any(f.done() for f in waiting)  # queued behind the busy thread, not refused
        release.set()
        assert [f.result(timeout=30) for f in waiting] == [None, None, None]
        assert busy.result(timeout=30) is not None
        assert ran == ["busy", "first", "second", "third"]  # each once, in order, on the one thread
        assert [t.name for t in threading.enumerate() if t.name.startswith("busy-pool")] == ["busy-pool-1"]
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and errors[0].exc_info is not None
        assert "starting a pool thread" in errors[0].getMessage()

        failing[0] = False  # threads can start again: the next one needed starts, and the episode ends
        release.clear()
        began.clear()
        held = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        assert pool.submit(lambda: "served").result(timeout=30) == "served"  # a new thread, not behind the held one
        assert len([r for r in caplog.records if "works again after 3 internal error(s)" in r.getMessage()]) == 1
        release.set()
        held.result(timeout=30)
    finally:
        release.set()
        pool.shutdown(wait=False)


def test_a_task_whose_thread_cannot_start_is_refused_when_its_only_thread_was_abandoned_to_a_hung_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No live thread can ever take it (the pool's one thread runs a task its caller gave up on): refused at once.

    Queued, it would wait for a task that may never return; refused, nothing runs later behind its caller's back.
    """
    real = threading.Thread.start
    failing = [False]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("hung-pool"):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    pool = DaemonExecutor(1, thread_name_prefix="hung-pool")
    release = threading.Event()
    began = threading.Event()
    ran: list[str] = []
    try:
        hung = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        pool.abandon(hung)
        failing[0] = True
        with pytest.raises(RuntimeError, match="can't start new thread"):
            pool.submit(ran.append, "refused")
        release.set()
        hung.result(timeout=30)
        failing[0] = False
        assert pool.submit(ran.append, "later").result(timeout=30) is None
        assert ran == ["later"]
    finally:
        release.set()
        pool.shutdown(wait=False)


def _start_fault(monkeypatch: pytest.MonkeyPatch, prefix: str) -> tuple[list[bool], list[str]]:
    """``Thread.start`` raises for threads named ``prefix...`` while the flag's first item is True; names recorded."""
    real = threading.Thread.start
    failing = [False]
    refused: list[str] = []

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith(prefix):
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    return failing, refused


@pytest.mark.parametrize("workers", [2, 1], ids=["queued-after-a-failed-start", "queued-in-a-full-pool"])
def test_tasks_queued_when_the_last_live_thread_is_abandoned_and_cannot_be_replaced_are_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """The only live thread is abandoned to a hung task and its replacement cannot start (injected).

    The tasks queued behind it (after their own thread could not start, or because the pool was full) fail at once
    with ``can't start new thread``: no thread may ever take them, and their callers' timeouts count from their
    start. Before, they stayed pending until threads could start again. Every failed start is counted.
    """
    failing, refused = _start_fault(monkeypatch, "orphan-pool")
    pool = DaemonExecutor(workers, thread_name_prefix="orphan-pool")
    release = threading.Event()
    began = threading.Event()
    ran: list[str] = []
    try:
        hung = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        failing[0] = True
        queued = [pool.submit(ran.append, word) for word in ("first", "second")]
        assert len(refused) == (2 if workers == 2 else 0)  # a full pool does not try to start one
        assert not any(f.done() for f in queued)  # a live thread could still take them
        pool.abandon(hung)  # its replacement cannot start: no live thread is left
        assert all(f.done() for f in queued)  # at once, not at some later submit
        for f in queued:
            with pytest.raises(RuntimeError, match="can't start new thread"):
                f.result(timeout=0)
        assert pool.internal_errors == len(refused) == (3 if workers == 2 else 1)
        release.set()
        hung.result(timeout=30)
        failing[0] = False
        assert pool.submit(ran.append, "later").result(timeout=30) is None
        assert ran == ["later"]  # the refused tasks never ran behind their callers' backs
        assert pool.internal_errors == len(refused)
    finally:
        release.set()
        pool.shutdown(wait=False)


def test_a_start_failure_after_the_tasks_that_waited_were_served_is_logged_as_a_new_episode(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No thread started between two faults, but the tasks the first made wait were all served in between.

    The second fault is logged with its traceback (after one INFO line ending the first episode), not silenced as
    part of an episode that only a thread start would have ended; both are counted.
    """
    failing, refused = _start_fault(monkeypatch, "episode-pool")
    caplog.set_level(logging.INFO, logger="evaltrace")
    pool = DaemonExecutor(2, thread_name_prefix="episode-pool")
    release = threading.Event()
    began = threading.Event()

    def errors() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR and "starting a pool thread" in r.getMessage()]

    try:
        busy = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        failing[0] = True
        waited = pool.submit(lambda: "served")
        assert len(errors()) == 1
        release.set()
        assert waited.result(timeout=30) == "served" and busy.result(timeout=30) is not None
        # The one thread is idle again: it takes the next task with no thread to start.
        release.clear()
        began.clear()
        held = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        assert len(refused) == 1
        second = pool.submit(lambda: "again")  # a new thread is needed again and cannot start: a new fault
        assert len(refused) == 2 and pool.internal_errors == 2
        assert len(errors()) == 2 and all(r.exc_info is not None for r in errors())
        ended = [r for r in caplog.records if "is no longer needed" in r.getMessage()]
        assert (
            len(ended) == 1
            and ended[0].levelno == logging.INFO
            and "after 1 internal error(s)" in ended[0].getMessage()
        )
        release.set()
        assert second.result(timeout=30) == "again"
        held.result(timeout=30)
    finally:
        release.set()
        pool.shutdown(wait=False)


def test_a_log_handler_that_submits_to_the_pool_does_not_deadlock_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The pool logs its start failures and recoveries after releasing its lock.

    A handler of the ``evaltrace`` logger that submits to the same pool (or any slow handler) runs while the pool
    is free: the waiting submit's failure, the abandoned thread's replacement failing, the recovery's INFO line.
    Before, the first of them deadlocked the submitting thread on the pool's own lock.
    """
    failing, refused = _start_fault(monkeypatch, "reentrant-pool")
    caplog.set_level(logging.INFO, logger="evaltrace")
    pool = DaemonExecutor(2, thread_name_prefix="reentrant-pool")
    seen: list[str] = []

    class Submits(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())
            try:
                pool.submit(lambda: None)
            except RuntimeError as exc:  # no live thread left: refused, as any submit then
                seen.append(f"refused: {exc}")

    handler = Submits(logging.INFO)
    logging.getLogger("evaltrace").addHandler(handler)
    release = threading.Event()
    began = threading.Event()
    done = threading.Event()

    def scenario() -> None:
        busy = pool.submit(lambda: (began.set(), release.wait(60)))
        assert began.wait(30)
        failing[0] = True
        pool.submit(lambda: None)  # its thread cannot start: logged (the handler submits too)
        pool.abandon(busy)  # the replacement cannot start: logged
        failing[0] = False
        pool.submit(lambda: None).result(timeout=30)  # a thread starts: the INFO line
        done.set()

    try:
        worker = threading.Thread(target=scenario, name="reentrant-scenario", daemon=True)
        worker.start()
        assert done.wait(30), f"deadlocked; logged so far: {seen}"
        assert any("starting a pool thread" in line for line in seen)
        assert any("starting a replacement" in line for line in seen)
        assert any("works again after" in line for line in seen)
        assert len(refused) >= 2
    finally:
        logging.getLogger("evaltrace").removeHandler(handler)
        release.set()
        if done.is_set():  # deadlocked, its lock is held for good: shutting it down would hang the test run
            pool.shutdown(wait=False)
