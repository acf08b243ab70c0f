"""Eval-aware export sampling together with trace completion: a failing verdict is never discarded by the draw.

Real SDK pipelines (``EvaluationSpanProcessor`` in front of an in-memory exporter) with ``keep_rate=0``, so a
trace reaches the exporter only when sampling kept it for a failure.
"""

from __future__ import annotations

import threading

from opentelemetry.trace import set_span_in_context

from evaltrace.evaluation import EvaluatorSpec, ExportSampling, evaluator
from evaltrace.evaluation.completion import CompletionBuffer
from evaltrace.schema import Trace

from .conftest import MakePipeline, Pipeline, wait_until
from .test_completion import TRACE, _span

NEVER = ExportSampling(keep_rate=0.0)  # only a failure (or a budget) keeps a trace


def _names(p: Pipeline) -> list[str]:
    return sorted(s.name for s in p.spans())


def test_a_trace_reopened_before_its_decision_waits_for_the_new_revision_that_fails(
    make_pipeline: MakePipeline,
) -> None:
    first_running, late_arrived = threading.Event(), threading.Event()
    calls: list[int] = []

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        calls.append(len(calls) + 1)
        if len(calls) == 1:  # revision 1 passes, but only once a late span re-opened the trace
            first_running.set()
            late_arrived.wait(10)
            return True
        return False  # revision 2, on the whole trace, fails

    p = make_pipeline([EvaluatorSpec(quality, trace_level=True)], export_sampling=NEVER, trace_quiet_period_s=0.05)
    with p.tracer.start_as_current_span("root") as root:
        with p.tracer.start_as_current_span("step"):
            pass
    assert first_running.wait(10)
    with p.tracer.start_as_current_span("late step", context=set_span_in_context(root)):
        pass
    late_arrived.set()  # revision 1 passes now; revision 2 still waits for its quiet period
    assert wait_until(lambda: len(calls) == 2)
    p.flush()
    # Revision 2's failure keeps the whole trace: every span and both evaluation spans.
    assert _names(p) == ["evaluation quality", "evaluation quality", "late step", "root", "step"]
    revisions = sorted(s.attributes["evaltrace.evaluation.revision"] for s in p.by_name("evaluation quality"))
    assert revisions == [1, 2]
    stats = p.processor.stats()["export_sampling"]
    assert stats["kept_traces"] == 1 and stats["discarded_traces"] == 0 and stats["parked_spans"] == 0


def test_a_discarded_trace_whose_late_reevaluation_fails_forwards_its_late_part(make_pipeline: MakePipeline) -> None:
    verdict = {"passed": True}

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        return verdict["passed"]

    p = make_pipeline([EvaluatorSpec(quality, trace_level=True)], export_sampling=NEVER, trace_quiet_period_s=0.05)
    with p.tracer.start_as_current_span("root") as root:
        with p.tracer.start_as_current_span("step"):
            pass
    stats = lambda: p.processor.stats()["export_sampling"]  # noqa: E731
    assert wait_until(lambda: stats()["discarded_traces"] == 1)  # passed: the draw (rate 0) discarded it
    assert p.spans() == []
    verdict["passed"] = False
    with p.tracer.start_as_current_span("late step", context=set_span_in_context(root)):
        pass
    assert wait_until(lambda: stats()["late_kept"] == 1)
    p.flush()
    # What was discarded is gone; the late span and the failing verdict on the whole trace are not.
    assert _names(p) == ["evaluation quality", "late step"]
    child = p.one("evaluation quality")
    assert child.attributes["evaltrace.evaluation.revision"] == 2
    assert child.attributes["evaltrace.eval.quality.passed"] is False
    assert child.parent is not None and child.parent.span_id == root.get_span_context().span_id
    final = stats()
    assert final["late_parked"] == 1 and final["discarded_spans"] == 3 and final["parked_spans"] == 0


def test_a_discarded_trace_whose_late_reevaluation_passes_stays_discarded(make_pipeline: MakePipeline) -> None:
    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        return True

    p = make_pipeline([EvaluatorSpec(quality, trace_level=True)], export_sampling=NEVER, trace_quiet_period_s=0.05)
    with p.tracer.start_as_current_span("root") as root:
        pass
    stats = lambda: p.processor.stats()["export_sampling"]  # noqa: E731
    assert wait_until(lambda: stats()["discarded_traces"] == 1)
    with p.tracer.start_as_current_span("late step", context=set_span_in_context(root)):
        pass
    assert wait_until(lambda: p.processor.stats()["reevaluations"] == 1)
    p.flush()
    assert wait_until(lambda: stats()["parked_spans"] == 0)
    assert p.spans() == []
    final = stats()
    # Counted once as a discarded trace; its late part's spans (the late step, revision 2's span) as discarded.
    assert (final["discarded_traces"], final["late_parked"], final["late_kept"]) == (1, 1, 0)
    assert final["discarded_spans"] == 4


def test_a_span_evaluated_after_its_trace_was_discarded_is_kept_when_it_fails(make_pipeline: MakePipeline) -> None:
    @evaluator(name="answer_ok")
    def answer_ok(trace: Trace) -> bool:
        return False

    spec = EvaluatorSpec(answer_ok, span_kinds={"llm"})
    p = make_pipeline([spec], export_sampling=NEVER)
    root = p.tracer.start_span("request")
    background = p.tracer.start_span(
        "summary", context=set_span_in_context(root), attributes={"evaltrace.span.kind": "llm"}
    )
    root.end()  # nothing evaluated yet: the draw (rate 0) discards the trace
    stats = lambda: p.processor.stats()["export_sampling"]  # noqa: E731
    assert wait_until(lambda: stats()["discarded_traces"] == 1)
    background.end()  # a background LLM call ends after the decision, and its evaluation fails
    p.flush()
    assert wait_until(lambda: stats()["late_kept"] == 1)
    assert p.one("summary").attributes["evaltrace.eval.answer_ok.passed"] is False


def test_sampling_hears_of_a_wait_before_the_timer_can_hand_the_trace_out() -> None:
    calls: list[tuple[int, int]] = []
    now = [100.0]
    buffer = CompletionBuffer(0.5, 30.0, 60.0, 10, 10, clock=lambda: now[0], on_wait=lambda t, d: calls.append((t, d)))
    buffer.add(_span("child", 2, 1), create=True, marker=False)
    assert calls == []  # no root yet: nothing to wait for
    assert buffer.root_ended(_span("root", 1, None), ["spec"], marker=False) == ("waiting", None)
    assert calls == [(TRACE, 1)]  # told under the buffer's lock, before collect() can hand the trace out
    now[0] += 1
    (done,), _ = buffer.collect()
    assert done.awaited  # the caller ends the wait once the evaluation ran
    buffer.add(_span("late", 3, 1), create=False, marker=False)  # re-opened: revision 2 is waited for too
    assert calls == [(TRACE, 1), (TRACE, 1)]
    # Another root of the trace with the end marker: evaluated on that root's own job, so the wait ends here.
    assert buffer.root_ended(_span("second root", 4, None), ["spec"], marker=True)[0] == "complete"
    assert calls[-1] == (TRACE, -1)
