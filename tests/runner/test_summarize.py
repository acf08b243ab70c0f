"""``evaltrace runs summarize``: summary.yaml rebuilt from traces.jsonl and results.jsonl, calling nothing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import run_eval
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE

from .conftest import Project

COUNTER_SOURCE = '''
from pathlib import Path

CALLS = Path(__file__).with_name("judge_calls.txt")


def counted(trace, case):
    """A stand-in for a paid judge: every call leaves a line behind."""
    with CALLS.open("a") as handle:
        handle.write(case.id + "\\n")
    return "alpha" in (trace.output.final_answer or "")
'''


def _project(project: Project) -> Path:
    # A module name of this project's own: another test's module of the same name may still be imported.
    (project.root / f"judge_{project.module}.py").write_text(textwrap.dedent(COUNTER_SOURCE))
    target = {"adapter": "python_function", "config": {"target": project.target("answer")}}
    return project.write({
        "name": "resum",
        "variants": [{"name": "v", **target}, {"name": "tools_only", **target}],
        "evaluators": [{"import": f"judge_{project.module}:counted", "name": "judge"}, {"name": "tool_called"}],
    })  # fmt: skip


def _calls(project: Project) -> int:
    path = project.root / "judge_calls.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _summarize(project: Project, run_id: str) -> int:
    return main(["runs", "summarize", run_id, "--runs-dir", str(project.runs_dir)])


def test_summary_is_rebuilt_from_stored_results_without_calling_judges_or_the_system(project: Project) -> None:
    outcome = run_eval(_project(project), runs_dir=project.runs_dir)
    judge_calls, system_calls = _calls(project), len(project.sut().CALLS)
    assert judge_calls == 6 and system_calls == 6
    summary_path = outcome.run.path / SUMMARY_FILE
    written = yaml.safe_load(summary_path.read_text())
    summary_path.unlink()  # data-model.md: summary.yaml is safe to delete and recompute

    assert _summarize(project, outcome.run.run_id) == 0
    rebuilt = yaml.safe_load(summary_path.read_text())
    assert (_calls(project), len(project.sut().CALLS)) == (judge_calls, system_calls)  # nothing was called
    for key in ("finished_at",):  # the end time comes from the last stored result, not from the lost file
        written.pop(key), rebuilt.pop(key)
    assert rebuilt == written


def test_summary_follows_edited_results(project: Project) -> None:
    outcome = run_eval(_project(project), runs_dir=project.runs_dir)
    before = {v.name: v for v in outcome.summary.variants}["v"]
    results = outcome.run.path / RESULTS_FILE
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    # A reviewer overturns the judge on v/c1 (pass -> fail): the summary must follow the stored results.
    for line in lines:
        if (line["variant_name"], line["case_id"], line["evaluator"]) == ("v", "c1", "judge"):
            assert line["passed"] is True
            line["passed"] = False
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    calls = _calls(project)

    assert _summarize(project, outcome.run.run_id) == 0
    summary = yaml.safe_load((outcome.run.path / SUMMARY_FILE).read_text())
    assert _calls(project) == calls
    after = {v["name"]: v for v in summary["variants"]}["v"]
    assert (after["cases_passed"], after["cases_failed"]) == (before.cases_passed - 1, before.cases_failed + 1)
    failing = {(c["case_id"], c["variant"]) for c in summary["failed_cases"]}
    assert ("c1", "v") in failing


def test_nothing_judged_gives_null_pass_rate_in_the_rebuilt_summary(project: Project) -> None:
    target = {"adapter": "python_function", "config": {"target": project.target("answer")}}
    path = project.write(
        {"name": "resum", "variants": [{"name": "v", **target}], "evaluators": [{"name": "tool_called"}]},
        cases=[{"id": "plain", "input": {"question": "q"}}],  # names no tool: tool_called skips it
    )
    outcome = run_eval(path, runs_dir=project.runs_dir)
    (outcome.run.path / SUMMARY_FILE).unlink()
    assert _summarize(project, outcome.run.run_id) == 0
    summary = yaml.safe_load((outcome.run.path / SUMMARY_FILE).read_text())
    assert summary["variants"][0]["pass_rate"] is None  # nothing judged: not 0.0
    assert summary["by_evaluator"][0]["by_variant"]["v"]["pass_rate"] is None


def test_an_unfinished_run_is_refused_naming_what_is_missing(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = run_eval(_project(project), runs_dir=project.runs_dir)
    results = outcome.run.path / RESULTS_FILE
    kept = results.read_text().splitlines()[:-1]  # killed before its last evaluation was saved
    results.write_text("".join(line + "\n" for line in kept))
    (outcome.run.path / SUMMARY_FILE).unlink()

    assert _summarize(project, outcome.run.run_id) == 2
    err = capsys.readouterr().err
    assert "unfinished" in err and "1 trace(s) without all their results" in err
    assert not (outcome.run.path / SUMMARY_FILE).exists()  # nothing half-true is written
