"""Compliance tags per evaluator (issue 29, the evaluator catalogue's standards table): ``evaltrace evaluators
list`` and the run report's evaluator table show which NIST AI RMF / SR 11-7 standard each evaluator serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main
from evaltrace.evaluators.catalogue import CATALOGUE
from run_report_project import run_project

# The catalogue's compliance table: standard -> framework.
TABLE = {
    "Safe": "NIST",
    "Secure and Resilient": "NIST",
    "Privacy Enhanced": "NIST",
    "Fair": "NIST",
    "Accountable and Transparent": "NIST",
    "Valid and Reliable": "NIST",
    "Conceptual Soundness": "SR 11-7",
    "Ongoing Monitoring": "SR 11-7",
    "Outcomes Analysis": "SR 11-7",
}


def _records(capsys: Any, *extra: str) -> list[dict[str, Any]]:
    assert main(["evaluators", "list", "--json", *extra]) == 0
    records: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return records


def test_every_catalogue_evaluator_is_listed_with_standards_of_the_table(capsys: Any) -> None:
    records = _records(capsys)
    assert [r["name"] for r in records] == sorted(CATALOGUE)
    assert all(r["class"] == CATALOGUE[r["name"]].__name__ for r in records)
    for record in records:
        assert record["standards"], f"{record['name']} has no compliance tag"
        assert set(record["standards"]) <= set(TABLE), record
    used = {s for r in records for s in r["standards"]}
    assert used == set(TABLE)  # every standard of the table is served by some evaluator


@pytest.mark.parametrize(
    ("evaluator", "standard"),
    [
        ("pii_leakage", "Privacy Enhanced"),
        ("toxicity", "Safe"),
        ("fairness_bias", "Fair"),
        ("faithfulness", "Accountable and Transparent"),
        ("answer_correctness", "Outcomes Analysis"),
        ("latency", "Ongoing Monitoring"),
        ("perplexity", "Conceptual Soundness"),
        ("encoding_guardrail", "Secure and Resilient"),
        ("exact_match", "Valid and Reliable"),
    ],
)
def test_evaluators_carry_the_standard_they_measure(capsys: Any, evaluator: str, standard: str) -> None:
    by_name = {r["name"]: r["standards"] for r in _records(capsys)}
    assert standard in by_name[evaluator]


def test_list_filters_by_standard_and_names_the_framework(capsys: Any) -> None:
    names = [r["name"] for r in _records(capsys, "--standard", "privacy enhanced")]
    assert names == ["contact_info", "pii_leakage", "sensitive_data"]
    assert main(["evaluators", "list", "--standard", "Fair"]) == 0
    out = capsys.readouterr().out
    assert "3 evaluators tagged Fair" in out and "Fair (NIST)" in out and "toxicity" not in out
    assert main(["evaluators", "list", "--standard", "GDPR"]) == 2
    assert "unknown standard 'GDPR'; known: Safe, Secure and Resilient" in capsys.readouterr().err


def test_run_report_tags_each_evaluator_with_its_standards(tmp_path: Path) -> None:
    outcome = run_project(tmp_path)
    page = tmp_path / "run.html"
    assert main(["report", str(outcome.run.path), "-o", str(page)]) == 0
    text = page.read_text()
    start = text.index('<section id="evaluators">')
    section = text[start : text.index("</section>", start)]
    row = next(r.split("</td>")[0] for r in section.split("<tr>") if "<b>contains_text</b></td>" in r)
    assert re.findall(r'data-standard="([^"]+)"', row) == ["Valid and Reliable", "Outcomes Analysis"]
    picky = next(r.split("</td>")[0] for r in section.split("<tr>") if "<b>picky</b></td>" in r)
    assert "data-standard" not in picky  # a user evaluator has no tag: nothing is claimed for it
