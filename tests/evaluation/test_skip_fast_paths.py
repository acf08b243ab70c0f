"""Spans no evaluator will run on are decided early: no buffering, no job, skips still counted exactly."""

from __future__ import annotations

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
