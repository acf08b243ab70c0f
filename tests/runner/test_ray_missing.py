"""``--engine ray`` without Ray installed: a clear error naming the extra (runs whether Ray is installed or not)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from run_report_project import forget, write_project


@pytest.fixture
def eval_path(tmp_path: Path) -> Iterator[Path]:
    path, _ = write_project(tmp_path / "project")
    yield path
    forget(tmp_path / "project")


@pytest.mark.parametrize("command", ["run", "evaluate"])
def test_engine_ray_without_ray_names_the_extra(
    command: str, tmp_path: Path, eval_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is not installed
    if command == "run":
        args = ["run", str(eval_path), "--engine", "ray", "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    else:
        args = ["evaluate", "--store", str(tmp_path / "store"), "-e", "contains_text", "--engine", "ray"]
    assert main(args) != 0
    assert "--engine ray needs Ray: pip install 'evaltrace[ray]'" in capsys.readouterr().err.replace("\n", "")
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made
