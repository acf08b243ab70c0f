"""The CI smoke run of the instruction benchmarks (``benchmarks/smoke.py``, issue 28): its verdicts and budgets.

The callgrind runs themselves are the CI step's (``.ci/run``); here the comparison that decides the exit status,
and the budget file every row must have.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import smoke  # noqa: E402


def _config(budget: float, target: float | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"budget": budget} | ({"target": target} if target is not None else {})
    return {"tolerance": 0.10, "rows": {"stream": row}}


def test_a_row_over_its_budget_by_more_than_the_tolerance_fails() -> None:
    lines, failed = smoke.verdicts({"stream": 11_100.0}, {"stream": "instr"}, _config(10_000))
    assert failed == ["stream"]
    assert "OVER BUDGET" in lines[1]


def test_a_row_within_the_tolerance_passes_and_says_when_its_target_is_not_met() -> None:
    lines, failed = smoke.verdicts({"stream": 10_900.0}, {"stream": "instr"}, _config(10_000, target=6_000))
    assert failed == []
    assert lines[1].split()[1:] == ["10,900", "10,000", "11,000", "6,000", "ok", "(target", "not", "met)"]


def test_ratios_are_compared_the_same_way() -> None:
    assert smoke.verdicts({"stream": 1.33}, {"stream": "x"}, _config(1.2))[1] == ["stream"]
    assert smoke.verdicts({"stream": 1.31}, {"stream": "x"}, _config(1.2))[1] == []


def test_a_row_without_a_budget_is_a_clear_error() -> None:
    with pytest.raises(SystemExit, match="no budget for row.*other"):
        smoke.verdicts({"other": 1.0}, {"other": "x"}, _config(1.0))


def test_the_budget_file_has_every_row_and_each_unmet_target_beside_its_budget() -> None:
    config = tomllib.loads((BENCHMARKS / "budgets.toml").read_text())
    assert {row.name for row in smoke.ROWS} == set(config["rows"])
    assert config["tolerance"] == 0.10
    for name, entry in config["rows"].items():
        assert entry["budget"] > 0, name
        if "target" in entry:  # a budget not met yet is today's figure, above the target
            assert entry["target"] < entry["budget"], name


def test_every_variant_with_a_0_call_run_is_one_forking_process_and_no_run_is_lost() -> None:
    runs = {run for row in smoke.ROWS for run in row.runs}
    jobs = smoke.schedule(runs)
    assert sorted(run for job in jobs for run in job) == sorted(runs)  # each run measured once
    pairs = [job for job in jobs if len(job) == 2]
    assert len(pairs) == 7 and len(jobs) == 16  # 23 runs: 7 variants' 0/N pairs share a process
    assert all(job[0][2] == 0 and job[1][2] > 0 and job[0][:2] == job[1][:2] for job in pairs)
    assert all(job[0][0] in smoke.SPLITTABLE for job in pairs)
    assert len(smoke.schedule(runs, split=False)) == 23


def test_split_calls_forks_a_0_call_child_then_an_n_call_child_from_the_same_state(tmp_path: Path) -> None:
    """What each child does after the split point is what a separate run with 0 and with N calls does."""
    import os
    import subprocess
    import textwrap

    probe = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(BENCHMARKS)!r})
        import _callgrind
        state = [1, 2, 3]  # set-up done once, before the split
        calls = _callgrind.split_calls(7)
        with open(os.path.join({str(tmp_path)!r}, f"child-{{os.getpid()}}"), "w") as out:
            out.write(f"{{calls}} {{len(state)}}")
    """)
    env = {**os.environ, "EVALTRACE_BENCH_SPLIT": str(tmp_path)}
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=60)
    first, second = (int(pid) for pid in (tmp_path / "pids").read_text().split())
    assert (tmp_path / f"child-{first}").read_text() == "0 3"
    assert (tmp_path / f"child-{second}").read_text() == "7 3"
    assert len(list(tmp_path.glob("child-*"))) == 2  # the parent exits at the split, unmeasured

    del env["EVALTRACE_BENCH_SPLIT"]
    done = subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=60)
    assert done.returncode == 0 and len(list(tmp_path.glob("child-*"))) == 3  # not split: one process, 7 calls
