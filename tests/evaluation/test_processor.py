from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from evaltrace._internal import tracing
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace.evaluation import EvaluatorSpec, RetryableEvaluatorError, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, Pipeline, wait_until


def events_of(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes) for e in span.events if e.name == "gen_ai.evaluation.result"]


@evaluator(name="always_pass")
def always_pass(trace: Trace) -> bool:
    return True


@evaluator(name="half", threshold=0.8)
def half(trace: Trace) -> float:
    return 0.5


@pytest.mark.parametrize("is_async", [False, True])
def test_enriched_span_carries_events_and_attributes(make_pipeline: MakePipeline, is_async: bool) -> None:
    async def async_half(trace: Trace) -> float:
        return 0.5

    scorer = evaluator(name="half", threshold=0.8)(async_half) if is_async else half
    # Enriched however loaded the machine is: the hold is wall-clock time.
    p = make_pipeline([always_pass, scorer], hold_timeout_s=600)
    with p.tracer.start_as_current_span("chat gpt", kind=SpanKind.CLIENT) as span:
        span.set_attribute("gen_ai.response.id", "chatcmpl-9")
        original_context = span.get_span_context()
    p.flush()
    out = p.one("chat gpt")
    assert out.context == original_context
    assert out.kind is SpanKind.CLIENT
    assert out.attributes["gen_ai.response.id"] == "chatcmpl-9"
    assert out.attributes["evaltrace.eval.always_pass.passed"] is True
    assert "evaltrace.eval.always_pass.score" not in out.attributes  # a bool verdict has no score
    assert out.attributes["evaltrace.eval.half.score"] == 0.5
    assert out.attributes["evaltrace.eval.half.passed"] is False
    assert out.attributes["evaltrace.eval.failed"] is True
    events = sorted(events_of(out), key=lambda e: e["gen_ai.evaluation.name"])
    assert events == [
        {
            "gen_ai.evaluation.name": "always_pass",
            "gen_ai.evaluation.score.label": "pass",
            "gen_ai.response.id": "chatcmpl-9",
        },
        {
            "gen_ai.evaluation.name": "half",
            "gen_ai.evaluation.score.label": "fail",
            "gen_ai.evaluation.score.value": 0.5,
            "gen_ai.response.id": "chatcmpl-9",
        },
    ]
    stats = p.processor.stats()
    assert stats["enriched"] == 1 and stats["evaluated"] == 2 and stats["queued"] == 0


