"""`evaltrace run --resume`: a run SIGKILLed while executing, then while evaluating, is completed without redoing
finished cells or results; torn last lines are repaired. Also: re-evaluate finds ``import:`` evaluators alone.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, RunDirectory, resume_run, run_eval
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from evaltrace.schema import EvaluationResult, RunSummary, Trace

from .conftest import Project

CLI = [sys.executable, "-c", "from evaltrace.cli import main; raise SystemExit(main())"]

USER_CODE = """
import time
from pathlib import Path

from evaltrace.schema import EvaluationResult

HERE = Path(__file__).parent


def _record(name, line):
    with open(HERE / name, "a") as handle:
        handle.write(line + "\\n")


def _wait_for(name):
    while not (HERE / name).exists():
        time.sleep(0.01)


def answer(question):
    _record("target_calls.txt", question)
    if question == "q4":
        _wait_for("release_target")  # the first run is killed here, with q1..q3 done
    return f"{question}: ok"


class Recorded:
    name = "recorded"
    version = None

    def evaluate(self, trace, case):
        _record("eval_calls.txt", trace.case_id)
        if trace.case_id == "c4":
            _wait_for("release_eval")  # the second run is killed here, with c1..c3 evaluated
        return EvaluationResult(evaluator=self.name, passed=True)
"""


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never got there"
        time.sleep(0.02)


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args, "--runs-dir", "runs", "--no-progress"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
    )


def test_resume_after_sigkill_redoes_nothing_finished(tmp_path: Path) -> None:
    root = tmp_path
    (root / "resumable.py").write_text(textwrap.dedent(USER_CODE))
    cases = [
        {"id": f"c{i}", "input": {"question": f"q{i}"}, "expected": {"answer_should_include": ["ok"]}}
        for i in range(1, 7)
    ]
    (root / "cases.yaml").write_text(yaml.safe_dump(cases))
    config = {
        "name": "resumable",
        "cases": "cases.yaml",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": "resumable:answer"}}],
        "evaluators": [{"import": "resumable:Recorded"}, {"name": "contains_text"}],
        "concurrency": 1,
    }
    (root / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    # 1. Killed while executing: 3 cells persisted, q4 in flight.
    first = _start(root, "run", "eval.yaml")
    run_dir: list[Path] = []

    def three_cells_done() -> bool:
        run_dir[:] = list((root / "runs").glob("*_resumable"))
        return (
            bool(run_dir) and len(_lines(run_dir[0] / TRACES_FILE)) == 3 and "q4" in _lines(root / "target_calls.txt")
        )

    _wait(three_cells_done, first)
    _kill(first)
    run = run_dir[0]
    assert not (run / RESULTS_FILE).exists() and not (run / SUMMARY_FILE).exists()
    with (run / TRACES_FILE).open("a") as handle:  # as if the kill had cut a write short
        handle.write('{"schema_version":"1.0","run_id":"')
    (root / "release_target").touch()

    # 2. Resumed (no eval.yaml named), then killed while evaluating: c1..c3 evaluated, c4 in flight.
    second = _start(root, "run", "--resume", run.name)
    _wait(lambda: len(_lines(run / RESULTS_FILE)) == 6 and "c4" in _lines(root / "eval_calls.txt"), second)
    _kill(second)
    with (run / RESULTS_FILE).open("a") as handle:
        handle.write('{"run_id":"2026')
    (root / "release_eval").touch()

    # 3. Resumed to the end.
    third = subprocess.run(
        [*CLI, "run", "--resume", run.name, "--runs-dir", "runs", "--no-progress"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert third.returncode == 0, third.stderr
    assert "results.jsonl: dropped a torn last line" in third.stdout

    # Each cell's system ran once, but q4, which was in flight at the first kill and had left no trace.
    calls = Counter(_lines(root / "target_calls.txt"))
    assert calls == {"q1": 1, "q2": 1, "q3": 1, "q4": 2, "q5": 1, "q6": 1}
    # Each evaluation ran once, but c4's, in flight at the second kill.
    evaluated = Counter(_lines(root / "eval_calls.txt"))
    assert evaluated == {"c1": 1, "c2": 1, "c3": 1, "c4": 2, "c5": 1, "c6": 1}
    traces = [Trace.model_validate_json(line) for line in _lines(run / TRACES_FILE)]
    assert sorted(t.case_id for t in traces) == [f"c{i}" for i in range(1, 7)]
    assert not (run / TRACES_FILE).stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    results = [EvaluationResult.model_validate_json(line) for line in _lines(run / RESULTS_FILE)]
    keys = Counter((r.case_id, r.variant_name, r.evaluator) for r in results)
    assert keys == {(f"c{i}", "v", e): 1 for i in range(1, 7) for e in ("recorded", "contains_text")}
    summary = RunSummary.model_validate(yaml.safe_load((run / SUMMARY_FILE).read_text()))
    (variant,) = summary.variants
    assert (summary.run_id, summary.cases_total, variant.cases_passed, variant.pass_rate) == (run.name, 6, 6, 1.0)


def _config(project: Project, **extra: object) -> dict[str, object]:
    return {
        "name": "again",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"name": "contains_text"}],
        **extra,
    }


def test_a_plain_rerun_starts_afresh_and_names_the_unfinished_run(project: Project) -> None:
    path = project.write(_config(project))
    first = run_eval(path, runs_dir=project.runs_dir)
    (first.run.path / SUMMARY_FILE).unlink()  # as if killed before the end
    second = run_eval(path, runs_dir=project.runs_dir)
    assert second.run.run_id != first.run.run_id
    assert any(f"--resume {first.run.run_id}" in note for note in second.notes)
    # Resuming the finished run redoes nothing: the system is not called again.
    calls = len(project.sut().CALLS)
    again = resume_run(RunDirectory(first.run.path))
    assert len(project.sut().CALLS) == calls
    assert [(r.case_id, r.evaluator) for r in again.results] == [(r.case_id, r.evaluator) for r in first.results]
    assert (first.run.path / SUMMARY_FILE).is_file()
    # Another config is not this run's: resuming with it is refused before anything runs.
    project.write(_config(project, concurrency=2))
    with pytest.raises(RunConfigError, match="differs from the config of run"):
        resume_run(RunDirectory(first.run.path), config_path=path)


EVALUATOR_MODULE = """
def mentions_question(trace, case):
    return case.input["question"] in (trace.output.final_answer or "")
