"""Tool evaluators, budgets, classification and agent sanity, table-driven with hand-checked values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluators import (
    AgentSanity,
    Classification,
    Cost,
    Latency,
    StepAlignment,
    TokenBudget,
    ToolCalled,
    ToolEfficiency,
    classification_report,
    report_from_results,
)
from evaltrace.evaluators.tools import efficiency_level
from evaltrace.schema import RubricLevel

from .factories import build_case, build_trace


@pytest.mark.parametrize(
    ("evaluator", "tools", "passed", "score", "missing"),
    [
        (ToolCalled("get_weather"), [("get_weather", {"city": "Paris"})], True, 1.0, []),
        (ToolCalled("get_weather"), [], False, 0.0, ["get_weather"]),
        (ToolCalled("a", "b"), [("a", {}), ("c", {})], False, 0.5, ["b"]),
        (ToolCalled("search", arguments={"q": "x"}), [("search", {"q": "y"})], False, 0.0, ["search"]),
        (ToolCalled("search", arguments={"q": "x"}), [("search", {"q": "x", "n": 3})], True, 1.0, []),
    ],
)
def test_tool_called(evaluator: ToolCalled, tools: Any, passed: bool, score: float, missing: list[str]) -> None:
    result = evaluator.evaluate(build_trace("", tools=tools))
    assert (result.passed, result.score, result.detail["missing"]) == (passed, score, missing)


def test_tool_called_from_case_and_skip() -> None:
    case = build_case(must_call_tools=["lookup"])
    assert ToolCalled().evaluate(build_trace("", tools=[("lookup", {})]), case).passed
    assert ToolCalled().evaluate(build_trace(""), None).status == "skipped"


@pytest.mark.parametrize(
    ("calls", "redundant", "optimal", "maximum", "missing", "level"),
    [
        (0, 0, 0, 2, 0, RubricLevel.EXCELLENT),
        (0, 0, 1, 2, 0, RubricLevel.FAILED),
        (2, 0, 2, 4, 0, RubricLevel.EXCELLENT),
        (3, 0, 2, 4, 0, RubricLevel.GOOD),
        (3, 1, 2, 4, 0, RubricLevel.GOOD),
        (4, 1, 2, 4, 0, RubricLevel.ACCEPTABLE),
        (4, 2, 2, 4, 0, RubricLevel.POOR),
        (8, 0, 2, 4, 0, RubricLevel.POOR),
        (9, 0, 2, 4, 0, RubricLevel.FAILED),
        (1, 0, 1, 3, 1, RubricLevel.POOR),
    ],
)
def test_efficiency_levels(
    calls: int, redundant: int, optimal: int, maximum: int, missing: int, level: RubricLevel
) -> None:
    assert efficiency_level(calls, redundant, optimal, maximum, missing) is level


def test_tool_efficiency_counts_identical_calls() -> None:
    tools = [("search", {"q": "a"}), ("search", {"q": "a"}), ("search", {"q": "b"})]
    result = ToolEfficiency(optimal=2, maximum=4).evaluate(build_trace("", tools=tools))
    assert result.detail["calls"] == 3 and result.detail["redundant_calls"] == 1
    assert result.detail["level"] == "good" and result.score == 0.8 and result.passed
    case = build_case(must_call_tools=["search", "fetch"])
    defaulted = ToolEfficiency().evaluate(build_trace("", tools=tools), case)
    # optimal 2 (required tools), maximum 4; "fetch" never called caps the level at poor.
    assert defaulted.detail["missing_required"] == ["fetch"] and defaulted.score == 0.3 and not defaulted.passed


@pytest.mark.parametrize(
    ("expected", "actual", "completeness", "alignment"),
    [
        (["a", "b", "c"], ["a", "b", "c"], 1.0, 1.0),
        (["a", "b", "c"], ["c", "b", "a"], 1.0, 1 / 3),
        (["a", "b", "c"], ["a", "x", "c"], 2 / 3, 2 / 3),
        (["a", "b"], [], 0.0, 0.0),
        (["a", "a"], ["a"], 0.5, 0.5),
    ],
)
def test_step_alignment(expected: list[str], actual: list[str], completeness: float, alignment: float) -> None:
    result = StepAlignment(expected).evaluate(build_trace("", tools=[(n, {}) for n in actual]))
    assert result.detail["completeness"] == pytest.approx(completeness)
    assert result.detail["alignment"] == pytest.approx(alignment)
    assert result.score == pytest.approx((completeness + alignment) / 2)


def test_step_alignment_from_case_metadata() -> None:
    case = build_case(metadata={"expected_steps": ["plan", "act"]})
    assert StepAlignment().evaluate(build_trace("", tools=[("plan", {}), ("act", {})]), case).passed


def test_latency_budget() -> None:
    ok = Latency(max_ms=200).evaluate(build_trace("", latency_ms=100))
    assert ok.passed and ok.score == 0.5 and ok.detail["direction"] == "lower"
    slow = Latency(max_ms=200, max_first_token_ms=50).evaluate(
        build_trace("", latency_ms=150, metrics={"latency_first_token_ms": 100})
    )
    assert not slow.passed and slow.score == 2.0 and slow.detail["over_limit"] == ["latency_first_token_ms"]
    partial = Latency(max_ms=200, max_first_token_ms=50).evaluate(build_trace("", latency_ms=100))
    assert partial.passed and partial.detail["not_reported"] == ["latency_first_token_ms"]
    with pytest.raises(ValueError):
        Latency()


def test_cost_and_token_budgets() -> None:
    assert Cost(0.01).evaluate(build_trace("", metrics={"cost_usd": 0.002})).score == pytest.approx(0.2)
    assert not Cost(0.01).evaluate(build_trace("", metrics={"cost_usd": 0.02})).passed
    assert Cost(0.01).evaluate(build_trace("")).status == "skipped"
    tokens = TokenBudget(max_total=100, max_output=30).evaluate(
        build_trace("", metrics={"token_input": 60, "token_output": 35})
    )
    assert not tokens.passed and tokens.detail["over_limit"] == ["token_output"]
    assert tokens.detail["measured"]["token_total"] == 95


@pytest.mark.parametrize(
    ("evaluator", "answer", "expected_label", "passed", "predicted"),
    [
        (Classification("positive"), "Positive", None, True, "positive"),
        (Classification("positive"), "negative", None, False, "negative"),
        (Classification(labels=["positive", "negative"]), "The sentiment is negative.", "negative", True, "negative"),
        (Classification(labels=["pos", "neg"]), "pos or neg", "neg", False, "pos or neg"),
    ],
)
def test_classification(
    evaluator: Classification, answer: str, expected_label: Any, passed: bool, predicted: str
) -> None:
    case = build_case(facts={"label": expected_label}) if expected_label else None
    result = evaluator.evaluate(build_trace(answer), case)
    assert result.passed is passed and result.detail["predicted"] == predicted


def test_classification_report_hand_checked() -> None:
    pairs = [("cat", "cat"), ("cat", "dog"), ("dog", "dog"), ("dog", "dog"), ("bird", "cat")]
    report = classification_report(pairs)
    assert report.accuracy == pytest.approx(3 / 5) and not report.passed
    assert report.confusion_matrix["cat"] == {"bird": 0, "cat": 1, "dog": 1}
    assert report.confusion_matrix["bird"]["cat"] == 1
    cat = report.per_class["cat"]  # predicted cat twice (1 right), truly cat twice (1 found)
    assert (cat.precision, cat.recall, cat.f1, cat.support) == (0.5, 0.5, 0.5, 2)
    dog = report.per_class["dog"]  # predicted dog 3 times (2 right), truly dog twice (2 found)
    assert dog.precision == pytest.approx(2 / 3) and dog.recall == 1.0 and dog.f1 == pytest.approx(0.8)
    assert report.per_class["bird"].f1 == 0.0
    assert report.macro_f1 == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_report_from_results() -> None:
    evaluator = Classification(labels=["yes", "no"])
    results = [
        evaluator.evaluate(build_trace(a), build_case(facts={"label": e}))
        for a, e in [("yes", "yes"), ("no", "no"), ("yes", "no"), ("no", "no")]
    ]
    report = report_from_results(results)
    assert report.accuracy == 0.75 and report.passed and report.total == 4


def test_agent_sanity(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"title": "x"}))
    (tmp_path / "notes.md").write_text("hello")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "broken.json").write_text("{nope")
    evaluator = AgentSanity(
        ["report.json", "notes.md", "empty.txt", "broken.json", "absent.txt"],
        required_keys={"report.json": ["title", "body"]},
    )
    result = evaluator.evaluate(build_trace("", extra={"artifacts_path": str(tmp_path)}))
    problems = result.detail["problems"]
    assert problems["report.json"] == ["missing key 'body'"]
    assert problems["empty.txt"] == ["empty"] and problems["absent.txt"] == ["missing"]
    assert problems["broken.json"][0].startswith("invalid JSON") and "notes.md" not in problems
    assert result.score == pytest.approx(1 / 5) and not result.passed
    assert AgentSanity(["x"]).evaluate(build_trace("")).status == "skipped"
