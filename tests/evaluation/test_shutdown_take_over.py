"""Shutdown taking over the jobs of a stalled evaluation loop: races with the loop, failures, its deadline.

As in ``test_shutdown_stalled_loop``, the loop is stalled deterministically by an inline evaluator waiting on an
event. These tests force what the review of the take-over found: the loop resuming in the middle of a take-over,
a take-over whose marking fails after its spans went out, and many jobs against shutdown's deadline.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from evaltrace.evaluation import _job_cuts
from evaltrace.evaluation._jobs import JobRunner

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