"""


def test_re_evaluate_finds_import_evaluators_from_anywhere(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One evaluator sits next to eval.yaml, one in a directory on the run's sys.path (as PYTHONPATH would)."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # whatever the run or re-evaluate adds goes away after
    near, far = f"{project.module}_near", f"{project.module}_far"
    (project.root / f"{near}.py").write_text(EVALUATOR_MODULE)
    elsewhere = tmp_path / "on_pythonpath"
    elsewhere.mkdir()
    (elsewhere / f"{far}.py").write_text(EVALUATOR_MODULE)
    sys.path.append(str(elsewhere))
    project.write(
        _config(
            project,
            evaluators=[
                {"import": f"{near}:mentions_question", "as": "near"},
                {"import": f"{far}:mentions_question", "as": "far"},
            ],
        )
    )
    monkeypatch.chdir(project.root)
    first = run_eval("eval.yaml", runs_dir=project.runs_dir)  # a relative eval.yaml, as users type it
    assert {r.evaluator for r in first.results} == {"near", "far"}

    # Another process, as it were: another working directory, neither module imported nor importable.
    for name in (near, far, project.module):
        sys.modules.pop(name, None)
    sys.path.remove(str(elsewhere))
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != project.root.resolve()]
    other = tmp_path / "other_cwd"
    other.mkdir()
    monkeypatch.chdir(other)
    (first.run.path / RESULTS_FILE).unlink()
    (first.run.path / SUMMARY_FILE).unlink()  # killed before its summary: no config_path to fall back on
    capsys.readouterr()
    code = main(["re-evaluate", str(first.run.path), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    results = RunDirectory(first.run.path).read_results()
    assert Counter(r.evaluator for r in results) == {"near": 3, "far": 3}
    assert all(r.status == "completed" for r in results)
