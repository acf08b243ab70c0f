"""Shutdown taking over the jobs of a stalled evaluation loop: races with the loop, failures, its deadline.

As in ``test_shutdown_stalled_loop``, the loop is stalled deterministically by an inline evaluator waiting on an
event. These tests force what the review of the take-over found: the loop resuming in the middle of a take-over,
a take-over whose marking fails after its spans went out, and many jobs against shutdown's deadline.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, JsonlScoreSink, _job_cuts, evaluator
from evaltrace.evaluation._jobs import JobRunner
from evaltrace.evaluation._lifecycle import MARKED_AT_LEAST
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until
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


def test_past_its_deadline_the_take_over_marks_the_rest_in_bulk_on_their_spans_and_in_the_sinks(
    make_pipeline: MakePipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shutdown(0): the take-over is past its deadline from the start. It marks its first MARKED_AT_LEAST jobs
    with marks of their own, then the others in bulk: every span still carries its marks, every sink its records.

    Before, every job was marked one by one, however long that took past the deadline; then (s15-shut4) the jobs
    past the deadline went as they were, with no mark and no sink record (test_sink_faults' guarantee broken).
    """
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [_stalling(entered, release), EvaluatorSpec(quick, inline=True)],
        sinks=[JsonlScoreSink(sink_path)],
        hold_timeout_s=600,
    )
    _off_the_lane(p.processor)
    jobs = 64
    for index in range(jobs):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    taken: list[int] = []
    original_abandon = EvaluationSpanProcessor._abandon_unfinished

    def abandon(self: Any, *args: Any) -> None:
        taken.append(len(self._live))  # the jobs it takes over; the engine's stop cut the others short (marked)
        original_abandon(self, *args)

    monkeypatch.setattr(EvaluationSpanProcessor, "_abandon_unfinished", abandon)
    try:
        p.processor.shutdown(timeout_millis=0)
        stats = p.processor.stats()
        spans = p.spans()
        assert sorted(span.name for span in spans) == sorted(f"s{index}" for index in range(jobs))
        assert taken[0] > MARKED_AT_LEAST, taken  # some jobs went the past-deadline way
        for span in spans:  # the take-over's first MARKED_AT_LEAST, the rest in bulk, and those the stop cut short
            assert _marks(span)["evaltrace.eval.stall.skip_reason"] == "shutdown", span.name
            assert _marks(span)["evaltrace.eval.quick.skip_reason"] == "shutdown", span.name
        assert stats["dropped_at_shutdown"] == 0 and stats["evaluation_spans"] == 0
        assert stats["not_evaluated_by_reason"] == {"shutdown": 2 * jobs}
        for name in ("stall", "quick"):
            assert stats["evaluators"][name]["not_evaluated_by_reason"] == {"shutdown": jobs}, name
        lines = sink_path.read_text().splitlines()
        records = {
            (json.loads(line)["not_evaluated"]["span_id"], json.loads(line)["not_evaluated"]["evaluator"])
            for line in lines
        }
        assert len(lines) == len(records) == 2 * jobs  # a record per mark, none twice
        before = _settled(p.processor)
    finally:
        release.set()
        p.processor._engine._loop_thread.join(60)
    assert _settled(p.processor) == before and len(p.spans()) == jobs


def test_a_taken_over_job_keeps_the_results_it_published_and_marks_only_the_rest(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """The first evaluator of the stalled job ran and published: its verdict stays on the span and in the sink."""
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(quick, inline=True), _stalling(entered, release)],
        sinks=[JsonlScoreSink(sink_path)],
        hold_timeout_s=60,
    )
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("s"):
        pass
    assert entered.wait(30)
    try:
        p.processor.shutdown(timeout_millis=600)
        marks = _marks(p.one("s"))
        assert marks["evaltrace.eval.quick.passed"] is True, marks
        assert "evaltrace.eval.quick.skip_reason" not in marks, marks
        assert marks["evaltrace.eval.stall.skip_reason"] == "shutdown", marks
        stats = p.processor.stats()
        assert (stats["evaluated"], stats["passed"]) == (1, 1)
        assert stats["not_evaluated_by_reason"] == {"shutdown": 1} and stats["dropped_at_shutdown"] == 0
        lines = [json.loads(line) for line in sink_path.read_text().splitlines()]
        assert [line["not_evaluated"]["evaluator"] for line in lines if "not_evaluated" in line] == ["stall"]
        assert [line["name"] for line in lines if "not_evaluated" not in line] == ["quick"], lines
        before = _settled(p.processor)
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
    assert _settled(p.processor) == before  # the stalled evaluator's own verdict is never published
    assert len(p.spans()) == 1


