"""`evaltrace run` with misbehaving user code: hung evaluators and targets, BaseException, a blocked event loop.

One real ``evaltrace run`` subprocess (module-scoped) runs an eval whose evaluators hang, raise ``SystemExit`` /
``KeyboardInterrupt`` (sync and async) or block their event loop, and whose target hangs on one case. The
process must finish on its own, exit 0 and write every file, each misbehaviour recorded as an error of its cell.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from evaltrace.schema import EvaluationResult, RunSummary, Trace

USER_CODE = """
import asyncio
import time

from evaltrace.schema import EvaluationResult


def answer(question):
    if question == "hang":
        time.sleep(600)  # past the variant's timeout_s: the cell is a timeout error, the run goes on
    if question == "exit":
        raise SystemExit(2)  # the system's failure, not the end of the run
    return f"{question}: ok"


class _Named:
    version = None

    def __init__(self):
        self.name = type(self).__name__.lower()


class Fine(_Named):
    def evaluate(self, trace, case):
        return EvaluationResult(evaluator=self.name, passed=True, score=1.0)


class HangSync(_Named):
    def evaluate(self, trace, case):
        time.sleep(600)


class ExitSync(_Named):
    def evaluate(self, trace, case):
        raise SystemExit(3)


class InterruptSync(_Named):
    def evaluate(self, trace, case):
        raise KeyboardInterrupt


class ExitAsync(_Named):
    async def evaluate(self, trace, case):
        await asyncio.sleep(0)
        raise SystemExit(4)


class InterruptAsync(_Named):
    async def evaluate(self, trace, case):
        await asyncio.sleep(0)
        raise KeyboardInterrupt


class BlockAsync(_Named):
    async def evaluate(self, trace, case):
        time.sleep(600)  # blocks the event loop it runs on


class SkipAll(_Named):
    def evaluate(self, trace, case):
        return EvaluationResult(evaluator=self.name, passed=False, status="skipped", reason="nothing to check")
"""

EVALUATORS = {
    "fine": None,
    "hangsync": 0.5,
    "exitsync": None,
    "interruptsync": None,
    "exitasync": None,
    "interruptasync": None,
    "blockasync": 0.5,
}
CLASS_NAMES = {
    "fine": "Fine",
    "hangsync": "HangSync",
    "exitsync": "ExitSync",
    "interruptsync": "InterruptSync",
    "exitasync": "ExitAsync",
    "interruptasync": "InterruptAsync",
    "blockasync": "BlockAsync",
}


@dataclass
class FaultRun:
    completed: subprocess.CompletedProcess[str]
    run_dir: Path
    traces: dict[str, Trace]
    results: dict[tuple[str, str], EvaluationResult]
    summary: RunSummary


def _cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from evaltrace.cli import main; raise SystemExit(main())", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "250"},
    )


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> FaultRun:
    root = tmp_path_factory.mktemp("faults")
    (root / "faulty_user_code.py").write_text(textwrap.dedent(USER_CODE))
    cases = [
        {"id": "ok", "input": {"question": "q"}},
        {"id": "hangs", "input": {"question": "hang"}},
        {"id": "exits", "input": {"question": "exit"}},
    ]
    (root / "cases.yaml").write_text(yaml.safe_dump(cases))
    evaluators: list[dict[str, object]] = []
    for name, timeout in EVALUATORS.items():
        entry: dict[str, object] = {"import": f"faulty_user_code:{CLASS_NAMES[name]}"}
        if timeout is not None:
            entry["timeout_s"] = timeout
        evaluators.append(entry)
    config = {
        "name": "faults",
        "cases": "cases.yaml",
        "variants": [
            {
                "name": "v",
                "adapter": "python_function",
                "config": {"target": "faulty_user_code:answer", "timeout_s": 0.5},
            }
        ],
        "evaluators": evaluators,
        "concurrency": 8,
    }
    (root / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # Before the fix this subprocess never exits (hung threads are joined at exit) or dies on the SystemExit.
    completed = _cli("run", "eval.yaml", "--runs-dir", "runs", "--no-progress", cwd=root, timeout=60)
    (run_dir,) = (root / "runs").iterdir()
    traces = {
        t.case_id: t
        for t in (Trace.model_validate_json(line) for line in (run_dir / "traces.jsonl").read_text().splitlines())
    }
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    parsed = [EvaluationResult.model_validate_json(line) for line in lines]
    results = {(r.case_id, r.evaluator): r for r in parsed}
    assert len(results) == len(parsed)  # one result per (case, evaluator)
    summary = RunSummary.model_validate(yaml.safe_load((run_dir / "summary.yaml").read_text()))
    return FaultRun(completed, run_dir, traces, results, summary)


def test_the_run_finishes_and_writes_every_file(fault_run: FaultRun) -> None:
    assert fault_run.completed.returncode == 0, fault_run.completed.stderr
    assert set(fault_run.results) == {(c, e) for c in ("ok", "hangs", "exits") for e in EVALUATORS}
    assert fault_run.results["ok", "fine"].status == "completed" and fault_run.results["ok", "fine"].passed


def test_a_hung_or_exiting_target_is_an_error_of_its_cell(fault_run: FaultRun) -> None:
    hung = fault_run.traces["hangs"]
    assert hung.error is not None and hung.error.type == "timeout"
    exited = fault_run.traces["exits"]
    assert exited.error is not None and exited.error.type == "exception"
    assert exited.error.message == "SystemExit: 2"
    assert fault_run.traces["ok"].error is None


@pytest.mark.parametrize("evaluator", ["hangsync", "blockasync"])
def test_a_hung_evaluator_is_a_timeout_error(fault_run: FaultRun, evaluator: str) -> None:
    for case in ("ok", "hangs", "exits"):
        result = fault_run.results[case, evaluator]
        assert result.status == "failed" and result.error is not None and result.error.type == "timeout"


@pytest.mark.parametrize(
    ("evaluator", "cause"),
    [
        ("exitsync", "SystemExit"),
        ("interruptsync", "KeyboardInterrupt"),
        ("exitasync", "SystemExit"),
        ("interruptasync", "KeyboardInterrupt"),
    ],
)
def test_base_exceptions_are_contained_and_named(fault_run: FaultRun, evaluator: str, cause: str) -> None:
    for case in ("ok", "hangs", "exits"):
        result = fault_run.results[case, evaluator]
        assert result.status == "failed" and result.error is not None
        assert result.error.message.startswith(cause)


def test_errors_are_reported_as_errors_not_failures(fault_run: FaultRun) -> None:
    (variant,) = fault_run.summary.variants
    # "ok": the target answered, one evaluator passed, the others errored: an error, not a fail, not a pass.
    # "hangs" and "exits": the system timed out or raised, which is the system failing.
    assert (variant.cases_passed, variant.cases_failed, variant.cases_eval_errors) == (0, 2, 1)
    assert variant.pass_rate == 0.0 and variant.cases_errored == 2
    rollups = {r.evaluator: r.by_variant["v"] for r in fault_run.summary.by_evaluator}
    assert rollups["hangsync"].errors == 3 and rollups["hangsync"].passed == rollups["hangsync"].failed == 0
    assert rollups["fine"].passed == 3 and rollups["fine"].pass_rate == 1.0
    # The terminal shows the errors as errors: "fine" judged 3 of 3, "hangsync" judged nothing.
    rows = {line.split()[0]: line for line in fault_run.completed.stdout.splitlines() if line.strip()}
    assert "100.0% (3/3)" in rows["fine"]
    assert "3 errors" in rows["hangsync"] and "%" not in rows["hangsync"]
