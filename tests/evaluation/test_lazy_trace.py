"""The evaluation pipeline hands evaluators a Trace mapped as far as they read it (``mapping._lazy``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from evaltrace.evaluation import evaluator
from evaltrace.mapping._lazy import LazyTrace
from evaltrace.schema import Trace
from lazy_mapping import unmapped

_AGENT = {"evaltrace.span.kind": "agent", "input.value": '{"q":"Weather?"}', "output.value": '"Sunny."'}
_CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Weather?"}]}]',
    "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Sunny."}]}]',
    "gen_ai.usage.input_tokens": 7,
}


def test_the_pipeline_hands_evaluators_a_trace_mapped_as_far_as_they_read(make_pipeline: Any) -> None:
    seen: list[tuple[type, set[str]]] = []

    @evaluator(name="sunny")
    def sunny(trace: Trace) -> bool:
        answer = trace.output.final_answer or ""
        seen.append((type(trace), unmapped(trace)))
        return "Sunny" in answer

    pipeline = make_pipeline([sunny])
    agent = {"evaltrace.span.kind": "agent", "input.value": '{"q":"Weather?"}', "output.value": '"Sunny."'}
    with pipeline.tracer.start_as_current_span("agent", attributes=agent):
        pass
    pipeline.flush()
    assert pipeline.one("agent").attributes["evaltrace.eval.sunny.outcome"] == "pass"
    kind, left = seen[0]
    assert kind is LazyTrace
    assert {"messages", "metrics", "llm_steps", "tool_calls", "extra", "started_at"} <= left


def test_a_field_mapping_bug_is_not_evaluated_never_the_evaluators_error(
    make_pipeline: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As test_completion's mapping-failure test, but the bug is in one field's mapping (metrics), read late.

    The evaluators reading that field are not evaluated (``mapping_failed``), also when one wraps the error;
    one that never reads it is judged as usual. The bug is logged once per Trace, however many read the field.
    """
    from evaltrace.mapping import _build, _lazy_fields

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a mapping bug of ours")

    for module in (_build, _lazy_fields):  # the eager assembly and the lazy field source each look it up
        monkeypatch.setattr(module, "build_metrics", broken)

    @evaluator(name="cheap")
    def cheap(trace: Trace) -> bool:
        return trace.metrics.total_tokens is None

    @evaluator(name="wrapping")
    def wrapping(trace: Trace) -> bool:
        try:
            return trace.metrics.total_tokens is None
        except Exception as exc:
            raise ValueError("could not read the metrics") from exc

    @evaluator(name="dumps")
    def dumps(trace: Trace) -> bool:
        return bool(trace.model_dump_json())

    @evaluator(name="answered")
    def answered(trace: Trace) -> bool:
        return trace.output.final_answer == "Sunny."

    p = make_pipeline([cheap, wrapping, dumps, answered], trace_quiet_period_s=0)
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        with p.tracer.start_as_current_span("agent", attributes=_AGENT):
            with p.tracer.start_as_current_span("chat", attributes=_CHAT):
                pass
        p.flush()
    for span in ("agent", "chat"):  # both are evaluated, each on its own Trace with the same broken field
        attributes = p.one(span).attributes or {}
        for name in ("cheap", "wrapping", "dumps"):
            assert attributes[f"evaltrace.eval.{name}.outcome"] == "not_evaluated", (span, name)
            assert attributes[f"evaltrace.eval.{name}.skip_reason"] == "mapping_failed", (span, name)
        assert attributes["evaltrace.eval.answered.outcome"] == "pass"
    stats = p.processor.stats()
    assert stats["failed"] == 0 and stats["errors"] == 0 and stats["passed"] == 2
    assert stats["not_evaluated_by_reason"]["mapping_failed"] == 6
    logged = [r for r in caplog.records if "mapping Trace.metrics" in r.getMessage()]
    assert len(logged) == 2  # once per Trace, not once per reader
    assert all("a mapping bug of ours" in (r.exc_text or "") for r in logged)
