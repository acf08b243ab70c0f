"""Ctrl-C (a real SIGINT to a real ``evaltrace run``): exit 130, no traceback, what was saved and the exact command
that continues the run; running that command finishes it."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import run_eval
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from evaltrace.schema import RunSummary

from .conftest import Project
from .test_resume import CLI, USER_CODE, _lines, _wait

LIST_OPTIONS: dict[str, Any] = {
    "capture_output": True,
    "text": True,
    "timeout": 60,
    "env": {**os.environ, "COLUMNS": "250"},
}
RUNS = "evals/out"  # not the default ./runs: the printed command must say where the run is


def _popen(root: Path, command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _interrupt(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    return out, err


def _continue_command(err: str) -> list[str]:
    (line,) = [line for line in err.splitlines() if line.startswith("continue with: ")]
    words = shlex.split(line.removeprefix("continue with: "))
    assert words[:3] == ["evaltrace", "run", "--resume"]
    return [*CLI, *words[1:], "--no-progress"]


def test_ctrl_c_says_what_was_saved_and_its_resume_command_finishes_the_run(tmp_path: Path) -> None:
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
    runs = root / RUNS
    found: list[Path] = []

    # 1. Ctrl-C while executing: q1..q3 saved, q4 in flight (its target waits for a file).
    first = _popen(root, [*CLI, "run", "eval.yaml", "--runs-dir", RUNS, "--no-progress"])

    def three_cells_done() -> bool:
        found[:] = list(runs.glob("*_resumable"))
        return bool(found) and len(_lines(found[0] / TRACES_FILE)) == 3 and "q4" in _lines(root / "target_calls.txt")

    _wait(three_cells_done, first)
    _, err = _interrupt(first)
    run = found[0]
    assert f"interrupted: saved 3 of 6 traces and 0 evaluation results in {RUNS}/{run.name}" in err
    command = _continue_command(err)
    assert command[len(CLI) :] == ["run", "--resume", run.name, "--runs-dir", RUNS, "--no-progress"]
    assert not (run / SUMMARY_FILE).exists()
    # `runs list` shows it unfinished, with the same command.
    listing = subprocess.run([*CLI, "runs", "list", "--runs-dir", RUNS], cwd=root, **LIST_OPTIONS)
    assert listing.returncode == 0, listing.stderr
    assert "unfinished: 3 of 6 traces, 0 results saved" in listing.stdout
    resume = shlex.join(["evaltrace", "run", "--resume", run.name, "--runs-dir", RUNS])
    assert f"unfinished {run.name} (killed, interrupted or still running); continue with: {resume}" in listing.stdout
    (root / "release_target").touch()

    # 2. The printed command continues it; Ctrl-C again while evaluating: c1..c3 evaluated, c4 in flight.
    second = _popen(root, command)
    _wait(lambda: len(_lines(run / RESULTS_FILE)) == 6 and "c4" in _lines(root / "eval_calls.txt"), second)
    _, err = _interrupt(second)
    assert f"interrupted: saved 6 of 6 traces and 6 evaluation results in {RUNS}/{run.name}" in err
    assert _continue_command(err) == command
    (root / "release_eval").touch()

    # 3. The same command again finishes the run; nothing finished was redone but what was in flight.
    third = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0, third.stderr
    assert Counter(_lines(root / "target_calls.txt")) == {"q1": 1, "q2": 1, "q3": 1, "q4": 2, "q5": 1, "q6": 1}
    assert Counter(_lines(root / "eval_calls.txt")) == {"c1": 1, "c2": 1, "c3": 1, "c4": 2, "c5": 1, "c6": 1}
    summary = RunSummary.model_validate(yaml.safe_load((run / SUMMARY_FILE).read_text()))
    (variant,) = summary.variants
    assert (summary.run_id, summary.cases_total, variant.cases_passed) == (run.name, 6, 6)
    listing = subprocess.run([*CLI, "runs", "list", "--runs-dir", RUNS], cwd=root, **LIST_OPTIONS)
    assert run.name in listing.stdout and "unfinished" not in listing.stdout


def test_runs_list_shows_unfinished_runs_with_their_resume_command(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(project.root)  # the default ./runs: the command needs no --runs-dir
    path = project.write(
        {
            "name": "listed",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "evaluators": [{"name": "contains_text"}],
        }
    )
    done = run_eval(path, runs_dir=Path("runs"))
    killed = run_eval(path, runs_dir=Path("runs"))
    (killed.run.path / SUMMARY_FILE).unlink()  # as if killed while evaluating
    with (killed.run.path / TRACES_FILE).open("a") as handle:
        handle.write('{"torn": ')  # a torn last line is not a saved trace
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    out = capsys.readouterr().out
    assert done.run.run_id in out and "unfinished: 3 of 3 traces, 3 results saved" in out
    command = f"evaltrace run --resume {killed.run.run_id}"
    assert f"unfinished {killed.run.run_id} (killed, interrupted or still running); continue with: {command}\n" in out
    assert out.count("unfinished ") == 1
    # The command does what it says.
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    assert (killed.run.path / SUMMARY_FILE).is_file()
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    assert "unfinished" not in capsys.readouterr().out
