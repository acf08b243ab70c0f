"""Trace completion: trace-level evaluation waits for the trace to be complete, re-runs on late spans, is bounded.

Real SDK pipelines with in-memory exporters; the buffer's own timing is checked with an injected clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, ExportSampling, JsonlScoreSink, evaluator
from evaltrace.evaluation.completion import CompletionBuffer
from evaltrace.exceptions import ConfigError
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, wait_until

TRACE = 0x0AF7651916CD43DD8448EB211C80319C


def _span(name: str, span_id: int, parent: int | None) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent_ctx = SpanContext(TRACE, parent, False, flags) if parent is not None else None
    return ReadableSpan(name=name, context=SpanContext(TRACE, span_id, False, flags), parent=parent_ctx)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_buffer_waits_for_root_and_quiet_period_then_reopens_on_a_late_span() -> None:
    clock = Clock()
    buffer = CompletionBuffer(2.0, 30.0, 300.0, max_traces=10, max_spans=10, clock=clock)
    buffer.add(_span("child", 2, 1), create=True, marker=False)
    clock.now += 5
    assert buffer.collect() == ([], [])  # no root yet: never complete, however quiet
    assert buffer.root_ended(_span("root", 1, None), ["spec"], marker=False) == ("waiting", None)
    clock.now += 1.5
    buffer.add(_span("straggler", 3, 1), create=True, marker=False)  # restarts the quiet period
    clock.now += 1.0
    assert buffer.collect() == ([], [])
    clock.now += 1.1
    (done,), incomplete = buffer.collect()
    assert incomplete == [] and [s.name for s in done.spans] == ["child", "root", "straggler"]
    assert done.revision == 1 and buffer.tombstone_count() == 1 and len(buffer) == 0

    clock.now += 10  # within the late window: the trace re-opens with every span, revision 2
    assert buffer.add(_span("late", 4, 1), create=False, marker=False) is True
    assert buffer.collect() == ([], [])
    clock.now += 2.0
    (again,), _ = buffer.collect()
    assert again.revision == 2 and [s.name for s in again.spans] == ["child", "root", "straggler", "late"]
    assert buffer.stats.reopened == 1 and buffer.stats.completed == 2


def test_buffer_bounds_make_traces_incomplete_never_evaluated() -> None:
    clock = Clock()
    buffer = CompletionBuffer(0.5, 0.0, 60.0, max_traces=10, max_spans=2, clock=clock)
    for span_id in (2, 3):
        buffer.add(_span(f"c{span_id}", span_id, 1), create=True, marker=False)
    # Truncated: not complete, whatever the marker says.
    assert buffer.root_ended(_span("root", 1, None), ["spec"], marker=True) == ("waiting", None)
    clock.now += 1
    complete, (incomplete,) = buffer.collect()
    assert complete == [] and incomplete.truncated

    waiting = CompletionBuffer(0.5, 0.0, 60.0, max_traces=10, max_spans=10, clock=clock)
    waiting.add(_span("c", 2, 1), create=True, marker=False)
    clock.now += 61  # the root never ended within max_wait
    assert waiting.collect()[1][0].root is None


def _ok(seen: list[Trace]) -> Any:
    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        seen.append(trace)
        return True

    return whole


def _llm(tokens: int) -> dict[str, Any]:
    return {"evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": tokens}


def test_quiet_period_evaluates_once_with_the_span_that_ended_after_the_root(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline([EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=0.3)
    root = p.tracer.start_span("root")
    with p.tracer.start_as_current_span("chat", context=set_span_in_context(root), attributes=_llm(4)):
        pass
    detached = p.tracer.start_span("background chat", context=set_span_in_context(root), attributes=_llm(6))
    root.end()
    # The root goes downstream at once, without trace-level results: they wait for the trace to complete.
    assert wait_until(lambda: len(p.by_name("root")) == 1)
    assert "evaltrace.eval.whole.passed" not in (p.one("root").attributes or {})
    detached.end()  # a span of the trace after its root: the quiet period restarts
    assert wait_until(lambda: len(p.by_name("evaluation whole")) == 1)
    assert len(seen) == 1 and seen[0].metrics.token_input == 10  # the late span was in the evaluated trace
    child = p.one("evaluation whole")
    assert child.parent is not None and child.parent.span_id == root.get_span_context().span_id
    assert child.attributes["evaltrace.eval.whole.passed"] is True
    assert child.attributes["evaltrace.evaluation.revision"] == 1
    assert p.processor.stats()["completion"]["completed"] == 1


def test_end_trace_skips_the_quiet_period_and_results_ride_on_the_root(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline([EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=3600)
    assert evaltrace.end_trace() is False  # no current span: nothing to mark
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("last step"):
            assert evaltrace.end_trace() is True
    assert wait_until(lambda: len(seen) == 1)  # an hour's quiet period, yet evaluated as the root ended
    assert wait_until(lambda: len(p.by_name("root")) == 1)
    assert p.one("root").attributes["evaltrace.eval.whole.passed"] is True
    assert p.one("last step").attributes["evaltrace.trace.end"] is True


def test_late_span_reruns_and_replaces_the_score(make_pipeline: MakePipeline, tmp_path: Path) -> None:
    seen: list[Trace] = []
    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(_ok(seen), trace_level=True)],
        [JsonlScoreSink(sink_path)],
        trace_quiet_period_s=0,
        sink_schedule_delay_s=0.01,
    )
    with p.tracer.start_as_current_span("root") as root:
        pass
    p.flush()
    assert p.one("root").attributes["evaltrace.eval.whole.passed"] is True  # quiet 0: as before, on the root
    with p.tracer.start_as_current_span("late", context=set_span_in_context(root)):
        pass
    assert wait_until(lambda: len(p.by_name("evaluation whole")) == 1)
    p.flush()
    assert len(seen) == 2
    assert p.one("evaluation whole").attributes["evaltrace.evaluation.revision"] == 2
    scores = [json.loads(line) for line in sink_path.read_text().splitlines()]
    assert len(scores) == 2 and scores[0]["id"] == scores[1]["id"]  # the same id: an upsert in Langfuse/Phoenix
    assert scores[0]["observation_id"] is None
    stats = p.processor.stats()
    assert stats["reevaluations"] == 1 and stats["completion"]["reopened"] == 1


def test_evicted_and_unfinished_traces_count_as_trace_incomplete(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline(
        [EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=3600, trace_completion_max_traces=2
    )
    roots = [p.tracer.start_span(f"root{i}") for i in range(3)]
    for i, root in enumerate(roots):  # three traces open at once: the first is evicted when the third opens
        with p.tracer.start_as_current_span(f"child{i}", context=set_span_in_context(root)):
            pass
    roots[1].end()  # root ended: evaluated at shutdown without the rest of its quiet period
    by_reason = lambda: p.processor.stats()["not_evaluated_by_reason"]  # noqa: E731
    assert wait_until(lambda: by_reason().get("trace_incomplete") == 1)
    p.processor.shutdown()
    assert [t.extra.get("span_id") for t in seen] == [format(roots[1].get_span_context().span_id, "016x")]
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"]["trace_incomplete"] == 2  # evicted root0 + root2 never ended
    assert stats["evaluators"]["whole"]["not_evaluated_by_reason"]["trace_incomplete"] == 2
    assert p.one("evaluation whole").attributes["evaltrace.eval.whole.passed"] is True
    for root in (roots[0], roots[2]):
        root.end()


def test_force_flush_evaluates_traces_whose_root_ended(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline([EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=3600)
    with p.tracer.start_as_current_span("root"):
        pass
    open_root = p.tracer.start_span("still running")
    with p.tracer.start_as_current_span("step", context=set_span_in_context(open_root)):
        pass
    assert seen == []
    p.flush()  # a serverless invocation ends: the finished trace is evaluated, the running one keeps waiting
    assert len(seen) == 1 and p.processor.stats()["completion"]["open_traces"] == 1
    open_root.end()


def test_predicate_rejection_counts_as_filtered(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    spec = EvaluatorSpec(_ok(seen), span_kinds={"llm"}, predicate=lambda attrs: attrs.get("keep") is True)
    p = make_pipeline([spec])
    for keep in (True, False, False):
        with p.tracer.start_as_current_span("chat", attributes={"evaltrace.span.kind": "llm", "keep": keep}):
            pass
    with p.tracer.start_as_current_span("tool", attributes={"evaltrace.span.kind": "tool"}):
        pass  # the kind filter rejects it: not an evaluation that could have run, not counted
    p.flush()
    assert len(seen) == 1
    assert p.processor.stats()["not_evaluated_by_reason"] == {"filtered": 2}


def test_completion_options_are_validated(make_pipeline: MakePipeline) -> None:
    with pytest.raises(ConfigError, match="trace_quiet_period_s"):
        make_pipeline(trace_quiet_period_s=-1)
    with pytest.raises(ConfigError, match="trace_max_wait_s"):
        make_pipeline(trace_max_wait_s=0)


def test_quiet_period_from_the_environment() -> None:
    from evaltrace._internal.evals_env import apply_to_options, read_evaluation_environment

    name = "OTEL_INSTRUMENTATION_GENAI_EVALS_TRACE_QUIET_PERIOD"
    env = read_evaluation_environment({name: "0.5"})
    assert apply_to_options(env, None)["trace_quiet_period_s"] == 0.5
    assert apply_to_options(env, {"trace_quiet_period_s": 1})["trace_quiet_period_s"] == 1  # code wins
    with pytest.raises(ConfigError) as info:
        read_evaluation_environment({name: "soon"})
    assert info.value.setting == name


def test_export_sampling_waits_for_the_deferred_trace_evaluation(make_pipeline: MakePipeline) -> None:
    verdict = {"pass": True}

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        return verdict["pass"]

    sampling = ExportSampling(keep_rate=0.0)
    p = make_pipeline([EvaluatorSpec(quality, trace_level=True)], export_sampling=sampling, trace_quiet_period_s=0.1)
    for name, passes in (("good", True), ("failing", False)):
        verdict["pass"] = passes
        with p.tracer.start_as_current_span(name):
            with p.tracer.start_as_current_span(name + ".child"):
                pass
        # The trace's fate is decided only once its deferred evaluation ran (a quiet period after the root).
        assert wait_until(lambda: p.processor.stats()["export_sampling"]["parked_spans"] == 0)
    assert sorted(s.name for s in p.spans()) == ["evaluation quality", "failing", "failing.child"]
    stats = p.processor.stats()["export_sampling"]
    assert stats["kept_traces"] == 1 and stats["discarded_traces"] == 1


FORK_SCRIPT = """
import os, sys, time, warnings
warnings.filterwarnings("ignore", ".*multi-threaded.*fork", DeprecationWarning)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator

