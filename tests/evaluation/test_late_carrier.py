"""Late results on OpenInference post-hoc carriers: one span link to the target, kind EVALUATOR, ``evaluations.*``.

Real SDK pipelines with in-memory exporters. OpenInference spec/annotations.md: an ended span is immutable, so
post-hoc feedback goes on a new carrier span with exactly one span link to its target; the link, not the parent,
names the target.
"""

from __future__ import annotations

import json
import threading

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import set_span_in_context

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until

OI = "evaluations.0.evaluation."


def _link_target(span: ReadableSpan) -> tuple[int, int]:
    (link,) = span.links  # exactly one link
    return link.context.trace_id, link.context.span_id


def test_a_late_result_goes_on_an_evaluator_span_linked_to_its_target(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="slow", threshold=0.5)
    def slow(trace: Trace) -> float:
        release.wait(5)
        return 0.25

    @evaluator(name="slower")
    def slower(trace: Trace) -> bool:
        release.wait(5)
        raise RuntimeError("boom")

    p = make_pipeline([slow, slower], hold_timeout_s=0.05, max_retries=0)
    with p.tracer.start_as_current_span("agent") as span:
        target = span.get_span_context()
    assert wait_until(lambda: len(p.by_name("agent")) == 1)
    release.set()
    p.flush()
    carrier = p.one("evaluation slow")
    assert _link_target(carrier) == (target.trace_id, target.span_id)
    assert carrier.parent is not None and carrier.parent.span_id == target.span_id  # the spec allows both
    attributes = carrier.attributes or {}
    assert attributes["openinference.span.kind"] == "EVALUATOR"
    assert attributes[OI + "name"] == "slow"
    assert attributes[OI + "score"] == 0.25
    assert attributes[OI + "label"] == "fail"
    assert attributes[OI + "annotator_kind"] == "CODE"
    metadata = json.loads(attributes[OI + "metadata"])
    assert metadata["evaluation_id"] and "judge_trace_id" not in metadata
    assert not any(key.startswith("trace.evaluations.") for key in attributes)
    # An evaluation that errored is no verdict: its carrier has the link and the kind, but no feedback object.
    errored = p.one("evaluation slower")
    assert _link_target(errored) == (target.trace_id, target.span_id)
    assert errored.attributes["openinference.span.kind"] == "EVALUATOR"
    assert not any(key.startswith(OI) for key in errored.attributes or {})


def test_a_trace_level_result_after_completion_carries_trace_feedback_linked_to_the_root(
    make_pipeline: MakePipeline,
) -> None:
    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        return True

    p = make_pipeline([EvaluatorSpec(whole, trace_level=True)], trace_quiet_period_s=0.2)
    root = p.tracer.start_span("root")
    with p.tracer.start_as_current_span("step", context=set_span_in_context(root)):
        pass
    root.end()
    assert wait_until(lambda: len(p.by_name("evaluation whole")) == 1)
    carrier = p.one("evaluation whole")
    target = root.get_span_context()
    assert _link_target(carrier) == (target.trace_id, target.span_id)
    attributes = carrier.attributes or {}
    assert attributes["openinference.span.kind"] == "EVALUATOR"
    assert attributes["trace.evaluations.0.evaluation.name"] == "whole"
    assert attributes["trace.evaluations.0.evaluation.label"] == "pass"
    assert not any(key.startswith(OI) for key in attributes)  # trace feedback only, never also span feedback
