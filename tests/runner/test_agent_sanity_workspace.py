"""``agent_sanity`` under ``evaltrace run`` with a workspace judges the files the system left in the run's snapshot.

It used to be "not evaluated" on every cell: it read ``extra["artifacts_path"]`` while the runner writes
``artifact_path`` (the cell's artifact.json, relative to the run directory).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaltrace.cli import main

from .conftest import Project

AGENT = """
import json
from pathlib import Path


def agent(task: str, workspace: Path) -> str:
    out = workspace / "out"
    out.mkdir(exist_ok=True)
    if task == "good":
        (out / "report.json").write_text(json.dumps({"title": "t", "body": "b"}))
        (workspace / "src" / "app.py").write_text("def main():\\n    return 42\\n")
    elif task == "bad":
        (out / "report.json").write_text("{not json")
        (out / "empty.json").write_text("")
    return task
"""

CASES = [
    {"id": "good", "input": {"task": "good"}},
    {"id": "bad", "input": {"task": "bad"}},
    {"id": "globbed", "input": {"task": "good"}, "expected": {"must_modify_files": ["out/*.json"]}},
]


@pytest.fixture
def agent_module(project: Project) -> Iterator[str]:
    name = f"sanity_agent_{project.module.rsplit('_', 1)[1]}"
    (project.root / f"{name}.py").write_text(textwrap.dedent(AGENT))
    source = project.root / "repo"
    (source / "src").mkdir(parents=True)
    (source / "src" / "app.py").write_text("def main():\n    return 0\n")
    (source / "notes.txt").write_text("start\n")
    yield name
    sys.modules.pop(name, None)


def _results(run_dir: Path) -> dict[tuple[str, str], dict[str, object]]:
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["evaluator"], r["case_id"]): r for r in rows}


def test_agent_sanity_reads_the_runs_workspace_snapshot(
    project: Project, agent_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed = {"name": "sanity", "type": "agent_sanity", "files": ["out/report.json", "src/app.py", "notes.txt"]}
    project.write(
        {
            "name": "sanity_eval",
            "variants": [
                {
                    "name": "fs",
                    "adapter": "python_function",
                    "config": {"target": f"{agent_module}:agent"},
                    "workspace": {"kind": "tempdir_snapshot", "path": "repo"},
                }
            ],
            "evaluators": [
                {**fixed, "required_keys": {"out/report.json": ["title"]}},
                {"name": "sanity_expected", "type": "agent_sanity"},  # the case's must_modify_files (globs)
            ],
        },
        cases=CASES,
    )
    args = ["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]
    assert main(args) == 0
    capsys.readouterr()
    (run_dir,) = [p for p in project.runs_dir.iterdir() if p.is_dir()]
    results = _results(run_dir)

    good = results["sanity", "good"]
    # report.json (added) and app.py (modified) are read from the snapshot; notes.txt was never written.
    assert good["status"] == "completed", good["reason"]
    assert good["detail"]["problems"] == {"notes.txt": ["unchanged: the system did not write it"]}
    assert good["score"] == pytest.approx(2 / 3)
    assert good["passed"] is False  # 2/3 < 0.75
    assert good["detail"]["root"] == str((run_dir / "artifacts" / "good" / "fs").absolute())

    bad = results["sanity", "bad"]
    assert bad["status"] == "completed", bad["reason"]
    problems = bad["detail"]["problems"]
    assert problems["out/report.json"][0].startswith("invalid JSON")
    assert problems["src/app.py"] == ["unchanged: the system did not write it"]
    assert bad["score"] == 0.0 and bad["passed"] is False

    globbed = results["sanity_expected", "globbed"]
    assert globbed["status"] == "completed" and globbed["passed"] is True
    assert globbed["detail"]["files"] == ["out/report.json"]
    # Cases without files to check stay "not evaluated", with the reason.
    assert results["sanity_expected", "good"]["status"] == "skipped"

    # re-evaluate reads the same snapshot from the run directory.
    assert main(["re-evaluate", run_dir.name, "--runs-dir", str(project.runs_dir)]) == 0
    capsys.readouterr()
    again = [p for p in project.runs_dir.iterdir() if p.is_dir() and p != run_dir]
    rerun = _results(again[0]) if again else _results(run_dir)
    assert rerun["sanity", "bad"]["detail"]["problems"] == problems
    assert rerun["sanity_expected", "globbed"]["passed"] is True


def test_an_unreadable_snapshot_is_an_error_not_a_pass(
    project: Project, agent_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write(
        {
            "name": "sanity_eval",
            "variants": [
                {
                    "name": "fs",
                    "adapter": "python_function",
                    "config": {"target": f"{agent_module}:agent"},
                    "workspace": {"kind": "tempdir_snapshot", "path": "repo"},
                }
            ],
            "evaluators": [{"name": "sanity", "type": "agent_sanity", "files": ["out/report.json"]}],
        },
        cases=CASES[:1],
    )
    assert main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 0
    (run_dir,) = [p for p in project.runs_dir.iterdir() if p.is_dir()]
    (run_dir / "artifacts" / "good" / "fs" / "artifact.json").chmod(0o600)
    (run_dir / "artifacts" / "good" / "fs" / "artifact.json").write_text("{}")
    capsys.readouterr()
    assert main(["re-evaluate", run_dir.name, "--runs-dir", str(project.runs_dir)]) == 0
    out = capsys.readouterr().out
    assert "agent_sanity" in out or "sanity" in out
    rows = [
        json.loads(line)
        for p in project.runs_dir.iterdir()
        if p.is_dir()
        for line in (p / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    latest = [r for r in rows if r["case_id"] == "good"][-1]
    assert latest["status"] == "failed"
    assert "not a valid filesystem artifact" in (latest["reason"] or "")
