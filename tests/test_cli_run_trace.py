"""``evaltrace traces show --run RUN REF``: a cell of an offline run opens in the terminal from what the summary prints.

A real run (tests/run_report_project.py); each line N of its traces.jsonl, and each ``CASE/VARIANT``, shows
that line's case and variant with its span tree, evaluations and answer, the same cell ``run.html#t-N`` opens.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from rich.cells import cell_len

from evaltrace.cli import main
from evaltrace.runner.rundir import TRACES_FILE
from run_report_project import run_project


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_project(tmp_path_factory.mktemp("run_trace")).run.path


def _show(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(argv) == 0
    shown = capsys.readouterr().out
    # "Traces: <path>" keeps the path in one piece, whatever the width (as in tests/test_cli_snapshots.py).
    assert all(cell_len(line) <= width for line in shown.splitlines() if not line.startswith("Traces: ")), shown
    return shown


def test_the_command_the_summary_prints_opens_that_cell(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = _show(["runs", "show", run_dir.name, "--runs-dir", str(run_dir.parent)], capsys, monkeypatch)
    lines = summary.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Open one here: "))
    command = " ".join([lines[at], *(line.strip() for line in lines[at + 1 :] if line.startswith("    "))])
    argv = shlex.split(command.removeprefix("Open one here: "))
    assert argv[:4] == ["evaltrace", "traces", "show", "--run"] and "--details" in argv
    line = int(argv[5])
    recorded = json.loads((run_dir / TRACES_FILE).read_text(encoding="utf-8").splitlines()[line - 1])
    shown = _show([*argv[1:], "--runs-dir", str(run_dir.parent)], capsys, monkeypatch)
    assert shown.splitlines()[0] == f"{recorded['case_id']} × {recorded['variant_name']}"
    assert f"traces.jsonl:{line}" in shown and f"run.html#t-{line}" in shown
    # The first cell the summary lists as not passing: "bad × v1", its failing evaluation and reason.
    assert (recorded["case_id"], recorded["variant_name"]) == ("bad", "v1")
    assert "evaluation contains_text fail 0.00: missing: 'missing'" in shown
    tree = shown.splitlines()
    assert any(row.startswith("evaltrace.case ") for row in tree)
    assert any(row.startswith("  └ invoke_agent sut ") for row in tree)
    assert any(row.startswith("    └ execute_tool lookup ") for row in tree)
    assert "  ↪ calls lookup" in shown or "    ↪ calls lookup" in shown  # --details: the conversation


@pytest.mark.parametrize("width", [80, 160])
def test_every_line_and_case_variant_names_the_same_cell(
    width: int, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (run_dir / TRACES_FILE).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        recorded = json.loads(line)
        by_line = _show(["traces", "show", "--run", str(run_dir), f"traces.jsonl:{number}"], capsys, monkeypatch, width)
        cell = f"{recorded['case_id']}/{recorded['variant_name']}"
        by_cell = _show(["traces", "show", "--run", str(run_dir), cell], capsys, monkeypatch, width)
        assert by_line.splitlines()[0] == f"{recorded['case_id']} × {recorded['variant_name']}"
        assert by_line == by_cell


def test_a_reference_to_no_cell_is_a_clear_error(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["traces", "show", "--run", str(run_dir), "99"]) == 1
    assert "no trace on line 99 of" in capsys.readouterr().out
    assert main(["traces", "show", "--run", str(run_dir), "nope/v9"]) == 1
    assert "no cell 'nope/v9'" in capsys.readouterr().out
    assert main(["traces", "show", "--run", "no-such-run", "1", "--runs-dir", str(run_dir.parent)]) == 2
    assert "--run" in capsys.readouterr().err
