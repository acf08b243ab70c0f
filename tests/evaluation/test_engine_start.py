"""Evaluation threads failing to start lose nothing uncounted, and the next span (score, call) tries again.

``Thread.start`` raising (``can't start new thread`` under a thread or memory limit) cannot be provoked reliably
in a test, so it is injected at ``threading.Thread.start`` for the threads concerned only (the engine's loop and
dispatcher, the evaluator pool, a score sink's, the trace completion timer); everything else is
the real processor, engine and OTel SDK. A refused span is exported unevaluated, each of its evaluators counted
``engine_unavailable``, its queue slot given back (a flush returns True at once, not False at its timeout), and
once the fault clears the next span is evaluated.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evaltrace._internal import semconv
from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.evaluation._isolation import EvaluatorThreads, Offenders
from evaltrace.evaluation._user_loop import UserLoop
from evaltrace.evaluation.runner import RunOptions, arun_evaluator
from evaltrace.evaluation.sampling import ExportSampling
from evaltrace.evaluation.sinks import SinkWorker, read_dead_letters
from evaltrace.schema import Score, Trace, score_id

from .conftest import MakePipeline, Pipeline, wait_until
from .helpers import make_trace

LOOP = "evaltrace-eval-loop"
DISPATCHER = "evaltrace-eval-dispatch"


@evaluator(name="parity")
def parity(trace: Trace) -> bool:
    return int(trace.input["input"]) % 2 == 0


class StartFault:
    """Makes ``Thread.start`` raise for the threads named in ``failing``; counts the attempts per name."""

    def __init__(self) -> None:
        self.failing: set[str] = set()
        self.attempts: dict[str, int] = {}


@pytest.fixture
def fault(monkeypatch: pytest.MonkeyPatch) -> Iterator[StartFault]:
    fault = StartFault()
    real: Callable[[threading.Thread], None] = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name in (LOOP, DISPATCHER):
            fault.attempts[thread.name] = fault.attempts.get(thread.name, 0) + 1
        if thread.name in fault.failing:
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    yield fault


def _spans(p: Pipeline, *numbers: int) -> None:
    for n in numbers:
        with p.tracer.start_as_current_span(f"s{n}", attributes={"input.value": str(n)}):
            pass


def _prompt_flush(p: Pipeline) -> None:
    """A flush returns True well before its 10 s timeout: no slot is held by a job nothing will run."""
    began = time.monotonic()
    assert p.processor.force_flush(10_000)
    assert time.monotonic() - began < 5.0


@pytest.mark.parametrize("failing", [LOOP, DISPATCHER])
def test_spans_the_engine_cannot_start_for_are_exported_counted_and_the_next_span_after_the_fault_is_evaluated(
    make_pipeline: MakePipeline, fault: StartFault, failing: str
) -> None:
    fault.failing = {failing}
    p = make_pipeline([parity])
    _spans(p, 0, 1)  # each end raises nothing into the application
    _prompt_flush(p)
    stats = p.processor.stats()
    assert (stats["enqueued"], stats["evaluated"], stats["queued"]) == (0, 0, 0)
    assert stats["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 2}
    assert stats["evaluators"]["parity"]["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 2}
    assert stats["internal_errors"] == 2
    assert fault.attempts[failing] == 2  # each submit tried again: no flag left claiming the threads run
    assert sorted(span.name for span in p.spans()) == ["s0", "s1"]
    assert all("evaltrace.eval.parity.passed" not in (span.attributes or {}) for span in p.spans())

    fault.failing = set()
    _spans(p, 2, 3)
    _prompt_flush(p)
    stats = p.processor.stats()
    assert (stats["enqueued"], stats["evaluated"], stats["queued"]) == (2, 2, 0)
    assert (stats["passed"], stats["failed"]) == (1, 1)
    assert (p.one("s2").attributes or {})["evaltrace.eval.parity.passed"] is True
    assert (p.one("s3").attributes or {})["evaltrace.eval.parity.passed"] is False
    assert fault.attempts == {LOOP: 1 if failing == DISPATCHER else 3, DISPATCHER: 3 if failing == DISPATCHER else 1}


def test_a_loop_thread_started_without_its_dispatcher_is_wound_down_at_shutdown(
    make_pipeline: MakePipeline, fault: StartFault
) -> None:
    """The half-started engine (loop running, dispatcher refused) keeps no thread or open loop past shutdown."""
    fault.failing = {DISPATCHER}
    p = make_pipeline([parity])
    _spans(p, 0)
    engine = p.processor._engine
    loop_thread = engine._loop_thread
    assert loop_thread.is_alive()  # started, and kept for the next attempt
    began = time.monotonic()
    p.processor.shutdown(10_000)
    assert time.monotonic() - began < 5.0
    assert not loop_thread.is_alive()
    assert engine.loop.is_closed()
    assert p.processor.stats()["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 1}
    assert [span.name for span in p.spans()] == ["s0"]


def test_a_sync_evaluation_whose_pool_thread_cannot_start_is_an_error_and_never_runs_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The evaluator pool refusing a call (its thread cannot start) gives an error result, never a verdict.

    The call is not left queued: the evaluator is not called later behind the caller's back (a judge call nobody
    awaits), and once threads can start the next call runs.
    """
    real: Callable[[threading.Thread], None] = threading.Thread.start
    failing = [True]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("test-eval-pool"):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    calls: list[str] = []

    @evaluator(name="counted")
    def counted(trace: Trace) -> bool:
        calls.append(trace.output.final_answer or "")
        return True

    pool = DaemonExecutor(1, thread_name_prefix="test-eval-pool")
    try:
        refused = asyncio.run(arun_evaluator(counted, make_trace("first"), executor=pool))
        assert refused.status == "failed"  # an error (counted under errors), never a judged verdict
        assert refused.error is not None and "can't start new thread" in str(refused.error)
        failing[0] = False
        # Bounded: a pool waiting on a thread it only counted would time out here, not hang the test.
        later = asyncio.run(
            arun_evaluator(counted, make_trace("second"), executor=pool, options=RunOptions(timeout_s=10.0))
        )
        assert later.passed is True
        assert calls == ["second"]
    finally:
        pool.shutdown(wait=False)


