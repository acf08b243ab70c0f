"""Closing the async evaluators' loop cancels what still runs there and lets it clean up; nothing is dropped unfinished.

Before, ``UserLoop.close()`` stopped the loop and closed it with its tasks pending: an evaluation in flight never
ran its ``finally`` (closing its client, ending its span), and when the tasks were collected later, asyncio logged
"Task was destroyed but it is pending" and Python warned "coroutine ... was never awaited" into whatever
application or test was running then.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluation._user_loop import UserLoop


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """What Python reports as unraisable (a coroutine never awaited, a task's own error) while the test runs."""
    seen: list[Any] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = previous


def _collected(runner: UserLoop) -> None:
    """Join the closed loops' threads and collect, so anything left pending would be reported now."""
    loops = [runner._current, *runner._own.values()]
    for holder in loops:
        if holder is not None:
            holder.thread.join(30)
            assert not holder.thread.is_alive()
            assert holder.loop.is_closed()
    del loops
    for _ in range(3):
        gc.collect()


def test_an_async_evaluation_in_flight_at_close_is_cancelled_and_runs_its_cleanup(
    caplog: pytest.LogCaptureFixture, unraisable: list[Any]
) -> None:
    runner = UserLoop()
    started = threading.Event()
    cleaned: list[str] = []

    async def evaluation() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise
        finally:
            cleaned.append("finally")
        return "never"

    async def main() -> None:
        call = asyncio.ensure_future(runner.run(evaluation))
        assert await asyncio.to_thread(started.wait, 30)
        runner.close()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, 30)  # the run's future is cancelled with its task

    caplog.set_level(logging.DEBUG, logger="asyncio")
    asyncio.run(main())
    _collected(runner)
    assert cleaned == ["cancelled", "finally"]
    assert not [r for r in caplog.records if "destroyed" in r.getMessage()], caplog.text
    assert unraisable == []


def test_a_task_created_as_the_loop_stops_is_cancelled_never_left_unawaited(
    caplog: pytest.LogCaptureFixture, unraisable: list[Any]
) -> None:
    # The window close() races with: a run's task is created, and the stop lands before its first step.
    runner = UserLoop()
    with runner._lock:
        holder = runner._started_locked()
    stepped: list[str] = []

    async def never_stepped() -> None:
        stepped.append("ran")

    def create_then_stop() -> None:
        holder.loop.create_task(never_stepped())
        holder.loop.stop()

    caplog.set_level(logging.DEBUG, logger="asyncio")
    holder.loop.call_soon_threadsafe(create_then_stop)
    runner.close()
    _collected(runner)
    assert stepped == []  # cancelled before its first step: the user's code never started
    assert not [r for r in caplog.records if "destroyed" in r.getMessage()], caplog.text
    assert unraisable == []  # no "coroutine ... was never awaited"


def test_a_run_submitted_during_the_wind_down_is_refused_and_its_coroutine_never_made() -> None:
    runner = UserLoop()
    with runner._lock:
        holder = runner._started_locked()
    started = threading.Event()
    winding = threading.Event()
    made: list[str] = []

    submitted = threading.Event()

    async def cleans_up_slowly() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            winding.set()
            await asyncio.to_thread(submitted.wait, 30)  # the wind-down keeps the loop turning meanwhile
            raise

    async def evaluation() -> None:
        made.append("made")

    holder.loop.call_soon_threadsafe(lambda: holder.loop.create_task(cleans_up_slowly()))
    assert started.wait(30)
    runner.close()
    assert winding.wait(30)
    run = runner._submit(evaluation, None)  # the loop is open (its wind-down waits for us): its start is queued
    submitted.set()
    with pytest.raises(RuntimeError, match="loop is closed"):
        run.future.result(30)
    _collected(runner)
    assert made == []


def _close_with_a_coroutine_that_ignores_cancellation() -> UserLoop:
    runner = UserLoop()
    started = threading.Event()

    async def stubborn() -> None:
        started.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue  # swallows every cancellation

    async def main() -> None:
        call = asyncio.ensure_future(runner.run(stubborn))
        assert await asyncio.to_thread(started.wait, 30)
        runner.close()
        with pytest.raises(RuntimeError, match="loop is closed"):  # its task never ends: the caller is told so
            await asyncio.wait_for(call, 60)

    asyncio.run(main())
    return runner


