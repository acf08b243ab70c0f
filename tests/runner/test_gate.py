"""The CI gate (``--fail-on-regression``) and promote never go green on nothing evaluated or on errors."""

from __future__ import annotations

import pytest

from evaltrace.cli import main
from evaltrace.runner import run_eval

from .conftest import Project

CASES = [{"id": "a", "input": {"question": "qa"}}, {"id": "b", "input": {"question": "qb"}}]


def _config(project: Project, evaluator: dict[str, object]) -> dict[str, object]:
    return {
        "name": "gated",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [evaluator],
    }


def test_a_run_whose_evaluators_all_skipped_fails_the_gate_and_cannot_be_promoted(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    # tool_called skips every case: none names a tool to expect.
    path = project.write(_config(project, {"name": "tool_called"}), cases=CASES)
    args = ["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"]
    assert main(args) == 0  # without the gate: a report, not a failure
    out = capsys.readouterr().out
    assert "not evaluated" in out and "100.0%" not in out
    assert "tool_called: " in out  # the skip reason is shown
    assert main([*args, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "gate failed" in out and "variant v: not evaluated: no case judged" in out
    (run_dir, *_) = sorted(p for p in project.runs_dir.iterdir() if p.is_dir())
    assert main(["promote", run_dir.name, "--runs-dir", str(project.runs_dir)]) == 2
    assert "judged no case" in capsys.readouterr().err


def test_a_baseline_pass_that_errors_now_is_unverified_and_fails_the_gate(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    path = project.write(
        _config(project, {"import": f"{project.probe}:answer_mentions_question", "as": "check"}), cases=CASES
    )
    good = run_eval(path, runs_dir=project.runs_dir)
    assert good.summary.variants[0].pass_rate == 1.0
    project.write(_config(project, {"import": f"{project.probe}:Crashes", "as": "check"}))
    broken = run_eval(path, runs_dir=project.runs_dir)
    (variant,) = broken.summary.variants
    # The evaluator crashed on both cases: errors, not failures of the system.
    assert (variant.cases_failed, variant.cases_eval_errors, variant.pass_rate) == (0, 2, 0.0)
    capsys.readouterr()
    compare = ["compare", good.run.run_id, broken.run.run_id, "--runs-dir", str(project.runs_dir)]
    assert main(compare) == 0
    out = capsys.readouterr().out
    assert "regressions: 0" in out and "unverified: 2" in out
    assert main([*compare, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "passed on the baseline, no verdict now (evaluation error or not evaluated): a, b" in out
