"""Run and trace references on the command line: a path-like id never reaches outside the runs folder or store.

A run id names a directory in ``--runs-dir``; anything path-like (absolute, ``..``, a separator) must be a run
directory itself. Each bad reference exits 2 with ``error``/``evaltrace report`` naming the argument, never a
traceback, and reads nothing it was not given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltrace.cli import main
from evaltrace.runner import run_eval

from .conftest import Project


@pytest.fixture
def outside_run(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real run in ``tmp/secret/``, with ``--runs-dir tmp/runs`` and the cwd two folders below ``tmp``.

    ``../secret/<id>`` then points outside the runs folder (``runs/../secret``) but at nothing from the cwd.
    """
    config = {
        "name": "paths",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"name": "contains_text"}],
    }
    run = run_eval(project.write(config), runs_dir=tmp_path / "secret").run.path
    (tmp_path / "runs").mkdir()
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return run


def _cases(run: Path, runs: Path) -> list[tuple[list[str], str]]:
    """(argv, argument named in the error) per entry point and shape of bad reference."""
    outside = f"../secret/{run.name}"
    flags = ["--runs-dir", str(runs)]
    return [
        (["compare", "/tmp/nope", *flags], "RUN_A"),
        (["compare", outside, *flags], "RUN_A"),
        (["compare", str(run), f"../secret/{run.name[:10]}", *flags], "RUN_B"),
        (["compare", "", *flags], "RUN_A"),
        (["promote", "a/b", *flags], "RUN"),
        (["runs", "push", outside, "--sqlite", "x.db", *flags], "RUN"),
        (["re-evaluate", "/nonexistent/run", "--no-progress", *flags], "RUN"),
        (["run", "--resume", outside, "--no-progress", *flags], "--resume"),
        (["report", outside, *flags], "RUN_OR_TRACE"),
        (["report", "../../x", *flags], "RUN_OR_TRACE"),
        (["report", "not-a-trace", *flags], "RUN_OR_TRACE"),
        (["traces", "show", "../x", "--store", str(runs)], "TRACE_ID"),
        (["traces", "show", "/etc/passwd", "--store", str(runs)], "TRACE_ID"),
    ]


CASE_IDS = [
    "compare-absolute",
    "compare-dotdot",
    "compare-dotdot-prefix-b",
    "compare-empty",
    "promote-slash",
    "push-dotdot",
    "re-evaluate-absolute",
    "resume-dotdot",
    "report-dotdot-run",
    "report-dotdot-trace",
    "report-not-hex",
    "traces-show-dotdot",
    "traces-show-absolute",
]


@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_a_bad_reference_exits_2_naming_the_argument(
    index: int, outside_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, argument = _cases(outside_run, tmp_path / "runs")[index]
    before = {p for p in tmp_path.rglob("*")}
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    message = " ".join((captured.out + captured.err).split())
    assert f"{argument}: " in message, message
    assert "Traceback" not in message
    # Nothing was written (no report file named after the id, no database), and the outside run was not read.
    assert {p for p in tmp_path.rglob("*")} == before


def test_an_explicit_run_directory_outside_the_runs_folder_still_works(
    outside_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(outside_run), str(outside_run), "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "Compared with" in capsys.readouterr().out


def test_glob_characters_in_an_id_are_literal(outside_run: Path, tmp_path: Path) -> None:
    runs = outside_run.parent  # ids under tmp/secret: "*" must not match the run
    assert main(["compare", "*", "--runs-dir", str(runs)]) == 2
    assert main(["compare", outside_run.name[:10], outside_run.name, "--runs-dir", str(runs)]) == 0
