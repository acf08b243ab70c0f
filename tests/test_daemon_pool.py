"""DaemonExecutor: tasks submitted together each get a thread, so one that hangs never holds the others back."""

from __future__ import annotations

import threading

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