def test_a_sync_evaluation_whose_thread_cannot_start_waits_for_a_busy_pool_thread_and_gets_its_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool's one thread is busy with another evaluation when the call's new thread cannot start (injected).

    On the live engine's pool (``EvaluatorThreads``) the call waits for the busy thread and gets its verdict, its
    timeout counted from its own start (the wait is not held against it). On a plain pool (offline runs) its
    timeout counts from submission, as for any queued call: cut short by it, the call never runs later. Before,
    each was an ``error`` (``can't start new thread``) though the busy thread would have served it.
    """
    real: Callable[[threading.Thread], None] = threading.Thread.start
    failing = [False]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith(("evaltrace-eval-", "test-eval-pool")):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    calls: list[str] = []
    release = threading.Event()
    began = threading.Event()

    @evaluator(name="holds")
    def holds(trace: Trace) -> bool:
        began.set()
        release.wait(60)
        return True

    @evaluator(name="counted")
    def counted(trace: Trace) -> bool:
        calls.append(trace.output.final_answer or "")
        return True

    async def waits_for_the_busy_thread(executor: concurrent.futures.Executor) -> None:
        busy = asyncio.ensure_future(arun_evaluator(holds, make_trace("busy"), executor=executor))
        assert await asyncio.to_thread(began.wait, 30)
        failing[0] = True
        queued = asyncio.ensure_future(
            arun_evaluator(counted, make_trace("queued"), executor=executor, options=RunOptions(timeout_s=0.5))
        )
        await asyncio.sleep(1.0)  # past its timeout, all spent waiting for the thread
        assert not queued.done() and calls == []
        release.set()
        result = await asyncio.wait_for(queued, 30)
        assert result.passed is True and result.error is None
        assert (await asyncio.wait_for(busy, 30)).passed is True
        assert calls == ["queued"]

    threads = EvaluatorThreads(2, Offenders())
    try:
        asyncio.run(waits_for_the_busy_thread(threads))
    finally:
        threads.shutdown(wait=False)

    failing[0], calls[:] = False, []
    release.clear()
    began.clear()
    pool = DaemonExecutor(2, thread_name_prefix="test-eval-pool")

    async def times_out_from_submission() -> None:
        busy = asyncio.ensure_future(arun_evaluator(holds, make_trace("busy"), executor=pool))
        assert await asyncio.to_thread(began.wait, 30)
        failing[0] = True
        cut = await arun_evaluator(counted, make_trace("cut"), executor=pool, options=RunOptions(timeout_s=0.5))
        assert cut.status == "failed" and cut.error is not None and "timed out after 0.5 s" in str(cut.error)
        release.set()
        assert (await asyncio.wait_for(busy, 30)).passed is True
        assert pool.submit(lambda: None).result(timeout=30) is None  # the busy thread is free: anything queued ran
        assert calls == []  # the call cut short never ran behind its caller's back

    try:
        asyncio.run(times_out_from_submission())
    finally:
        release.set()
        pool.shutdown(wait=False)


def _thread_fault(monkeypatch: pytest.MonkeyPatch, prefix: str) -> list[bool]:
    """``Thread.start`` raises for threads named ``prefix...`` while the returned flag's first item is True."""
    real: Callable[[threading.Thread], None] = threading.Thread.start
    failing = [True]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith(prefix):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    return failing


def _score(name: str) -> Score:
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    return Score(
        id=score_id(trace, span, name, "v1"),
        name=name,
        value=1.0,
        data_type="NUMERIC",
        trace_id=trace,
        observation_id=span,
    )


def _names(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line.get("score", line)["name"] for line in lines]


def test_a_score_sink_whose_thread_cannot_start_keeps_its_scores_and_delivers_them_once_it_can(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    failing = _thread_fault(monkeypatch, "evaltrace-sink-")
    path = tmp_path / "scores.jsonl"
    worker = SinkWorker(JsonlScoreSink(path), dead_letter_path=tmp_path / "dead.jsonl", schedule_delay_s=0.01)
    worker.submit([_score("first")])  # neither the constructor nor submit raises
    began = time.monotonic()
    assert not worker.force_flush(10.0)  # said at once: no thread to wait for
    assert time.monotonic() - began < 5.0
    failing[0] = False
    worker.submit([_score("second")])
    assert worker.force_flush(10.0)
    assert _names(path) == ["first", "second"]
    assert worker.shutdown(5.0)
    assert (worker.stats.submitted, worker.stats.successes, worker.stats.dead_lettered) == (2, 2, 0)


def test_a_score_sink_whose_thread_never_starts_dead_letters_its_scores_at_shutdown_counted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _thread_fault(monkeypatch, "evaltrace-sink-")
    dead = tmp_path / "dead.jsonl"
    worker = SinkWorker(JsonlScoreSink(tmp_path / "scores.jsonl"), dead_letter_path=dead)
    worker.submit([_score("kept")])
    assert worker.shutdown(1.0) is False  # no thread delivered it: shutdown settled it
    assert (worker.stats.submitted, worker.stats.dead_lettered, worker.stats.dropped) == (1, 1, 0)
    scores, bad = read_dead_letters(dead)
    assert ([score.name for score in scores], bad) == (["kept"], 0)


def test_a_trace_completion_timer_that_cannot_start_loses_no_trace_and_starts_with_a_later_one(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timer's thread failing to start never reaches the application nor the span's own evaluators.

    Its trace is evaluated by the next ``force_flush()`` (which ticks itself), and once threads can start the next
    trace starts the timer and is evaluated when quiet, with no flush.
    """
    failing = _thread_fault(monkeypatch, "evaltrace-trace-completion")
    seen: list[str] = []

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        seen.append(trace.output.final_answer or "")
        return True

    p = make_pipeline([EvaluatorSpec(whole, trace_level=True), parity], trace_quiet_period_s=0.2)
    with p.tracer.start_as_current_span("r0", attributes={"input.value": "0", "output.value": "t0"}):
        with p.tracer.start_as_current_span("c0", attributes={"input.value": "2"}):
            pass
    p.flush()  # the flush evaluates the trace waiting for its quiet period
    assert seen == ["t0"]
    # The spans' own evaluators ran: the failed start never reached their planning.
    assert (p.one("r0").attributes or {})["evaltrace.eval.parity.passed"] is True
    assert (p.one("c0").attributes or {})["evaltrace.eval.parity.passed"] is True
    assert p.processor.stats()["completion"]["completed"] == 1
    failing[0] = False
    with p.tracer.start_as_current_span("r1", attributes={"input.value": "1", "output.value": "t1"}):
        pass
    assert wait_until(lambda: len(p.by_name("evaluation whole")) == 2, timeout=10.0)  # the timer runs now
    assert seen == ["t0", "t1"]


def test_async_evaluations_whose_loop_or_watchdog_cannot_start_fail_cleanly_and_the_next_call_starts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The async evaluators' loop thread failing to start: that call fails (an error, never a verdict).

    Its new event loop is closed (not leaked per attempt), and the next call starts one. A watchdog that cannot
    start refuses nothing: the call runs, and the next call starts the watchdog.
    """
    failing_loop = _thread_fault(monkeypatch, "evaltrace-async-eval-1")
    runner = UserLoop()
    opened: list[asyncio.AbstractEventLoop] = []
    real_new_loop = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = real_new_loop()
        opened.append(loop)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", new_event_loop)

    async def answer() -> str:
        return "ran"

    async def main() -> None:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            await runner.run(answer)
        assert opened and all(loop.is_closed() for loop in opened)
        failing_loop[0] = False
        failing_watchdog = _thread_fault(monkeypatch, "evaltrace-async-eval-watchdog")
        assert await runner.run(answer) == "ran"  # unwatched, not refused
        assert runner._watchdog is None
        failing_watchdog[0] = False
        assert await runner.run(answer) == "ran"
        assert runner._watchdog is not None and runner._watchdog.is_alive()

    try:
        asyncio.run(main())
    finally:
        runner.close()


def test_a_failure_between_admission_and_the_engine_gives_the_slot_back_counted_and_never_reaches_the_app(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export sampling noting the job (a bug of ours, injected) fails after the span's admission to the queue.

    ``span.end()`` raises nothing, the span is exported, its evaluator is counted not evaluated
    (``engine_unavailable``: the job never reached the engine), and its queue slot is given back (the flush
    returns True at once); the spans around it are evaluated as usual.
    """
    p = make_pipeline([parity], export_sampling=ExportSampling(keep_rate=1.0))
    gate = p.processor._gate
    assert gate is not None
    real = gate.job_started
    refused: list[int] = []

    def job_started(trace_id: int) -> None:
        if not refused:
            refused.append(trace_id)
            raise RuntimeError("a bug of ours")
        real(trace_id)

    monkeypatch.setattr(gate, "job_started", job_started)
    _spans(p, 0, 1, 2)  # the first span's hand-off fails: nothing raised here
    _prompt_flush(p)
    stats = p.processor.stats()
    assert (stats["enqueued"], stats["evaluated"], stats["queued"], stats["internal_errors"]) == (2, 2, 0, 1)
    assert stats["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 1}
    assert sorted(span.name for span in p.spans()) == ["s0", "s1", "s2"]
    assert "evaltrace.eval.parity.passed" not in (p.one("s0").attributes or {})
    assert (p.one("s2").attributes or {})["evaltrace.eval.parity.passed"] is True


def test_a_blocked_loop_whose_replacement_cannot_start_stays_watched_and_is_replaced_once_threads_can_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The watchdog failing to start the fresh loop for a blocked one neither dies nor raises into excepthook.

    The failure is counted (``internal_errors``) and logged once for the episode (not at every look); the watchdog
    keeps watching, and once threads can start it replaces the still-blocked loop: another evaluation runs while the
    blocking one is still blocked.
    """
    real: Callable[[threading.Thread], None] = threading.Thread.start
    failing = [False]

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("evaltrace-async-eval-") and not thread.name.endswith("watchdog"):
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    uncaught: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(repr(args.exc_value)))
    caplog.set_level(logging.INFO, logger="evaltrace")
    runner = UserLoop(stall_s=0.1)
    release = threading.Event()

    async def blocker() -> str:
        release.wait(30.0)  # blocks its loop (blocking code in a coroutine) until the test releases it
        return "blocked"

    async def quick() -> str:
        return "ok"

    async def main() -> None:
        assert await runner.run(quick) == "ok"  # the loop and its watchdog start
        failing[0] = True
        blocked = asyncio.ensure_future(runner.run(blocker))
        assert await _until(lambda: runner.internal_errors >= 3)  # several looks saw the stall, each replace failed
        assert runner._watchdog is not None and runner._watchdog.is_alive()
        assert runner.stalls == 0
        failing[0] = False
        assert await _until(lambda: runner.stalls == 1)  # retried at a later look: replaced now
        assert await asyncio.wait_for(runner.run(quick), 10.0) == "ok"  # runs on the fresh loop, not behind the block
        assert not blocked.done()
        release.set()
        assert await blocked == "blocked"

    try:
        asyncio.run(main())
    finally:
        release.set()
        runner.close()
    assert uncaught == []
    failed = [r for r in caplog.records if r.levelno == logging.ERROR and "evaluators' loop" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert len([r for r in caplog.records if "works again after" in r.getMessage()]) == 1


def test_a_watchdog_that_died_is_started_again_by_the_next_async_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watchdog thread that ended (a BaseException past ``_watch``'s guard) is replaced by the next call.

    Otherwise blocking detection would be off for good: ``_watchdog`` would point to a dead thread.
    """
    runner = UserLoop(stall_s=0.1)
    uncaught: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(repr(args.exc_value)))

    def die(blocked: object) -> None:
        raise SystemExit  # ends the watchdog thread silently

    async def quick() -> str:
        return "ok"

    async def main() -> None:
        assert await runner.run(quick) == "ok"  # the loop and its watchdog start
        monkeypatch.setattr(runner, "_replace", die)
        release = threading.Event()

        async def blocker() -> None:
            release.wait(30.0)

        blocked = asyncio.ensure_future(runner.run(blocker))
        first = runner._watchdog
        assert first is not None
        assert await _until(lambda: not first.is_alive())
        release.set()
        await blocked
        monkeypatch.undo()
        assert await runner.run(quick) == "ok"
        assert runner._watchdog is not first and runner._watchdog is not None and runner._watchdog.is_alive()

    try:
        asyncio.run(main())
    finally:
        runner.close()


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_a_ctrl_c_in_the_engine_threads_start_after_they_started_reaches_the_app_and_starts_no_second_loop_thread(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``KeyboardInterrupt`` landing in ``Thread.start()`` after the loop thread started (injected after the start).

    ``span.end()`` passes the user's interrupt on unchanged; that span is exported unevaluated and counted
    (``engine_unavailable``) with its queue slot given back (a flush returns True), and the thread that runs is
    kept: the next span starts no second thread on the same event loop (which would die: loop already running).
    """
    real: Callable[[threading.Thread], None] = threading.Thread.start
    once = [True]
    uncaught: list[str] = []
    monkeypatch.setattr(
        threading, "excepthook", lambda args: uncaught.append(f"{args.thread.name}: {args.exc_value!r}")
    )

    def start(thread: threading.Thread) -> None:
        real(thread)
        if once[0] and thread.name == LOOP:
            once[0] = False
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)
    before = set(threading.enumerate())
    p = make_pipeline([parity])
    with pytest.raises(KeyboardInterrupt):
        _spans(p, 0)
    _spans(p, 2, 4)
    assert p.processor.force_flush(10_000)
    assert [t.name for t in set(threading.enumerate()) - before if t.name == LOOP] == [LOOP]
    assert uncaught == []
    stats = p.processor.stats()
    assert (stats["enqueued"], stats["evaluated"], stats["queued"]) == (2, 2, 0)
    assert stats["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 1}
    assert sorted(span.name for span in p.spans()) == ["s0", "s2", "s4"]
    assert (p.one("s4").attributes or {})["evaltrace.eval.parity.passed"] is True


def test_threads_that_cannot_start_on_every_span_log_once_per_episode_and_count_every_span(
    make_pipeline: MakePipeline, fault: StartFault, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A persistent thread limit logs no traceback per span on ``span.end()``'s thread: one per episode and site.

    The engine's hand-off and the trace completion timer (both tried again at every span's end), and a score
    sink's thread (tried again with every score): each logs one ERROR with its traceback while it lasts, one INFO
    line when it works again; every span refused is still counted.
    """
    caplog.set_level(logging.INFO, logger="evaltrace")
    failing_timer = _thread_fault(monkeypatch, "evaltrace-trace-completion")  # after ``fault``: wraps its start
    failing_sink = _thread_fault(monkeypatch, "evaltrace-sink-")
    fault.failing = {LOOP}

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        return True

    p = make_pipeline([EvaluatorSpec(whole, trace_level=True), parity], trace_quiet_period_s=0.2)
    _spans(p, *range(20))
    stats = p.processor.stats()
    assert stats["internal_errors"] == 20  # each span's hand-off
    assert stats["evaluators"]["parity"]["not_evaluated_by_reason"] == {semconv.SKIP_ENGINE_UNAVAILABLE: 20}
    worker = SinkWorker(JsonlScoreSink(Path(os.devnull)), schedule_delay_s=0.01)
    for n in range(20):
        worker.submit([_score(f"s{n}")])

    def errors(what: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR and what in r.getMessage()]

    sites = ("evaluation engine", "trace completion timer", "score sink")
    assert [len(errors(what)) for what in sites] == [1, 1, 1]
    assert all(errors(what)[0].exc_info is not None for what in sites)
    fault.failing = set()
    failing_timer[0] = failing_sink[0] = False
    _spans(p, 20)
    worker.submit([_score("after")])
    assert worker.force_flush(10.0)
    worker.shutdown(5.0)
    recovered = [r.getMessage() for r in caplog.records if "works again after" in r.getMessage()]
    assert len(recovered) == 3
    assert [len(errors(what)) for what in sites] == [1, 1, 1]


@pytest.mark.parametrize("workers", [2, 1], ids=["queued-after-a-failed-start", "queued-in-a-full-pool"])
def test_a_sync_evaluation_queued_behind_a_hung_one_whose_replacement_cannot_start_is_an_error_at_once(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Threads cannot start (injected) once call A runs on the live engine's pool; A hangs past its 0.5 s timeout.

    Call B, queued behind A (its own thread could not start, or the pool was full), gets an ``error`` naming the
    failure as soon as A is let go and A's replacement cannot start: no live thread is left to run it, and its
    timeout counts only from its start. Before, B stayed pending until threads could start again (counted at
    shutdown as cancelled). B's evaluator never runs later; every failed start is counted.
    """
    failing = _thread_fault(monkeypatch, "evaltrace-eval-")
    failing[0] = False
    began = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    @evaluator(name="hangs")
    def hangs(trace: Trace) -> bool:
        began.set()
        release.wait(60)
        return True

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        calls.append(trace.output.final_answer or "")
        return True

    threads = EvaluatorThreads(workers, Offenders())

    async def scenario() -> None:
        a = asyncio.ensure_future(
            arun_evaluator(hangs, make_trace("a"), executor=threads, options=RunOptions(timeout_s=0.5))
        )
        assert await asyncio.to_thread(began.wait, 30)
        failing[0] = True
        b = asyncio.ensure_future(
            arun_evaluator(quick, make_trace("b"), executor=threads, options=RunOptions(timeout_s=0.5))
        )
        refused = await asyncio.wait_for(b, 20)  # A's timeout (0.5 s from its start) plus load; before: never
        assert refused.status == "failed" and refused.error is not None
        assert "can't start new thread" in str(refused.error)
        timed_out = await asyncio.wait_for(a, 20)
        assert timed_out.status == "failed" and "timed out" in str(timed_out.error)
        assert threads.internal_errors == (2 if workers == 2 else 1)  # B's thread (if tried), A's replacement
        release.set()
        failing[0] = False
        later = await arun_evaluator(quick, make_trace("c"), executor=threads, options=RunOptions(timeout_s=10.0))
        assert later.passed is True
        assert calls == ["c"]  # B never ran behind its caller's back

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        threads.shutdown(wait=False)


def test_evaluator_threads_that_cannot_start_are_counted_in_the_processor_stats(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each failed start of a sync evaluator thread (injected) is one ``internal_errors`` in ``stats()``.

    The spans whose thread could not start wait for the pool's busy thread and are evaluated: no error result.
    Before, these failures were logged as "every occurrence is counted" but counted nowhere.
    """
    real: Callable[[threading.Thread], None] = threading.Thread.start
    failing = [False]
    attempts: list[str] = []

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name.startswith("evaltrace-eval-") and thread.name[15:].isdigit():
            attempts.append(thread.name)
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    began = threading.Event()
    release = threading.Event()

    @evaluator(name="gate")
    def gate(trace: Trace) -> bool:
        if int(trace.input["input"]) == 0:
            began.set()
            release.wait(60)
        return True

    # Trace-level: its jobs run on the loop's thread pool (span-level sync ones would take the fast lane).
    p = make_pipeline([EvaluatorSpec(gate, trace_level=True)], sync_workers=2, trace_quiet_period_s=0.1)
    try:
        _spans(p, 0)
        assert began.wait(30)  # span 0's evaluation holds the pool's one thread
        failing[0] = True
        _spans(p, 1, 2, 3)
        assert wait_until(lambda: len(attempts) >= 3, 30)
        release.set()
        assert p.processor.force_flush(30_000)
        stats = p.processor.stats()
        assert (stats["evaluated"], stats["passed"], stats["errors"]) == (4, 4, 0)
        assert stats["internal_errors"] == len(attempts) >= 3
    finally:
        release.set()