def test_a_result_being_published_as_shutdown_takes_the_job_over_is_kept_not_marked(
    make_pipeline: MakePipeline,
) -> None:
    """The loop is inside the publication of a result (its log event) when shutdown takes the job over.

    Shutdown must see that result (announced before the job read ``abandoned``): it keeps it on the span and
    does not mark it ``shutdown``; so it counts once, as evaluated, never as both.
    """
    from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

    entered, release = threading.Event(), threading.Event()

    class Blocking(LogRecordProcessor):
        """Blocks the loop inside the first result's publication (its log event), as a slow log pipeline would."""

        def on_emit(self, log_data: Any) -> None:
            if not entered.is_set():
                entered.set()
                release.wait(30)

        emit = on_emit

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(Blocking())
    p = make_pipeline([EvaluatorSpec(quick, inline=True)], logger_provider=logger_provider, hold_timeout_s=60)
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("s"):
        pass
    assert entered.wait(30)
    try:
        p.processor.shutdown(timeout_millis=600)
        marks = _marks(p.one("s"))
        assert marks["evaltrace.eval.quick.passed"] is True, marks
        assert "evaltrace.eval.quick.skip_reason" not in marks, marks
        assert p.processor.stats()["not_evaluated_by_reason"] == {}
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"], stats["not_evaluated_by_reason"]) == (1, 1, {})
    assert len(p.spans()) == 1 and stats["dropped_at_shutdown"] == 0


JOBS = 2048  # the default max_queue_size: every span admitted, each job stalled behind the first one
QUICK = ("q1", "q2", "q3", "q4")


