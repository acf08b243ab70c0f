"""Builders of traces and cases for the evaluator tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from evaltrace.schema import EvalCase, ExpectedBehavior, ToolCall, Trace, TraceMetrics, TraceOutput

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def build_trace(
    answer: str | None = "",
    *,
    question: str | None = None,
    contexts: list[str] | None = None,
    tools: list[tuple[str, dict[str, Any]]] | None = None,
    latency_ms: int = 100,
    metrics: dict[str, Any] | None = None,
    thinking: str | None = None,
    extra: dict[str, Any] | None = None,
    variant: str = "v1",
    case_id: str = "c1",
) -> Trace:
    inputs: dict[str, Any] = {}
    if question is not None:
        inputs["question"] = question
    if contexts is not None:
        inputs["contexts"] = contexts
    return Trace(
        run_id="run",
        case_id=case_id,
        variant_name=variant,
        started_at=T0,
        finished_at=T0 + dt.timedelta(milliseconds=latency_ms),
        input=inputs,
        output=TraceOutput(final_answer=answer, thinking=thinking),
        tool_calls=[ToolCall(id=f"call{i}", name=n, arguments=a) for i, (n, a) in enumerate(tools or [])],
        metrics=TraceMetrics(**(metrics or {})),
        extra=extra or {},
    )


def build_case(**expected: Any) -> EvalCase:
    metadata = expected.pop("metadata", {})
    return EvalCase(id="c1", metadata=metadata, expected=ExpectedBehavior(**expected))
