"""docs/evaluators.md lists every catalogue evaluator with its inputs, range, threshold and what it needs to run.

The rows are checked against the code: the "Kind" letters against the constructor (a judge evaluator takes
``judge``, an embedding one ``embedder``, a deterministic one neither) and the documented default threshold
against the evaluator's own.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluators import CATALOGUE, Judge, create_evaluator

from .test_thresholds import DEAD_JUDGE, REQUIRED, flat_embedder

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluators.md"
HEADER = re.compile(r"^\| Name \(class\) \| Kind \| (Needs|Options) \| Metric \| Range \| Threshold: ")


def _rows() -> dict[str, list[str]]:
    """Catalogue name -> the cells of its row, from the catalogue and session tables."""
    rows: dict[str, list[str]] = {}
    in_table = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if HEADER.match(line):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            in_table = False
        if in_table and line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            for name in re.findall(r"`([a-z_0-9]+)`", cells[0]):
                rows[name] = cells
    return rows


ROWS = _rows()


@pytest.mark.parametrize("name", sorted(CATALOGUE))
async def test_every_catalogue_evaluator_has_a_complete_row(name: str) -> None:
    assert name in ROWS, f"docs/evaluators.md has no row for {name}"
    _, kind, inputs, metric, value_range, threshold = ROWS[name]
    assert inputs and metric and value_range and threshold
    parameters = inspect.signature(CATALOGUE[name].__init__).parameters
    letters = set(re.findall(r"[DJEL]", kind))
    assert ("J" in letters or "L" in letters) == ("judge" in parameters), (name, kind)
    assert ("E" in letters) == ("embedder" in parameters), (name, kind)
    judge = Judge("judge-model", base_url=DEAD_JUDGE, api_key="test-key", max_retries=0)
    try:
        args, options = REQUIRED.get(name, ((), {}))
        extra: dict[str, Any] = {}
        if "judge" in parameters:
            extra["judge"] = judge
        if "embedder" in parameters:
            extra["embedder"] = flat_embedder
        evaluator = create_evaluator(name, *args, **options, **extra)
    finally:
        await judge.aclose()
    documented = re.match(r"(\d+(?:\.\d+)?)", threshold)
    if documented is not None:
        if name == "llm_judge":  # documented as a share of the scale, which is the default 0-1 scale here
            assert evaluator.normalized_threshold == float(documented.group(1))
        else:
            assert evaluator.threshold == float(documented.group(1)), (name, threshold)
