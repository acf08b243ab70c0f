"""The job side's per-result fast paths (issue 28, s14) count and write exactly what the code before them did.

``PipelineStats.record`` has a judgement path without the outcome-to-counter lookup and ``whole_ms``'s frame;
``span_result_attributes`` keeps each evaluator's ``evaltrace.eval.<name>.*`` keys instead of building them per
result; ``evaluation_event_attributes`` reads its keys from module constants; ``_publish`` computes a judgement's
outcome inline. Each test compares the new code with the code it replaced (kept here verbatim as the reference):
the same counts and snapshot, the same attributes in the same order with the same types, for every kind of result
and for results on real spans of the real pipeline (the real OTel SDK, an in-memory exporter).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import semconv, settings
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, convert, evaluator
from evaltrace.evaluation.convert import (
    _label,
    capped,
    error_type,
    evaluation_event_attributes,
    judge_trace_id,
    result_outcome,
    skip_reason,
    span_result_attributes,
)
from evaltrace.evaluation.runner import failed_result, skipped_result
from evaltrace.evaluation.skip_reasons import count_skip_reason, skip_reason_key
from evaltrace.evaluation.spans import enriched_copy
from evaltrace.evaluation.stats import _COUNTER_OF_OUTCOME, PipelineStats, _EvaluatorCounters
from evaltrace.schema import EvaluationResult, Trace
from evaltrace.schema._base import whole_ms
from evaltrace.schema.trace import TraceError

T0 = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _reference_span_attributes(results: Iterable[EvaluationResult]) -> dict[str, Any]:
    """span_result_attributes before the kept keys (s13), verbatim."""
    attributes: dict[str, Any] = {}
    judged = False
    any_failed = False
    errors: list[str] = []
    not_evaluated: list[str] = []
    for result in results:
        outcome = result_outcome(result)
        prefix = semconv.EVALTRACE_EVAL_PREFIX + result.evaluator
        attributes[prefix + semconv.EVALTRACE_EVAL_OUTCOME_SUFFIX] = outcome
        if outcome == "error":
            errors.append(result.evaluator)
            attributes[prefix + semconv.EVALTRACE_EVAL_ERROR_TYPE_SUFFIX] = (
                error_type(result) or semconv.ERROR_TYPE_OTHER
            )
        elif outcome in ("not_evaluated", "pending"):
            not_evaluated.append(result.evaluator)
            if result.reason:
                attributes[prefix + semconv.EVALTRACE_EVAL_SKIP_REASON_SUFFIX] = capped(result.reason)
        else:
            judged = True
            any_failed = any_failed or outcome == "fail"
            if result.score is not None:
                attributes[prefix + semconv.EVALTRACE_EVAL_SCORE_SUFFIX] = float(result.score)
            attributes[prefix + semconv.EVALTRACE_EVAL_PASSED_SUFFIX] = outcome == "pass"
    if judged:
        attributes[semconv.EVALTRACE_EVAL_FAILED] = any_failed
    if errors:
        attributes[semconv.EVALTRACE_EVAL_ERRORS] = tuple(errors)
    if not_evaluated:
        attributes[semconv.EVALTRACE_EVAL_NOT_EVALUATED] = tuple(not_evaluated)
    return attributes


def _reference_event(result: EvaluationResult, response_id: str | None, provenance: bool) -> dict[str, Any]:
    """evaluation_event_attributes as the composition of the public helpers (the general path)."""
    attributes: dict[str, Any] = {semconv.GEN_AI_EVALUATION_NAME: result.evaluator}
    outcome = result_outcome(result)
    label = _label(result, outcome)
    if label is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = label
    if result.score is not None and outcome in ("pass", "fail"):
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
    if result.reason:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = capped(result.reason)
    if response_id:
        attributes[semconv.GEN_AI_RESPONSE_ID] = response_id
    failure = error_type(result) if outcome == "error" else None
    if failure is not None:
        attributes[semconv.ERROR_TYPE] = failure
    judge = judge_trace_id(result)
    if judge is not None:
        attributes[semconv.EVALTRACE_JUDGE_TRACE_ID] = judge
    if provenance:
        if result.evaluator_version:
            attributes[semconv.EVALTRACE_EVALUATOR_VERSION] = result.evaluator_version
        if result.evaluator_type:
            attributes[semconv.EVALTRACE_EVALUATOR_TYPE] = result.evaluator_type
    return attributes


class _ReferenceStats(PipelineStats):
    """PipelineStats with record() as it was before the judgement path (s13), verbatim."""

    def record(self, result: EvaluationResult, outcome: str | None = None) -> None:
        if outcome is None:
            outcome = result_outcome(result)
        key = _COUNTER_OF_OUTCOME.get(outcome)
        timed_out = result.error is not None and result.error.type == "timeout"
        reason = (skip_reason_key(skip_reason(result)) or "") if key == "skipped" else None
        if type(result) is EvaluationResult:
            latency_ms = float(whole_ms(result.started_at, result.finished_at))
        else:
            latency_ms = float(result.latency_ms)
        with self._lock:
            per = self._by_evaluator.get(result.evaluator)
            if per is None:
                per = self._by_evaluator[result.evaluator] = _EvaluatorCounters()
            per.evaluated += 1
            per.latencies_ms.append(latency_ms)
            self.counters["evaluated"] += 1
            if key is not None:
                setattr(per, key, getattr(per, key) + 1)
                self.counters[key] += 1
                if reason is not None:
                    count_skip_reason(per.skipped_by_reason, reason)
                    count_skip_reason(self._skipped_by_reason, reason)
            if timed_out:
                per.timed_out += 1
                self.counters["timed_out"] += 1


class _SlowResult(EvaluationResult):
    """A user's result class with its own latency (the stats read the property for it)."""

    @property
    def latency_ms(self) -> int:  # type: ignore[override]
        return 12_345


