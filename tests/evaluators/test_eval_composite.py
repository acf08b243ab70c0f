"""Agent rubric, run insights, the public surface, and the fit with the evaluation pipeline."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

import evaltrace.evaluators as evaluators
from evaltrace.evaluators import (
    AgentRubric,
    ContainsText,
    Faithfulness,
    Judge,
    NoPII,
    Regex,
    ToolCalled,
    run_insights,
)
from evaltrace.schema import EvaluationResult, Rubric, RubricDimension

from .factories import build_case, build_trace
from .fake_openai import FakeOpenAI

LEVELS = {
    "factual_accuracy": "good",
    "completeness": "excellent",
    "citation_accuracy": "acceptable",
    "source_quality": "poor",
}


def rubric_responder(levels: dict[str, str]) -> Any:
    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        dimension = prompt.split("Dimension: ", 1)[1].split("\n", 1)[0]
        level = levels.get(dimension)
        return {"status": 500} if level is None else json.dumps({"level": level, "reason": dimension})

    return respond


async def test_default_agent_rubric(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.responder = rubric_responder(LEVELS)
    tools = [("search", {"q": "a"}), ("fetch", {"id": 1})]
    trace = build_trace("Answer with [1].", question="Q?", contexts=["source"], tools=tools)
    case = build_case(must_call_tools=["search", "fetch"], facts={"expected_answer": "A"})
    result = await AgentRubric(judge).evaluate(trace, case)

    # 0.30*0.8 + 0.25*1.0 + 0.15*0.6 + 0.10*0.3 + 0.20*1.0 (two calls, both required: excellent)
    overall = 0.30 * 0.8 + 0.25 * 1.0 + 0.15 * 0.6 + 0.10 * 0.3 + 0.20 * 1.0
    assert result.score == pytest.approx(overall) and result.passed
    dims = result.detail["dimensions"]
    assert list(dims) == ["factual_accuracy", "completeness", "citation_accuracy", "source_quality", "tool_efficiency"]
    assert dims["source_quality"] == {
        "score": 0.3,
        "passed": False,
        "status": "completed",
        "reason": "poor: source_quality",
        "version": "v1.0.0+rubric-level.v1",
        "weight": 0.10,
    }
    assert len(fake_openai.chat_requests) == 4
    assert result.cost_usd == pytest.approx(4 * (100 * 1.0 + 20 * 2.0) / 1e6)


async def test_agent_rubric_leaves_out_failed_dimensions(fake_openai: FakeOpenAI, judge: Judge) -> None:
    fake_openai.responder = rubric_responder({"factual_accuracy": "failed", "completeness": "failed"})
    trace = build_trace("x", question="Q?", tools=[("search", {})])
    result = await AgentRubric(judge).evaluate(trace, build_case(must_call_tools=["search"]))
    # citation_accuracy and source_quality fail (HTTP 500): overall over the three scored dimensions.
    assert result.detail["not_scored"] == ["citation_accuracy", "source_quality"]
    assert result.score == pytest.approx((0.30 * 0.0 + 0.25 * 0.0 + 0.20 * 1.0) / 0.75)
    assert not result.passed and "not scored" in result.reason


async def test_custom_rubric_with_sync_evaluators() -> None:
    rubric = Rubric(
        name="mini", dimensions=[RubricDimension(name="tools", weight=1), RubricDimension(name="text", weight=3)]
    )
    evaluator = AgentRubric(
        rubric=rubric, evaluators={"tools": ToolCalled("a"), "text": ContainsText("ok")}, name="mini"
    )
    result = await evaluator.evaluate(build_trace("ok", tools=[("b", {})]))
    assert result.score == pytest.approx(0.75) and result.passed and result.evaluator == "mini"
    with pytest.raises(ValueError):
        AgentRubric(rubric=rubric, evaluators={"tools": ToolCalled("a")})


def result(
    evaluator: str,
    variant: str,
    case: str,
    score: float,
    passed: bool,
    threshold: float = 0.75,
    direction: str = "higher",
) -> EvaluationResult:
    return EvaluationResult(
        evaluator=evaluator,
        variant_name=variant,
        case_id=case,
        score=score,
        passed=passed,
        detail={"threshold": threshold, "direction": direction},
    )


def test_run_insights() -> None:
    results = [
        result("faithfulness", "a", "c1", 0.9, True),
        result("faithfulness", "a", "c2", 0.5, False),
        result("faithfulness", "b", "c1", 0.6, False),
        result("faithfulness", "b", "c2", 0.4, False),
        result("toxicity", "a", "c1", 0.1, True, 0.25, "lower"),
        result("toxicity", "b", "c1", 0.5, False, 0.25, "lower"),
        EvaluationResult(evaluator="faithfulness", variant_name="a", case_id="c3", passed=False, status="failed"),
    ]
    traces = [
        build_trace("", variant="a", latency_ms=300, metrics={"cost_usd": 0.02}),
        build_trace("", variant="b", latency_ms=100, metrics={"cost_usd": 0.01}),
    ]
    insights = run_insights(results, traces)
    faith = insights.evaluators["faithfulness"]
    assert faith.average_by_variant == {"a": pytest.approx(0.7), "b": pytest.approx(0.5)}
    assert faith.pass_rate_by_variant == {"a": 0.5, "b": 0.0}
    assert faith.best_variant == "a" and faith.hardest_case == "c2" and faith.hardest_case_failures == 2
    assert insights.evaluators["toxicity"].best_variant == "a"  # lower is better
    assert insights.problems == [
        "faithfulness: average 0.70 for variant 'a' is below the threshold 0.75",
        "faithfulness: average 0.50 for variant 'b' is below the threshold 0.75",
        "toxicity: average 0.50 for variant 'b' is above the threshold 0.25",
    ]
    assert (insights.cheapest_variant, insights.most_expensive_variant, insights.fastest_variant) == ("b", "a", "b")


def test_public_surface_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(evaluators).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert evaluators.__all__ == sorted(evaluators.__all__)
    assert public == set(evaluators.__all__)


def test_prompts_are_package_data_with_versions() -> None:
    from importlib import resources

    from evaltrace.evaluators._prompts import load_prompt

    names = sorted(
        p.name[:-5]
        for p in resources.files("evaltrace.evaluators").joinpath("prompts").iterdir()
        if p.name.endswith(".toml")
    )
    assert len(names) == 19  # 13 trace judges + 4 session judges (conversation.py) + 2 of the simulated user
    for name in names:
        prompt = load_prompt(name)
        assert prompt.name == name and prompt.version == "1" and prompt.user


def test_deterministic_evaluators_fit_the_pipeline_protocol() -> None:
    evaluation = pytest.importorskip("evaltrace.evaluation")
    runner = pytest.importorskip("evaltrace.evaluation.runner")
    for evaluator in (ToolCalled("x"), NoPII(), Regex("a")):
        assert isinstance(evaluator, evaluation.Evaluator)
    stamped = runner.run_evaluator(NoPII(), build_trace("mail a@b.io", case_id="c9"))
    assert stamped.evaluator == "pii_leakage" and stamped.case_id == "c9" and not stamped.passed
    assert stamped.evaluator_version == "v1.0.0"


async def test_judge_evaluators_fit_the_pipeline(fake_openai: FakeOpenAI, judge: Judge) -> None:
    runner = pytest.importorskip("evaltrace.evaluation.runner")
    fake_openai.script(json.dumps({"claims": [{"claim": "x", "supported": True}]}))
    evaluator = Faithfulness(judge)
    assert runner.is_async_evaluator(evaluator)
    stamped = await runner.arun_evaluator(evaluator, build_trace("x", contexts=["x"]))
    assert stamped.passed and stamped.evaluator_version == "v1.0.0+faithfulness.v1"


def test_catalogue_names_match_evaluator_names() -> None:
    from evaltrace.evaluators import CATALOGUE, create_evaluator

    special = {"pii_leakage", "semantic_similarity_sentences", "llm_judge"}  # alias class / instance-level names
    for name, cls in CATALOGUE.items():
        if name not in special:
            assert cls.name == name, name
    assert create_evaluator("tool_called", "get_weather").tools == ("get_weather",)
    assert create_evaluator("pii_leakage").name == "pii_leakage"
    with pytest.raises(KeyError, match="known: agent_rubric"):
        create_evaluator("nope")


def test_run_insights_reports_flips_after_perturbation() -> None:
    from evaltrace.schema import EvalCase

    cases = [EvalCase(id="c1"), EvalCase(id="c1-typo", metadata={"perturbation_of": "c1"}), EvalCase(id="c2")]
    results = [
        result("facts", "a", "c1", 1.0, True),
        result("facts", "a", "c1-typo", 0.0, False),
        result("facts", "b", "c1", 1.0, True),
        result("facts", "b", "c1-typo", 1.0, True),
        result("facts", "a", "c2", 1.0, True),
    ]
    insights = run_insights(results, cases=cases)
    flips = [p for p in insights.problems if "perturbed" in p]
    assert flips == ["facts: variant 'a' fails perturbed case 'c1-typo' but passes its original 'c1'"]
