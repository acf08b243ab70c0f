"""The evaluation engine's threads failing to start lose nothing uncounted, and the next span tries again.

``Thread.start`` raising (``can't start new thread`` under a thread or memory limit) cannot be provoked reliably
in a test, so it is injected at ``threading.Thread.start`` for the engine's two threads only; everything else is
the real processor, engine and OTel SDK. A refused span is exported unevaluated, each of its evaluators counted
``engine_unavailable``, its queue slot given back (a flush returns True at once, not False at its timeout), and
once the fault clears the next span is evaluated.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from evaltrace._internal import semconv
from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace.evaluation import evaluator
from evaltrace.evaluation.runner import RunOptions, arun_evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, Pipeline
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