JUDGE = type("E", (), {"name": "judge", "version": "2"})()


def _timed(evaluator_name: str, delta_us: int, **fields: Any) -> EvaluationResult:
    return EvaluationResult.model_construct(
        evaluator=evaluator_name,
        started_at=T0,
        finished_at=T0 + dt.timedelta(microseconds=delta_us),
        **{"passed": True, "status": "completed", "reason": "", "detail": {}, "metadata": None, **fields},
    )


KINDS = [
    EvaluationResult(evaluator="a", passed=True),
    EvaluationResult(evaluator="b", passed=False, score=0.25, reason="too short"),
    EvaluationResult(evaluator="c", passed=True, detail={"label": "polite"}, reason="polite", score=1),
    EvaluationResult(evaluator="d", passed=False, detail={"label": ""}),
    EvaluationResult(evaluator="e", passed=True, detail={"label": 3}, metadata={semconv.JUDGE_TRACE_ID_KEY: "ab" * 16}),
    EvaluationResult(evaluator="f", passed=True, metadata={"other": 1}, evaluator_version="1.2", evaluator_type="llm"),
    EvaluationResult(evaluator="g", passed=True, score=1, status="pending"),
    EvaluationResult(evaluator="h", passed=True, reason="x" * 5000),
    EvaluationResult(evaluator="a", passed=False, score=0.0, error=TraceError(type="timeout", message="late")),
    failed_result(JUDGE, "TimeoutError", "slow", timeout=True),
    failed_result(JUDGE, "ValueError", "bug"),
    skipped_result(JUDGE, "no expected answer"),
    skipped_result(JUDGE, semconv.SKIP_NO_ANSWER),
    skipped_result(JUDGE, "no_reference"),
    EvaluationResult(evaluator="s", status="skipped", passed=False),
    EvaluationResult(evaluator="s", status="skipped", passed=True, reason="y" * 5000),
    _SlowResult(evaluator="slow", passed=True),
    _timed("t", 0),
    _timed("t", 999, passed=False),
    _timed("t", 1_001, score=0.5),
    _timed("t", -1),
    _timed("t", -1_001, passed=False),
    _timed("t", 86_400_000_000 + 5),
]


