"""Record traces whose evaluations pass, fail, error and skip, through the real pipeline into a local store."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator
from evaltrace.exporters import LocalTraceStore


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
RELEASE = threading.Event()


@evaluator(name="late_judge")
def late_judge(trace: Any) -> bool:
    RELEASE.wait(10)
    raise ConnectionError("judge unreachable")


def record_trace(store: Path, evaluators: Sequence[Any], *, late: bool = False) -> str:
    """Record one agent trace evaluated by ``evaluators`` into ``store``; return its trace id.

    With ``late``, ``late_judge`` runs too and errors only after the agent span went out unevaluated, so its
    result arrives on a child ``evaluation late_judge`` span (status ERROR).
    """
    options: dict[str, Any] = {"dead_letter_dir": None, "emit_log_events": False}
    if late:
        RELEASE.clear()
        evaluators = [*evaluators, late_judge]
        options["hold_timeout_s"] = 0.01
    handle = evaltrace.configure(
        "outcomes",
        local_store=store,
        batch=False,
        evaluators=[EvaluatorSpec(e, span_kinds={"agent"}) for e in evaluators],
        evaluation_options=options,
    )

    @evaltrace.agent(name="weather")
    def answer(question: str) -> str:
        return "It is sunny in Paris."

    try:
        tracer = handle.provider.get_tracer("outcomes")
        with tracer.start_as_current_span("request") as root:
            answer("What's the weather in Paris?")
            trace_id = format(root.get_span_context().trace_id, "032x")
        if late:  # let the agent span go out held-and-timed-out first
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if any(s.name == "invoke_agent weather" for s in LocalTraceStore(store).spans(trace_id)):
                    break
                time.sleep(0.005)
            RELEASE.set()
        assert handle.force_flush(30_000)
    finally:
        handle.shutdown()
    return trace_id
