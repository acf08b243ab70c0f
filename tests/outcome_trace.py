"""Record traces whose evaluations pass, fail, error and skip, through the real pipeline into a local store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator


@evaluator(name="relevance", threshold=0.5)
def relevance(trace: Any) -> float:
    return 0.82


@evaluator(name="concise", threshold=0.9)
def concise(trace: Any) -> float:
    return 0.5


@evaluator(name="judge")
def judge(trace: Any) -> bool:
    raise ConnectionError("judge unreachable")


@evaluator(name="faithful")
def faithful(trace: Any) -> bool:
    raise SkipEvaluation("no reference answer")


@evaluator(name="grounded")
def grounded(trace: Any) -> bool:
    raise SkipEvaluation("no retrieved documents")


MIXED = (relevance, concise, judge, faithful)
ALL_SKIPPED = (faithful, grounded)


def record_trace(store: Path, evaluators: Sequence[Any]) -> str:
    """Record one agent trace evaluated by ``evaluators`` into ``store``; return its trace id."""
    handle = evaltrace.configure(
        "outcomes",
        local_store=store,
        batch=False,
        evaluators=[EvaluatorSpec(e, span_kinds={"agent"}) for e in evaluators],
        evaluation_options={"dead_letter_dir": None, "emit_log_events": False},
    )

    @evaltrace.agent(name="weather")
    def answer(question: str) -> str:
        return "It is sunny in Paris."

    try:
        tracer = handle.provider.get_tracer("outcomes")
        with tracer.start_as_current_span("request") as root:
            answer("What's the weather in Paris?")
            trace_id = format(root.get_span_context().trace_id, "032x")
        assert handle.force_flush(30_000)
    finally:
        handle.shutdown()
    return trace_id
