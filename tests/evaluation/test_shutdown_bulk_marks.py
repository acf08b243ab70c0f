"""Shutdown's take-over past its deadline: every span keeps its ``shutdown`` marks, every sink its records.

As in ``test_shutdown_stalled_loop``, the loop is stalled deterministically by an inline evaluator waiting on an
event; ``MARKED_AT_LEAST`` is patched to 0 and ``shutdown(0)`` is past the take-over's deadline from the start,
so every job taken over goes the past-deadline way, with no load and no clock needed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, _job_cuts, _lifecycle, evaluator
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.schema import Score, Trace

from .conftest import MakePipeline
from .test_shutdown_stalled_loop import _off_the_lane, _stalling

JOBS = 24


class HungSink:
    """A sink with no file of its own: its ``not_evaluated`` records go to its dead-letter file."""

    name = "hung"

    def export(self, batch: Sequence[Score]) -> SinkResult:
        return SinkResult(rejected=list(batch), error="hung")  # never called here: nothing is evaluated

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def _take_over(make_pipeline: MakePipeline, tmp_path: Path, marked_at_least: int) -> dict[str, Any]:
    """JOBS stalled jobs x 2 evaluators taken over by ``shutdown(0)``: what the spans, stats and sinks got."""
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    directory = tmp_path / str(marked_at_least)
    directory.mkdir()
    p = make_pipeline(
        [_stalling(entered, release), EvaluatorSpec(quick, inline=True)],
        sinks=[JsonlScoreSink(directory / "scores.jsonl"), HungSink()],
        dead_letter_dir=directory / "dead",
        hold_timeout_s=600,
    )
    _off_the_lane(p.processor)
    for index in range(JOBS):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_lifecycle, "MARKED_AT_LEAST", marked_at_least)
        made: list[str] = []
        original = _job_cuts.skipped_result

        def counted(evaluator: Any, reason: str) -> Any:
            made.append(evaluator.name)
            return original(evaluator, reason)

        patch.setattr(_job_cuts, "skipped_result", counted)
        try:
            p.processor.shutdown(timeout_millis=0)
        finally:
            release.set()
            p.processor._engine._loop_thread.join(60)
    spans = {
        span.name: (
            {key: value for key, value in (span.attributes or {}).items() if key.startswith("evaltrace.eval.")},
            [(event.name, dict(event.attributes or {})) for event in span.events],
        )
        for span in p.spans()
    }
    ids = {format(span.context.span_id, "016x"): span.name for span in p.spans()}

    def records(path: Path) -> list[tuple[str, str, str]]:
        lines = [json.loads(line)["not_evaluated"] for line in path.read_text().splitlines()]
        assert all(line["reason"] == "shutdown" for line in lines)
        return sorted(
            (ids[line["span_id"]], line["evaluator"], line["observation_id"] == line["span_id"]) for line in lines
        )

    return {
        "spans": spans,
        "count": len(p.spans()),
        "stats": p.processor.stats(),
        "jsonl": records(directory / "scores.jsonl"),
        "dead": records(directory / "dead" / "hung.jsonl"),
        "made": made,
    }


def test_past_the_take_overs_deadline_every_span_keeps_its_shutdown_marks_and_every_sink_its_records(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """Main's guarantee (test_sink_faults' cut-short test), on the take-over's past-deadline path.

    Every evaluation shutdown cut short leaves a ``shutdown`` mark on its span, in ``stats()`` and a record in
    every score file (the JSONL sink's own, another sink's dead-letter file), exactly as a job marked on its own
    does: the spans, their events, the counts and the records are the same with every job past the deadline as
    with none. Before, a job past the deadline went out with no mark and no record, only counted in ``stats()``.
    """
    bulk = _take_over(make_pipeline, tmp_path, marked_at_least=0)
    own = _take_over(make_pipeline, tmp_path, marked_at_least=JOBS)
    assert sorted(bulk["made"]) == ["quick", "stall"]  # the past-deadline path: one mark per evaluator
    assert len(own["made"]) == 2 * JOBS  # every job marked on its own (the engine's stop cut none short)
    assert bulk["count"] == own["count"] == JOBS
    for name, (attributes, events) in bulk["spans"].items():
        assert attributes == {
            "evaltrace.eval.stall.outcome": "not_evaluated",
            "evaltrace.eval.stall.skip_reason": "shutdown",
            "evaltrace.eval.quick.outcome": "not_evaluated",
            "evaltrace.eval.quick.skip_reason": "shutdown",
            "evaltrace.eval.not_evaluated": ("stall", "quick"),
        }, name
        assert len(events) == 2, name
    assert bulk["spans"] == own["spans"]
    expected = sorted((f"s{index}", name, True) for index in range(JOBS) for name in ("stall", "quick"))
    assert bulk["jsonl"] == bulk["dead"] == own["jsonl"] == own["dead"] == expected
    for run in (bulk, own):
        stats = run["stats"]
        assert stats["not_evaluated_by_reason"] == {"shutdown": 2 * JOBS}
        for name in ("stall", "quick"):
            assert stats["evaluators"][name]["not_evaluated_by_reason"] == {"shutdown": JOBS}, name
        assert stats["sinks"]["hung"]["not_evaluated"] == stats["sinks"]["jsonl"]["not_evaluated"] == 2 * JOBS
        assert (stats["dropped_at_shutdown"], stats["internal_errors"], stats["evaluation_spans"]) == (0, 0, 0)


@pytest.mark.parametrize("marked_at_least", [0, JOBS], ids=["in-bulk", "one-by-one"])
def test_a_sink_whose_not_evaluated_write_raises_keeps_no_other_sink_from_its_records(
    make_pipeline: MakePipeline, tmp_path: Path, marked_at_least: int
) -> None:
    """The first sink's ``SinkWorker.not_evaluated`` raises (a bug of ours) at every write, on both take-over paths.

    The second sink still gets a record per mark, each raising write is counted as an internal error, nothing is
    raised to the application, and the exporters are still shut down. Before, the first raising sink ended the
    loop over the sinks: the second got no record, and the bulk path counted no internal error.
    """
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [_stalling(entered, release), EvaluatorSpec(quick, inline=True)],
        sinks=[HungSink(), JsonlScoreSink(sink_path)],
        hold_timeout_s=600,
    )
    _off_the_lane(p.processor)
    raised: list[int] = []

    def broken(records: Sequence[Any]) -> None:
        raised.append(len(records))
        raise RuntimeError("a bug in SinkWorker.not_evaluated")

    p.processor._sinks[0].not_evaluated = broken  # type: ignore[method-assign]
    for index in range(JOBS):
        with p.tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_lifecycle, "MARKED_AT_LEAST", marked_at_least)
        try:
            p.processor.shutdown(timeout_millis=0)
        finally:
            release.set()
            p.processor._engine._loop_thread.join(60)
    stats = p.processor.stats()
    assert sum(raised) == 2 * JOBS and len(raised) == (1 if marked_at_least == 0 else JOBS), raised
    assert stats["internal_errors"] == len(raised)  # one per raising write, on either path
    lines = [json.loads(line)["not_evaluated"] for line in sink_path.read_text().splitlines()]
    assert len(lines) == stats["sinks"]["jsonl"]["not_evaluated"] == 2 * JOBS  # every record, in the later sink
    assert stats["sinks"]["hung"]["not_evaluated"] == 0
    assert stats["not_evaluated_by_reason"] == {"shutdown": 2 * JOBS}
    assert len(p.spans()) == JOBS and stats["dropped_at_shutdown"] == 0
    assert p.exporter.export([]) == SpanExportResult.FAILURE  # the exporter was shut down
