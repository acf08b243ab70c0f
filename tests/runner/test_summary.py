"""Pure summary rules: case outcomes, skipped results, evaluator rollups and variant comparisons."""

from __future__ import annotations

import datetime as dt

import pytest

from evaltrace.runner.gate import comparison_gate_problems, run_gate_problems
from evaltrace.runner.summary import CaseOutcomes, case_outcomes, compare_variants, run_comparison, summarise_run
from evaltrace.schema import EvaluationResult, RunSummary, Trace, TraceError, TraceMetrics

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
    # A skipped result does not fail a case, a system error does; a judged failure beats an evaluation error.
    assert outcomes == {"base": {"a": "pass", "b": "pass", "c": "fail"}, "new": {"a": "fail", "b": "pass", "c": "pass"}}


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
    assert (base.cases_failed, base.cases_eval_errors, base.cases_not_evaluated) == (1, 0, 0)
    e1, e2 = summary.by_evaluator
    assert e1.by_variant["base"].pass_rate == 1.0  # the skipped result is left out
    assert e1.by_variant["base"].avg_score == pytest.approx(0.75)
    assert (e1.by_variant["base"].passed, e1.by_variant["base"].not_evaluated) == (2, 1)
    # e2 on "new": one errored evaluation and one skip: nothing judged, and neither counts as a failure.
    rollup = e2.by_variant["new"]
    assert e2.by_variant.keys() == {"new"}
    assert (rollup.passed, rollup.failed, rollup.errors, rollup.not_evaluated) == (0, 0, 1, 1)

    report = compare_variants(summary, outcomes, "base")
    (delta,) = report.deltas
    assert delta.variant == "new" and delta.regressions == ["a"] and delta.improvements == ["c"]
    assert delta.pass_rate_delta == pytest.approx(0.0) and delta.avg_latency_delta_ms == pytest.approx(20.0)
    assert (report.kind, report.regressions_count, report.improvements_count) == ("ad_hoc", 1, 1)


def _summary(run_id: str, traces: list[Trace], results: list[EvaluationResult]) -> tuple[RunSummary, CaseOutcomes]:
    return summarise_run(
        run_id=run_id,
        started_at=T0,
        finished_at=T0,
        config_path="eval.yaml",
        config_hash="h",
        variant_names=["v"],
        traces=traces,
        results=results,
    )


def test_errors_leave_the_pass_rate_and_skips_are_not_evaluated() -> None:
    traces = [_trace(c, "v", 10) for c in ("passes", "fails", "errors", "skipped", "bare")]
    results = [
        _result("passes", "v", "judge", True),
        _result("passes", "v", "rules", False, status="skipped", reason="no rule applies"),
        _result("fails", "v", "judge", False),
        _result("fails", "v", "rules", False, status="failed"),  # a judged failure is still a failure
        _result("errors", "v", "judge", False, status="failed"),
        _result("errors", "v", "rules", True),  # passing rules cannot vouch for what the judge did not see
        _result("skipped", "v", "judge", False, status="skipped", reason="no answer"),
        _result("skipped", "v", "rules", False, status="skipped", reason="no rule applies"),
    ]
    summary, outcomes = _summary("r", traces, results)
    assert outcomes == {
        "v": {"passes": "pass", "fails": "fail", "errors": "error", "skipped": "not_evaluated", "bare": "not_evaluated"}
    }
    (v,) = summary.variants
    assert (v.cases_passed, v.cases_failed, v.cases_eval_errors, v.cases_not_evaluated) == (1, 1, 1, 2)
    assert v.pass_rate == 0.5  # 1 of the 2 judged cases: the error and the skips are not in the denominator
    assert v.not_evaluated_reasons == {
        "judge: no answer": 1,
        "no evaluator applies": 1,
        "rules: no rule applies": 1,
    }
    judge = next(r for r in summary.by_evaluator if r.evaluator == "judge").by_variant["v"]
    assert (judge.passed, judge.failed, judge.errors, judge.not_evaluated, judge.pass_rate) == (1, 1, 1, 1, 0.5)
    assert judge.skip_reasons == {"no answer": 1}


def test_nothing_evaluated_is_never_a_pass_nor_a_green_gate() -> None:
    traces = [_trace(c, "v", 10) for c in ("a", "b")]
    skipped = [_result(c, "v", "judge", False, status="skipped", reason="no answer") for c in ("a", "b")]
    summary, _ = _summary("r", traces, skipped)
    (v,) = summary.variants
    assert v.cases_passed == 0 and v.cases_not_evaluated == 2 and v.not_evaluated_reasons == {"judge: no answer": 2}
    (problem,) = run_gate_problems(summary)
    assert "not evaluated" in problem and "variant v" in problem


def test_comparison_with_unjudged_cases_is_unverified_not_green() -> None:
    traces = [_trace(c, "v", 10) for c in ("a", "b")]
    good, good_outcomes = _summary("base", traces, [_result(c, "v", "judge", True) for c in ("a", "b")])
    # Now the judge errors on "a" and passes "b": no regression, but "a" is unverified.
    now, now_outcomes = _summary(
        "now", traces, [_result("a", "v", "judge", False, status="failed"), _result("b", "v", "judge", True)]
    )
    report = run_comparison(good, good_outcomes, now, now_outcomes)
    (delta,) = report.deltas
    assert delta.regressions == [] and delta.unverified == ["a"] and report.unverified_count == 1
    assert delta.pass_rate_delta == 0.0 and not delta.not_evaluated  # b: 1/1 both times
    (problem,) = comparison_gate_problems(report)
    assert "no verdict now" in problem and problem.endswith(": a")
    # Nothing judged now at all: the delta says so instead of a pass-rate drop to 0%.
    skipped = [_result(c, "v", "judge", False, status="skipped") for c in ("a", "b")]
    empty, empty_outcomes = _summary("empty", traces, skipped)
    (delta,) = run_comparison(good, good_outcomes, empty, empty_outcomes).deltas
    assert delta.not_evaluated and delta.pass_rate_delta == 0.0 and delta.unverified == ["a", "b"]
