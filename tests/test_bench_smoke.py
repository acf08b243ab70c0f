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