@pytest.fixture(autouse=True)
def _short_cap() -> Iterator[None]:
    saved = settings.current
    settings.current = dataclasses.replace(settings.current, max_attribute_length=120)
    try:
        yield
    finally:
        settings.current = saved


def _same(built: dict[str, Any], reference: dict[str, Any]) -> None:
    """The same keys in the same order, equal values of the same types."""
    assert list(built.items()) == list(reference.items())
    assert [type(v) for v in built.values()] == [type(v) for v in reference.values()]


@pytest.mark.parametrize("count", [1, 2, 3])
def test_span_attributes_with_kept_keys_are_those_built_per_result(count: int) -> None:
    for results in itertools.permutations(KINDS, count) if count < 3 else itertools.combinations(KINDS, count):
        _same(span_result_attributes(results), _reference_span_attributes(results))


def test_evaluator_names_past_the_kept_bound_get_the_same_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "_KEYS", {})
    monkeypatch.setattr(convert, "_MAX_KEPT_NAMES", 2)
    results = [EvaluationResult(evaluator=f"name-{i}", passed=i % 2 == 0, score=i / 10) for i in range(6)]
    for _ in range(2):  # the first time builds (and keeps two), the second reads the kept ones
        _same(span_result_attributes(results), _reference_span_attributes(results))
    assert list(convert._KEYS) == ["name-0", "name-1"]


def test_long_evaluator_names_are_not_kept_so_the_key_cache_stays_small(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cache is module-wide and span_result_attributes is public: 1,024 names of 100 KB each once pinned 512 MB.
    monkeypatch.setattr(convert, "_KEYS", {})
    long_name, short_name = "n" * 100_000, "n" * 256
    results = [EvaluationResult(evaluator=name, passed=True, score=1.0) for name in (long_name, short_name)]
    _same(span_result_attributes(results), _reference_span_attributes(results))
    assert list(convert._KEYS) == [short_name]


@pytest.mark.parametrize("provenance", [False, True])
@pytest.mark.parametrize("response_id", [None, "", "resp-1"])
def test_event_attributes_from_module_constants_are_those_of_the_helpers(
    response_id: str | None, provenance: bool
) -> None:
    for result in KINDS:
        _same(evaluation_event_attributes(result, response_id, provenance=provenance),
              _reference_event(result, response_id, provenance))  # fmt: skip


def _snapshot(stats: PipelineStats) -> dict[str, Any]:
    return stats.snapshot()


def test_stats_record_counts_every_kind_as_before() -> None:
    new, old = PipelineStats(), _ReferenceStats()
    many_tokens = [skipped_result(JUDGE, f"token_{i}") for i in range(40)]  # past the token cap
    for result in [*KINDS, *many_tokens, *KINDS]:
        new.record(result)
        old.record(result)
        outcome = result_outcome(result)
        new.record(result, outcome)
        old.record(result, outcome)
        assert _snapshot(new) == _snapshot(old)
    snapshot = _snapshot(new)
    assert snapshot["timed_out"] == 8 and snapshot["evaluated"] == 2 * (2 * len(KINDS) + 40)
    assert [list(per) for per in snapshot["evaluators"].values()] == [
        list(per) for per in _snapshot(old)["evaluators"].values()
    ]


@evaluator(name="graded")
def graded(trace: Trace) -> EvaluationResult:
    text = str(trace.input.get("question"))
    if text.startswith("skip"):
        raise SkipEvaluation("no_reference")
    if text.startswith("boom"):
        raise ValueError("broken evaluator")
    return EvaluationResult(evaluator="graded", passed="good" in text, score=0.75 if "good" in text else 0.1,
                            reason=text, detail={"label": "fine"} if "label" in text else {})  # fmt: skip


@evaluator(name="plain")
def plain(trace: Trace) -> bool:
    return "good" in str(trace.input.get("question"))


@pytest.fixture
def pipeline() -> Iterator[tuple[InMemorySpanExporter, Any]]:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "job-side", exporters=[exporter], local_store=False, batch=False, capture_content=True, sinks=[],
        evaluators=[EvaluatorSpec(graded, span_kinds={"agent"}), EvaluatorSpec(plain, span_kinds={"agent"})],
    )  # fmt: skip
    try:
        yield exporter, handle
    finally:
        handle.shutdown()


