"""Rubric roll-ups (issue 29, metrics reference): dimension averages in summary.yaml, the CLI and the report;
factual accuracy scored as the importance-weighted claim mean; the complexity distribution of the cases.

A real run of the ``agent_rubric`` evaluator, its judge a real OpenAI-compatible endpoint on 127.0.0.1 that
answers each rubric dimension with a fixed level (and factual accuracy with claims).
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from evaltrace.runner import RunOutcome, run_eval
from judge_server import JudgeServer, serve_judge

from .conftest import Project

LEVELS = {"factual_accuracy": "good", "completeness": "excellent", "citation_accuracy": "acceptable",
          "source_quality": "poor"}  # fmt: skip
# Importance 3 verified, importance 1 not: (3 * 1 + 1 * 0) / 4 = 0.75, while the level "good" is 0.8.
CLAIMS = [
    {"claim": "the key maps to alpha", "verified": True, "importance": 3},
    {"claim": "it was looked up twice", "verified": False, "importance": 1},
]


def _verdict(body: dict[str, Any]) -> dict[str, Any]:
    prompt = body["messages"][-1]["content"]
    dimension = prompt.split("Dimension: ", 1)[1].split("\n", 1)[0]
    reply: dict[str, Any] = {"level": LEVELS[dimension], "reason": dimension}
    if dimension == "factual_accuracy":
        reply["claims"] = CLAIMS
    return reply


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    with serve_judge(_verdict) as server:
        yield server


@pytest.fixture
def rubric_run(project: Project, judge: JudgeServer) -> RunOutcome:
    cases = [
        {"id": "c1", "input": {"question": "q1", "key": "a"}, "metadata": {"complexity": "high"},
         "expected": {"must_call_tools": ["lookup"], "facts": {"expected_answer": "alpha"}}},
        {"id": "c2", "input": {"question": "q2", "key": "a"}, "expected": {"facts": {"expected_answer": "alpha"}}},
        {"id": "c3", "input": {"question": "q3", "key": "a"}, "metadata": {"complexity": ""}},
        {"id": "c4", "input": {"question": "q4", "key": "a"}, "metadata": {"complexity": "low"}},
    ]  # fmt: skip
    config = {
        "name": "rubric",
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "judge": {"model": "judge-small", "base_url": judge.url, "api_key": "k"},
        "evaluators": [{"name": "agent_rubric"}],
    }
    return run_eval(project.write(config, cases), runs_dir=project.runs_dir)


def test_factual_accuracy_scores_the_importance_weighted_claim_mean(rubric_run: RunOutcome) -> None:
    (first, *_) = rubric_run.results
    dimensions = first.detail["dimensions"]
    assert dimensions["factual_accuracy"]["score"] == pytest.approx(0.75)  # not the level's 0.8


def test_summary_yaml_has_dimension_averages_and_complexity(rubric_run: RunOutcome) -> None:
    insights = rubric_run.run.read_summary().insights
    assert insights is not None
    averages = insights.dimension_averages["v1"]
    assert averages["factual_accuracy"] == pytest.approx(0.75)
    assert averages["completeness"] == pytest.approx(1.0)
    assert averages["citation_accuracy"] == pytest.approx(0.6)
    assert averages["source_quality"] == pytest.approx(0.3)
    assert "tool_efficiency" in averages  # the deterministic dimension too
    # c2 has no complexity and c3 an empty one: both count as medium.
    assert insights.complexity_distribution == {"high": 1, "low": 1, "medium": 2}


def test_cli_and_report_show_the_roll_ups(rubric_run: RunOutcome, tmp_path: Path, capsys: Any) -> None:
    assert main(["runs", "show", str(rubric_run.run.path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rubric dimension averages of v1: citation_accuracy 0.60, completeness 1.00, factual_accuracy 0.75" in out
    assert "cases by complexity: high 1, low 1, medium 2" in out
    page = tmp_path / "run.html"
    assert main(["report", str(rubric_run.run.path), "-o", str(page)]) == 0
    text = page.read_text()
    start = text.index("<h3>Rubric dimension averages</h3>")
    table = html.unescape(text[start : text.index("</table>", start)])
    assert 'title="factual_accuracy on v1">0.75<' in table and 'title="source_quality on v1">0.30<' in table
    assert "cases by complexity: high <b>1</b>, low <b>1</b>, medium <b>2</b>" in text
