"""The evaluation pipeline hands evaluators a Trace mapped as far as they read it (``mapping._lazy``)."""

from __future__ import annotations

from typing import Any

from evaltrace.evaluation import evaluator
from evaltrace.mapping._lazy import LazyTrace
from evaltrace.schema import Trace
from lazy_mapping import unmapped


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
