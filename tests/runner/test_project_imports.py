"""eval.yaml's ``module:attr`` references import the project's own modules, from any working directory.

A real project layout in tmp_path (pyproject.toml at the root, package ``myapp/``, ``evals/eval.yaml``) is run with
the real CLI in a subprocess, from the evals folder and from an unrelated directory.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from evaltrace.cli.evaluate_entries import load_entries
from evaltrace.runner.config import load_eval_config
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.import_paths import import_dirs, import_object, project_root

_SCRIPT = "from evaltrace.cli import main; raise SystemExit(main())"
_counter = itertools.count()

AGENT = """
def answer(question: str) -> str:
    return "the answer to " + question
"""
CHECKS = """
def mentions_answer(trace, case):
    return "answer" in (trace.output.final_answer or "")
"""


def _project(root: Path, package: str = "myapp", *, pythonpath: list[str] | None = None) -> Path:
    """A project: pyproject.toml, ``<package>/agent.py`` and ``checks.py``, ``evals/eval.yaml`` referencing them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "agent.py").write_text(textwrap.dedent(AGENT))
    (root / package / "checks.py").write_text(textwrap.dedent(CHECKS))
    evals = root / "evals"
    evals.mkdir()
    (evals / "cases.yaml").write_text(yaml.safe_dump([{"id": "c1", "input": {"question": "life"}}]))
    config = {
        "name": "demo",
        "cases": "cases.yaml",
        "systems": [{"name": "v1", "adapter": "python_function", "config": {"target": f"{package}.agent:answer"}}],
        "evaluators": [{"import": f"{package}.checks:mentions_answer"}],
        **({"pythonpath": pythonpath} if pythonpath is not None else {}),
    }
    (evals / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return evals / "eval.yaml"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # `python -c` puts the working directory on sys.path, as a console script does not: both must work.
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture
def clean_imports() -> Iterator[None]:
    """Undo what in-process imports add to sys.path and sys.modules."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]


@pytest.mark.parametrize("where", ["evals", "elsewhere"])
def test_run_imports_the_project_from_a_subfolder_or_elsewhere(tmp_path: Path, where: str) -> None:
    """`evaltrace run evals/eval.yaml` finds myapp.agent (system) and myapp.checks (evaluator) via the project root."""
    eval_path = _project(tmp_path / "project")
    cwd = eval_path.parent if where == "evals" else tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    completed = _cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), "--no-progress", cwd=cwd)
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    (result,) = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert result["evaluator"] == "mentions_answer" and result["passed"] is True


def test_re_evaluate_with_the_config_imports_the_project(tmp_path: Path) -> None:
    """`re-evaluate RUN --config evals/eval.yaml` from another directory imports the project's evaluator too."""
    eval_path = _project(tmp_path / "project")
    runs = tmp_path / "runs"
    assert _cli("run", str(eval_path), "--runs-dir", str(runs), "--no-progress", cwd=eval_path.parent).returncode == 0
    (run_dir,) = runs.iterdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    completed = _cli("re-evaluate", str(run_dir), "--config", str(eval_path), "--no-progress", cwd=elsewhere)
    assert completed.returncode == 0, completed.stderr


def test_a_typo_in_a_module_exits_2_with_what_to_do(tmp_path: Path) -> None:
    """A misspelt module: exit 2, the module named, the directories searched, the fix; no traceback."""
    eval_path = _project(tmp_path / "project")
    config = yaml.safe_load(eval_path.read_text())
    config["systems"][0]["config"]["target"] = "myap.agent:answer"
    eval_path.write_text(yaml.safe_dump(config))
    completed = _cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr + completed.stdout
    message = completed.stderr
    assert "systems[0].config.target" in message
    assert "no module named 'myap'" in message and "did you mean 'myapp'?" in message
    assert str((tmp_path / "project").resolve()) in message
    assert "add `pythonpath:` to eval.yaml or run from the project root" in message


def test_pythonpath_key_adds_directories_relative_to_the_eval_file(tmp_path: Path, clean_imports: None) -> None:
    """Without a project marker, `pythonpath: [../lib]` is what makes the package importable."""
    package = f"evaltrace_pp_{next(_counter)}"
    eval_path = _project(tmp_path / "lib", package, pythonpath=[".."])
    (tmp_path / "lib" / "pyproject.toml").unlink()  # no project root: only pythonpath finds the package
    evals = tmp_path / "lib" / "evals"
    config = load_eval_config(eval_path)
    assert config.pythonpath == [".."]
    dirs = import_dirs(eval_path, evals, config.pythonpath)
    assert dirs[:2] == [(tmp_path / "lib").resolve(), evals.resolve()]
    assert import_object(f"{package}.agent:answer", dirs)("x") == "the answer to x"


@pytest.mark.parametrize(
    ("value", "entry", "problem"),
    [
        (["missing"], "pythonpath[0]", "does not exist; paths are relative to"),
        (["cases.yaml"], "pythonpath[0]", "is not a directory"),
        ("src", "pythonpath", "expected a valid list"),
        ([""], "pythonpath[0]", "expected a directory path"),
    ],
)
def test_pythonpath_entries_are_validated(tmp_path: Path, value: object, entry: str, problem: str) -> None:
    eval_path = _project(tmp_path / "project")
    config = yaml.safe_load(eval_path.read_text())
    config["pythonpath"] = value
    eval_path.write_text(yaml.safe_dump(config))
    with pytest.raises(RunConfigError) as caught:
        load_eval_config(eval_path)
    assert caught.value.entry == entry
    assert problem in str(caught.value)


def test_evaluate_with_an_eval_file_imports_the_project(tmp_path: Path, clean_imports: None) -> None:
    """`evaltrace evaluate --evaluators evals/eval.yaml` builds the file's `import:` evaluators from the project."""
    package = f"evaltrace_ev_{next(_counter)}"
    eval_path = _project(tmp_path / "project", package)
    (spec,) = load_entries([], eval_path)
    assert spec.evaluator.name == "mentions_answer"


def test_a_missing_dependency_of_the_module_is_named_as_such(tmp_path: Path, clean_imports: None) -> None:
    """The project's module is found but imports something not installed: pythonpath is not the fix."""
    package = f"evaltrace_dep_{next(_counter)}"
    eval_path = _project(tmp_path / "project", package)
    (tmp_path / "project" / package / "agent.py").write_text("import evaltrace_not_installed_xyz\n")
    dirs = import_dirs(eval_path, eval_path.parent)
    with pytest.raises(ValueError, match="it imports 'evaltrace_not_installed_xyz', which is not installed"):
        import_object(f"{package}.agent:answer", dirs)


def test_project_root_is_the_nearest_marker(tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner" / "evals").mkdir(parents=True)
    (tmp_path / "outer" / ".git").mkdir()
    (tmp_path / "outer" / "inner" / "pyproject.toml").write_text("")
    assert project_root(tmp_path / "outer" / "inner" / "evals") == tmp_path / "outer" / "inner"
    (tmp_path / "outer" / "inner" / "pyproject.toml").unlink()
    assert project_root(tmp_path / "outer" / "inner" / "evals") == tmp_path / "outer"
