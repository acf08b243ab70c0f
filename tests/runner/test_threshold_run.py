"""`evaltrace run` applies eval.yaml thresholds with the catalogue's semantics (issue 29).

json_schema's threshold is the share of cases that must hold valid JSON (0.5 by default): 3 valid answers out of
4 raise no run problem, and a stricter ``threshold:`` in eval.yaml does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner.rundir import SUMMARY_FILE
from evaltrace.schema import RunSummary

from .conftest import Project

SYSTEM = '''
import json


def answer(question: str) -> str:
    """Valid JSON for every city but one, which the system answers in prose."""
    if question == "Atlantis":
        return "I could not find that city."
    return json.dumps({"city": question, "country": "somewhere"})
'''
SCHEMA = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
CASES = [{"id": c.lower(), "input": {"question": c}} for c in ("Paris", "Rome", "Oslo", "Atlantis")]


def _run(project: Project, entry: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[RunSummary, str]:
    module = f"json_system_{project.module}"
    (project.root / f"{module}.py").write_text(SYSTEM)
    project.modules.append(module)
    config = {
        "name": "json_answers",
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": f"{module}:answer"}}],
        "evaluators": [entry],
    }
    path = project.write(config, CASES)
    try:
        code = main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"])
    finally:
        sys.modules.pop(module, None)
    assert code in (0, 1)  # a failed case is a verdict, not an error of the run
    (run_dir,) = [p for p in project.runs_dir.iterdir() if p.is_dir()]
    summary = RunSummary.model_validate(yaml.safe_load((run_dir / SUMMARY_FILE).read_text()))
    return summary, capsys.readouterr().out


def test_three_valid_json_answers_of_four_raise_no_problem(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, out = _run(project, {"name": "valid_json", "type": "json_schema", "schema": SCHEMA}, capsys)
    (variant,) = summary.variants
    assert (variant.cases_passed, variant.cases_failed) == (3, 1)  # each case keeps its own verdict
    assert summary.insights is not None
    assert not [p for p in summary.insights.problems if p.startswith("valid_json")]
    assert "problem: valid_json" not in out


def test_a_stricter_threshold_in_eval_yaml_reports_the_problem(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {"name": "valid_json", "type": "json_schema", "schema": SCHEMA, "threshold": 0.9}
    summary, _ = _run(project, entry, capsys)
    assert summary.insights is not None
    (problem,) = [p for p in summary.insights.problems if p.startswith("valid_json")]
    assert "average 0.75" in problem and "below the threshold 0.9" in problem


def test_a_threshold_outside_0_and_1_is_a_config_error(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    module = f"json_system_{project.module}"
    (project.root / f"{module}.py").write_text(SYSTEM)
    config = {
        "name": "json_answers",
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": f"{module}:answer"}}],
        "evaluators": [{"name": "valid_json", "type": "json_schema", "schema": SCHEMA, "threshold": 3}],
    }
    code = main(["run", str(project.write(config, CASES)), "--runs-dir", str(project.runs_dir), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "evaluators[0]" in err and "threshold must be between 0 and 1, got 3" in err
    assert not Path(project.runs_dir).exists() or not any(Path(project.runs_dir).iterdir())
