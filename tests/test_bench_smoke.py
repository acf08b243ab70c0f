"""The CI smoke run of the instruction benchmarks (``benchmarks/smoke.py``, issue 28): its verdicts and budgets.

The callgrind runs themselves are the CI step's (``.ci/run``); here the comparison that decides the exit status,
and the budget file every row must have.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import _callgrind  # noqa: E402
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


CHILD = """
import gc, sys
sys.path.insert(0, {benchmarks!r})
import _callgrind

variant, calls = _callgrind.child_request(sys.argv)


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


work(300_000)  # set-up and warm-up: the same in every run
if variant == "mark":
    _callgrind.count_from_here()
    work(100_000)  # counted: after the mark
gc.collect()
work(calls)
"""


@pytest.mark.skipif(
    shutil.which("valgrind") is None or not _callgrind.can_count_from_collect(),
    reason="needs valgrind on x86-64 Linux",
)
def test_a_run_counted_from_the_collection_leaves_the_set_up_out_and_a_mark_opens_it_earlier(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(benchmarks=str(BENCHMARKS)))
    _callgrind.warm([(str(script), "collect"), (str(script), "mark")])  # no run compiles what another one reads
    whole = {n: _callgrind.run_totals(str(script), "collect", n)[1] for n in (0, 50_000)}
    window = {n: _callgrind.run_totals(str(script), "collect", n, from_collect=True)[1] for n in (0, 50_000)}
    marked = _callgrind.run_totals(str(script), "mark", 0, from_collect=True)[1]
    # The set-up's 300,000 iterations (tens of millions of instructions) are not counted from the collection on...
    assert whole[0] - window[0] > 10_000_000
    # ... while the 50,000 measured ones are (not asserted equal to the whole runs' difference: on this bare loop
    # the two differed by ~19% in session 8, unexplained; on the smoke rows' children they agreed within 1%).
    assert window[50_000] - window[0] > 10_000_000
    # A mark opens the count earlier: its 100,000 iterations are in, the set-up's still out.
    assert window[0] + 5_000_000 < marked < whole[0]
