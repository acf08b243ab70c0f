"""Spans no evaluator will run on are decided early: no buffering, no job, skips still counted exactly."""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation.trace_sampling import trace_fraction

from .conftest import MakePipeline


@evaluator(name="always")
def always(trace: object) -> bool:
    return True


def test_without_any_evaluator_spans_pass_through_untouched(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    with pipeline.tracer.start_as_current_span("parent", attributes={"evaltrace.span.kind": "agent"}):
        with pipeline.tracer.start_as_current_span("child"):
            pass
    pipeline.flush()
    assert [s.name for s in pipeline.spans()] == ["child", "parent"]
    stats = pipeline.processor.stats()
    assert stats["enqueued"] == 0 and stats["evaluated"] == 0 and stats["buffer"]["traces"] == 0


def test_an_evaluator_attached_after_the_processor_started_still_runs(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    with pipeline.tracer.start_as_current_span("before"):
        pass
    ref = register_evaluators("tests.fast_paths", [always])  # what a decorator does at decoration time
    with pipeline.tracer.start_as_current_span("decorated", attributes={semconv.EVALTRACE_EVALUATORS_REF: ref}):
        with pipeline.tracer.start_as_current_span("inner"):
            pass
    pipeline.flush()
    decorated = pipeline.one("decorated")
    assert (decorated.attributes or {})["evaltrace.eval.always.passed"] is True
    assert "evaltrace.eval.always.passed" not in (pipeline.one("before").attributes or {})
    assert pipeline.processor.stats()["evaluated"] == 1


def test_a_trace_sampled_out_is_decided_at_span_start_and_counted_at_end(make_pipeline: MakePipeline) -> None:
    rate = 0.5
    pipeline = make_pipeline([EvaluatorSpec(always, sample_rate=rate, span_kinds=["llm"])])
    buffer = pipeline.processor._buffer
    tracked = {True: 0, False: 0}
    ends = {True: 0, False: 0}
    for _ in range(40):
        with pipeline.tracer.start_as_current_span("chat", attributes={"evaltrace.span.kind": "llm"}) as span:
            trace_id = span.get_span_context().trace_id
            sampled = trace_fraction(trace_id) < rate
            tracked[sampled] += buffer.is_tracked(trace_id)  # buffered only when an evaluator will run
            with pipeline.tracer.start_as_current_span("tool", attributes={"evaltrace.span.kind": "tool"}):
                pass
        ends[sampled] += 1
    pipeline.flush()
    assert ends[True] and ends[False], "40 random traces fall on both sides of a 50% sample"
    assert tracked == {True: ends[True], False: 0}
    stats = pipeline.processor.stats()
    assert stats["evaluated"] == ends[True]
    # The llm span of each sampled-out trace is counted once; the tool span is not (the kind filter).
    assert stats["sampled_out"] == ends[False]
    assert stats["not_evaluated_by_reason"] == {"sampled_out": ends[False]}
    assert stats["buffer"]["traces"] == 0


# Admission of decorator-attached evaluators: after a ref's first span, one whose specs all run whenever they apply
# (no sampler, sample_rate 1) is admitted without the per-spec checks while no limit is set. Every other case must
# still take those checks on every span, not only the first.


def _decorated(pipeline: Any, ref: str, spans: int) -> list[int]:
    trace_ids = []
    for i in range(spans):
        with pipeline.tracer.start_as_current_span(
            f"decorated-{i}", attributes={semconv.EVALTRACE_EVALUATORS_REF: ref}
        ) as span:
            trace_ids.append(span.get_span_context().trace_id)
    pipeline.flush()
    return trace_ids


def test_an_attached_evaluator_runs_on_every_span_of_its_ref_and_once_when_also_global(
    make_pipeline: MakePipeline,
) -> None:
    pipeline = make_pipeline([EvaluatorSpec(always, name_glob="decorated-1")])
    ref = register_evaluators("tests.fast_paths.every", [always])
    _decorated(pipeline, ref, 4)
    for i in range(4):
        assert (pipeline.one(f"decorated-{i}").attributes or {})["evaltrace.eval.always.passed"] is True
    stats = pipeline.processor.stats()
    assert stats["evaluated"] == 4  # decorated-1 matched the global spec too: run once
    assert stats["evaluators"]["always"]["passed"] == 4


def test_an_attached_evaluator_sampled_by_rate_is_sampled_on_every_span_not_only_the_first(
    make_pipeline: MakePipeline,
) -> None:
    rate = 0.5
    pipeline = make_pipeline()
    ref = register_evaluators("tests.fast_paths.rate", [EvaluatorSpec(always, sample_rate=rate)])
    trace_ids = _decorated(pipeline, ref, 40)
    sampled = [trace_fraction(t) < rate for t in trace_ids]
    assert any(sampled) and not all(sampled), "40 random traces fall on both sides of a 50% sample"
    for i, inside in enumerate(sampled):
        outcome = (pipeline.one(f"decorated-{i}").attributes or {}).get("evaltrace.eval.always.outcome")
        assert outcome == ("pass" if inside else None)  # a span no evaluator runs on goes out as it ended
    stats = pipeline.processor.stats()
    assert stats["evaluated"] == sum(sampled)
    assert stats["sampled_out"] == len(sampled) - sum(sampled)
    assert stats["not_evaluated_by_reason"] == {"sampled_out": len(sampled) - sum(sampled)}


def test_an_attached_evaluators_sampler_is_asked_on_every_span(make_pipeline: MakePipeline) -> None:
    asked: list[str] = []

    def every_other(attributes: Any) -> bool:
        asked.append(attributes[semconv.EVALTRACE_EVALUATORS_REF])
        return len(asked) % 2 == 1

    pipeline = make_pipeline()
    ref = register_evaluators("tests.fast_paths.sampler", [EvaluatorSpec(always, sampler=every_other)])
    _decorated(pipeline, ref, 6)
    assert asked == [ref] * 6
    stats = pipeline.processor.stats()
    assert stats["evaluated"] == 3 and stats["sampled_out"] == 3


def test_an_attached_evaluator_under_a_global_rate_limit_is_limited_on_every_span(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(limits={"evaluations_per_second": 1, "burst": 2}, limits_clock=lambda: 0.0)
    ref = register_evaluators("tests.fast_paths.limited", [always])
    _decorated(pipeline, ref, 5)
    outcomes = [
        (pipeline.one(f"decorated-{i}").attributes or {}).get("evaltrace.eval.always.outcome") for i in range(5)
    ]
    assert outcomes == ["pass", "pass", None, None, None]  # no token left: out as they ended, counted below
    stats = pipeline.processor.stats()
    assert stats["evaluated"] == 2 and stats["not_evaluated_by_reason"] == {"rate_limited": 3}
