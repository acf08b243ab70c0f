"""The evaluation process engine (engine="process") with the real SDK: same results as in process, a killed
child, shutdown draining, evaluators that cannot be shipped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.exceptions import ConfigError

from .conftest import MakePipeline, Pipeline, wait_until
from .process_evaluators import answer_length, mentions_paris, slow

pytestmark = pytest.mark.skipif(os.name != "posix", reason="kills the child with POSIX signals")


def _answer(pipeline: Pipeline, question: str, answer: str) -> None:
    """An agent span with a tool child and an LLM child, as an application makes them."""
    with pipeline.tracer.start_as_current_span(
        "invoke_agent helper", attributes={"evaltrace.span.kind": "agent", "input.value": json.dumps(question)}
    ) as agent:
        with pipeline.tracer.start_as_current_span("execute_tool lookup", attributes={"evaltrace.span.kind": "tool"}):
            pass
        with pipeline.tracer.start_as_current_span("chat model", attributes={"evaltrace.span.kind": "llm"}):
            pass
        agent.set_attribute("output.value", answer)


def _eval_attributes(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("evaltrace.eval")}


def _scores(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    # Values, not ids or times: the two runs made different traces at different moments.
    return sorted(
        ({"name": r["name"], "value": r["value"], "comment": r.get("comment")} for r in rows),
        key=lambda r: (r["name"], r["value"], r["comment"] or ""),
    )


ANSWERS = [("capital of France?", "Paris is the capital of France."), ("and Spain?", "Madrid."), ("hi", "")]


def _run(make_pipeline: MakePipeline, tmp_path: Path, engine: str) -> tuple[list[ReadableSpan], list[Any], Any]:
    specs = [EvaluatorSpec(mentions_paris, span_kinds=["agent"]), EvaluatorSpec(answer_length, span_kinds=["agent"])]
    scores = tmp_path / f"scores-{engine}.jsonl"
    pipeline = make_pipeline(specs, sinks=[JsonlScoreSink(scores)], engine=engine, hold_timeout_s=30.0)
    for question, answer in ANSWERS:
        _answer(pipeline, question, answer)
    pipeline.flush()
    stats = pipeline.processor.stats()
    pipeline.provider.shutdown()
    # By question: the process engine may forward spans in another order than they ended.
    spans = sorted(pipeline.by_name("invoke_agent helper"), key=lambda s: str((s.attributes or {})["input.value"]))
    return spans, _scores(scores), stats


def test_process_engine_gives_the_same_spans_and_scores_as_in_process(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    thread_spans, thread_scores, _ = _run(make_pipeline, tmp_path, "thread")
    process_spans, process_scores, stats = _run(make_pipeline, tmp_path, "process")

    assert stats["process"]["started"] == 1 and stats["process"]["answered"] == len(ANSWERS)
    assert stats["evaluated"] == 2 * len(ANSWERS) and stats["enriched"] == len(ANSWERS)
    assert len(process_spans) == len(thread_spans) == len(ANSWERS)
    for in_thread, in_process in zip(thread_spans, process_spans, strict=True):
        assert _eval_attributes(in_process) == _eval_attributes(in_thread)
        assert [e.name for e in in_process.events] == [e.name for e in in_thread.events]
    assert process_scores == thread_scores
    by_name = {(s["name"], s["value"]) for s in process_scores}
    assert ("answer_length", 31 / 40) in by_name
    comments = {s["comment"] for s in process_scores if s["name"] == "answer_length"}
    assert "31 characters for {'input': 'capital of France?'}" in comments  # the child mapped the span's input


def test_a_killed_child_leaves_spans_unevaluated_counted_then_restarts(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline([EvaluatorSpec(slow, span_kinds=["agent"])], engine="process", hold_timeout_s=30.0)
    engine = pipeline.processor._remote
    assert engine is not None
    for question, answer in ANSWERS:
        _answer(pipeline, question, answer)
    assert wait_until(lambda: engine.in_flight() == len(ANSWERS), timeout=60)
    pid = engine.kill_for_tests()
    assert pid is not None
    pipeline.flush()  # must not hang on the dead child

    spans = pipeline.by_name("invoke_agent helper")
    assert len(spans) == len(ANSWERS)  # every span went out
    for span in spans:  # not evaluated, with the reason: never a verdict
        attributes = span.attributes or {}
        assert attributes["evaltrace.eval.slow.outcome"] == "not_evaluated"
        assert attributes["evaltrace.eval.slow.skip_reason"] == "engine_unavailable"
        assert "evaltrace.eval.slow.passed" not in attributes or attributes["evaltrace.eval.slow.passed"] is not True
    stats = pipeline.processor.stats()
    assert stats["process"]["crashes"] == 1 and stats["process"]["lost_jobs"] == len(ANSWERS)
    assert stats["not_evaluated_by_reason"]["engine_unavailable"] == len(ANSWERS)
    assert stats["passed"] == stats["failed"] == 0

    def evaluated_after_restart() -> bool:  # the first jobs within the back-off are refused (counted) at once
        _answer(pipeline, "again?", "Paris again.")
        pipeline.flush()
        return bool(pipeline.processor.stats()["passed"])

    assert wait_until(evaluated_after_restart, timeout=60)
    assert pipeline.processor.stats()["process"]["started"] == 2
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the killed child is gone (reaped), not a zombie we hold


def test_shutdown_drains_evaluations_in_the_child(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline([EvaluatorSpec(slow, span_kinds=["agent"])], engine="process", hold_timeout_s=30.0)
    for question, answer in ANSWERS:
        _answer(pipeline, question, answer)
    engine = pipeline.processor._remote
    assert engine is not None
    pipeline.processor.shutdown(60_000)  # at once: the evaluations are still running in the child

    spans = pipeline.by_name("invoke_agent helper")
    assert [(s.attributes or {}).get("evaltrace.eval.slow.passed") for s in spans] == [True] * len(ANSWERS)
    assert pipeline.processor.stats()["passed"] == len(ANSWERS)
    assert not engine.alive()


def test_an_evaluator_that_cannot_be_shipped_is_a_config_error(tmp_path: Path) -> None:
    @evaluator(name="local_closure")
    def local_closure(trace: Any) -> bool:
        return True

    with pytest.raises(ConfigError, match="local_closure.*cannot be shipped to the evaluation process"):
        evaltrace.configure(
            service_name="t", exporters=[], local_store=False, evaluators=[local_closure], evaluation="process"
        )
    with pytest.raises(ConfigError, match="evaluation"):
        evaltrace.configure(service_name="t", exporters=[], local_store=False, evaluation="processes")  # type: ignore[arg-type]


def test_configure_process_engine_evaluates_decorated_functions(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="t", exporters=[exporter], local_store=False, evaluation="process", handle_sigterm=False
    )
    try:

        @evaltrace.agent(evaluators=[mentions_paris])
        def answer(question: str) -> str:
            return "Paris, of course"

        answer("capital of France?")
        handle.force_flush()
        (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
        assert (span.attributes or {})["evaltrace.eval.mentions_paris.passed"] is True
        assert handle.evaluation_processor.stats()["process"]["answered"] == 1
    finally:
        handle.shutdown()