def test_taking_over_many_jobs_keeps_shutdowns_deadline_and_counts_every_evaluation(
    make_pipeline: MakePipeline, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,048 stalled jobs x 5 evaluators at shutdown(600 ms): marking them all one by one would take seconds.

    Past ``deadline - reserve/8`` the take-over marks the remaining jobs in bulk (one mark per evaluator shared,
    counts and sink records written once). Whichever path a job took, its span is exported once with all its
    marks, and every evaluation is counted once and recorded once in the sink. The bulk path is proven by
    structure, not by a clock: at most ``MARKED_AT_LEAST`` jobs' marks plus one shared mark per evaluator are
    built, and the WARNING reports at least ``2,048 - MARKED_AT_LEAST`` jobs marked in bulk. (The loop's stop,
    blocked by the stalled evaluator, ends past ``deadline - reserve/8`` by construction: the cancelled jobs are
    waited for until ``deadline - reserve/2``, then the loop's join takes at least 0.1 s.) Wall time is only a
    hang guard (timeout + 10 s), not a bound. Before, every job was marked one by one: 2,048 x 5 marks built.
    """
    entered, release = threading.Event(), threading.Event()

    def quick(name: str) -> EvaluatorSpec:
        @evaluator(name=name)
        def ev(trace: Trace) -> bool:
            return True

        return EvaluatorSpec(ev, inline=True)

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [_stalling(entered, release), *(quick(name) for name in QUICK)],
        sinks=[JsonlScoreSink(sink_path)],
        hold_timeout_s=600,
        max_queue_size=JOBS,
    )
    _off_the_lane(p.processor)
    for index in range(JOBS):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    # Every job must have left the engine's inbox for the stalled loop: a job still in the inbox at stop is cut
    # short with marks of its own, which would break the bulk count below with nothing wrong in the code.
    assert wait_until(p.processor._engine._inbox.empty, 30)
    made: list[str] = []
    original = _job_cuts.skipped_result

    def counted(evaluator: Any, reason: str) -> Any:
        made.append(evaluator.name)
        return original(evaluator, reason)

    monkeypatch.setattr(_job_cuts, "skipped_result", counted)  # what builds a mark, one by one or shared in bulk
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="evaltrace.evaluation"):
            p.processor.shutdown(timeout_millis=600)
        elapsed = time.monotonic() - started
        stats = p.processor.stats()
        spans = p.spans()
        assert sorted(span.name for span in spans) == sorted(f"s{index}" for index in range(JOBS))
        assert stats["dropped_at_shutdown"] == 0 and stats["dropped"] == 0
        names = ("stall", *QUICK)
        assert stats["not_evaluated_by_reason"] == {"shutdown": JOBS * len(names)}
        for name in names:
            assert stats["evaluators"][name]["not_evaluated_by_reason"] == {"shutdown": JOBS}, name
        assert (stats["evaluated"], stats["passed"], stats["failed"]) == (0, 0, 0)
        for span in spans:  # all of its evaluations marked on it, whichever path it took
            reasons = [_marks(span).get(f"evaltrace.eval.{name}.skip_reason") for name in names]
            assert reasons == ["shutdown"] * len(names), _marks(span)
        lines = sink_path.read_text().splitlines()
        assert len(lines) == JOBS * len(names)  # a sink record per mark on a span
        assert len(made) <= (MARKED_AT_LEAST + 1) * len(names), len(made)  # the rest shared, in bulk
        bulk = [
            int(match.group(1))
            for record in caplog.records
            if (match := re.search(r"the last (\d+) job\(s\), left at the take-over's deadline", record.getMessage()))
        ]
        assert len(bulk) == 1 and bulk[0] >= JOBS - MARKED_AT_LEAST, caplog.text
        # A hang guard only (the take-over's bound is proven by structure above): not a timing of the bulk path.
        assert elapsed < 0.6 + 10, elapsed
    finally:
        release.set()
        p.processor._engine._loop_thread.join(60)


def test_a_result_being_published_as_shutdown_takes_its_job_over_finishes_publishing_as_a_dead_letter(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """What docs/reliability.md says of it: kept on the span and counted by shutdown, its publication finishes later.

    The loop is inside the result's publication (its log event) when shutdown takes the job over. The rest of
    that publication (the log event, the score) runs when the loop resumes, after ``shutdown()`` returned: the
    sinks are shut down by then, so the score goes to the dead-letter file, counted ``dead_lettered``; it is
    counted evaluated once, never marked ``shutdown``.
    """
    from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

    entered, release = threading.Event(), threading.Event()

    class Blocking(LogRecordProcessor):
        def on_emit(self, log_data: Any) -> None:
            if not entered.is_set():
                entered.set()
                release.wait(30)

        emit = on_emit

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(Blocking())
    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(quick, inline=True)],
        sinks=[JsonlScoreSink(sink_path)],
        logger_provider=logger_provider,
        hold_timeout_s=60,
    )
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("s"):
        pass
    assert entered.wait(30)
    try:
        p.processor.shutdown(timeout_millis=600)
        stats = p.processor.stats()
        assert _marks(p.one("s"))["evaltrace.eval.quick.passed"] is True
        assert (stats["evaluated"], stats["passed"], stats["not_evaluated_by_reason"]) == (1, 1, {})
        assert (stats["log_events"], stats["sinks"]["jsonl"]["submitted"]) == (0, 0)  # not published yet
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
    stats = p.processor.stats()
    assert (stats["evaluated"], stats["passed"], stats["not_evaluated_by_reason"]) == (1, 1, {})
    assert stats["log_events"] == 1
    sink = stats["sinks"]["jsonl"]
    assert (sink["submitted"], sink["dead_lettered"], sink["successes"]) == (1, 1, 0), sink
    assert not sink_path.exists() or sink_path.read_text() == ""
    letters = [path.read_text() for path in (tmp_path / "dead-letter").rglob("*") if path.is_file()]
    assert sum(text.count('"quick"') for text in letters) == 1, letters
    assert len(p.spans()) == 1 and stats["dropped_at_shutdown"] == 0
