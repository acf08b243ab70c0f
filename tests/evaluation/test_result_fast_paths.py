"""The per-result fast paths (issue 28) build exactly what the general paths build.

Each cheap evaluator's answer becomes a result, is stamped, and is turned into event and span attributes and
metrics once per evaluated span; those steps skip validation and helper calls for values our own code made. Each
test here compares a fast path with the general one it replaces: the same values, the same ``__dict__`` order and
the same fields set, for every kind of answer, status and evaluator shape.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import inspect
import sys
import threading
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import semconv, tracing, trusted_models
from evaltrace._internal.tracing import SUPPRESS_EVALTRACE_KEY
from evaltrace.evaluation import evaluator
from evaltrace.evaluation.convert import (
    _label,
    error_type,
    evaluation_event_attributes,
    judge_trace_id,
    result_outcome,
    span_result_attributes,
)
from evaltrace.evaluation.runner import (
    arun_evaluator,
    call_evaluator,
    failed_result,
    is_async_evaluator,
    skipped_result,
    stamp,
)
from evaltrace.evaluation.telemetry import PipelineMetrics
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import EvaluationResult, Trace
from evaltrace.schema._base import whole_ms

from .helpers import make_trace

T0 = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _same_model(built: EvaluationResult, reference: EvaluationResult, *, ignore: tuple[str, ...] = ()) -> None:
    """Equal values (but ``ignore``), the same field order and the same fields set."""
    assert type(built) is type(reference)
    assert list(built.__dict__) == list(reference.__dict__)
    assert {k: v for k, v in built.__dict__.items() if k not in ignore} == {
        k: v for k, v in reference.__dict__.items() if k not in ignore
    }
    assert built.model_fields_set == reference.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None


ANSWERS: list[tuple[Any, dict[str, Any]]] = [
    (True, {"passed": True}),
    (False, {"passed": False}),
    (0.7, {"passed": True, "score": 0.7}),
    (0, {"passed": False, "score": 0.0}),
    ("relevant", {"passed": True, "reason": "relevant", "detail": {"label": "relevant"}}),
    ("Fail", {"passed": False, "reason": "Fail", "detail": {"label": "Fail"}}),
]


@pytest.mark.parametrize(("answer", "fields"), ANSWERS)
@pytest.mark.parametrize("version", [None, "v3"])
@pytest.mark.parametrize("is_async", [False, True])
def test_a_function_evaluators_answer_is_the_validated_result_of_the_same_fields(
    answer: Any, fields: dict[str, Any], version: str | None, is_async: bool
) -> None:
    if is_async:

        async def judge(trace: Trace) -> Any:
            return answer

    else:

        def judge(trace: Trace) -> Any:
            return answer

    ev = evaluator(name="judge", version=version, evaluator_type="deterministic")(judge)
    produced = ev.evaluate(make_trace(), None)
    built = asyncio.run(produced) if inspect.isawaitable(produced) else produced
    assert isinstance(built, EvaluationResult)
    given = {"evaluator": "judge", "evaluator_type": "deterministic", **fields}
    if version is not None:
        given["evaluator_version"] = version
    reference = EvaluationResult(**given, started_at=built.started_at, evaluation_id=built.evaluation_id)
    reference.model_fields_set.discard("evaluation_id")  # given here only to compare values: ours sets none
    _same_model(built, reference)
    assert built.started_at == built.finished_at and built.started_at.tzinfo is dt.UTC
    assert built.evaluation_id.startswith("eval_")
    if not is_async:
        second = ev.evaluate(make_trace(), None)
        assert isinstance(second, EvaluationResult)
        assert second.evaluation_id != built.evaluation_id
        assert second.detail is not built.detail and second.model_fields_set is not built.model_fields_set
        built.detail["mine"] = 1
        assert "mine" not in second.detail  # nothing mutable is shared between two results


def test_a_template_refuses_to_share_a_field_that_needs_its_own_value_per_instance() -> None:
    with pytest.raises(TypeError, match=r"\['detail'\] need a value per instance"):
        trusted_models.template(
            EvaluationResult, frozenset({"evaluator", "passed", "started_at", "finished_at", "evaluation_id"})
        )


RESULTS = [
    EvaluationResult(evaluator="judge", passed=True, started_at=T0),
    EvaluationResult(evaluator="", passed=False, score=0.2, started_at=T0),
    EvaluationResult(evaluator="judge", evaluator_version="own", passed=True, started_at=T0),
    EvaluationResult.model_construct(evaluator="judge", passed=True, started_at=T0, finished_at=T0),
]


def _lazy_trace() -> Trace:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    attributes = {"evaltrace.span.kind": "agent", "input.value": '{"q":"Weather?"}', "output.value": '"Sunny."'}
    with provider.get_tracer("test").start_as_current_span("agent", attributes=attributes):
        pass
    (span,) = exporter.get_finished_spans()
    return trace_from_spans([span], span, lazy=True)


class _Versioned:
    name = "named"

    def __init__(self, version: Any) -> None:
        self.version = version


@pytest.mark.parametrize("result", RESULTS)
@pytest.mark.parametrize("version", [None, "v2"])
@pytest.mark.parametrize("lazy", [False, True])
def test_stamping_our_result_class_is_model_copy_of_the_same_update(
    result: EvaluationResult, version: str | None, lazy: bool
) -> None:
    trace: Any = make_trace()
    if lazy:  # the lazily mapped Trace the live pipeline hands over is stamped the same way
        trace = _lazy_trace()
        assert type(trace) is not Trace
    before = dict(result.__dict__), set(result.model_fields_set)
    stamped = stamp(result, _Versioned(version), trace, T0)
    update = {
        "evaluator": result.evaluator or "named",
        "run_id": trace.run_id,
        "case_id": trace.case_id,
        "variant_name": trace.variant_name,
        "started_at": T0,
        "finished_at": stamped.finished_at,
    }
    if version is not None and result.evaluator_version is None:
        update["evaluator_version"] = version
    _same_model(stamped, result.model_copy(update=update))
    assert T0 <= stamped.finished_at <= dt.datetime.now(dt.UTC)
    assert (dict(result.__dict__), set(result.model_fields_set)) == before  # a copy: the result is unchanged
    late = stamp(result, _Versioned(version), trace, dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    assert late.finished_at == late.started_at  # a clock behind the start never makes a negative latency


def test_stamping_with_a_version_that_is_not_a_string_still_validates() -> None:
    with pytest.raises(ValueError, match="evaluator_version"):
        stamp(RESULTS[0], _Versioned(3), make_trace(), T0)


def test_the_evaluator_call_runs_suppressed_in_the_callers_context_and_restores_it() -> None:
    seen: dict[str, Any] = {}

    @evaluator(name="probe")
    def probe(trace: Trace) -> bool:
        seen["suppressed"] = otel_context.get_value(SUPPRESS_EVALTRACE_KEY)
        seen["caller's"] = otel_context.get_value("caller-key")
        return True

    token = otel_context.attach(otel_context.set_value("caller-key", 42))
    try:
        before = otel_context.get_current()
        produced, exc = call_evaluator(probe, make_trace())
        assert exc is None and isinstance(produced, EvaluationResult)
        assert otel_context.get_current() is before
    finally:
        otel_context.detach(token)
    assert seen == {"suppressed": True, "caller's": 42}


def test_the_evaluator_call_on_a_thread_with_nothing_attached_is_suppressed_and_leaves_the_empty_context() -> None:
    """A lane worker's case (nothing attached): the suppressed context built once is used, never the default edited."""
    seen: list[dict[str, Any]] = []

    @evaluator(name="probe")
    def probe(trace: Trace) -> bool:
        seen.append(dict(otel_context.get_current()))
        with tracing.suppress_instrumentation():  # nested use inside the evaluator still works
            seen.append(dict(otel_context.get_current()))
        return True

    def on_a_fresh_thread() -> None:
        before = otel_context.get_current()
        assert before == {}
        for _ in range(2):
            produced, exc = call_evaluator(probe, make_trace())
            assert exc is None and isinstance(produced, EvaluationResult)
        seen.append({"after": otel_context.get_current() is before, "still empty": dict(before)})

    thread = threading.Thread(target=on_a_fresh_thread)
    thread.start()
    thread.join()
    suppressed = {SUPPRESS_EVALTRACE_KEY: True}
    assert seen == [suppressed, suppressed, suppressed, suppressed, {"after": True, "still empty": {}}]
    assert not tracing.is_suppressed()


