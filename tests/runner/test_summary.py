"""Pure summary rules: case outcomes, skipped results, evaluator rollups and variant comparisons."""

from __future__ import annotations

import datetime as dt

import pytest

from evaltrace.runner.summary import case_outcomes, compare_variants, summarise_run
from evaltrace.schema import EvaluationResult, Trace, TraceError, TraceMetrics

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)


def _trace(case: str, variant: str, ms: int, *, error: bool = False, cost: float | None = None) -> Trace:
    return Trace(
        run_id="r",
        case_id=case,
        variant_name=variant,
        started_at=T0,
        finished_at=T0 + dt.timedelta(milliseconds=ms),
        error=TraceError(type="exception", message="x") if error else None,
        metrics=TraceMetrics(cost_usd=cost),
    )


def _result(case: str, variant: str, evaluator: str, passed: bool, **fields: object) -> EvaluationResult:
    return EvaluationResult(case_id=case, variant_name=variant, evaluator=evaluator, passed=passed, **fields)


TRACES = [
    _trace("a", "base", 10, cost=0.01),
    _trace("b", "base", 30),
    _trace("c", "base", 20, error=True),
    _trace("a", "new", 40, cost=0.03),
    _trace("b", "new", 40),
    _trace("c", "new", 40),
]
RESULTS = [
    _result("a", "base", "e1", True, score=1.0),
    _result("b", "base", "e1", True, score=0.5),
    _result("c", "base", "e1", False, status="skipped"),
    _result("a", "new", "e1", False, score=0.0),
    _result("b", "new", "e1", True, score=1.0),
    _result("c", "new", "e1", True),
    _result("a", "new", "e2", False, status="failed"),
    _result("b", "new", "e2", False, status="skipped"),
]


def test_case_outcomes() -> None:
    outcomes = case_outcomes(TRACES, RESULTS)
    # A skipped result does not fail a case; a system error or a failed evaluation does.
    assert outcomes == {"base": {"a": True, "b": True, "c": False}, "new": {"a": False, "b": True, "c": True}}


def test_summary_figures_and_comparison() -> None:
    summary, outcomes = summarise_run(
        run_id="r",
        started_at=T0,
        finished_at=T0,
        config_path="eval.yaml",
        config_hash="h",
        variant_names=["base", "new"],
        traces=TRACES,
        results=RESULTS,
    )
    base, new = summary.variants
    assert (base.cases_total, base.cases_passed, base.cases_errored) == (3, 2, 1)
    assert base.avg_latency_ms == 20.0 and base.avg_cost_usd == pytest.approx(0.01)
    assert base.avg_tokens_input is None
    e1, e2 = summary.by_evaluator
    assert e1.by_variant["base"].pass_rate == 1.0  # the skipped result is left out
    assert e1.by_variant["base"].avg_score == pytest.approx(0.75)
    assert e2.by_variant.keys() == {"new"} and e2.by_variant["new"].pass_rate == 0.0

    report = compare_variants(summary, outcomes, "base")
    (delta,) = report.deltas
    assert delta.variant == "new" and delta.regressions == ["a"] and delta.improvements == ["c"]
    assert delta.pass_rate_delta == pytest.approx(0.0) and delta.avg_latency_delta_ms == pytest.approx(20.0)
    assert (report.kind, report.regressions_count, report.improvements_count) == ("ad_hoc", 1, 1)
