"""A real offline run whose cells cover every outcome, for the run report and run summary tests.

Two python_function variants over five cases, evaluated by ``contains_text`` and a user evaluator that errors
on one case and skips the rest:

| case      | v1                        | v2                                   |
|-----------|---------------------------|--------------------------------------|
| ok        | pass                      | fail (answers "nothing": regression) |
| bad       | fail (expects "missing")  | fail                                 |
| crash     | error (evaluator crashes) | error                                |
| skip      | not evaluated             | not evaluated                        |
| xss       | fail (markup in reason)   | fail (the system raises, markup)     |

The ``xss`` case's input, answer, expectations and the failing reasons carry HTML, to prove it is escaped.
"""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path

import yaml

from evaltrace.runner import RunOutcome, run_eval

XSS = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"
_counter = itertools.count()

SUT = f"""
import evaltrace

XSS = {XSS!r}


@evaltrace.tool
def lookup(key: str) -> str:
    return "alpha"


@evaltrace.agent(name="sut")
def answer(question: str, note: str = "") -> str:
    if question == "xss":
        return "here: " + XSS
    return f"{{question}}: {{lookup('a')}}"


@evaltrace.agent(name="sut")
def answer_v2(question: str, note: str = "") -> str:
    if question == "ok":
        return "nothing"
    if question == "xss":
        raise RuntimeError("v2 exploded on " + XSS)
    return f"{{question}}: {{lookup('a')}}"
"""

EVALUATOR = """
from evaltrace.schema import EvaluationResult


class Picky:
    name = "picky"
    version = "1"

    def evaluate(self, trace, case):
        if case.id == "crash":
            raise ZeroDivisionError("picky evaluator bug")
        return EvaluationResult(evaluator=self.name, passed=False, status="skipped", reason="picky has no opinion")
"""

CASES = [
    {"id": "ok", "input": {"question": "ok"}, "metadata": {"tags": ["smoke"], "level": 1},
     "expected": {"answer_should_include": ["alpha"]}},
    {"id": "bad", "input": {"question": "bad"}, "metadata": {"tags": ["smoke", "hard"], "level": 2},
     "expected": {"answer_should_include": ["missing"]}},
    {"id": "crash", "input": {"question": "crash"}, "metadata": {"tags": "hard", "level": 2},
     "expected": {"answer_should_include": ["alpha"]}},
    {"id": "skip", "input": {"question": "skip"}, "metadata": {"level": 3}},
    {"id": "xss", "input": {"question": "xss", "note": XSS}, "metadata": {"tags": ["web"], "lang": "fr"},
     "expected": {"answer_should_include": ["<script>", "</b>never"]}},
]  # fmt: skip

EXPECTED = {
    "v1": {"ok": "pass", "bad": "fail", "crash": "error", "skip": "not_evaluated", "xss": "fail"},
    "v2": {"ok": "fail", "bad": "fail", "crash": "error", "skip": "not_evaluated", "xss": "fail"},
}


def write_project(root: Path) -> tuple[Path, str]:
    """Write eval.yaml, cases.yaml, the system and the evaluator under ``root``; return (eval.yaml, module)."""
    index = next(_counter)
    module, evaluators = f"report_sut_{index}", f"report_evals_{index}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(SUT))
    (root / f"{evaluators}.py").write_text(textwrap.dedent(EVALUATOR))
    (root / "cases.yaml").write_text(yaml.safe_dump(CASES, sort_keys=False))
    config = {
        "name": "report_demo",
        "cases": "cases.yaml",
        "variants": [
            {"name": "v1", "adapter": "python_function", "config": {"target": f"{module}:answer"}},
            {"name": "v2", "adapter": "python_function", "config": {"target": f"{module}:answer_v2"}},
        ],
        "evaluators": [{"name": "contains_text"}, {"import": f"{evaluators}:Picky"}],
        "baseline": "v1",
        "concurrency": 2,
    }
    path = root / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, module


def forget(root: Path) -> None:
    """Drop the project's modules and path, so another test's project of the same names imports afresh."""
    for name in [m for m in sys.modules if m.startswith(("report_sut_", "report_evals_"))]:
        sys.modules.pop(name, None)
    if str(root.resolve()) in sys.path:
        sys.path.remove(str(root.resolve()))


def run_project(tmp_path: Path, **options: object) -> RunOutcome:
    """Write the project under ``tmp_path / 'project'`` and run it into ``tmp_path / 'runs'``."""
    path, _ = write_project(tmp_path / "project")
    try:
        return run_eval(path, runs_dir=tmp_path / "runs", **options)  # type: ignore[arg-type]
    finally:
        forget(tmp_path / "project")
