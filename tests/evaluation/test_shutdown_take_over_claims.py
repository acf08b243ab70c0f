"""Shutdown's take-over against the job's own last steps: one claim decides, per evaluation and per span.

Each test forces, with events (no sleeps), an interleaving the second review of the take-over found: the loop
claiming a result just before or just after shutdown took its job over, the fast lane counting a mapping failure
while shutdown takes its job over, a raising forward in shutdown's own paths, and held jobs (span gone, results
pending) taken over past the take-over's deadline. Whatever the order, every evaluation ends up exactly once
published or marked ``shutdown``, and spans exported + spans counted = spans produced.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, _job_cuts, _job_publish, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until
from .test_shutdown_stalled_loop import _marks, _off_the_lane, _settled


def _quick() -> EvaluatorSpec:
    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    return EvaluatorSpec(quick, inline=True)


def _sink_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("claimed_first", [False, True], ids=["take-over-first", "job-first"])
def test_each_evaluation_is_published_or_marked_shutdown_exactly_once_whichever_claims_first(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, claimed_first: bool
) -> None:
    """The loop pauses right before (or right after) claiming its result while shutdown takes the job over.

    Before the single claim, the job announced its result (``publishing``) and then read ``abandoned``: the
    review paused it between the two (dekker.py), shutdown kept the announced result on the span as a verdict,
    and the job, seeing ``abandoned``, never published it: a verdict on the span, not in ``stats()`` nor the
    sinks. Now the job's claim and shutdown's ``abandoned`` are decided under one lock.
    """
    paused, taken = threading.Event(), threading.Event()
    original_claim = _job_publish.claim

    def claim(job: Any, spec: Any, result: Any, lock: Any) -> bool:
        if claimed_first:
            won = original_claim(job, spec, result, lock)
            paused.set()
            assert taken.wait(30), "shutdown never took the job over"
            return won
        paused.set()
        assert taken.wait(30), "shutdown never took the job over"
        return original_claim(job, spec, result, lock)

    original_split = _job_cuts.split_taken

    def split_taken(job: Any) -> Any:
        try:
            return original_split(job)
        finally:
            taken.set()

    monkeypatch.setattr(_job_publish, "claim", claim)
    monkeypatch.setattr(_job_cuts, "split_taken", split_taken)
    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline([_quick()], sinks=[JsonlScoreSink(sink_path)], hold_timeout_s=60)
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("s"):
        pass
    assert paused.wait(30), "the job never reached its claim"
    try:
        p.processor.shutdown(timeout_millis=600)
    finally:
        taken.set()
    p.processor._engine._loop_thread.join(30)
    assert not p.processor._engine._loop_thread.is_alive()
    stats = p.processor.stats()
    marks = _marks(p.one("s"))
    letters = [path.read_text() for path in (tmp_path / "dead-letter").rglob("*") if path.is_file()]
    scores = sum(text.count('"quick"') for text in letters) + sum(
        1 for line in _sink_lines(sink_path) if line.get("name") == "quick"
    )
    not_evaluated = [line for line in _sink_lines(sink_path) if "not_evaluated" in line]
    if claimed_first:  # the job's: kept on the span, published once (its score after shutdown: a dead letter)
        assert marks["evaltrace.eval.quick.passed"] is True and "evaltrace.eval.quick.skip_reason" not in marks
        assert (stats["evaluated"], stats["passed"], stats["not_evaluated_by_reason"]) == (1, 1, {})
        assert (scores, not_evaluated) == (1, [])
    else:  # shutdown's: marked on the span, in stats() and the sink; never published
        assert marks["evaltrace.eval.quick.skip_reason"] == "shutdown", marks
        assert "evaltrace.eval.quick.passed" not in marks, marks
        assert (stats["evaluated"], stats["not_evaluated_by_reason"]) == (0, {"shutdown": 1})
        assert scores == 0 and [line["not_evaluated"]["evaluator"] for line in not_evaluated] == ["quick"]
    assert len(p.spans()) == 1 and stats["dropped_at_shutdown"] == 0


@pytest.mark.parametrize("paused_at", ["before-claim", "counting"])
def test_a_mapping_failure_on_the_fast_lane_racing_the_take_over_counts_each_evaluation_once(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch, paused_at: str
) -> None:
    """The lane thread pauses before its claim, or inside its ``mapping_failed`` count, while shutdown takes over.

    Before, the lane counted ``mapping_failed`` without the job's claim (lane_mapfail.py): paused inside that
    count, shutdown also marked the evaluation ``shutdown``, so it counted twice (mapping_failed and shutdown).
    """
    from evaltrace.evaluation import _jobs
    from evaltrace.evaluation._mapping import MappingFailed
    from evaltrace.evaluation.processor import EvaluationSpanProcessor

    def unmappable(members: Any, span: Any) -> Any:
        raise MappingFailed("forced")

    monkeypatch.setattr(_jobs, "build_trace", unmappable)

    @evaluator(name="q")
    def q(trace: Trace) -> bool:
        return True

    p = make_pipeline([EvaluatorSpec(q)], hold_timeout_s=60)  # sync, not inline: the fast lane runs it
    paused, taken, lane_done = threading.Event(), threading.Event(), threading.Event()

    def pause() -> None:
        if threading.current_thread() is not threading.main_thread() and not paused.is_set():
            paused.set()
            assert taken.wait(30), "shutdown never took the job over"

    stats = p.processor._stats
    original_count, original_claim = stats.not_evaluated, _job_publish.claim

    def not_evaluated(reason: str, name: str, amount: int = 1) -> None:
        if reason == "mapping_failed" and paused_at == "counting":
            pause()
        original_count(reason, name, amount)

    def claim(job: Any, spec: Any, result: Any, lock: Any) -> bool:
        if paused_at == "before-claim":
            pause()
        return original_claim(job, spec, result, lock)

    original_deliver = _jobs.JobRunner._deliver

    def deliver(self: Any, job: Any, results: Any) -> None:
        try:
            original_deliver(self, job, results)
        finally:
            lane_done.set()

    original_abandon = EvaluationSpanProcessor._abandon_unfinished

    def abandon(self: Any, *args: Any) -> None:
        try:
            original_abandon(self, *args)
        finally:
            taken.set()

    monkeypatch.setattr(stats, "not_evaluated", not_evaluated)
    monkeypatch.setattr(_job_publish, "claim", claim)
    monkeypatch.setattr(_jobs.JobRunner, "_deliver", deliver)
    monkeypatch.setattr(EvaluationSpanProcessor, "_abandon_unfinished", abandon)
    with p.tracer.start_as_current_span("s"):
        pass
    assert paused.wait(30), "the lane never reached the mapping failure"
    try:
        p.processor.shutdown(timeout_millis=600)
    finally:
        taken.set()
    assert lane_done.wait(30), "the lane never finished the job"
    counts = p.processor.stats()
    reason = _marks(p.one("s"))["evaltrace.eval.q.skip_reason"]
    expected = "mapping_failed" if paused_at == "counting" else "shutdown"  # claimed by the lane, or by shutdown
    assert reason == expected
    assert counts["not_evaluated_by_reason"] == {expected: 1}
    assert counts["evaluators"]["q"]["not_evaluated_by_reason"] == {expected: 1}
    assert len(p.spans()) == 1 and counts["dropped_at_shutdown"] == 0


@pytest.mark.parametrize("raising_at", ["past-deadline-forward", "every-forward"])
def test_a_raising_forward_during_the_take_over_is_counted_and_shutdown_still_shuts_everything_down(
    monkeypatch: pytest.MonkeyPatch, raising_at: str
) -> None:
    """A bug of ours in the forward path (asis_raise.py): shutdown's own forwards raise, past its deadline.

    ``shutdown(0)``: 16 jobs are marked on their own, the rest in bulk (each forward through the job context);
    with ``past-deadline-forward`` the forward of the jobs marked in bulk raises, with ``every-forward`` that of
    the first 16 too, so the failure fallback forwards them as they are through the processor's forward, which
    raises again. (Until s16-shut7, the jobs past the deadline went as they are through the processor's forward.) Before, the exception reached the application
    from ``shutdown()`` and the downstream processors were never shut down. Now each such span is counted
    (internal error, dropped ``evaluation_loop_stalled``) and shutdown goes on.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evaltrace.evaluation import EvaluationSpanProcessor
    from evaltrace.evaluation._lifecycle import MARKED_AT_LEAST

    from .test_shutdown_stalled_loop import _stalling

    jobs = MARKED_AT_LEAST + 24
    entered, release = threading.Event(), threading.Event()
    shut: list[str] = []

    class Downstream(SimpleSpanProcessor):
        def shutdown(self) -> None:
            shut.append("downstream")
            super().shutdown()

    exporter = InMemorySpanExporter()
    processor = EvaluationSpanProcessor(
        downstream=[Downstream(exporter)], evaluators=[_stalling(entered, release)], hold_timeout_s=60
    )
    _off_the_lane(processor)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    try:
        for index in range(jobs):
            with tracer.start_as_current_span(f"s{index}"):
                pass
        assert entered.wait(30), "the stalling evaluator never ran"
        assert wait_until(processor._engine._inbox.empty, 30)  # dispatched to the (stalled) loop
        taken: list[int] = []
        original_abandon = EvaluationSpanProcessor._abandon_unfinished

        def abandon(self: Any, *args: Any) -> None:
            taken.append(len(self._live))  # the jobs it takes over (the others were cut short before it)
            try:
                original_abandon(self, *args)
            finally:
                taken.append(-1)

        def raising(original: Any, after: int = 0) -> Any:
            calls = [0]

            def forward(span: Any) -> None:
                if len(taken) == 1:  # only inside the take-over: the forwards the finding is about
                    calls[0] += 1
                    if calls[0] > after:
                        raise RuntimeError("a bug of ours in the forward path")
                original(span)

            return forward

        monkeypatch.setattr(EvaluationSpanProcessor, "_abandon_unfinished", abandon)
        monkeypatch.setattr(processor, "_forward", raising(processor._forward))
        after = MARKED_AT_LEAST if raising_at == "past-deadline-forward" else 0  # one forward per job marked
        monkeypatch.setattr(processor._runner.ctx, "forward", raising(processor._runner.ctx.forward, after))
        processor.shutdown(timeout_millis=0)  # returns: nothing raised to the application
        assert shut == ["downstream"]
        stats = processor.stats()
        exported = [span.name for span in exporter.get_finished_spans()]
        dropped = stats["dropped_at_shutdown_by_reason"].get("evaluation_loop_stalled", 0)
        assert len(exported) == len(set(exported))
        assert len(exported) + dropped == jobs and stats["dropped_at_shutdown"] == dropped
        assert taken[0] > MARKED_AT_LEAST, taken  # some jobs went the past-deadline way
        marked_sent = MARKED_AT_LEAST if raising_at == "past-deadline-forward" else 0
        assert dropped == taken[0] - marked_sent
        # Exactly two errors per span lost, none elsewhere: its take-over's forward raised (``_take_over_failed``),
        # then the fallback forward of the span as it is (``forward_or_count``). Each is counted where it happens.
        assert stats["internal_errors"] == 2 * dropped
        assert stats["not_evaluated_by_reason"] == {"shutdown": jobs}
    finally:
        release.set()
        processor._engine._loop_thread.join(30)
    assert len(exporter.get_finished_spans()) == len(exported)


HELD = 20


def test_held_jobs_taken_over_past_the_deadline_export_their_published_results_and_marks_as_child_spans(
    make_pipeline: MakePipeline,
) -> None:
    """Jobs held past their hold deadline (span gone, one result pending) when a stalled loop is taken over.

    ``shutdown(0)``: the first 16 jobs are marked on their own, the rest in bulk; for each, its published results
    and its mark follow as child spans. Before, a held job past the deadline lost the child spans of the results
    it had published (heldstall.py): neither exported nor counted; then they were only counted
    ``evaluation_loop_stalled``, and the pending evaluation's mark was on no span (test_sink_faults' guarantee).
    """
    import asyncio

    from evaltrace.evaluation._lifecycle import MARKED_AT_LEAST

    arm, entered, release = threading.Event(), threading.Event(), threading.Event()

    @evaluator(name="stall")
    def stall(trace: Trace) -> bool:
        if arm.is_set() and not entered.is_set():
            entered.set()
            release.wait(30)
        return True

    @evaluator(name="q")
    def q(trace: Trace) -> bool:
        return True

    @evaluator(name="slow")
    async def slow(trace: Trace) -> bool:
        await asyncio.sleep(30)  # pending at shutdown: the held jobs wait for it
        return True

    p = make_pipeline([EvaluatorSpec(stall, inline=True), EvaluatorSpec(q), EvaluatorSpec(slow)], hold_timeout_s=0.05)
    _off_the_lane(p.processor)
    for index in range(HELD):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert wait_until(
        lambda: (p.processor.stats()["held_timeout"], p.processor.stats()["evaluated"]) == (HELD, 2 * HELD), 30
    ), p.processor.stats()
    arm.set()
    with p.tracer.start_as_current_span("stalled"):
        pass
    assert entered.wait(30), "the stalling evaluator never ran"
    try:
        p.processor.shutdown(timeout_millis=0)
        stats = p.processor.stats()
        names = [span.name for span in p.spans()]
        app = sorted(name for name in names if not name.startswith("evaluation "))
        assert app == sorted([*(f"s{index}" for index in range(HELD)), "stalled"])
        children = len(names) - len(app)
        assert HELD > MARKED_AT_LEAST  # some held jobs went the past-deadline way
        assert children == stats["evaluation_spans"] == HELD * 3  # stall, q (published), slow (mark)
        spans = p.spans()
        by_id = {span.context.span_id: span.name for span in spans}
        carried = sorted(
            (by_id[span.parent.span_id], span.name, _marks(span)[f"evaltrace.eval.{span.name[11:]}.outcome"])
            for span in spans
            if span.parent is not None
        )
        expected = [
            (f"s{index}", f"evaluation {name}", outcome)
            for index in range(HELD)
            for name, outcome in (("q", "pass"), ("slow", "not_evaluated"), ("stall", "pass"))
        ]
        assert carried == sorted(expected)
        assert stats["dropped_at_shutdown_by_reason"] == {}
        assert stats["not_evaluated_by_reason"] == {"shutdown": HELD + 3}  # slow per held job; the stalled job's 3
        before = _settled(p.processor)
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
    assert _settled(p.processor) == before and len(p.spans()) == len(names)
