"""Results on every OTel channel in the spec's form: score histogram, pass/error counters, event attributes.

Real SDK throughout: a MeterProvider with an InMemoryMetricReader, a LoggerProvider with an in-memory log
exporter, and the processor in a real TracerProvider (``make_pipeline``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from evaltrace.evaluation import evaluator
from evaltrace.evaluation.telemetry import MAX_METRIC_EVALUATOR_NAMES, NameGuard, PipelineMetrics
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline
from .log_records import InMemoryLogRecordExporter, event_record

EVENT_SPEC_KEYS = {
    "gen_ai.evaluation.name",
    "gen_ai.evaluation.score.value",
    "gen_ai.evaluation.score.label",
    "gen_ai.evaluation.explanation",
    "gen_ai.response.id",
    "error.type",
}


@evaluator(name="tone_of_voice_v2", version="2.1", evaluator_type="custom_rubric")
def tone(trace: Trace) -> EvaluationResult:
    return EvaluationResult(
        evaluator="tone_of_voice_v2", passed=True, score=0.8, reason="polite", detail={"label": "polite"}
    )


@evaluator(name="brevity")
def brevity(trace: Trace) -> float:
    return 0.2  # below the 0.5 threshold: a fail with a score


@evaluator(name="flaky_judge")
def flaky(trace: Trace) -> bool:
    raise ConnectionError("judge unreachable")


@pytest.fixture
def metering() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


@pytest.fixture
def logs() -> Iterator[tuple[LoggerProvider, InMemoryLogRecordExporter]]:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def test_score_histogram_and_counters_keep_custom_evaluator_names(
    make_pipeline: MakePipeline, metering: tuple[MeterProvider, InMemoryMetricReader]
) -> None:
    meter_provider, reader = metering
    p = make_pipeline([tone, brevity, flaky], meter_provider=meter_provider, max_retries=0)
    for _ in range(2):
        with p.tracer.start_as_current_span("chat"):
            pass
    p.flush()
    points = _points(reader)

    histogram = {tuple(sorted(dp.attributes.items())): dp for dp in points["gen_ai.evaluation.score"]}
    assert set(histogram) == {
        (("evaltrace.evaluation.outcome", "pass"), ("gen_ai.evaluation.name", "tone_of_voice_v2")),
        (("evaltrace.evaluation.outcome", "fail"), ("gen_ai.evaluation.name", "brevity")),
    }, "an errored evaluation has no score to record; a custom name is kept as is"
    tone_point = histogram[(("evaltrace.evaluation.outcome", "pass"), ("gen_ai.evaluation.name", "tone_of_voice_v2"))]
    assert isinstance(tone_point, HistogramDataPoint)
    assert (tone_point.count, tone_point.sum) == (2, pytest.approx(1.6))
    # Deciles for 0-1 scores: 0.8 falls in (0.7, 0.8], not in the SDK default's first bucket.
    assert tone_point.explicit_bounds[:11] == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    assert tone_point.bucket_counts[8] == 2

    passes = {dp.attributes["evaltrace.evaluator"]: dp.value for dp in points["evaltrace.evaluation.passes"]}
    assert passes == {"tone_of_voice_v2": 2}
    errors = {
        (dp.attributes["evaltrace.evaluator"], dp.attributes["error.type"]): dp.value
        for dp in points["evaltrace.evaluation.errors"]
    }
    assert errors == {("flaky_judge", "ConnectionError"): 2}


def test_metric_names_beyond_the_bound_go_to_other(metering: tuple[MeterProvider, InMemoryMetricReader]) -> None:
    meter_provider, reader = metering
    metrics = PipelineMetrics(meter_provider, lambda: 0, dict, dict, max_evaluator_names=2)
    for name in ("first", "second", "third", "fourth", "first"):
        metrics.record_result(EvaluationResult(evaluator=name, passed=True, score=1.0))
    names = {dp.attributes["gen_ai.evaluation.name"]: dp.count for dp in _points(reader)["gen_ai.evaluation.score"]}
    assert names == {"first": 2, "second": 1, "_other": 2}


def test_name_guard_keeps_the_first_names_for_good() -> None:
    guard = NameGuard(limit=3)
    assert [guard(n) for n in ("a", "b", "c", "d", "a", "d")] == ["a", "b", "c", "_other", "a", "_other"]
    assert MAX_METRIC_EVALUATOR_NAMES == 200


def test_event_attributes_follow_the_spec_on_span_events_and_log_records(
    make_pipeline: MakePipeline, logs: tuple[LoggerProvider, InMemoryLogRecordExporter]
) -> None:
    logger_provider, exporter = logs
    p = make_pipeline([tone, flaky], logger_provider=logger_provider, max_retries=0)
    with p.tracer.start_as_current_span("chat", attributes={"gen_ai.response.id": "chatcmpl-42"}):
        pass
    p.flush()
    span_events = {
        e.attributes["gen_ai.evaluation.name"]: dict(e.attributes or {})
        for e in p.one("chat").events
        if e.name == "gen_ai.evaluation.result"
    }
    records = [event_record(r.log_record) for r in exporter.get_finished_logs()]
    log_events = {
        attributes["gen_ai.evaluation.name"]: attributes
        for name, attributes in records
        if name == "gen_ai.evaluation.result"
    }
    expected = {
        "tone_of_voice_v2": {
            "gen_ai.evaluation.name": "tone_of_voice_v2",
            "gen_ai.evaluation.score.value": 0.8,
            "gen_ai.evaluation.score.label": "polite",
            "gen_ai.evaluation.explanation": "polite",
            "gen_ai.response.id": "chatcmpl-42",
        },
        "flaky_judge": {  # the evaluation itself failed: error.type, and no label or score that reads as a verdict
            "gen_ai.evaluation.name": "flaky_judge",
            "gen_ai.evaluation.explanation": span_events["flaky_judge"].get("gen_ai.evaluation.explanation"),
            "gen_ai.response.id": "chatcmpl-42",
            "error.type": "ConnectionError",
        },
    }
    assert span_events == expected
    assert log_events == expected
    for attributes in (*span_events.values(), *log_events.values()):
        assert set(attributes) <= EVENT_SPEC_KEYS, "provenance is opt-in: only spec attributes by default"


@pytest.mark.parametrize("late", [False, True], ids=["enriched-span", "late-evaluation-span"])
def test_provenance_is_added_when_opted_in(
    make_pipeline: MakePipeline, logs: tuple[LoggerProvider, InMemoryLogRecordExporter], late: bool
) -> None:
    logger_provider, exporter = logs
    options: dict[str, Any] = {"hold_timeout_s": 0.0} if late else {}
    p = make_pipeline([tone], logger_provider=logger_provider, evaluation_provenance=True, **options)
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    carrier = p.one("evaluation tone_of_voice_v2") if late else p.one("chat")
    (event,) = [e for e in carrier.events if e.name == "gen_ai.evaluation.result"]
    (record,) = [r.log_record for r in exporter.get_finished_logs()]
    for attributes in (dict(event.attributes or {}), event_record(record)[1]):
        assert attributes["evaltrace.evaluator.version"] == "2.1"
        assert attributes["evaltrace.evaluator.type"] == "custom_rubric"
