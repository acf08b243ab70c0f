"""A real offline run for the insights and analytics tests: two variants, eight cases, three evaluators.

``fast`` answers at once; ``slow`` sleeps 0.4 s per case. The evaluators are user evaluators whose scores come
from the tables below, so every figure the tests assert is computed here by hand:

- ``answer_quality`` (generation): passes at score >= 0.5; confidence 0.9 on fast, 0.6 on slow.
- ``context_precision`` (retrieval: a ``context_*`` evaluator): passes at score >= 0.5.
- ``flaky``: crashes on (slow, c8), skips everything else.

| case | fast                       | slow                                   |
|------|----------------------------|----------------------------------------|
| c1   | pass                       | fail (both)                            |
| c2   | pass                       | pass                                   |
| c3   | pass                       | fail (generation)                      |
| c4   | fail (retrieval)           | pass                                   |
| c5   | pass                       | fail (both)                            |
| c6   | fail (generation)          | fail (both)                            |
| c7   | pass                       | fail (generation)                      |
| c8   | pass                       | error (flaky crashed; the others pass) |

``complexity``: c1 and c2 ``high``, c3 ``low``, the rest none (counted as ``medium``).
"""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path

import yaml

from evaltrace.runner import RunOutcome, run_eval

ANSWER_QUALITY = {
    "fast": {"c1": 0.9, "c2": 0.8, "c3": 0.7, "c4": 0.9, "c5": 0.6, "c6": 0.3, "c7": 0.8, "c8": 0.9},
    "slow": {"c1": 0.4, "c2": 0.5, "c3": 0.2, "c4": 0.9, "c5": 0.1, "c6": 0.3, "c7": 0.3, "c8": 0.6},
}
CONTEXT_PRECISION = {
    "fast": {"c1": 0.9, "c2": 0.9, "c3": 0.8, "c4": 0.2, "c5": 0.9, "c6": 0.9, "c7": 0.9, "c8": 0.9},
    "slow": {"c1": 0.3, "c2": 0.9, "c3": 0.8, "c4": 0.9, "c5": 0.2, "c6": 0.4, "c7": 0.9, "c8": 0.9},
}
COMPLEXITY = {"c1": "high", "c2": "high", "c3": "low"}
_counter = itertools.count()

SUT = """
import time


def fast(question: str) -> str:
    return "answer to " + question


def slow(question: str) -> str:
    time.sleep(0.4)
    return "late answer to " + question
"""

EVALUATORS = f"""
from evaltrace.schema import EvaluationResult

ANSWER_QUALITY = {ANSWER_QUALITY!r}
CONTEXT_PRECISION = {CONTEXT_PRECISION!r}


class AnswerQuality:
    name = "answer_quality"
    version = "1"

    def evaluate(self, trace, case):
        score = ANSWER_QUALITY[trace.variant_name][case.id]
        confidence = 0.9 if trace.variant_name == "fast" else 0.6
        return EvaluationResult(evaluator=self.name, passed=score >= 0.5, score=score, confidence=confidence,
                                reason=f"quality {{score}}")


class ContextPrecision:
    name = "context_precision"
    version = "1"

    def evaluate(self, trace, case):
        score = CONTEXT_PRECISION[trace.variant_name][case.id]
        return EvaluationResult(evaluator=self.name, passed=score >= 0.5, score=score, reason=f"precision {{score}}")


class Flaky:
    name = "flaky"
    version = "1"

    def evaluate(self, trace, case):
        if (trace.variant_name, case.id) == ("slow", "c8"):
            raise RuntimeError("flaky evaluator bug")
        return EvaluationResult(evaluator=self.name, passed=False, status="skipped", reason="no opinion")
"""


def write_project(root: Path) -> Path:
    """Write eval.yaml, cases.yaml, the system and the evaluators under ``root``; return eval.yaml."""
    index = next(_counter)
    module, evaluators = f"insights_sut_{index}", f"insights_evals_{index}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(SUT))
    (root / f"{evaluators}.py").write_text(textwrap.dedent(EVALUATORS))
    cases = []
    for n in range(1, 9):
        case_id = f"c{n}"
        metadata = {"complexity": COMPLEXITY[case_id]} if case_id in COMPLEXITY else {}
        cases.append({"id": case_id, "input": {"question": case_id}, "metadata": metadata})
    (root / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    config = {
        "name": "insights_demo",
        "cases": "cases.yaml",
        "variants": [
            {"name": "fast", "adapter": "python_function", "config": {"target": f"{module}:fast"}},
            {"name": "slow", "adapter": "python_function", "config": {"target": f"{module}:slow"}},
        ],
        "evaluators": [
            {"import": f"{evaluators}:AnswerQuality"},
            {"import": f"{evaluators}:ContextPrecision"},
            {"import": f"{evaluators}:Flaky"},
        ],
        "concurrency": 4,
    }
    path = root / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_project(tmp_path: Path) -> RunOutcome:
    """Write the project under ``tmp_path / 'project'`` and run it into ``tmp_path / 'runs'``."""
    root = tmp_path / "project"
    path = write_project(root)
    try:
        return run_eval(path, runs_dir=tmp_path / "runs")
    finally:
        for name in [m for m in sys.modules if m.startswith(("insights_sut_", "insights_evals_"))]:
            sys.modules.pop(name, None)
        if str(root.resolve()) in sys.path:
            sys.path.remove(str(root.resolve()))
