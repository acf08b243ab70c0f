"""The CI gate (``--fail-on-regression``) and promote never go green on nothing evaluated or on errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

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
    assert (variant.cases_failed, variant.cases_eval_errors, variant.pass_rate) == (0, 2, None)  # nothing judged
    capsys.readouterr()
    compare = ["compare", good.run.run_id, broken.run.run_id, "--runs-dir", str(project.runs_dir)]
    assert main(compare) == 0
    out = capsys.readouterr().out
    assert "regressions: 0" in out and "unverified: 2" in out
    assert main([*compare, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "passed on the baseline, no verdict now (evaluation error or not evaluated): a, b" in out


VARIANT_CHECK = """
def check(trace, case):
    if trace.variant_name.startswith("errored"):
        raise ZeroDivisionError("evaluator bug on this variant")
    return False
"""


def _summary_yaml(project: Project) -> dict[str, Any]:
    (run_dir,) = [p for p in project.runs_dir.iterdir() if p.is_dir()]
    loaded = yaml.safe_load((run_dir / "summary.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_a_variant_whose_evaluations_all_errored_fails_the_gate_despite_system_failures(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One case fails by the system ("boom"), the evaluator crashes on every trace: a failure is no evaluator's
    # verdict, so nothing was evaluated. It used to pass the gate with "0 regressions, best variant v".
    monkeypatch.setenv("COLUMNS", "250")
    cases = [{"id": "a", "input": {"question": "qa"}}, {"id": "boom", "input": {"question": "boom"}}]
    path = project.write(_config(project, {"import": f"{project.probe}:Crashes", "as": "check"}), cases=cases)
    args = ["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress", "--fail-on-regression"]
    assert main(args) == 1
    out = capsys.readouterr().out.replace("\n", "")
    assert "gate failed: variant v: not evaluated: no evaluator judged anything (2 evaluation error(s)" in out
    assert "best variant" not in out
    summary = _summary_yaml(project)
    (variant,) = summary["variants"]
    assert variant["pass_rate"] == 0.0 and variant["cases_failed"] == 1  # the system failure is judged
    (rollup,) = summary["by_evaluator"]
    assert rollup["by_variant"]["v"]["pass_rate"] is None  # nothing judged: null, not 0.0
    assert summary["insights"]["best_variant"] is None


def test_a_variant_nothing_was_judged_on_is_never_best(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    module = f"{project.probe}_variant_check"
    (project.root / f"{module}.py").write_text(VARIANT_CHECK)
    cases = [{"id": "a", "input": {"question": "qa"}}, {"id": "boom", "input": {"question": "boom"}}]
    config = {
        "name": "gated",
        "variants": [
            # Fast, one system failure, every evaluation errored: its pass rate (0.0) ties the judged one's.
            {"name": "errored", "adapter": "python_function", "config": {"target": project.target("answer")}},
            # Slow, every case judged (failed) by the evaluator.
            {"name": "judged", "adapter": "python_function", "config": {"target": project.target("slow")}},
        ],
        "evaluators": [{"import": f"{module}:check", "as": "check"}],
    }
    path = project.write(config, cases=cases)
    assert main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    summary = _summary_yaml(project)
    assert summary["insights"]["best_variant"] == "judged"
    assert "best variant judged" in out
    rates = {v["name"]: v["pass_rate"] for v in summary["variants"]}
    assert rates == {"errored": 0.0, "judged": 0.0}
    rollups = summary["by_evaluator"][0]["by_variant"]
    assert rollups["errored"]["pass_rate"] is None and rollups["judged"]["pass_rate"] == 0.0
    # The report and the CLI tables read the null rate without crashing or showing 0%.
    (run_dir,) = [p for p in project.runs_dir.iterdir() if p.is_dir()]
    assert main(["runs", "show", run_dir.name, "--runs-dir", str(project.runs_dir)]) == 0
    assert main(["runs", "list", "--runs-dir", str(project.runs_dir)]) == 0
    shown = capsys.readouterr().out
    assert "Traceback" not in shown
    report = project.root / "run.html"
    assert main(["report", run_dir.name, "--runs-dir", str(project.runs_dir), "-o", str(report)]) == 0
    assert "not evaluated" in report.read_text()
