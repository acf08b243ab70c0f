"""A ``force_flush`` that answers 0, "" or raises is a failed flush everywhere we combine flushes; None is success.

The objects flushed are often the application's (exporters, span processors, score sinks). OTel's contract is a
bool; None is what older SDK base classes return (the SDK counts it as success); any other falsy answer must not
read as flushed, and an exception must be reported as False, never raised into the application's flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal.deferred_evaluation import DeferredEvaluation
from evaltrace._internal.export_queue import ExportQueue
from evaltrace._internal.flush_results import flush_call, flush_ok
from evaltrace.context import StampingPipeline
from evaltrace.evaluation.processor import EvaluationSpanProcessor
from evaltrace.evaluation.sinks.base import SinkResult
from evaltrace.evaluation.sinks.worker import SinkWorker
from evaltrace.schema import Score


class _Raises(Exception):
    pass


def _answer(answer: object) -> object:
    if isinstance(answer, type) and issubclass(answer, Exception):
        raise answer("flush failed")
    return answer


# (what force_flush answers, what the combined flush must say)
ANSWERS = [
    pytest.param(True, True, id="True"),
    pytest.param(None, True, id="None-legacy"),
    pytest.param(False, False, id="False"),
    pytest.param(0, False, id="zero"),
    pytest.param("", False, id="empty-str"),
    pytest.param(_Raises, False, id="raises"),
]


class _Exporter(SpanExporter):
    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.flushes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> Any:
        self.flushes += 1
        return _answer(self.answer)


class _Processor(SpanProcessor):
    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.flushes = 0

    def force_flush(self, timeout_millis: int = 30_000) -> Any:
        self.flushes += 1
        return _answer(self.answer)


class _Sink:
    name = "answers"

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.flushes = 0

    def export(self, batch: Sequence[Score]) -> SinkResult:
        return SinkResult.success()

    def force_flush(self, timeout_millis: int = 30_000) -> Any:
        self.flushes += 1
        return _answer(self.answer)

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_export_queue_reads_its_exporters_flush_answer(answer: object, expected: bool) -> None:
    exporter = _Exporter(answer)
    queue = ExportQueue(exporter, "answers", synchronous=True)
    try:
        assert queue.force_flush(5_000) is expected
        assert exporter.flushes == 1
    finally:
        queue.shutdown(1_000)


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_sink_worker_reads_its_sinks_flush_answer(answer: object, expected: bool, tmp_path: Path) -> None:
    sink = _Sink(answer)
    worker = SinkWorker(sink, dead_letter_path=tmp_path / "dead.jsonl", schedule_delay_s=0.01)
    try:
        assert worker.force_flush(5.0) is expected
        assert sink.flushes == 1
    finally:
        worker.shutdown(1.0)


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_evaluation_processor_reads_its_sinks_and_downstream_flush_answers(
    answer: object, expected: bool, tmp_path: Path
) -> None:
    for case in ("sink", "downstream"):
        sink, processor = (
            _Sink(answer if case == "sink" else True),
            _Processor(answer if case == "downstream" else True),
        )
        evaluation = EvaluationSpanProcessor(downstream=[processor], sinks=[sink], dead_letter_dir=tmp_path / case)
        try:
            assert evaluation.force_flush(5_000) is expected, case
            assert (sink.flushes, processor.flushes) == (1, 1)  # one failing does not skip the other
        finally:
            evaluation.shutdown(1_000)


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_deferred_evaluation_reads_its_downstream_flush_answer(answer: object, expected: bool) -> None:
    failing, after = _Processor(answer), _Processor(True)
    deferred = DeferredEvaluation(lambda: _Processor(True), [failing, after])
    assert deferred.force_flush(5_000) is expected
    assert after.flushes == 1  # the next processor is still flushed


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_configure_pipeline_reads_its_processors_flush_answer(answer: object, expected: bool) -> None:
    failing, after = _Processor(answer), _Processor(True)
    pipeline = StampingPipeline([failing, after])
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(pipeline)
    assert pipeline.force_flush(5_000) is expected
    assert after.flushes == 1


class _BoolRaises:
    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


def test_flush_ok_and_flush_call_answer_a_bool() -> None:
    assert [flush_ok(v) for v in (True, None, 1, "yes", False, 0, "", [], _BoolRaises())] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
    ]

    def boom(timeout_millis: int) -> bool:
        raise RuntimeError("down")

    assert flush_call(boom, 10, "flushing a test exporter") is False