def test_an_evaluator_that_edits_its_context_in_place_changes_no_later_evaluations_context() -> None:
    """opentelemetry-api 1.30 (our floor) blocks only ``ctx[k] = v``: ``pop``/``update`` on the current context
    edit it in place. The suppressed context shared between evaluations on threads with nothing attached must
    then not be shared, or one evaluator's edit (even removing the suppression) reaches every later evaluation.
    On newer APIs the edits raise, and the result is the same."""
    seen: list[dict[str, Any]] = []

    @evaluator(name="rude")
    def rude(trace: Trace) -> bool:
        current = otel_context.get_current()
        for edit in (lambda: current.update({"tenant": "A"}), lambda: current.pop(SUPPRESS_EVALTRACE_KEY, None)):
            try:
                edit()
            except Exception:  # a Context that refuses changes (opentelemetry-api 1.31+)
                pass
        return True

    @evaluator(name="probe")
    def probe(trace: Trace) -> bool:
        seen.append(dict(otel_context.get_current()))
        return True

    for each in (rude, probe):
        thread = threading.Thread(target=call_evaluator, args=(each, make_trace()))
        thread.start()
        thread.join()
    assert seen == [{SUPPRESS_EVALTRACE_KEY: True}]


class _SyncClass:
    name = "sync"
    version = None

    def evaluate(self, trace: Any, case: Any) -> EvaluationResult:
        return EvaluationResult(evaluator="sync", passed=True)


