"""Eval-aware export sampling together with trace completion: a failing verdict is never discarded by the draw.

Real SDK pipelines (``EvaluationSpanProcessor`` in front of an in-memory exporter) with ``keep_rate=0``, so a
trace reaches the exporter only when sampling kept it for a failure.
"""

from __future__ import annotations

import threading

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from evaltrace.evaluation import EvaluatorSpec, ExportSampling, evaluator
from evaltrace.evaluation.completion import CompletionBuffer
from evaltrace.evaluation.sampling import ExportGate
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
    # Another root of the trace with the end marker: evaluated on that root's own job, which the wait goes to
    # (ending it here would let sampling decide before that job even started).
    outcome, complete = buffer.root_ended(_span("second root", 4, None), ["spec"], marker=True)
    assert outcome == "complete" and complete is not None and complete.awaited
    assert calls == [(TRACE, 1), (TRACE, 1)]


# --- reviewed: a verdict is never decided away before it exists ------------------------------------------------


def _remote_parent() -> Context:
    """The context of a caller in another service: each span started under it is a local root of one trace."""
    parent = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0x00F067AA0BA902B7, True, TraceFlags(TraceFlags.SAMPLED))
    return set_span_in_context(NonRecordingSpan(parent))


@evaluator(name="quality")
def _failing(trace: Trace) -> bool:
    return False


def test_a_second_local_root_with_the_end_marker_keeps_the_whole_trace_when_its_verdict_fails(
    make_pipeline: MakePipeline,
) -> None:
    p = make_pipeline([EvaluatorSpec(_failing, trace_level=True)], export_sampling=NEVER, trace_quiet_period_s=5.0)
    caller = _remote_parent()  # the service is called twice in one trace
    with p.tracer.start_as_current_span("call A", context=caller):
        with p.tracer.start_as_current_span("step A"):
            pass
    # The second call ends the trace: its own job evaluates the trace, and sampling must wait for that verdict.
    with p.tracer.start_as_current_span("call B", context=caller, attributes={"evaltrace.trace.end": True}):
        pass
    p.flush()
    assert wait_until(lambda: p.processor.stats()["export_sampling"]["parked_spans"] == 0)
    assert _names(p) == ["call A", "call B", "step A"]
    assert p.one("call B").attributes["evaltrace.eval.quality.passed"] is False
    stats = p.processor.stats()["export_sampling"]
    assert (stats["kept_traces"], stats["discarded_traces"], stats["late_parked"]) == (1, 0, 0)


def test_a_second_local_root_no_evaluator_matches_leaves_the_first_roots_evaluation_pending(
    make_pipeline: MakePipeline,
) -> None:
    judged: list[Trace] = []

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        judged.append(trace)
        return False

    spec = EvaluatorSpec(quality, trace_level=True, name_glob="chat *")
    p = make_pipeline([spec], export_sampling=NEVER, trace_quiet_period_s=0.05)
    caller = _remote_parent()
    with p.tracer.start_as_current_span("chat A", context=caller):
        with p.tracer.start_as_current_span("step A"):
            pass
    with p.tracer.start_as_current_span("health B", context=caller):  # no trace-level evaluator is for this root
        pass
    assert wait_until(lambda: len(judged) == 1)
    p.flush()
    assert wait_until(lambda: p.processor.stats()["export_sampling"]["parked_spans"] == 0)
    # chat A's evaluation still ran (on the whole trace: see test_completion) and its failure kept the trace.
    assert len(judged) == 1
    assert _names(p) == ["chat A", "evaluation quality", "health B", "step A"]
    assert p.processor.stats()["export_sampling"]["kept_traces"] == 1


def _otlp_span(name: str, span_id: int, parent: int | None, *, remote: bool = False) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent_ctx = SpanContext(TRACE, parent, remote, flags) if parent is not None else None
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE, span_id, False, flags),
        parent=parent_ctx,
        start_time=1_000_000_000,
        end_time=2_000_000_000,
    )


def test_in_the_worker_a_service_entry_span_does_not_decide_the_trace_before_its_root(
    make_pipeline: MakePipeline,
) -> None:
    p = make_pipeline([EvaluatorSpec(_failing, trace_level=True)], export_sampling=NEVER, trace_quiet_period_s=0.05)
    # Spans fed without on_start (an OTLP receiver). Service B's spans arrive before service A's: A root -> A client
    # -> (remote) B server -> B db.
    p.processor.on_end(_otlp_span("B db", 4, 3))
    p.processor.on_end(_otlp_span("B server", 3, 2, remote=True))
    stats = lambda: p.processor.stats()["export_sampling"]  # noqa: E731
    assert stats()["discarded_traces"] == 0 and stats()["parked_spans"] == 2  # B's entry span is not the root
    p.processor.on_end(_otlp_span("A client", 2, 1))
    p.processor.on_end(_otlp_span("A root", 1, None))
    assert wait_until(lambda: stats()["kept_traces"] == 1)
    p.flush()
    assert _names(p) == ["A client", "A root", "B db", "B server", "evaluation quality"]
    assert stats()["discarded_traces"] == 0


def test_a_trace_parked_past_max_age_is_released_in_full_by_force_flush(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([EvaluatorSpec(_failing)], export_sampling=ExportSampling(keep_rate=0.0, max_age_s=0.05))
    root = p.tracer.start_span("request")  # never ends here
    with p.tracer.start_as_current_span("step", context=set_span_in_context(root)):
        pass
    # Nothing else happens in the process: the age is checked by force_flush, not only when another trace parks.
    assert wait_until(lambda: p.processor.force_flush(1000) and len(p.spans()) == 1)
    assert _names(p) == ["step"]
    stats = p.processor.stats()["export_sampling"]
    assert stats["released_unsampled"] == 1 and stats["parked_spans"] == 0


def test_a_trace_parked_past_max_age_is_released_by_the_completion_timer(make_pipeline: MakePipeline) -> None:
    p = make_pipeline(
        [EvaluatorSpec(_failing, trace_level=True)],
        export_sampling=ExportSampling(keep_rate=0.0, max_age_s=0.05),
        trace_quiet_period_s=0.05,
    )
    root = p.tracer.start_span("request")  # still running: its trace stays open and parked
    with p.tracer.start_as_current_span("step", context=set_span_in_context(root)):
        pass
    assert wait_until(lambda: _names(p) == ["step"])  # no flush, no other trace: the timer released it
    assert p.processor.stats()["export_sampling"]["released_unsampled"] == 1
    root.end()


def test_export_gate_releases_a_trace_older_than_max_age_on_expire() -> None:
    delivered: list[str] = []
    now = [100.0]
    gate = ExportGate(
        ExportSampling(keep_rate=0.0, max_age_s=10.0), lambda s: delivered.append(s.name), clock=lambda: now[0]
    )
    gate.expect(TRACE, 1)  # a verdict to wait for, whose end never comes (an internal error)
    gate.offer(_span("root", 1, None))
    gate.expire()
    assert delivered == [] and gate.parked_spans() == 1  # not old yet
    now[0] += 11
    gate.expire()
    assert delivered == ["root"]  # fail-open: forwarded in full and counted
    assert gate.stats.released_unsampled == 1 and gate.parked_spans() == 0
