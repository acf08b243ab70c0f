"""A score sink that raises: every error is counted, and what it was writing is written elsewhere or counted lost.

The sinks are the real ones failing for real (a JSONL sink or dead-letter file whose path is a directory, a score
the JSON encoder refuses), plus one user-written sink (the public ``ScoreSink`` protocol) that raises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace.evaluation import JsonlScoreSink, LangfuseScoreSink, RetryPolicy, evaluator
from evaltrace.evaluation.sinks import SinkResult, SinkWorker
from evaltrace.evaluation.sinks.deadletter import not_evaluated_lines
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated
from evaltrace.schema import Score, Trace, score_id

from .conftest import MakePipeline

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
ONCE = RetryPolicy(max_retries=0)  # the first failure is final: no backoff to wait for
FAST = RetryPolicy(max_retries=1, initial_backoff_s=0.001, max_backoff_s=0.01)


def _records(count: int) -> list[NotEvaluated]:
    return [
        NotEvaluated(
            trace_id=TRACE,
            observation_id=SPAN,
            span_id=SPAN,
            evaluator=f"judge{i}",
            evaluator_version=None,
            reason="shutdown",
        )
        for i in range(count)
    ]


def _unwritable(tmp_path: Path) -> Path:
    path = tmp_path / "a-directory.jsonl"  # opening it for appending raises IsADirectoryError
    path.mkdir()
    return path


def test_a_jsonl_sink_that_cannot_write_its_not_evaluated_records_writes_them_to_the_dead_letter_file(
    tmp_path: Path,
) -> None:
    # Before: logged, then neither written anywhere nor counted, and no internal error counted.
    dead = tmp_path / "dead.jsonl"
    worker = SinkWorker(JsonlScoreSink(_unwritable(tmp_path)), dead_letter_path=dead)
    try:
        worker.not_evaluated(_records(3))
        assert (worker.stats.not_evaluated, worker.stats.not_evaluated_dropped, worker.stats.internal_errors) == (
            3,
            0,
            1,
        )
        kept = [json.loads(line)["not_evaluated"] for line in not_evaluated_lines(dead)]
        assert [record["evaluator"] for record in kept] == ["judge0", "judge1", "judge2"]
    finally:
        worker.shutdown(5)


def test_not_evaluated_records_written_nowhere_are_counted_lost(tmp_path: Path) -> None:
    # The JSONL sink's file fails and there is no dead-letter file: counted; a non-JSONL sink whose dead-letter
    # file fails: counted too.
    alone = SinkWorker(JsonlScoreSink(_unwritable(tmp_path)), dead_letter_path=None)
    (tmp_path / "dead").mkdir()
    remote = SinkWorker(
        LangfuseScoreSink("http://127.0.0.1:9", "pk", "sk"),  # never called: the records go to its dead-letter file
        dead_letter_path=_unwritable(tmp_path / "dead"),
    )
    try:
        alone.not_evaluated(_records(2))
        remote.not_evaluated(_records(4))
        for worker, count in ((alone, 2), (remote, 4)):
            stats = worker.stats
            assert (stats.not_evaluated, stats.not_evaluated_dropped, stats.internal_errors) == (0, count, 1)
    finally:
        alone.shutdown(5)
        remote.shutdown(5)


def _unencodable(name: str) -> Score:
    return Score(
        id=score_id(TRACE, SPAN, name, "v1"),
        name=name,
        value=1.0,
        data_type="NUMERIC",
        trace_id=TRACE,
        observation_id=SPAN,
        source="EVAL",
        metadata={"raw": object()},  # the JSON encoder refuses it: in the sink's export and in the dead-letter file
    )


def test_scores_the_dead_letter_file_refuses_are_counted_dropped_never_lost_uncounted(tmp_path: Path) -> None:
    # Before: the dead-letter write raised ValueError (only OSError was caught); the give-up that followed found
    # the batch already taken, so the scores were neither delivered, dead-lettered nor dropped.
    dead = tmp_path / "dead.jsonl"
    worker = SinkWorker(
        JsonlScoreSink(tmp_path / "scores.jsonl"), dead_letter_path=dead, retry=ONCE, schedule_delay_s=0.01
    )
    worker.submit([_unencodable("a"), _unencodable("b")])
    assert worker.force_flush(10)
    worker.shutdown(5)
    stats = worker.stats
    assert stats.submitted == stats.successes + stats.dead_lettered + stats.dropped == 2
    assert (stats.successes, stats.dead_lettered, stats.dropped) == (0, 0, 2)
    assert stats.internal_errors == 2  # the sink's export raised, then the dead-letter write
    assert worker._thread is not None and not worker._thread.is_alive()  # ended at shutdown, not killed by the error


class _BrokenSink:
    """A user's sink (the public ``ScoreSink`` protocol) whose export and shutdown raise."""

    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    def export(self, batch: Sequence[Score]) -> SinkResult:
        self.calls += 1
        raise RuntimeError("the sink's client is misconfigured")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        raise RuntimeError("closing failed")


def test_a_sink_that_raises_is_retried_dead_lettered_and_counted_in_the_pipelines_internal_errors(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    @evaluator(name="relevance")
    def relevance(trace: Trace) -> float:
        return 0.9

    sink = _BrokenSink()
    p = make_pipeline([relevance], sinks=[sink], sink_schedule_delay_s=0.01, sink_retry=FAST)
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    stats: dict[str, Any] = p.processor.stats()
    sink_stats = stats["sinks"]["broken"]
    assert (sink_stats["successes"], sink_stats["retries"], sink_stats["dead_lettered"]) == (0, 1, 1)
    assert sink_stats["internal_errors"] == sink.calls == 2  # each raising export, retried as a transient failure
    assert stats["internal_errors"] == 2
    p.processor.shutdown()
    stats = p.processor.stats()
    assert stats["sinks"]["broken"]["internal_errors"] == stats["internal_errors"] == 3  # and its shutdown