QUESTIONS = ["good answer", "bad answer", "good label", "skip me", "boom now", "x" * 400]


def test_the_enriched_copy_of_real_spans_carries_the_attributes_and_events_built_before(
    pipeline: tuple[InMemorySpanExporter, Any],
) -> None:
    exporter, handle = pipeline

    @evaltrace.agent
    def ask(question: str) -> str:
        return "answer to " + question

    for question in QUESTIONS:
        ask(question)
    handle.force_flush()
    enriched = [
        s for s in exporter.get_finished_spans() if s.attributes and "evaltrace.eval.graded.outcome" in s.attributes
    ]
    assert len(enriched) == len(QUESTIONS)
    for span in enriched:
        # The results back from what the span carries, then the copy rebuilt from the span as it was before them.
        results = [_result_of(span, name) for name in ("graded", "plain")]
        original = _without_evaluation(span)
        for variant in (original, _with_response_id(original)):
            for provenance in (False, True):
                copy = enriched_copy(variant, results, provenance=provenance)
                reference = dict(variant.attributes or {})
                reference.update(_reference_span_attributes(results))
                _same(dict(copy.attributes or {}), reference)
                response_id = (variant.attributes or {}).get(semconv.GEN_AI_RESPONSE_ID)
                events = [dict(e.attributes or {}) for e in copy.events][len(variant.events) :]
                assert len(events) == len(results)
                for built, result in zip(events, results, strict=True):
                    _same(built, _reference_event(result, response_id, provenance))
        _same(dict(span.attributes or {}), {**dict(original.attributes or {}), **_reference_span_attributes(results)})


def _result_of(span: ReadableSpan, name: str) -> EvaluationResult:
    attributes = span.attributes or {}
    prefix = f"evaltrace.eval.{name}."
    outcome = attributes[prefix + "outcome"]
    (event,) = [e for e in span.events if (e.attributes or {}).get(semconv.GEN_AI_EVALUATION_NAME) == name]
    explanation = str((event.attributes or {}).get(semconv.GEN_AI_EVALUATION_EXPLANATION, ""))
    if outcome == "error":
        return failed_result(type("E", (), {"name": name, "version": None})(), "ValueError", explanation)
    if outcome == "not_evaluated":
        return skipped_result(type("E", (), {"name": name, "version": None})(), explanation)
    label = (event.attributes or {}).get(semconv.GEN_AI_EVALUATION_SCORE_LABEL)
    return EvaluationResult(
        evaluator=name, passed=outcome == "pass", score=attributes.get(prefix + "score"), reason=explanation,
        detail={"label": label} if label not in ("pass", "fail") else {},
    )  # fmt: skip


def _without_evaluation(span: ReadableSpan) -> ReadableSpan:
    from evaltrace._internal.span_copy import replaced

    attributes = {k: v for k, v in (span.attributes or {}).items() if not k.startswith("evaltrace.eval.")}
    events = [e for e in span.events if e.name != semconv.GEN_AI_EVALUATION_RESULT_EVENT]
    return replaced(span, attributes=attributes, events=events)


def _with_response_id(span: ReadableSpan) -> ReadableSpan:
    from evaltrace._internal.span_copy import replaced

    return replaced(span, attributes={**dict(span.attributes or {}), semconv.GEN_AI_RESPONSE_ID: "chatcmpl-1"})