@evaluator(name="whole")
def whole(trace) -> bool:
    return True

exporter = InMemorySpanExporter()
processor = EvaluationSpanProcessor(
    [SimpleSpanProcessor(exporter)], [EvaluatorSpec(whole, trace_level=True)], dead_letter_dir=None,
    trace_quiet_period_s=0.1,
)
provider = TracerProvider()
provider.add_span_processor(processor)
tracer = provider.get_tracer("t")

def one_trace_evaluated(name):
    with tracer.start_as_current_span(name):
        pass
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # no flush: only the completion timer can evaluate it
        if any(s.name == "evaluation whole" and s.parent.span_id == root_id(name) for s in exporter.get_finished_spans()):
            return True
        time.sleep(0.01)
    return False

def root_id(name):
    return next(s.context.span_id for s in exporter.get_finished_spans() if s.name == name)

assert one_trace_evaluated("parent")  # the parent's timer thread is running when it forks
pid = os.fork()
if pid == 0:
    os._exit(0 if one_trace_evaluated("child") else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_its_own_completion_timer(tmp_path: Path) -> None:
    script = tmp_path / "fork_app.py"
    script.write_text(FORK_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "child 0" in done.stdout, done.stdout + done.stderr


# --- review r1: regressions -------------------------------------------------------------------------------------


def test_buffer_never_reopens_a_given_up_trace_from_its_root() -> None:
    clock = Clock()
    buffer = CompletionBuffer(0.5, 30.0, 60.0, max_traces=1, max_spans=10, clock=clock)
    buffer.add(_span("child", 2, 1), create=True, marker=False)
    other = ReadableSpan(name="other", context=SpanContext(TRACE + 1, 9, False, TraceFlags(TraceFlags.SAMPLED)))
    buffer.add(other, create=True, marker=False)  # max_traces=1: the first trace is evicted, given up
    assert buffer.add(_span("late child", 3, 1), create=True, marker=False) is False
    assert buffer.root_ended(_span("root", 1, None), ["spec"], marker=True) == ("closed", None)
    clock.now += 1
    assert buffer.collect()[0] == []  # never handed out as complete
    assert buffer.stats.after_incomplete == 2 and buffer.stats.incomplete == 1


def test_a_trace_given_up_is_not_judged_from_its_root_later(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline([EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=0.1, trace_max_wait_s=0.2)
    root = p.tracer.start_span("agent run")  # a long-running agent: its root outlives trace_max_wait_s
    with p.tracer.start_as_current_span("step", context=set_span_in_context(root)):
        pass
    by_reason = lambda: p.processor.stats()["not_evaluated_by_reason"]  # noqa: E731
    assert wait_until(lambda: by_reason().get("trace_incomplete") == 1)
    with p.tracer.start_as_current_span("late step", context=set_span_in_context(root)):
        pass
    root.end()
    p.flush()
    assert seen == []  # the root alone is not the trace
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"trace_incomplete": 1}  # counted once, not again at the root
    assert stats["completion"]["after_incomplete"] == 2 and not p.by_name("evaluation whole")
    assert {s.name for s in p.spans()} == {"agent run", "step", "late step"}  # every span still forwarded


def test_a_root_renamed_before_it_ends_is_evaluated_with_all_its_spans(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    spec = EvaluatorSpec(_ok(seen), trace_level=True, name_glob="POST /chat")
    p = make_pipeline([spec], trace_quiet_period_s=0.1)
    root = p.tracer.start_span("POST")  # an HTTP server span: its route is known only later
    for tokens in (3, 4):
        with p.tracer.start_as_current_span("chat", context=set_span_in_context(root), attributes=_llm(tokens)):
            pass
    root.update_name("POST /chat")
    root.end()
    assert wait_until(lambda: len(seen) == 1)
    assert seen[0].metrics.token_input == 7  # both children, not the root alone
    with p.tracer.start_as_current_span("GET /health"):  # a root no evaluator matches: discarded at its end
        with p.tracer.start_as_current_span("check"):
            pass
    p.flush()
    assert len(seen) == 1 and p.processor.stats()["completion"]["open_traces"] == 0


def test_a_late_revision_finishing_first_is_not_overwritten_by_the_stale_one(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    @evaluator(name="whole")
    def whole(trace: Trace) -> EvaluationResult:
        call = len(calls) + 1
        calls.append(call)
        if call == 1:  # revision 1: a slow judge call, still running when revision 2 is submitted
            started.set()
            release.wait(10)
        return EvaluationResult(evaluator="whole", passed=call > 1, score=float(call))

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(whole, trace_level=True)],
        [JsonlScoreSink(sink_path)],
        trace_quiet_period_s=0.05,
        sink_schedule_delay_s=0.01,
    )
    with p.tracer.start_as_current_span("root") as root:
        pass
    assert started.wait(10)
    with p.tracer.start_as_current_span("late tool call", context=set_span_in_context(root)):
        pass
    assert wait_until(lambda: len(p.by_name("evaluation whole")) == 1)  # revision 2 finished first
    release.set()
    p.flush()
    scores = [json.loads(line) for line in sink_path.read_text().splitlines()]
    assert [score["value"] for score in scores] == [2.0]  # only revision 2's verdict is published
    stats = p.processor.stats()
    assert stats["superseded"] == 1 and stats["evaluated"] == 1 and stats["failed"] == 0
    revisions = sorted(s.attributes["evaltrace.evaluation.revision"] for s in p.by_name("evaluation whole"))
    assert revisions == [1, 2]  # revision 1's span still says what ran, under its own revision


def test_a_mapping_failure_of_ours_is_not_evaluated_never_a_verdict(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evaltrace.mapping

    def broken(*args: Any, **kwargs: Any) -> Trace:
        raise RuntimeError("a mapping bug of ours")

    monkeypatch.setattr(evaltrace.mapping, "trace_from_spans", broken)

    @evaluator(name="used_a_tool")
    def used_a_tool(trace: Trace) -> bool:
        return len(trace.tool_calls) > 0

    p = make_pipeline([used_a_tool, EvaluatorSpec(_ok([]), trace_level=True)], trace_quiet_period_s=0)
    with p.tracer.start_as_current_span("agent", attributes={"evaltrace.span.kind": "agent"}):
        with p.tracer.start_as_current_span("search", attributes={"evaltrace.span.kind": "tool"}):
            pass
    p.flush()
    attributes = p.one("agent").attributes or {}
    for name in ("used_a_tool", "whole"):
        assert attributes[f"evaltrace.eval.{name}.outcome"] == "not_evaluated"
        assert attributes[f"evaltrace.eval.{name}.skip_reason"] == "mapping_failed"
    stats = p.processor.stats()
    assert stats["failed"] == 0 and stats["passed"] == 0
    assert stats["not_evaluated_by_reason"]["mapping_failed"] == 3  # used_a_tool on both spans, whole once


def test_evaluations_cut_short_at_shutdown_are_counted_by_reason(make_pipeline: MakePipeline) -> None:
    started, release = threading.Event(), threading.Event()

    @evaluator(name="slow")
    def slow(trace: Trace) -> bool:
        started.set()
        release.wait(10)
        return True

    p = make_pipeline([EvaluatorSpec(slow, trace_level=True)], trace_quiet_period_s=0)
    with p.tracer.start_as_current_span("root"):
        pass
    assert started.wait(10)
    p.processor.shutdown(timeout_millis=300)
    release.set()
    stats = p.processor.stats()
    assert stats["cancelled"] == 1 and stats["not_evaluated_by_reason"] == {"shutdown": 1}
    assert p.one("root").attributes["evaltrace.eval.slow.outcome"] == "not_evaluated"


def test_another_root_of_an_evaluated_trace_after_its_late_window_is_counted(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []
    p = make_pipeline([EvaluatorSpec(_ok(seen), trace_level=True)], trace_quiet_period_s=0, trace_late_window_s=0)
    caller = NonRecordingSpan(SpanContext(TRACE, 0x99, True, TraceFlags(TraceFlags.SAMPLED)))
    for name in ("call 1", "call 2"):  # this service called twice within one distributed trace
        with p.tracer.start_as_current_span(name, context=set_span_in_context(caller)):
            pass
    p.flush()
    assert len(seen) == 1  # the second call's spans alone are not the trace the first verdict was about
    assert p.processor.stats()["not_evaluated_by_reason"] == {"late_after_window": 1}


# --- trace_incomplete counts only the evaluators that would have run ---------------------------------------------


def _named(name: str) -> Any:
    @evaluator(name=name)
    def check(trace: Trace) -> bool:
        return True

    return check


def test_a_trace_given_up_counts_trace_incomplete_only_for_evaluators_that_would_have_run(
    make_pipeline: MakePipeline,
) -> None:
    specs = [
        EvaluatorSpec(_named("everything"), trace_level=True),
        EvaluatorSpec(_named("chat_route"), trace_level=True, name_glob="POST /chat"),  # matches once renamed
        EvaluatorSpec(_named("never_sampled"), trace_level=True, sample_rate=0.0),
        EvaluatorSpec(_named("agents_only"), trace_level=True, span_kinds={"agent"}),
        EvaluatorSpec(_named("premium"), trace_level=True, predicate=lambda attrs: attrs.get("tier") == "premium"),
    ]
    p = make_pipeline(specs, trace_quiet_period_s=0.1, trace_max_wait_s=0.2)
    root = p.tracer.start_span("POST", attributes={"evaltrace.span.kind": "workflow", "tier": "free"})
    root.update_name("POST /chat")  # an HTTP server span learns its route
    with p.tracer.start_as_current_span("step", context=set_span_in_context(root)):
        pass
    by_reason = lambda: p.processor.stats()["not_evaluated_by_reason"]  # noqa: E731
    # The root outlives trace_max_wait_s; the timer counts the evaluators one after the other: wait for all four.
    assert wait_until(lambda: sum(by_reason().values()) == 4)
    stats = p.processor.stats()
    per_evaluator = {name: e["not_evaluated_by_reason"] for name, e in stats["evaluators"].items()}
    # Only the evaluators whose filters and sampling would have run on this root count it incomplete; the root's
    # name and attributes are read as they are when the trace is given up (renamed already).
    assert per_evaluator["everything"] == {"trace_incomplete": 1}
    assert per_evaluator["chat_route"] == {"trace_incomplete": 1}
    assert per_evaluator["never_sampled"] == {"sampled_out": 1}  # what it would have counted at the root's end
    assert per_evaluator["premium"] == {"filtered": 1}
    assert "agents_only" not in per_evaluator or not per_evaluator["agents_only"]  # a kind filter: never counted
    assert by_reason() == {"trace_incomplete": 2, "sampled_out": 1, "filtered": 1}
    root.end()


def test_a_root_less_trace_in_the_worker_counts_trace_incomplete_for_evaluators_it_cannot_rule_out(
    make_pipeline: MakePipeline,
) -> None:
    specs = [
        EvaluatorSpec(_named("agents_only"), trace_level=True, span_kinds={"agent"}),
        EvaluatorSpec(_named("never_sampled"), trace_level=True, sample_rate=0.0),
    ]
    p = make_pipeline(specs, trace_quiet_period_s=0.1, trace_max_wait_s=0.2)
    # Spans fed without on_start (an OTLP receiver): the root never arrives, its name and kind are unknown.
    p.processor.on_end(_span("step", 2, 1))
    assert wait_until(lambda: sum(p.processor.stats()["not_evaluated_by_reason"].values()) == 2)
    stats = p.processor.stats()
    # The kind filter cannot be decided without the root: counted as possibly applying. Sampling by trace id can.
    assert stats["evaluators"]["agents_only"]["not_evaluated_by_reason"] == {"trace_incomplete": 1}
    assert stats["evaluators"]["never_sampled"]["not_evaluated_by_reason"] == {"sampled_out": 1}


# --- several local roots of one trace (a service called twice) ---------------------------------------------------


def test_a_stale_end_marker_entry_never_takes_the_next_revision_out_of_the_buffer() -> None:
    clock = Clock()
    waits: list[int] = []
    buffer = CompletionBuffer(0.5, 30.0, 60.0, 10, 10, clock=clock, on_wait=lambda t, d: waits.append(d))
    buffer.add(_span("child", 2, 1), create=True, marker=False)
    assert buffer.root_ended(_span("root A", 1, None), ["spec"], marker=False) == ("waiting", None)
    buffer.add(_span("marked", 3, 1), create=False, marker=True)  # due at the next collect
    outcome, first = buffer.root_ended(_span("root B", 4, None), ["spec"], marker=True)
    assert outcome == "complete" and first is not None and first.awaited  # the wait goes to root B's job
    buffer.add(_span("late", 5, 1), create=False, marker=False)  # re-opens: revision 2
    clock.now += 1
    (second,), incomplete = buffer.collect()  # the stale entry of revision 1 is skipped, revision 2 is due
    assert incomplete == [] and second.revision == 2 and second.awaited
    assert len(second.spans) == 5 and len(buffer) == 0
    assert waits == [1, 1]  # never ended by the buffer: by root B's job and collect()'s caller


def test_a_root_no_evaluator_is_for_joins_a_trace_another_root_left_waiting() -> None:
    clock = Clock()
    waits: list[int] = []
    buffer = CompletionBuffer(0.5, 30.0, 60.0, 10, 10, clock=clock, on_wait=lambda t, d: waits.append(d))
    buffer.track(TRACE)
    buffer.track(TRACE)  # two local roots of the trace run
    buffer.add(_span("step A", 2, 1), create=False, marker=False)
    assert buffer.discard(_span("health B", 4, None)) is False  # root A still runs: its trace is kept
    assert len(buffer) == 1
    assert buffer.root_ended(_span("chat A", 1, None), ["spec"], marker=False) == ("waiting", None)
    assert waits == [1]
    clock.now += 1
    (done,), _ = buffer.collect()
    assert sorted(s.name for s in done.spans) == ["chat A", "health B", "step A"]  # judged on the whole trace


def test_a_root_no_evaluator_is_for_leaves_a_waiting_trace_waiting() -> None:
    clock = Clock()
    waits: list[int] = []
    buffer = CompletionBuffer(0.5, 30.0, 60.0, 10, 10, clock=clock, on_wait=lambda t, d: waits.append(d))
    buffer.track(TRACE)
    buffer.add(_span("step A", 2, 1), create=False, marker=False)
    assert buffer.root_ended(_span("chat A", 1, None), ["spec"], marker=False) == ("waiting", None)
    buffer.track(TRACE)
    assert buffer.discard(_span("health B", 4, None)) is False
    clock.now += 1
    (done,), _ = buffer.collect()
    assert done.awaited and waits == [1]  # the wait was not ended: sampling still waits for the verdict
    assert sorted(s.name for s in done.spans) == ["chat A", "health B", "step A"]
    # The only root of another trace, no evaluator for it: forgotten, nothing waits.
    other = ReadableSpan(name="step", context=SpanContext(7, 2, False), parent=SpanContext(7, 1, False))
    buffer.track(7)
    buffer.add(other, create=False, marker=False)
    assert len(buffer) == 1
    assert buffer.discard(ReadableSpan(name="health", context=SpanContext(7, 1, False))) is False
    assert len(buffer) == 0 and waits == [1]


def test_the_buffer_does_not_keep_a_root_that_never_ends_alive() -> None:
    import gc
    import weakref

    from opentelemetry.sdk.trace import TracerProvider

    buffer = CompletionBuffer(0.5, 30.0, 60.0, 10, 10)
    root = TracerProvider().get_tracer("t").start_span("abandoned")  # the application drops it without end()
    assert root.context is not None
    buffer.track(root.context.trace_id, root)
    ref = weakref.ref(root)
    del root
    gc.collect()
    assert ref() is None


def test_shutdown_releases_parked_spans_and_shuts_exporters_down_even_if_the_drain_fails(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        return True

    p = make_pipeline(
        [EvaluatorSpec(quality, trace_level=True)],
        export_sampling=ExportSampling(keep_rate=0.0),
        trace_quiet_period_s=30.0,
    )
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("step"):
            pass
    completion = p.processor._completion
    assert completion is not None

    def broken(*, drain: bool = False) -> Any:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(completion, "collect", broken)
    p.processor.shutdown(3000)  # does not raise
    assert sorted(s.name for s in p.spans()) == ["root", "step"]  # released in full: nothing lost
    assert p.processor.stats()["internal_errors"] >= 1


def test_one_trace_that_fails_to_settle_does_not_leak_the_others(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged: list[str] = []

    @evaluator(name="quality")
    def quality(trace: Trace) -> bool:
        judged.append(trace.case_id)
        return False

    p = make_pipeline(
        [EvaluatorSpec(quality, trace_level=True)],
        export_sampling=ExportSampling(keep_rate=0.0),
        trace_quiet_period_s=30.0,
    )
    processor = p.processor
    submit = processor._submit_trace
    first = True

    def flaky(entry: Any) -> None:
        nonlocal first
        if first:
            first = False
            raise RuntimeError("a bug of ours")
        submit(entry)

    monkeypatch.setattr(processor, "_submit_trace", flaky)
    for name in ("one", "two"):
        with p.tracer.start_as_current_span(name):
            pass
    p.flush()  # both are due now; the first one's error must not drop the second
    assert wait_until(lambda: processor.stats()["export_sampling"]["parked_spans"] == 0)
    assert len(judged) == 1
    stats = processor.stats()
    assert stats["internal_errors"] == 1
    # The one that failed to settle is decided without a verdict (its wait ended); the other is kept for its fail.
    assert stats["export_sampling"]["kept_traces"] == 1 and stats["export_sampling"]["discarded_traces"] == 1
