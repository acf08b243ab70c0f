"""A sync evaluator that hangs past its timeout costs at most ``stuck_calls.limit`` threads, never one per timeout.

Each timed-out call leaves its thread running (Python cannot stop a thread). Once the process's stuck threads
reach the cap, an evaluator with calls among them gets no new thread: its calls are errors (``overloaded``),
counted, never verdicts, until one of its threads returns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from evaltrace._internal.daemon_pool import StuckCalls, stuck_calls
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until

LIMIT = 2


@pytest.fixture
def small_cap() -> Iterator[None]:
    before = stuck_calls.limit
    stuck_calls.limit = LIMIT
    try:
        yield
    finally:
        stuck_calls.limit = before


def test_stuck_calls_refuse_only_an_evaluator_holding_stuck_threads_at_the_cap() -> None:
    calls = StuckCalls(limit=2)
    calls.stuck(1)
    assert not calls.refuses(1)  # under the cap
    calls.stuck(2)
    assert (calls.refuses(1), calls.refuses(2), calls.refuses(3)) == (True, True, False)
    calls.returned(1)
    assert (calls.total, calls.refuses(2)) == (1, False)
    calls.returned(1)  # not counted any more: nothing to free
    assert (calls.total, calls.of(1), calls.of(2)) == (1, 0, 1)


def test_a_hung_evaluator_is_capped_and_its_calls_past_the_cap_are_overloaded_errors(
    make_pipeline: MakePipeline, small_cap: None
) -> None:
    release = threading.Event()
    inside = 0
    most = 0
    lock = threading.Lock()

    @evaluator(name="hung")
    def hung(trace: Trace) -> bool:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        try:
            release.wait(30)
        finally:
            with lock:
                inside -= 1
        return True

    @evaluator(name="fine")
    def fine(trace: Trace) -> bool:
        return True

    spans = 5
    p = make_pipeline([EvaluatorSpec(hung, timeout_s=0.05), fine], hold_timeout_s=5)
    try:
        for i in range(spans):
            with p.tracer.start_as_current_span(f"s{i}"):
                pass
            # One at a time: each call times out (or is refused) before the next span comes.
            assert wait_until(lambda i=i: len(p.by_name(f"s{i}")) == 1, timeout=10)
        assert most == LIMIT  # without the cap: one thread per span, all still hanging
        assert stuck_calls.of(id(hung)) == LIMIT
        outcomes = [p.one(f"s{i}").attributes or {} for i in range(spans)]
        assert [a["evaltrace.eval.hung.error_type"] for a in outcomes] == ["timeout"] * LIMIT + ["overloaded"] * (
            spans - LIMIT
        )
        assert all(a["evaltrace.eval.hung.outcome"] == "error" for a in outcomes)
        assert all(a["evaltrace.eval.fine.passed"] is True for a in outcomes)  # other evaluators run on
        stats = p.processor.stats()
        assert (stats["errors"], stats["timed_out"], stats["passed"], stats["failed"]) == (spans, LIMIT, spans, 0)
    finally:
        release.set()
    assert wait_until(lambda: stuck_calls.of(id(hung)) == 0)  # the threads came back: the evaluator runs again
    with p.tracer.start_as_current_span("after"):
        pass
    p.flush()
    assert p.one("after").attributes["evaltrace.eval.hung.passed"] is True  # type: ignore[index]