def test_a_coroutine_that_ignores_cancellation_does_not_hold_the_loops_thread_for_ever(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    runner = _close_with_a_coroutine_that_ignores_cancellation()
    holder = runner._current
    assert holder is not None
    holder.thread.join(60)  # the wind-down is bounded: the thread ends, the loop is closed
    assert not holder.thread.is_alive()
    assert holder.loop.is_closed()
    del holder, runner
    for _ in range(3):
        gc.collect()  # here, not in a later test: the one task left behind is reported now, as asyncio does
    assert [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]


def test_a_retired_loops_own_stop_during_the_wind_down_does_not_cut_its_cleanup_short(
    caplog: pytest.LogCaptureFixture, unraisable: list[Any]
) -> None:
    runner = UserLoop()
    with runner._lock:
        holder = runner._started_locked()
    cleaned: list[str] = []

    async def slow_cleanup() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            holder.stop()  # lands while the wind-down waits (as a retired loop's last run stops it)
            await asyncio.sleep(0.2)  # a cleanup that itself awaits: only finishes if the loop keeps running
            cleaned.append("done")

    holder.loop.call_soon_threadsafe(lambda: holder.loop.create_task(slow_cleanup()))
    holder.loop.call_soon_threadsafe(holder.loop.call_soon, holder.stop)  # after the task's first step
    caplog.set_level(logging.DEBUG, logger="asyncio")
    _collected(runner)
    assert cleaned == ["done"]
    assert not [r for r in caplog.records if "destroyed" in r.getMessage()], caplog.text
    assert unraisable == []


def test_tasks_a_cleanup_starts_run_to_their_end_and_async_generators_left_suspended_are_closed(
    caplog: pytest.LogCaptureFixture, unraisable: list[Any]
) -> None:
    runner = UserLoop()
    started = threading.Event()
    log: list[str] = []
    suspended: list[Any] = []

    async def closer() -> None:
        await asyncio.sleep(0.1)  # not cancelled: a cleanup's own task runs on within the bound
        log.append("closer ran")

    async def pages() -> Any:
        try:
            yield 1
            yield 2
        finally:
            log.append("generator closed")

    async def evaluation() -> None:
        generator = pages()
        await generator.__anext__()
        suspended.append(generator)  # left suspended at a yield: only the loop's async-generator shutdown closes it
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            asyncio.ensure_future(closer())  # fire-and-forget cleanup
            log.append("finally")

    async def main() -> None:
        call = asyncio.ensure_future(runner.run(evaluation))
        assert await asyncio.to_thread(started.wait, 30)
        runner.close()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, 30)

    caplog.set_level(logging.DEBUG, logger="asyncio")
    asyncio.run(main())
    _collected(runner)
    assert sorted(log) == ["closer ran", "finally", "generator closed"]
    assert not [r for r in caplog.records if "destroyed" in r.getMessage()], caplog.text
    assert unraisable == []


EXIT_SCRIPT = """
import asyncio, atexit, os, threading
from evaltrace.evaluation._user_loop import UserLoop

runner = UserLoop()
started = threading.Event()

async def evaluation():
    started.set()
    try:
        await asyncio.sleep(3600)
    finally:
        os.write(1, b"cleanup begins\\n")
        await asyncio.sleep(0.2)
        os.write(1, b"cleanup finished\\n")

pipeline = asyncio.new_event_loop()
threading.Thread(target=pipeline.run_forever, daemon=True).start()
asyncio.run_coroutine_threadsafe(runner.run(evaluation), pipeline)
assert started.wait(60)

def at_exit():
    runner.close()  # as a TracerProvider's shutdown at exit closes the evaluation pipeline
    os.write(1, b"closed at exit\\n")

atexit.register(at_exit)
"""


def test_a_close_at_interpreter_exit_lets_the_cleanup_finish_before_the_process_ends(tmp_path: Path) -> None:
    # close() never waits; at exit its loop's thread is given exit_hooks' bounded join, so the cleanup does not
    # wake as the interpreter finalizes (which can abort the process) and is not cut off half-way.
    script = tmp_path / "app.py"
    script.write_text(EXIT_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["cleanup begins", "cleanup finished", "closed at exit"], done.stderr
