"""``max_dataset_rows`` on an evaluator entry: the evaluator judges at most the first N cases per system."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from evaltrace.runner import RunConfigError, re_evaluate, run_eval

from .conftest import Project

COUNTER_SOURCE = '''
from pathlib import Path

CALLS = Path(__file__).with_name("judged.txt")


def expensive(trace, case):
    """Stands in for a paid judge: each call leaves the case id behind."""
    with CALLS.open("a") as handle:
        handle.write(case.id + "\\n")
    return True
'''

CASES = [{"id": f"row{i}", "input": {"question": f"q{i}"}} for i in range(1, 6)]


def _config(project: Project, **entry: Any) -> Path:
    # A module name of this project's own: another test's module of the same name may still be imported.
    (project.root / f"judge_{project.module}.py").write_text(textwrap.dedent(COUNTER_SOURCE))
    target = {"adapter": "python_function", "config": {"target": project.target("answer")}}
    return project.write(
        {
            "name": "capped",
            "variants": [{"name": "a", **target}, {"name": "b", **target}],
            "evaluators": [
                {"import": f"judge_{project.module}:expensive", "name": "judge", **entry},
                {"name": "contains_text"},
            ],
        },
        cases=CASES,
    )


def _judged(project: Project) -> list[str]:
    path = project.root / "judged.txt"
    return sorted(path.read_text().split()) if path.exists() else []


def test_an_evaluator_judges_only_the_first_rows_of_the_dataset(project: Project) -> None:
    outcome = run_eval(_config(project, max_dataset_rows=2), runs_dir=project.runs_dir)
    assert _judged(project) == ["row1", "row1", "row2", "row2"]  # 2 rows x 2 systems: never called past them
    judge = [r for r in outcome.results if r.evaluator == "judge"]
    assert {(r.case_id, r.status) for r in judge if r.status == "completed"} == {
        ("row1", "completed"),
        ("row2", "completed"),
    }
    capped = [r for r in judge if r.status == "skipped"]
    assert len(capped) == 6 and all("max_dataset_rows 2 reached" in r.reason for r in capped)
    assert next(r for r in capped if r.case_id == "row3").reason.endswith("(row 3 of the dataset)")
    others = [r for r in outcome.results if r.evaluator == "contains_text"]
    assert len(others) == 10  # other evaluators are not capped
    rollup = next(r for r in outcome.summary.by_evaluator if r.evaluator == "judge").by_variant
    assert (rollup["a"].passed, rollup["a"].not_evaluated) == (2, 3)  # skipped rows are not evaluated, not failed

    re_evaluate(outcome.run)  # the cap holds on re-evaluation too
    assert len(_judged(project)) == 8


@pytest.mark.parametrize("value", [0, -1, "ten", 2.5])
def test_a_bad_max_dataset_rows_is_a_config_error(project: Project, value: object) -> None:
    with pytest.raises(RunConfigError, match=r"evaluators\[0\]\.max_dataset_rows"):
        run_eval(_config(project, max_dataset_rows=value), runs_dir=project.runs_dir)
    assert _judged(project) == [] and not project.runs_dir.exists()


def test_the_cap_through_the_cli(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(project, max_dataset_rows=1)
    assert main(["run", str(path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 0
    assert _judged(project) == ["row1", "row1"]
    assert "max_dataset_rows 1 reached" in capsys.readouterr().out
