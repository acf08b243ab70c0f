"""examples/eval end to end, as a user runs it: `python examples/eval/run.py` in a fresh directory, offline.

Three systems (two python variants of one function differing by kwargs, one HTTP system answering in
Anthropic's extended-thinking shape through `preset: anthropic`), a filesystem case, deterministic evaluators
and an LLM judge pointed at a local scripted server through the `judge:` block; then the run report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "eval"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_eval_example_runs_offline_and_reports(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), str(tmp_path / "runs")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (run,) = (tmp_path / "runs").iterdir()
    traces = {(t["case_id"], t["variant_name"]): t for t in _jsonl(run / "traces.jsonl")}
    results = _jsonl(run / "results.jsonl")
    assert len(traces) == 12 * 3

    # One function, two variants: kwargs picked the model; the careful one's <think> never reaches the answer.
    careful = traces[("convert_eur_usd", "careful")]
    assert careful["output"]["final_answer"] == "100 EUR is 108.00 USD."
    assert "Convert" in careful["output"]["thinking"] and "<think>" not in careful["output"]["final_answer"]
    assert careful["extra"]["variant_kwargs"] == {"model": "careful"}
    assert traces[("convert_eur_usd", "quick")]["output"]["final_answer"] == "That is about 100.00 USD."

    # The HTTP system in Claude's shape: answer, thinking, tool calls and tokens mapped by the preset.
    deployed = traces[("weather_paris", "deployed")]
    assert deployed["output"]["final_answer"] == "It is 18 °C and sunny in Paris."
    assert deployed["output"]["thinking"] == "Look up paris with get_weather."
    assert [c["name"] for c in deployed["tool_calls"]] == ["get_weather"]
    assert deployed["metrics"]["token_input"] > 0 and deployed["metrics"]["token_output"] > 0

    def verdict(case: str, variant: str, evaluator: str) -> dict[str, Any]:
        (result,) = [
            r for r in results if (r["case_id"], r["variant_name"], r["evaluator"]) == (case, variant, evaluator)
        ]
        return result

    # The filesystem case: the quick model touched a forbidden file, the careful one only created its note.
    assert verdict("save_note", "careful", "files")["passed"] is True
    quick_files = verdict("save_note", "quick", "files")
    assert quick_files["passed"] is False and "config/settings.toml" in quick_files["reason"]
    assert (run / "artifacts" / "save_note" / "quick" / "diff.txt").read_text().count("last_note") == 1
    assert verdict("save_note", "deployed", "files")["status"] == "skipped"  # no workspace: not evaluated

    # The judge block: every judge evaluation went to the local judge with its model.
    grounded = verdict("convert_eur_usd", "quick", "grounded")
    assert grounded["passed"] is False and grounded["evaluator_type"] == "llm_judge"
    assert grounded["detail"]["judge"]["model"] == "judge-small"
    assert verdict("convert_eur_usd", "careful", "grounded")["passed"] is True

    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert {v["name"] for v in summary["variants"]} == {"careful", "quick", "deployed"}
    report = (run / "run.html").read_text(encoding="utf-8")
    assert "save_note" in report and "deployed" in report
    # The filesystem cell's detail shows what the system changed in its workspace (diff.txt), escaped.
    assert "Files changed" in report and "last_note = &quot;notes/" in report
    assert "regressed in quick: convert_eur_usd, convert_gbp_eur, save_note" in completed.stdout
