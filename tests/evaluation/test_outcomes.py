"""An evaluation that errored or was skipped is never shown or counted as a pass or a fail (issue 11).

Through the real pipeline (OTel SDK, in-memory exporters, Logs and Metrics SDKs): enriched span attributes
and events, late child ``evaluation`` spans, the log event, metrics, ``stats()`` and the monitor.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace.evaluation import ProductionMonitor, SkipEvaluation, evaluator
from evaltrace.evaluation.runner import failed_result, skipped_result
from evaltrace.report import build_report
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, wait_until
from .log_records import InMemoryLogRecordExporter, event_record


@evaluator(name="good")
def good(trace: Trace) -> float:
    return 0.9


@evaluator(name="bad", threshold=0.5)
def bad(trace: Trace) -> float:
    return 0.2


@evaluator(name="broken")
def broken(trace: Trace) -> bool:
    raise ConnectionError("judge unreachable")


@evaluator(name="needs_ref")
def needs_ref(trace: Trace) -> bool:
    raise SkipEvaluation("no reference answer")


def events_of(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {
        str(e.attributes["gen_ai.evaluation.name"]): dict(e.attributes)  # type: ignore[index]
        for e in span.events
        if e.name == "gen_ai.evaluation.result" and e.attributes
    }


def test_enriched_span_keeps_errors_and_skips_apart_from_verdicts(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([good, bad, broken, needs_ref])
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    span = p.one("chat")
    attrs = dict(span.attributes or {})
    evals = {k: v for k, v in attrs.items() if k.startswith("evaltrace.eval.")}
    assert evals == {
        "evaltrace.eval.good.outcome": "pass",
        "evaltrace.eval.good.score": 0.9,
        "evaltrace.eval.good.passed": True,
        "evaltrace.eval.bad.outcome": "fail",
        "evaltrace.eval.bad.score": 0.2,
        "evaltrace.eval.bad.passed": False,
        "evaltrace.eval.broken.outcome": "error",
        "evaltrace.eval.broken.error_type": "ConnectionError",
        "evaltrace.eval.needs_ref.outcome": "not_evaluated",
        "evaltrace.eval.needs_ref.skip_reason": "no reference answer",
        "evaltrace.eval.failed": True,  # bad failed; broken is not in it
        "evaltrace.eval.errors": ("broken",),
        "evaltrace.eval.not_evaluated": ("needs_ref",),
    }
    assert span.status.status_code is StatusCode.UNSET  # an evaluation's error is not the application's
    events = events_of(span)
    assert events["good"]["gen_ai.evaluation.score.label"] == "pass"
    assert events["bad"]["gen_ai.evaluation.score.label"] == "fail"
    assert events["broken"]["error.type"] == "ConnectionError"
    assert "gen_ai.evaluation.score.label" not in events["broken"]
    assert "gen_ai.evaluation.score.value" not in events["broken"]
    assert events["needs_ref"]["gen_ai.evaluation.score.label"] == "not_evaluated"
    assert events["needs_ref"]["gen_ai.evaluation.explanation"] == "no reference answer"
    assert "error.type" not in events["needs_ref"]


def test_span_whose_evaluators_all_errored_or_skipped_never_reads_as_passed(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([broken, needs_ref])
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    attrs = dict(p.one("chat").attributes or {})
    assert "evaltrace.eval.failed" not in attrs  # nothing judged: "failed=False" would read as all passed
    assert not any(k.endswith(".passed") or k.endswith(".score") for k in attrs)
    assert attrs["evaltrace.eval.errors"] == ("broken",)
    assert attrs["evaltrace.eval.not_evaluated"] == ("needs_ref",)


def test_late_child_spans_are_error_only_when_the_evaluation_errored(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    def late(function: Any) -> Any:
        def wrapped(trace: Trace) -> Any:
            release.wait(5)
            return function.evaluate(trace, None)

        return evaluator(name=function.name, threshold=0.5)(wrapped)

    p = make_pipeline([late(good), late(bad), late(broken), late(needs_ref)], hold_timeout_s=0.01)
    with p.tracer.start_as_current_span("agent"):
        pass
    assert wait_until(lambda: len(p.by_name("agent")) == 1)
    release.set()
    p.flush()
    children = {s.name.removeprefix("evaluation "): s for s in p.spans() if s.name.startswith("evaluation ")}
    assert {name: s.status.status_code for name, s in children.items()} == {
        "good": StatusCode.UNSET,
        "bad": StatusCode.UNSET,  # judging the output a fail is the evaluation working, not failing
        "broken": StatusCode.ERROR,
        "needs_ref": StatusCode.UNSET,
    }
    assert children["broken"].status.description == "ConnectionError"
    broken_attrs = dict(children["broken"].attributes or {})
    assert broken_attrs["evaltrace.eval.broken.outcome"] == "error"
    assert "evaltrace.eval.broken.passed" not in broken_attrs and "evaltrace.eval.failed" not in broken_attrs
    skipped_attrs = dict(children["needs_ref"].attributes or {})
    assert skipped_attrs["evaltrace.eval.needs_ref.outcome"] == "not_evaluated"
    assert "evaltrace.eval.needs_ref.passed" not in skipped_attrs
    assert dict(children["bad"].attributes or {})["evaltrace.eval.bad.passed"] is False
    # The report counts each late result once, on the evaluated span (not again on its evaluation span).
    report = build_report(p.spans(), None)
    assert sorted((r.span_name, r.name, r.outcome) for r in report.scores) == [
        ("agent", "bad", "fail"),
        ("agent", "broken", "error"),
        ("agent", "good", "pass"),
        ("agent", "needs_ref", "not_evaluated"),
    ]


def test_log_events_carry_error_type_and_no_verdict(make_pipeline: MakePipeline) -> None:
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline([broken, needs_ref], logger_provider=provider)
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    events = [event_record(r.log_record) for r in logs.get_finished_logs()]
    records = {attributes["gen_ai.evaluation.name"]: attributes for _, attributes in events}
    assert records["broken"] == {
        "gen_ai.evaluation.name": "broken",
        "gen_ai.evaluation.explanation": "evaluator failed: ConnectionError: judge unreachable",
        "error.type": "ConnectionError",
    }
    assert records["needs_ref"] == {
        "gen_ai.evaluation.name": "needs_ref",
        "gen_ai.evaluation.score.label": "not_evaluated",
        "gen_ai.evaluation.explanation": "no reference answer",
    }
    provider.shutdown()


def test_metrics_count_outcomes_and_passed_only_for_verdicts(make_pipeline: MakePipeline) -> None:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    p = make_pipeline([good, bad, broken, needs_ref], meter_provider=meter_provider)
    for _ in range(2):
        with p.tracer.start_as_current_span("s"):
            pass
    p.flush()
    data = reader.get_metrics_data()
    assert data is not None
    (count,) = [
        m
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "evaltrace.evaluation.count"
    ]
    seen = {
        (
            dp.attributes["evaltrace.evaluator"],
            dp.attributes["evaltrace.evaluation.outcome"],
            dp.attributes.get("evaltrace.evaluation.passed"),
        ): dp.value
        for dp in count.data.data_points  # type: ignore[attr-defined]
    }
    assert seen == {
        ("good", "pass", True): 2,
        ("bad", "fail", False): 2,
        ("broken", "error", None): 2,
        ("needs_ref", "not_evaluated", None): 2,
    }
    meter_provider.shutdown()


def test_judge_outage_leaves_the_pass_rate_and_counts_errors(make_pipeline: MakePipeline) -> None:
    outage = {"on": False}

    @evaluator(name="judge")
    def judge(trace: Trace) -> bool:
        if outage["on"]:
            raise TimeoutError("judge did not answer")
        return True

    p = make_pipeline([judge])
    for on in (False, False, True, True, True, True):
        outage["on"] = on
        with p.tracer.start_as_current_span("s"):
            pass
        p.flush()
    stats = p.processor.stats()
    per = stats["evaluators"]["judge"]
    assert (per["evaluated"], per["passed"], per["failed"], per["errors"], per["skipped"]) == (6, 2, 0, 4, 0)
    assert per["pass_rate"] == 1.0 and per["error_rate"] == pytest.approx(4 / 6)
    assert (stats["passed"], stats["failed"], stats["errors"]) == (2, 0, 4)
    health = stats["monitor"]["judge"]
    assert health["status"] == "healthy" and health["pass_rate"] == 1.0 and health["sample_count"] == 2
    assert health["errors"] == 4 and health["error_rate"] == pytest.approx(4 / 6)


def _judge(passed: bool) -> EvaluationResult:
    return EvaluationResult(evaluator="judge", passed=passed, score=float(passed))


def test_monitor_counts_errors_and_skips_apart_within_the_window() -> None:
    now = [1000.0]
    monitor = ProductionMonitor(window_s=60, clock=lambda: now[0])
    named = type("E", (), {"name": "judge", "version": None})()
    for passed in (True, True, True, False):
        monitor.record(_judge(passed))
    for _ in range(3):
        monitor.record(failed_result(named, "timeout", "slow", timeout=True))
    monitor.record(skipped_result(named, "no question"))
    health = monitor.health()["judge"]
    assert (health.sample_count, health.errors, health.skipped) == (4, 3, 1)
    assert health.pass_rate == 0.75 and health.status == "warning"  # judged only: 3 of 4
    assert health.error_rate == pytest.approx(3 / 7)
    now[0] += 61
    late = monitor.health()["judge"]
    assert (late.sample_count, late.errors, late.skipped, late.error_rate) == (0, 0, 0, None)


def test_monitor_with_only_errors_is_insufficient_data_not_critical() -> None:
    monitor = ProductionMonitor()
    named = type("E", (), {"name": "judge", "version": None})()
    for _ in range(5):
        monitor.record(failed_result(named, "ConnectError", "judge down"))
    health = monitor.health()["judge"]
    assert health.status == "insufficient_data" and health.pass_rate is None
    assert health.errors == 5 and health.error_rate == 1.0