class _AsyncClass(_SyncClass):
    async def evaluate(self, trace: Any, case: Any) -> EvaluationResult:  # type: ignore[override]
        return EvaluationResult(evaluator="async", passed=True)


class _PartialAsync(_SyncClass):
    def __init__(self) -> None:
        self.evaluate = functools.partial(_AsyncClass.evaluate, self)  # type: ignore[method-assign]


class _StaticAsync(_SyncClass):
    @staticmethod
    async def evaluate(trace: Any, case: Any) -> EvaluationResult:  # type: ignore[override]
        return EvaluationResult(evaluator="static", passed=True)


class _Flagged(_SyncClass):
    is_async = True


SHAPES: list[Any] = [
    _SyncClass(),
    _AsyncClass(),
    _PartialAsync(),
    _StaticAsync(),
    _Flagged(),
    evaluator(lambda trace: True),
    evaluator(name="a")(lambda trace: asyncio.sleep(0, True)),
]


async def _async_answer(trace: Trace) -> bool:
    return True


SHAPES.append(evaluator(_async_answer))
if sys.version_info >= (3, 12):  # a method marked a coroutine function (inspect.markcoroutinefunction, 3.12+)

    class _Marked(_SyncClass):
        pass

    _Marked.evaluate = inspect.markcoroutinefunction(lambda self, trace, case: _AsyncClass().evaluate(trace, case))  # type: ignore[attr-defined,method-assign]
    SHAPES.append(_Marked())


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: type(shape).__name__)
def test_is_async_evaluator_decides_as_inspect_does(shape: Any) -> None:
    expected = bool(getattr(shape, "is_async", False)) or inspect.iscoroutinefunction(shape.evaluate)
    assert is_async_evaluator(shape) is expected


