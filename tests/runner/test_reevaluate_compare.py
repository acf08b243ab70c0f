"""re-evaluate (never calls the system), promote, drift and compare, through the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, compare_runs, promote_run, re_evaluate, run_eval
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE

from .conftest import Project


def _config(project: Project, function: str = "answer", **extra: object) -> dict[str, object]:
    return {
        "name": "drifty",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target(function)}}],
        "evaluators": [{"name": "contains_text"}],
        **extra,
    }


def test_re_evaluate_reads_traces_and_never_calls_the_system(project: Project) -> None:
    path = project.write(_config(project))
    first = run_eval(path, runs_dir=project.runs_dir)
    calls = len(project.sut().CALLS)
    assert calls == 3
    traces_before = (first.run.path / TRACES_FILE).read_bytes()

    again = re_evaluate(first.run)
    assert len(project.sut().CALLS) == calls  # the system was not called
    assert (first.run.path / TRACES_FILE).read_bytes() == traces_before  # traces are never rewritten
    assert [(r.case_id, r.passed) for r in again.results] == [(r.case_id, r.passed) for r in first.results]

    # New evaluators from another eval.yaml: results and summary are rewritten from the same traces.
    other = project.root / "other.yaml"
    other.write_text(
        yaml.safe_dump(
            {
                "cases": "cases.yaml",
                **_config(project, evaluators=[{"import": f"{project.probe}:answer_mentions_question"}]),
            }
        )
    )
    code = main(["re-evaluate", str(first.run.path), "--config", str(other), "--no-progress"])
    assert code == 0
    assert len(project.sut().CALLS) == calls
    lines = (first.run.path / RESULTS_FILE).read_text().splitlines()
    assert {json.loads(line)["evaluator"] for line in lines} == {"answer_mentions_question"}
    summary = yaml.safe_load((first.run.path / SUMMARY_FILE).read_text())
    assert [r["evaluator"] for r in summary["by_evaluator"]] == ["answer_mentions_question"]
    assert summary["run_id"] == first.run.run_id


def test_re_evaluate_completes_a_run_interrupted_before_its_summary(project: Project) -> None:
    path = project.write(_config(project))
    first = run_eval(path, runs_dir=project.runs_dir)
    (first.run.path / SUMMARY_FILE).unlink()
    (first.run.path / RESULTS_FILE).unlink()
    again = re_evaluate(RunDirectory(first.run.path))
    assert again.summary.variants[0].cases_total == 3
    assert (first.run.path / SUMMARY_FILE).is_file()


def test_promote_then_drift_reports_regressions(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    path = project.write(_config(project))
    good = run_eval(path, runs_dir=project.runs_dir)
    assert main(["promote", good.run.run_id, "--runs-dir", str(project.runs_dir)]) == 0
    baseline = project.runs_dir / "baselines" / "drifty"
    assert (baseline / SUMMARY_FILE).read_text() == (good.run.path / SUMMARY_FILE).read_text()

    project.write(_config(project, function="answer_wrong"))
    bad = run_eval(path, runs_dir=project.runs_dir, drift=True)
    report = bad.summary.comparison
    assert report is not None and report.kind == "drift"
    assert report.baseline == report.baseline_run_id == good.run.run_id
    (delta,) = report.deltas
    # c1 and c2 passed before and fail now; c3 failed (system error) both times... and now passes nothing.
    assert delta.regressions == ["c1", "c2"] and delta.improvements == []
    assert report.regressions_count == 2 and delta.pass_rate_delta == pytest.approx(-2 / 3)
    # summary.yaml on disk carries the drift comparison.
    on_disk = yaml.safe_load((bad.run.path / SUMMARY_FILE).read_text())
    assert on_disk["comparison"]["kind"] == "drift"

    # compare A B, and compare B against the promoted baseline, agree.
    assert compare_runs(good.run, bad.run).deltas == report.deltas
    capsys.readouterr()
    code = main(["compare", good.run.run_id, bad.run.run_id, "--runs-dir", str(project.runs_dir)])
    out = capsys.readouterr().out
    assert code == 0 and "c1, c2" in out and "-66.7 pts" in out
    # It says what changed for each regressed case, and where the judged run's trace is.
    assert "What changed against" in out and "regression c1 in " in out and "pass -> fail" in out
    assert str(bad.run.path / "traces.jsonl") in out.replace("\n", "")
    assert main(["compare", bad.run.run_id, "--runs-dir", str(project.runs_dir), "--fail-on-regression"]) == 1
    # The reverse direction shows improvements.
    assert compare_runs(bad.run, good.run).deltas[0].improvements == ["c1", "c2"]


def test_drift_without_a_baseline_is_a_note(project: Project) -> None:
    path = project.write(_config(project))
    outcome = run_eval(path, runs_dir=project.runs_dir, drift=True)
    assert outcome.summary.comparison is None
    assert any("no promoted baseline" in note for note in outcome.notes)


def test_unknown_run_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "nope", "nada", "--runs-dir", str(tmp_path)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["re-evaluate", "nope", "--runs-dir", str(tmp_path), "--no-progress"]) == 2


def test_run_ids_are_unique_and_sortable(project: Project) -> None:
    path = project.write(_config(project))
    ids = [run_eval(path, runs_dir=project.runs_dir).run.run_id for _ in range(3)]
    assert len(set(ids)) == 3 and ids == sorted(ids)


def test_promote_replaces_the_previous_baseline(project: Project) -> None:
    path = project.write(_config(project))
    first = run_eval(path, runs_dir=project.runs_dir)
    second = run_eval(path, runs_dir=project.runs_dir)
    promote_run(first.run, project.runs_dir)
    target = promote_run(second.run, project.runs_dir)
    assert yaml.safe_load((target / SUMMARY_FILE).read_text())["run_id"] == second.run.run_id


def test_runs_list(project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps long cells at the default 80 columns
    path = project.write(_config(project))
    first = run_eval(path, runs_dir=project.runs_dir)
    second = run_eval(path, runs_dir=project.runs_dir, sqlite_path=project.root / "r.db", run_namespace={"b": "x"})
    capsys.readouterr()
    assert main(["runs", "list", "--runs-dir", str(project.runs_dir)]) == 0
    out = capsys.readouterr().out
    assert out.index(second.run.run_id) < out.index(first.run.run_id)  # newest first
    assert "v 66.7%" in out
    assert main(["runs", "list", "--sqlite", str(project.root / "r.db"), "--namespace", "b=x"]) == 0
    out = capsys.readouterr().out
    assert second.run.run_id in out and first.run.run_id not in out
