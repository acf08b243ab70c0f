from __future__ import annotations

import threading

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import set_span_in_context

import evaltrace.evaluation as evaluation
from evaltrace.evaluation import EvaluatorSpec, ExportSampling, ProductionMonitor, evaluator, health_status
from evaltrace.exceptions import ConfigError
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline
from .log_records import InMemoryLogRecordExporter, event_record


@evaluator(name="ok")
def ok(trace: Trace) -> bool:
    return True


@evaluator(name="bad")
def bad(trace: Trace) -> bool:
    return False


def test_log_event_parented_to_the_evaluated_span(make_pipeline: MakePipeline) -> None:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline([ok], logger_provider=logger_provider)
    with p.tracer.start_as_current_span("chat", attributes={"gen_ai.response.id": "resp_1"}) as span:
        ctx = span.get_span_context()
    p.flush()
    (record,) = [r.log_record for r in logs.get_finished_logs()]
    name, attributes = event_record(record)
    assert name == "gen_ai.evaluation.result"
    assert (record.trace_id, record.span_id) == (ctx.trace_id, ctx.span_id)
    assert attributes == {
        "gen_ai.evaluation.name": "ok",
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.response.id": "resp_1",
    }
    logger_provider.shutdown()


def test_metrics_mirror_stats(make_pipeline: MakePipeline) -> None:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    p = make_pipeline([ok, bad], meter_provider=meter_provider)
    for _ in range(3):
        with p.tracer.start_as_current_span("s"):
            pass
    p.flush()
    data = reader.get_metrics_data()
    assert data is not None and data.resource_metrics, "no metrics were recorded"
    points: dict[str, list[object]] = {}
    for resource_metrics in data.resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    counts = {
        (dp.attributes["evaltrace.evaluator"], dp.attributes["evaltrace.evaluation.passed"]): dp.value  # type: ignore[attr-defined]
        for dp in points["evaltrace.evaluation.count"]
    }
    assert counts == {("ok", True): 3, ("bad", False): 3}
    rates = {dp.attributes["evaltrace.evaluator"]: dp.value for dp in points["evaltrace.evaluation.pass_rate"]}  # type: ignore[attr-defined]
    assert rates == {"ok": 1.0, "bad": 0.0}
    assert "evaltrace.evaluation.duration" in points and "evaltrace.evaluation.queue_size" in points
    meter_provider.shutdown()


@pytest.mark.parametrize(
    ("rate", "samples", "status"),
    [
        (None, 0, "insufficient_data"),
        (0.9, 10, "healthy"),
        (0.85, 10, "healthy"),
        (0.8, 10, "warning"),
        (0.69, 10, "critical"),
    ],
)
def test_health_thresholds(rate: float | None, samples: int, status: str) -> None:
    assert health_status(rate, samples) == status


def test_monitor_window_and_previews() -> None:
    now = [1000.0]
    monitor = ProductionMonitor(window_s=60, clock=lambda: now[0])
    monitor.register("quiet")
    for passed in (True, True, False):
        monitor.record(EvaluationResult(evaluator="judge", passed=passed, score=float(passed)), "q" * 500, "a")
    monitor.record(EvaluationResult(evaluator="judge", passed=False, status="failed"))
    health = monitor.health()
    assert health["quiet"].status == "insufficient_data"
    assert health["judge"].sample_count == 3 and health["judge"].status == "critical"
    assert health["judge"].average_score == pytest.approx(2 / 3)
    assert len(monitor.samples("judge")[0].query_preview) == 200
    now[0] += 61
    assert monitor.health()["judge"].status == "insufficient_data"


def test_processor_exposes_monitor_in_stats(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([ok, EvaluatorSpec(bad, sample_rate=0.0)])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    monitor = p.processor.stats()["monitor"]
    assert monitor["ok"]["status"] == "healthy" and monitor["bad"]["status"] == "insufficient_data"


def test_export_sampling_keeps_failed_and_over_budget_traces(make_pipeline: MakePipeline) -> None:
    verdict = {"pass": True}

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        return verdict["pass"]

    sampling = ExportSampling(keep_rate=0.0, max_tokens=100)
    p = make_pipeline([EvaluatorSpec(quality, trace_level=True)], export_sampling=sampling, trace_quiet_period_s=0)

    def run(name: str, tokens: int = 0) -> None:
        with p.tracer.start_as_current_span(name):
            with p.tracer.start_as_current_span(name + ".child", attributes={"gen_ai.usage.output_tokens": tokens}):
                pass
        p.flush()

    run("good")
    verdict["pass"] = False
    run("failing")
    verdict["pass"] = True
    run("costly", tokens=500)
    names = sorted(s.name for s in p.spans())
    assert names == ["costly", "costly.child", "failing", "failing.child"]
    stats = p.processor.stats()["export_sampling"]
    assert stats["kept_traces"] == 2 and stats["discarded_traces"] == 1 and stats["parked_spans"] == 0


def test_export_sampling_releases_parked_traces_on_shutdown(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([EvaluatorSpec(ok, trace_level=True)], export_sampling=ExportSampling(keep_rate=0.0))
    root = p.tracer.start_span("root")
    with p.tracer.start_as_current_span("orphan.child", context=set_span_in_context(root)):
        pass
    assert p.spans() == []
    p.processor.shutdown()
    assert [s.name for s in p.spans()] == ["orphan.child"]
    root.end()


def test_export_sampling_bound_releases_oldest_in_full(make_pipeline: MakePipeline) -> None:
    p = make_pipeline(export_sampling=ExportSampling(keep_rate=0.0, max_traces=1))
    roots = [p.tracer.start_span(f"r{i}") for i in range(3)]
    for i, root in enumerate(roots):  # three traces' children while their roots are open
        with p.tracer.start_as_current_span(f"c{i}", context=set_span_in_context(root)):
            pass
    assert {s.name for s in p.spans()} == {"c0", "c1"}
    assert p.processor.stats()["export_sampling"]["released_unsampled"] == 2
    for root in roots:
        root.end()


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="hold_timeout"):
        evaluation.EvaluationSpanProcessor(hold_timeout=1)
    with pytest.raises(ConfigError):
        evaluation.EvaluationSpanProcessor(max_queue_size=0)


def test_public_names_are_sorted_and_exist() -> None:
    assert evaluation.__all__ == sorted(evaluation.__all__)
    for name in evaluation.__all__:
        assert hasattr(evaluation, name)


def test_concurrent_span_ends_are_all_forwarded_once(make_pipeline: MakePipeline) -> None:
    # 200 spans from 4 threads: at load they may outlast the default 2 s hold (wall-clock time), then go out
    # unenriched with carrier spans; this test is about forwarding each span once, enriched.
    p = make_pipeline([ok], max_queue_size=10_000, hold_timeout_s=600)

    def worker(n: int) -> None:
        for i in range(50):
            with p.tracer.start_as_current_span(f"t{n}-{i}"):
                pass

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    p.flush()
    names = [s.name for s in p.spans()]
    assert len(names) == 200 == len(set(names))
    assert all(s.attributes["evaltrace.eval.ok.passed"] is True for s in p.spans())
