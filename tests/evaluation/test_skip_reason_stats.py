"""Online stats break the evaluators' own skips down by reason, as a backfill's report does.

An evaluator that declines a span (``no_answer`` from the built-in ones, a ``SkipEvaluation`` of the user's) gives a
"not evaluated" result, counted in ``stats()["skipped"]``. ``skipped_by_reason`` says why: in total and per
evaluator, keyed by the reason stored on the span (``evaltrace.eval.<name>.skip_reason``) when it is a code or an
identifier-like token, under ``other`` when it is free text or a token past the cap, summing to ``skipped``.
Free text is never a key: stats() is served on /healthz and must not show what redaction masks on the spans.
Through ``configure()``, the real pipeline, real evaluators and the real OTel SDK with an in-memory exporter.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator
from evaltrace.evaluation.skip_reasons import MAX_SKIP_REASON_TOKENS, skip_reason_key
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
    folded = {"other" if r == capped_long else r: n for r, n in on_spans["reference"].items()}  # free text
    expected = {
        "pii_leakage": {"no_answer": 2},
        "contains_text": {"no_answer": 2},
        "reference": {"no_reference": 2, capped_long: 1},
        "silent": {"skipped": 3},
    }
    assert {name: dict(counts) for name, counts in on_spans.items()} == expected
    expected["reference"] = folded
    evaluators = stats["evaluators"]
    for name, reasons in expected.items():
        assert evaluators[name]["skipped_by_reason"] == reasons, name
        assert sum(reasons.values()) == evaluators[name]["skipped"], name  # sums to the existing count
    assert folded == {"no_reference": 2, "other": 1}
    assert stats["skipped_by_reason"] == {"no_answer": 4, "no_reference": 2, "other": 1, "skipped": 3}
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


EMAIL = "alice.smith@example.com"


@evaluator(name="needs_ref")
def needs_ref(trace: Trace) -> bool:
    """A user's skip whose message names the user it was missing for (free text with PII)."""
    raise SkipEvaluation(f"no reference answer on file for {EMAIL}")


@evaluator(name="per_case")
def per_case(trace: Trace) -> bool:
    """A user's skip whose message names the case: one distinct message per trace."""
    raise SkipEvaluation(f"no reference answer for case {trace.input.get('question')}")


@evaluator(name="per_token")
def per_token(trace: Trace) -> bool:
    """A user's skip whose reason is a token, but a distinct one per trace (``case_0``, ``case_1``...)."""
    raise SkipEvaluation(f"case_{trace.input.get('question')}")


def _configure(*evaluators: Any, **options: Any) -> Any:
    specs = [EvaluatorSpec(e, span_kinds={"agent"}) for e in evaluators]
    return evaltrace.configure(
        "skip-reasons", local_store=False, batch=False, capture_content=True, evaluators=specs, sinks=[], **options
    )


@pytest.fixture
def restore() -> Iterator[None]:
    saved = settings.current
    try:
        yield
    finally:
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def _sums_to_skipped(stats: dict[str, Any]) -> None:
    assert sum(stats["skipped_by_reason"].values()) == stats["skipped"]
    for name, per in stats["evaluators"].items():
        assert sum(per["skipped_by_reason"].values()) == per["skipped"], name


def test_a_redacted_skip_message_never_shows_in_stats(restore: None) -> None:
    exporter = InMemorySpanExporter()
    handle = _configure(needs_ref, exporters=[exporter], redact=True)
    try:

        @evaltrace.agent(name="weather")
        def answer(question: str) -> str:
            return "Sunny"

        answer("q")
        assert handle.force_flush()
        stats = handle.evaluation_processor.stats()
    finally:
        handle.shutdown()
    exported = [
        str(value)
        for span in exporter.get_finished_spans()
        for key, value in (span.attributes or {}).items()
        if key == "evaltrace.eval.needs_ref.skip_reason"
    ]
    assert len(exported) == 1 and EMAIL not in exported[0]  # the span's reason is redacted on export
    assert stats["skipped_by_reason"] == {"other": 1}  # so stats (served on /healthz) does not hold it either
    assert stats["evaluators"]["needs_ref"]["skipped_by_reason"] == {"other": 1}
    assert "alice" not in json.dumps(stats, default=str)
    _sums_to_skipped(stats)


def test_skip_reasons_stay_bounded_and_sum_to_skipped(restore: None) -> None:
    handle = _configure(per_case, per_token, NoPII())
    try:

        @evaltrace.agent(name="weather")
        def answer(question: str, reply: str | None) -> str | None:
            return reply

        cases = MAX_SKIP_REASON_TOKENS + 8
        for i in range(cases):
            answer(str(i), "Sunny")
        answer("late", None)  # NoPII skips with no_answer: a code, its own key after the tokens' cap is reached
        assert handle.force_flush()
        stats = handle.evaluation_processor.stats()
    finally:
        handle.shutdown()
    evaluators = stats["evaluators"]
    # One message per case: free text, all under one key however many cases there are.
    assert evaluators["per_case"]["skipped_by_reason"] == {"other": cases + 1}
    # One token per case: the first MAX_SKIP_REASON_TOKENS apart, the rest folded into "other".
    tokens = evaluators["per_token"]["skipped_by_reason"]
    assert len(tokens) == MAX_SKIP_REASON_TOKENS + 1
    assert tokens["other"] == cases + 1 - MAX_SKIP_REASON_TOKENS
    assert all(tokens[f"case_{i}"] == 1 for i in range(MAX_SKIP_REASON_TOKENS))
    assert evaluators["pii_leakage"]["skipped_by_reason"] == {"no_answer": 1}
    # In total too: the capped tokens, the code and "other" (free text and tokens past the cap together).
    total = stats["skipped_by_reason"]
    assert len(total) == MAX_SKIP_REASON_TOKENS + 2 and total["no_answer"] == 1
    assert total["other"] == 2 * (cases + 1) - MAX_SKIP_REASON_TOKENS
    assert stats["skipped"] == 2 * (cases + 1) + 1
    _sums_to_skipped(stats)


@pytest.mark.parametrize(
    ("reason", "key"),
    [
        ("no_reference", "no_reference"),
        ("needs.ref-v2", "needs.ref-v2"),
        ("a" * 64, "a" * 64),
        ("a" * 65, None),
        ("No_reference", None),
        ("no reference", None),
        ("1st_case", None),
        (EMAIL, None),
        ("", None),
        ("no_answer", "no_answer"),
        ("shutdown", "shutdown"),
        ("skipped", "skipped"),
        # SkipEvaluation() with no message: evaltrace's own default text, so its own key despite the space.
        ("not applicable", "not applicable"),
    ],
)
def test_only_codes_and_identifier_tokens_are_keys(reason: str, key: str | None) -> None:
    assert skip_reason_key(reason) == key
