"""docs/evaluators.md documents the JSON each judge prompt must return, exactly as the prompt asks for it.

Each row of "The judge's reply" table quotes its prompt's requested shape; every prompt file has a row, every
evaluator named in a row uses that prompt, and a reply written as documented parses with the evaluator's parser.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from evaltrace.evaluators._judged import json_object
from evaltrace.evaluators._prompts import load_prompt
from evaltrace.evaluators.catalogue import CATALOGUE
from evaltrace.evaluators.judge import Judge

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluators.md"
PROMPTS = sorted(
    p.stem for p in resources.files("evaltrace.evaluators").joinpath("prompts").iterdir() if p.name.endswith(".toml")
)
_CODE = re.compile(r"`([^`]+)`")


def _rows() -> dict[str, tuple[list[str], str]]:
    """Prompt name -> (evaluator names, the documented reply) from the table of "The judge's reply"."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### The judge's reply", 1)[1].split("\n#", 1)[0]
    rows: dict[str, tuple[list[str], str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = (_CODE.findall(cells[1]), cells[2].strip("`"))
    return rows


def _requested_shape(name: str) -> str:
    """The line after "Reply with JSON ..." in the prompt: the shape the judge is asked for."""
    lines = load_prompt(name).user.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("Reply with JSON"))
    return lines[index + 1]


def test_every_prompt_has_a_row_quoting_its_requested_shape() -> None:
    rows = _rows()
    assert set(rows) == set(PROMPTS)
    for name in PROMPTS:
        assert rows[name][1] == _requested_shape(name), name
    claims = load_prompt("rubric_level").tables["claims"]["shape"].removeprefix(", ")
    assert f"appends `{claims}`" in DOC.read_text(encoding="utf-8")  # what factual_accuracy adds to the shape


# Prompts the offline runner's simulated user sends (runner/simulation.py), not an evaluator's.
_SIMULATOR_PROMPTS = {"simulated_user", "simulated_user_goal"}


def test_every_listed_evaluator_uses_the_prompt_of_its_row() -> None:
    for prompt, (evaluators, _) in _rows().items():
        if prompt in _SIMULATOR_PROMPTS:
            continue
        catalogued = [e for e in evaluators if e in CATALOGUE and e != "agent_rubric"]
        assert catalogued, prompt
        for name in catalogued:
            judged = _judged(name)
            assert judged.prompt_name == prompt, (name, prompt)


_OPTIONS: dict[str, dict[str, Any]] = {
    "llm_judge": {"rubric": "helpfulness"},
    "language_mismatch": {"detector": "judge"},
}


def _judged(name: str) -> Any:
    """The catalogue evaluator ``name`` built with a judge on loopback (never called), as the judge sees it."""
    judge = Judge("judge-model", base_url="http://127.0.0.1:9/v1", api_key="unused")
    built = CATALOGUE[name](judge=judge, **_OPTIONS.get(name, {}))
    inner = getattr(built, "_judged", None)  # language_mismatch delegates to a judged evaluator
    return inner if hasattr(inner, "prompt_name") else built


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_reply_written_as_documented_parses(prompt: str) -> None:
    """The documented reply (placeholders filled) is accepted by the parser of each evaluator using the prompt."""
    evaluators, reply = _rows()[prompt]
    reply = reply.replace("{scale_max}", "1").replace("{claims_shape}", "")
    if prompt in _SIMULATOR_PROMPTS:
        assert json_object(reply), prompt
        return
    for name in evaluators:
        if name not in CATALOGUE or name == "agent_rubric":
            continue
        built = _judged(name)
        if hasattr(built, "parse"):
            assert built.parse(reply) is not None, name
        else:  # session evaluators parse per conversation: the JSON object is what they read
            assert json_object(reply), name