def _reference_event(result: EvaluationResult) -> dict[str, Any]:
    """evaluation_event_attributes as the composition of the public helpers (the code before the fast path)."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": result.evaluator}
    outcome = result_outcome(result)
    label = _label(result, outcome)
    if label is not None:
        attributes["gen_ai.evaluation.score.label"] = label
    if result.score is not None and outcome in ("pass", "fail"):
        attributes["gen_ai.evaluation.score.value"] = float(result.score)
    if result.reason:
        attributes["gen_ai.evaluation.explanation"] = result.reason
    failure = error_type(result) if outcome == "error" else None
    if failure is not None:
        attributes["error.type"] = failure
    judge = judge_trace_id(result)
    if judge is not None:
        attributes[semconv.EVALTRACE_JUDGE_TRACE_ID] = judge
    return attributes


JUDGE = type("E", (), {"name": "judge", "version": None})()
KINDS = [
    EvaluationResult(evaluator="a", passed=True),
    EvaluationResult(evaluator="b", passed=False, score=0.25, reason="too short"),
    EvaluationResult(evaluator="c", passed=True, detail={"label": "polite"}, reason="polite"),
    EvaluationResult(evaluator="d", passed=False, detail={"label": ""}),
    EvaluationResult(evaluator="e", passed=True, detail={"label": 3}, metadata={semconv.JUDGE_TRACE_ID_KEY: "ab" * 32}),
    EvaluationResult(evaluator="f", passed=True, metadata={"other": 1}),
    EvaluationResult(evaluator="g", passed=True, score=1, status="pending"),
    failed_result(JUDGE, "TimeoutError", "slow", timeout=True),
    skipped_result(JUDGE, "no expected answer"),
]


@pytest.mark.parametrize("result", KINDS, ids=lambda r: f"{r.evaluator}-{r.status}")
def test_event_and_span_attributes_are_those_of_the_outcome_and_label_helpers(result: EvaluationResult) -> None:
    built = evaluation_event_attributes(result)
    assert list(built.items()) == list(_reference_event(result).items())  # order included
    outcome = result_outcome(result)
    span = span_result_attributes([result])
    assert span[f"evaltrace.eval.{result.evaluator}.outcome"] == outcome
    if outcome in ("pass", "fail"):
        assert span[f"evaltrace.eval.{result.evaluator}.passed"] is (outcome == "pass")
        assert span["evaltrace.eval.failed"] is (outcome == "fail")
    else:
        assert f"evaltrace.eval.{result.evaluator}.passed" not in span and "evaltrace.eval.failed" not in span


def test_the_metrics_latency_is_whole_ms_for_every_delta() -> None:
    reader = InMemoryMetricReader()
    metrics = PipelineMetrics(MeterProvider(metric_readers=[reader]), lambda: 0, dict, dict)
    # The histogram drops negative records; the floor division equals whole_ms for those too.
    for delta_us in (-1, -999, -1000, -1001, -86_400_000_001):
        finished = T0 + dt.timedelta(microseconds=delta_us)
        assert (finished - T0) // dt.timedelta(milliseconds=1) == whole_ms(T0, finished)
    deltas_us = [0, 1, 999, 1000, 1001, 1_999_999, 86_400_000_000 + 5]
    expected: list[float] = []
    for delta_us in deltas_us:
        finished = T0 + dt.timedelta(microseconds=delta_us)
        result = EvaluationResult.model_construct(evaluator="lat", passed=True, started_at=T0, finished_at=finished)
        metrics.record_result(result)
        expected.append(whole_ms(T0, finished) / 1000)
    data = reader.get_metrics_data()
    assert data is not None
    (histogram,) = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_EVAL_DURATION
    ]
    (point,) = histogram.data.data_points
    assert point.count == len(deltas_us)
    assert point.sum == pytest.approx(sum(expected))
    assert (point.min, point.max) == (min(expected), max(expected))


def test_a_kept_evaluator_name_is_recorded_as_is_and_new_names_past_the_bound_as_other() -> None:
    reader = InMemoryMetricReader()
    metrics = PipelineMetrics(MeterProvider(metric_readers=[reader]), lambda: 0, dict, dict, max_evaluator_names=1)
    for name in ("first", "first", "second"):
        metrics.record_result(EvaluationResult(evaluator=name, passed=True))
    data = reader.get_metrics_data()
    assert data is not None
    names = sorted(
        (point.attributes[semconv.EVALTRACE_EVALUATOR_NAME], point.value)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_EVAL_EVALUATIONS
        for point in metric.data.data_points
    )
    assert names == [("_other", 1), ("first", 2)]


def test_the_loop_path_returns_the_stamped_result_of_a_sync_evaluator() -> None:
    @evaluator(name="inline", version="v1")
    def inline(trace: Trace) -> float:
        return 0.9

    result = asyncio.run(arun_evaluator(inline, make_trace()))
    assert (result.status, result.passed, result.score, result.evaluator_version) == ("completed", True, 0.9, "v1")
    assert (result.run_id, result.case_id, result.variant_name) == ("live", "c1", "svc")
    assert result.model_fields_set >= {"run_id", "case_id", "variant_name", "started_at", "finished_at"}


def test_a_monitor_sample_built_in_one_step_is_the_frozen_dataclass_its_init_builds() -> None:
    import dataclasses

    from evaltrace.evaluation.monitor import PREVIEW_CHARS, MonitorSample, ProductionMonitor

    monitor = ProductionMonitor(clock=lambda: 12.5)
    passed = EvaluationResult(evaluator="judge", passed=True, score=0.75)
    monitor.record(passed, query="q" * 500, output=None, outcome="pass")
    (sample,) = monitor.samples("judge")
    reference = MonitorSample(at=12.5, passed=True, score=0.75, query_preview="q" * PREVIEW_CHARS, output_preview="")
    assert sample == reference and hash(sample) == hash(reference) and repr(sample) == repr(reference)
    assert list(vars(sample).items()) == list(vars(reference).items())  # the same fields, in field order
    assert dataclasses.asdict(sample) == dataclasses.asdict(reference)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.passed = False  # type: ignore[misc]
    assert monitor.health()["judge"].sample_count == 1
