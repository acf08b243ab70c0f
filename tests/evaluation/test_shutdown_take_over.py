"""Shutdown taking over the jobs of a stalled evaluation loop: races with the loop, failures, its deadline.

As in ``test_shutdown_stalled_loop``, the loop is stalled deterministically by an inline evaluator waiting on an
event. These tests force what the review of the take-over found: the loop resuming in the middle of a take-over,
a take-over whose marking fails after its spans went out, and many jobs against shutdown's deadline.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, _job_cuts, evaluator
from evaltrace.evaluation._jobs import JobRunner
from evaltrace.schema import Trace

from .conftest import MakePipeline
from .test_shutdown_stalled_loop import _marks, _off_the_lane, _settled, _stalling

SPANS = 3


def test_the_loop_resuming_in_the_middle_of_a_take_over_cannot_lose_the_application_span(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stalled evaluator returns while shutdown builds the marks of its job (after the job's pop).

    The loop then runs the job's tail: its last forward fails to claim the job (shutdown popped it). Before the
    fix, that failed claim still marked the job forwarded, and shutdown, reading that after, sent only child
    evaluation spans: the application's span was neither exported nor counted.
    """
    entered, release = threading.Event(), threading.Event()
    p = make_pipeline([_stalling(entered, release)], hold_timeout_s=60)
    _off_the_lane(p.processor)
    for index in range(SPANS):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    stalled = p.processor._runner
    tail_ran = threading.Event()
    original_forward = JobRunner._forward_once

    def forward_once(self: JobRunner, job: Any, span: Any, final: bool = True) -> bool:
        try:
            return original_forward(self, job, span, final)
        finally:
            if threading.current_thread() is not threading.main_thread() and self is stalled:
                tail_ran.set()

    monkeypatch.setattr(JobRunner, "_forward_once", forward_once)
    original_skipped = _job_cuts.skipped_result
    forced: list[bool] = []

    def skipped_result(evaluator: Any, reason: str) -> Any:
        if not forced and threading.current_thread() is threading.main_thread():
            forced.append(True)
            release.set()  # the loop resumes now, between the take-over's pop and its emission
            assert tail_ran.wait(30), "the loop never ran the job's last forward"
        return original_skipped(evaluator, reason)

    monkeypatch.setattr(_job_cuts, "skipped_result", skipped_result)
    p.processor.shutdown(timeout_millis=600)
    assert forced, "the take-over never built a mark"
    stats = p.processor.stats()
    assert sorted(span.name for span in p.spans()) == [f"s{index}" for index in range(SPANS)]
    assert stats["dropped_at_shutdown"] == 0 and stats["evaluation_spans"] == 0
    for span in p.spans():
        assert _marks(span)["evaltrace.eval.stall.skip_reason"] == "shutdown"
    assert stats["not_evaluated_by_reason"] == {"shutdown": SPANS}
    before = _settled(p.processor)
    p.processor._engine._loop_thread.join(30)
    assert _settled(p.processor) == before and len(p.spans()) == SPANS


def _raising_sink_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording the take-over's marks in the sinks raises (a bug of ours), after its spans were built."""

    def boom(self: JobRunner, job: Any, cut: Any) -> None:
        raise RuntimeError("a bug recording the shutdown marks")

    monkeypatch.setattr(JobRunner, "_sink_not_evaluated", boom)


def test_a_take_over_whose_marking_raises_after_its_span_went_out_counts_nothing_more(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enriched span goes out (emit_cut's ``finally``), then the error: it is an internal error, never a drop.

    Before, the fallback read ``job.forwarded`` (set by the take-over before sending) and counted each exported
    span ``evaluation_loop_stalled`` too: exported + counted exceeded produced.
    """
    entered, release = threading.Event(), threading.Event()
    p = make_pipeline([_stalling(entered, release)], hold_timeout_s=60)
    _off_the_lane(p.processor)
    for index in range(SPANS):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    _raising_sink_marks(monkeypatch)
    try:
        p.processor.shutdown(timeout_millis=600)
        stats = p.processor.stats()
        assert sorted(span.name for span in p.spans()) == [f"s{index}" for index in range(SPANS)]
        for span in p.spans():
            assert _marks(span)["evaltrace.eval.stall.skip_reason"] == "shutdown"
        assert stats["dropped_at_shutdown"] == 0, stats["dropped_at_shutdown_by_reason"]
        assert stats["internal_errors"] == SPANS
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)


def test_a_trace_level_take_over_whose_marking_raises_after_its_child_span_went_out_counts_nothing_more(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a job whose span went already: its child ``evaluation whole`` span went out, not counted."""
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        if not entered.is_set():
            entered.set()
            release.wait(30)
        return True

    p = make_pipeline(
        [EvaluatorSpec(whole, trace_level=True, inline=True)], trace_quiet_period_s=3600, hold_timeout_s=60
    )
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("child"):
            pass
    _raising_sink_marks(monkeypatch)
    try:
        p.processor.shutdown(timeout_millis=600)  # hands the trace out (drain), then takes its stalled job over
        assert entered.is_set()
        stats = p.processor.stats()
        assert sorted(span.name for span in p.spans()) == ["child", "evaluation whole", "root"]
        assert stats["dropped_at_shutdown"] == 0, stats["dropped_at_shutdown_by_reason"]
        assert stats["internal_errors"] == 1
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
