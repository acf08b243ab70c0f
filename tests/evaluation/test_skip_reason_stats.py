"""Online stats break the evaluators' own skips down by reason, as a backfill's report does.

An evaluator that declines a span (``no_answer`` from the built-in ones, a ``SkipEvaluation`` of the user's) gives a
"not evaluated" result, counted in ``stats()["skipped"]``. ``skipped_by_reason`` says why: in total and per
evaluator, keyed by the reason stored on the span (``evaltrace.eval.<name>.skip_reason``), summing to ``skipped``.
Through ``configure()``, the real pipeline, real evaluators and the real OTel SDK with an in-memory exporter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator
from evaltrace.evaluators import ContainsText, NoPII
from evaltrace.schema import EvaluationResult, Trace

LONG = "needs a reference answer " * 10  # longer than the configured attribute cap (120) below


@evaluator(name="reference")
def reference(trace: Trace) -> bool:
    """Declines spans without a reference: a user's skip with its own reason (capped as the span caps it)."""
    text = str(trace.input.get("question"))  # the agent's arguments
    if text.startswith("ref"):
        return True
    raise SkipEvaluation(LONG if text.startswith("long") else "no_reference")


@evaluator(name="silent")
def silent(trace: Trace) -> EvaluationResult:
    """Declines every other span with a skipped result and no reason at all."""
    if str(trace.input.get("question")).endswith("1"):
        return EvaluationResult(evaluator="silent", status="skipped", passed=False)
    return EvaluationResult(evaluator="silent", passed=True)


@pytest.fixture
def configured() -> Iterator[tuple[InMemorySpanExporter, Any]]:
    saved = settings.current
    exporter = InMemorySpanExporter()
    specs = [EvaluatorSpec(e, span_kinds={"agent"}) for e in (NoPII(), ContainsText("Seattle"), reference, silent)]
    handle = evaltrace.configure(
        "skip-reasons", exporters=[exporter], local_store=False, batch=False, capture_content=True, evaluators=specs,
        sinks=[], max_attribute_length=120,
    )  # fmt: skip
    try:
        yield exporter, handle
    finally:
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def test_the_evaluators_own_skips_are_counted_by_the_reason_on_their_spans(
    configured: tuple[InMemorySpanExporter, Any],
) -> None:
    exporter, handle = configured

    @evaltrace.agent(name="weather")
    def answer(question: str, reply: str | None) -> str | None:
        return reply

    asked = [
        ("ref 0", "50 degrees in Seattle"),  # everything judged
        ("ref 1", None),  # no answer: NoPII and ContainsText skip with no_answer; silent skips without a reason
        ("q 0", "Sunny in Seattle"),  # reference skips: no_reference
        ("long 1", None),  # reference's reason is capped; the rest as "ref 1"
        ("q 1", "Rain"),  # ContainsText fails (a verdict, not a skip); silent skips
    ]
    for question, reply in asked:
        answer(question, reply)
    assert handle.force_flush()
    stats = handle.evaluation_processor.stats()

    # What the spans store: each evaluator's not_evaluated outcomes and their skip_reason (or none).
    on_spans: dict[str, Counter[str]] = {}
    agents = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert len(agents) == len(asked)
    for span in agents:
        attributes = span.attributes or {}
        for name in ("pii_leakage", "contains_text", "reference", "silent"):
            if attributes.get(f"evaltrace.eval.{name}.outcome") == "not_evaluated":
                reason = str(attributes.get(f"evaltrace.eval.{name}.skip_reason", "skipped"))
                on_spans.setdefault(name, Counter())[reason] += 1

    capped_long = next(r for r in on_spans["reference"] if r != "no_reference")
    assert len(capped_long) <= 120 < len(LONG)  # the span's capped reason, not the evaluator's long one
    expected = {
        "pii_leakage": {"no_answer": 2},
        "contains_text": {"no_answer": 2},
        "reference": {"no_reference": 2, capped_long: 1},
        "silent": {"skipped": 3},
    }
    assert {name: dict(counts) for name, counts in on_spans.items()} == expected
    evaluators = stats["evaluators"]
    for name, reasons in expected.items():
        assert evaluators[name]["skipped_by_reason"] == reasons, name
        assert sum(reasons.values()) == evaluators[name]["skipped"], name  # sums to the existing count
    assert stats["skipped_by_reason"] == {"no_answer": 4, "no_reference": 2, capped_long: 1, "skipped": 3}
    assert sum(stats["skipped_by_reason"].values()) == stats["skipped"] == 10
    # The existing counts are unchanged: verdicts, and never-started evaluations (none here) apart.
    assert (evaluators["contains_text"]["passed"], evaluators["contains_text"]["failed"]) == (2, 1)
    assert stats["not_evaluated_by_reason"] == {}
    assert all("not_evaluated_by_reason" not in per for per in evaluators.values())


def test_an_evaluator_that_never_skips_reports_no_reasons(configured: tuple[InMemorySpanExporter, Any]) -> None:
    _, handle = configured

    @evaltrace.agent(name="weather")
    def answer(question: str) -> str:
        return "50 degrees in Seattle"

    answer("ref 0")
    assert handle.force_flush()
    stats = handle.evaluation_processor.stats()
    assert stats["skipped"] == 0 and stats["skipped_by_reason"] == {}
    assert all(per["skipped_by_reason"] == {} for per in stats["evaluators"].values())