def test_span_without_matching_evaluator_is_forwarded_at_once(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([EvaluatorSpec(always_pass, span_kinds={"llm"})])
    with p.tracer.start_as_current_span("plain"):
        pass
    # Forwarded synchronously inside on_end: no flush needed.
    assert [s.name for s in p.spans()] == ["plain"]
    assert "evaltrace.eval.failed" not in p.spans()[0].attributes


def test_filters_kind_glob_predicate(make_pipeline: MakePipeline) -> None:
    spec = EvaluatorSpec(
        always_pass,
        span_kinds={"llm"},
        name_glob="chat *",
        predicate=lambda attrs: attrs.get("gen_ai.request.model") == "gpt-4o",
    )
    p = make_pipeline([spec])
    for name, model in [("chat a", "gpt-4o"), ("chat b", "other"), ("embed c", "gpt-4o")]:
        with p.tracer.start_as_current_span(
            name, attributes={"evaltrace.span.kind": "llm", "gen_ai.request.model": model}
        ):
            pass
    p.flush()
    assert "evaltrace.eval.always_pass.passed" in p.one("chat a").attributes
    assert "evaltrace.eval.always_pass.passed" not in p.one("chat b").attributes
    assert "evaltrace.eval.always_pass.passed" not in p.one("embed c").attributes


def test_hold_timeout_forwards_as_is_then_child_evaluation_spans(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="slow")
    def slow(trace: Trace) -> bool:
        release.wait(5)
        return False

    p = make_pipeline([slow, always_pass], hold_timeout_s=0.05)
    with p.tracer.start_as_current_span("agent") as span:
        parent_ctx = span.get_span_context()
    assert wait_until(lambda: len(p.by_name("agent")) == 1)
    held = p.one("agent")
    assert "evaltrace.eval.failed" not in held.attributes and not held.events
    release.set()
    p.flush()
    assert len(p.by_name("agent")) == 1  # forwarded exactly once
    children = {s.name: s for s in p.spans() if s.name.startswith("evaluation ")}
    assert set(children) == {"evaluation slow", "evaluation always_pass"}
    child = children["evaluation slow"]
    assert child.parent is not None and child.parent.span_id == parent_ctx.span_id
    assert child.context.trace_id == parent_ctx.trace_id
    assert child.kind is SpanKind.INTERNAL
    assert child.attributes["evaltrace.span.kind"] == "evaluation"
    assert child.attributes["langfuse.observation.type"] == "evaluator"
    assert child.attributes["evaltrace.eval.slow.passed"] is False
    assert events_of(child)[0]["gen_ai.evaluation.name"] == "slow"
    stats = p.processor.stats()
    assert stats["held_timeout"] == 1 and stats["evaluation_spans"] == 2 and stats["enriched"] == 0


def test_queue_overflow_drops_counts_and_still_forwards(make_pipeline: MakePipeline) -> None:
    release = threading.Event()
    started = threading.Event()

    @evaluator(name="blocker")
    def blocker(trace: Trace) -> bool:
        started.set()
        release.wait(5)
        return True

    p = make_pipeline([blocker], max_queue_size=1, hold_timeout_s=10)
    for i in range(4):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    # The three that did not fit were forwarded synchronously, unenriched.
    assert sorted(s.name for s in p.spans()) == ["s1", "s2", "s3"]
    assert all("evaltrace.eval.failed" not in s.attributes for s in p.spans())
    assert p.processor.stats()["dropped"] == 3
    assert started.wait(5)
    release.set()
    p.flush()
    assert p.one("s0").attributes["evaltrace.eval.blocker.passed"] is True


def test_shutdown_drains_pending_evaluations(make_pipeline: MakePipeline) -> None:
    gate = threading.Event()

    @evaluator(name="gated")
    def gated(trace: Trace) -> bool:
        gate.wait(5)
        return True

    p = make_pipeline([gated], hold_timeout_s=30)
    for i in range(5):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    assert p.spans() == []
    threading.Timer(0.05, gate.set).start()
    p.provider.shutdown()
    names = sorted(s.name for s in p.spans())
    assert names == [f"s{i}" for i in range(5)]
    assert all(s.attributes["evaltrace.eval.gated.passed"] is True for s in p.spans())
    assert p.processor.stats()["evaluated"] == 5


def test_shutdown_deadline_forwards_unevaluated_spans(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="stuck")
    def stuck(trace: Trace) -> bool:
        release.wait(5)
        return True

    p = make_pipeline([stuck], hold_timeout_s=30)
    with p.tracer.start_as_current_span("s"):
        pass
    p.processor.shutdown(timeout_millis=50)
    release.set()
    assert [s.name for s in p.spans()] == ["s"]  # not lost
    assert p.processor.stats()["unflushed_jobs"] == 1


def test_evaluator_exception_timeout_and_retry(make_pipeline: MakePipeline) -> None:
    release = threading.Event()
    calls = {"n": 0}

    @evaluator(name="broken")
    def broken(trace: Trace) -> bool:
        raise KeyError("missing")

    @evaluator(name="slow")
    def slow(trace: Trace) -> bool:
        release.wait(5)
        return True

    @evaluator(name="flaky")
    def flaky(trace: Trace) -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RetryableEvaluatorError("429")
        return True

    p = make_pipeline([broken, EvaluatorSpec(slow, timeout_s=0.05), flaky], max_retries=2)
    with p.tracer.start_as_current_span("s"):
        pass
    try:
        p.flush()
    finally:
        release.set()
    out = p.one("s")
    assert out.attributes["evaltrace.eval.broken.outcome"] == "error"  # an error, never passed=False
    assert out.attributes["evaltrace.eval.slow.outcome"] == "error"
    assert out.attributes["evaltrace.eval.flaky.passed"] is True
    error_types = {e["gen_ai.evaluation.name"]: e.get("error.type") for e in events_of(out)}
    assert error_types == {"broken": "KeyError", "slow": "timeout", "flaky": None}
    stats = p.processor.stats()
    assert (stats["errors"], stats["failed"], stats["timed_out"], stats["retries"]) == (2, 0, 1, 1)
    assert stats["evaluators"]["slow"]["timed_out"] == 1


def test_sampling_rate_and_callable(make_pipeline: MakePipeline) -> None:
    never = EvaluatorSpec(evaluator(name="never")(lambda t: True), sample_rate=0.0)
    chosen = EvaluatorSpec(half, sampler=lambda attrs: attrs.get("user.tier") == "gold")
    p = make_pipeline([never, chosen])
    for tier in ("gold", "free"):
        with p.tracer.start_as_current_span(tier, attributes={"user.tier": tier}):
            pass
    p.flush()
    assert "evaltrace.eval.half.passed" in p.one("gold").attributes
    assert "evaltrace.eval.half.passed" not in p.one("free").attributes
    assert not any("evaltrace.eval.never.passed" in s.attributes for s in p.spans())
    assert p.processor.stats()["sampled_out"] == 3  # never twice, chosen once


def _llm(p: Pipeline, name: str, tokens: int) -> None:
    with p.tracer.start_as_current_span(
        name,
        attributes={"evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": tokens},
    ):
        pass


def test_trace_level_evaluation_over_the_tree(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        seen.append(trace)
        return True

    p = make_pipeline([EvaluatorSpec(whole, trace_level=True)], trace_quiet_period_s=0)  # results on the root
    with p.tracer.start_as_current_span("root") as root:
        with p.tracer.start_as_current_span("step"):
            _llm(p, "chat 1", 10)
        _llm(p, "chat 2", 5)
        root_ctx = root.get_span_context()
    p.flush()
    assert len(seen) == 1
    assert seen[0].metrics.token_input == 15
    assert seen[0].extra["span_id"] == format(root_ctx.span_id, "016x")
    assert p.one("root").attributes["evaltrace.eval.whole.passed"] is True
    assert "evaltrace.eval.whole.passed" not in p.one("chat 1").attributes
    assert p.processor.stats()["buffer"]["traces"] == 0  # released at root end


def test_decorator_ref_evaluates_the_subtree(make_pipeline: MakePipeline) -> None:
    seen: list[Trace] = []

    @evaluator(name="sub")
    def sub(trace: Trace) -> bool:
        seen.append(trace)
        return trace.metrics.token_input == 7

    key = register_evaluators("tests.agent", [sub])
    p = make_pipeline()  # no global evaluators: only the ref triggers evaluation
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("invoke_agent a", attributes={"evaltrace.evaluators.ref": key}):
            _llm(p, "chat in", 7)
        _llm(p, "chat out", 100)
    p.flush()
    assert len(seen) == 1 and seen[0].metrics.token_input == 7
    assert p.one("invoke_agent a").attributes["evaltrace.eval.sub.passed"] is True
    assert "evaltrace.eval.failed" not in p.one("root").attributes


def test_judge_spans_under_suppression_are_not_evaluated(make_pipeline: MakePipeline) -> None:
    calls = {"n": 0}
    holder: dict[str, Pipeline] = {}

    @evaluator(name="judge")
    def judge(trace: Trace) -> bool:
        calls["n"] += 1
        assert tracing.is_suppressed()
        with holder["p"].tracer.start_as_current_span("judge call"):
            pass
        return True

    p = holder["p"] = make_pipeline([judge])
    with p.tracer.start_as_current_span("app"):
        pass
    p.flush()
    p.flush()
    assert calls["n"] == 1  # the judge's own span was not evaluated
    assert p.one("app").attributes["evaltrace.eval.judge.passed"] is True
    assert "evaltrace.eval.judge.passed" not in p.one("judge call").attributes


def test_trace_buffer_is_bounded(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([EvaluatorSpec(always_pass, trace_level=True)], trace_buffer_max_traces=2)
    for i in range(5):  # children of roots that have not ended yet
        with p.tracer.start_as_current_span(f"root{i}", end_on_exit=False) as root:
            with p.tracer.start_as_current_span(f"child{i}"):
                pass
        del root
    stats = p.processor.stats()["buffer"]
    assert stats["traces"] == 2 and stats["evicted_traces"] == 3


def test_status_error_on_failed_child_span(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="late_boom")
    def late_boom(trace: Trace) -> bool:
        release.wait(5)
        raise RuntimeError("x")

    p = make_pipeline([late_boom], hold_timeout_s=0.01)
    with p.tracer.start_as_current_span("s"):
        pass
    assert wait_until(lambda: len(p.by_name("s")) == 1)
    release.set()
    p.flush()
    child = p.one("evaluation late_boom")
    assert child.status.status_code is StatusCode.ERROR
    assert child.attributes["error.type"] == "RuntimeError"


def test_spans_fed_without_on_start_still_get_subtree_and_trace_evaluation(make_pipeline: MakePipeline) -> None:
    """An OTLP receiver hands finished spans to on_end only; subtrees must still be complete."""
    seen: list[Trace] = []

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        seen.append(trace)
        return True

    source = make_pipeline()  # records finished spans without evaluating (no evaluators)
    with source.tracer.start_as_current_span("root"):
        _llm(source, "chat 1", 3)
        _llm(source, "chat 2", 4)
    target = make_pipeline([EvaluatorSpec(whole, trace_level=True)], trace_quiet_period_s=0)
    for span in source.spans():  # children first, as they ended
        target.processor.on_end(span)
    target.flush()
    assert len(seen) == 1 and seen[0].metrics.token_input == 7
    assert target.one("root").attributes["evaltrace.eval.whole.passed"] is True


@pytest.mark.parametrize("is_async", [False, True])
def test_concurrency_limits(make_pipeline: MakePipeline, is_async: bool) -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def enter() -> None:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])

    def leave() -> None:
        with lock:
            state["now"] -= 1

    @evaluator(name="sync_limited")
    def sync_limited(trace: Trace) -> bool:
        enter()
        threading.Event().wait(0.005)
        leave()
        return True

    @evaluator(name="async_limited")
    async def async_limited(trace: Trace) -> bool:
        enter()
        await asyncio.sleep(0.005)
        leave()
        return True

    p = make_pipeline([async_limited if is_async else sync_limited], sync_workers=1, max_async_concurrency=1)
    for i in range(6):
        with p.tracer.start_as_current_span(f"s{i}"):
            pass
    p.flush()
    assert state["max"] == 1
    assert p.processor.stats()["evaluated"] == 6


def test_sync_evaluators_run_on_the_fast_lane_not_the_pool(make_pipeline: MakePipeline) -> None:
    threads: list[str] = []

    @evaluator(name="where")
    def where(trace: Trace) -> bool:
        threads.append(threading.current_thread().name)
        return True

    p = make_pipeline([EvaluatorSpec(where, inline=True)])
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert threads == ["evaltrace-eval-lane-1"]  # one worker thread runs the whole job: no hop to the pool
    assert p.one("s").attributes["evaltrace.eval.where.passed"] is True


def test_inline_results_past_the_hold_deadline_follow_as_evaluation_spans(make_pipeline: MakePipeline) -> None:
    # All-inline jobs run without a task per evaluator; a retry backoff can still carry them past the hold
    # deadline, and then the span must go out as is, once, with the result following, as on the general path.
    attempts: list[int] = []

    @evaluator(name="flaky_inline")
    def flaky_inline(trace: Trace) -> bool:
        attempts.append(1)
        if len(attempts) == 1:
            raise RetryableEvaluatorError("judge busy")
        return True

    p = make_pipeline([EvaluatorSpec(flaky_inline, inline=True)], hold_timeout_s=0.05, retry_backoff_s=0.2)
    with p.tracer.start_as_current_span("s"):
        pass
    p.flush()
    assert len(attempts) == 2
    spans = p.exporter.get_finished_spans()
    (evaluated,) = [s for s in spans if s.name == "s"]  # forwarded exactly once
    assert "evaltrace.eval.flaky_inline.passed" not in (evaluated.attributes or {})
    (late,) = [s for s in spans if s.name == "evaluation flaky_inline"]
    assert late.parent is not None and late.parent.span_id == evaluated.context.span_id
    assert (late.attributes or {})["evaltrace.eval.flaky_inline.outcome"] == "pass"
    stats = p.processor.stats()
    assert (stats["held_timeout"], stats["evaluation_spans"], stats["enriched"]) == (1, 1, 0)


def test_kind_fast_path_keeps_refs_and_releases_buffers(make_pipeline: MakePipeline) -> None:
    @evaluator(name="by_ref")
    def by_ref(trace: Trace) -> bool:
        return True

    key = register_evaluators("tests.fast", [by_ref])
    p = make_pipeline(
        [EvaluatorSpec(always_pass, span_kinds={"llm"}), EvaluatorSpec(half, span_kinds={"agent"}, trace_level=True)]
    )
    with p.tracer.start_as_current_span("root", attributes={"evaltrace.span.kind": "task"}):
        with p.tracer.start_as_current_span(
            "tool", attributes={"evaltrace.span.kind": "tool", "evaltrace.evaluators.ref": key}
        ):
            pass
    p.flush()
    assert p.one("tool").attributes["evaltrace.eval.by_ref.passed"] is True
    assert "evaltrace.eval.failed" not in p.one("root").attributes  # trace-level spec wants an agent root
    assert p.processor.stats()["buffer"]["traces"] == 0
