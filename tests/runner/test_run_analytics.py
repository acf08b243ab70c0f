"""Analytics from the evaluation data models (issue 29), through ``evaltrace runs analytics|preference|agreement|trend``.

One real offline run (:mod:`.insights_project`, whose tables give every expected figure by hand); the trend reads
three run directories. The statistics are checked against values worked out independently below.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from statistics import pstdev
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, RunOutcome

from .insights_project import ANSWER_QUALITY, CONTEXT_PRECISION, run_project


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_project(tmp_path_factory.mktemp("analytics"))


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _pearson(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return cov / (sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)) ** 0.5


def test_performance_counts_evaluations_errors_and_skips(demo: RunOutcome, capsys: Any) -> None:
    data = _json(capsys, ["runs", "analytics", str(demo.run.path), "--json"])
    perf = data["evaluation_performance"]
    # 3 evaluators x 16 cells: 32 judged, flaky crashed once and skipped 15 times.
    assert (perf["total_evaluations"], perf["successful_evaluations"]) == (48, 32)
    assert (perf["failed_evaluations"], perf["not_evaluated"]) == (1, 15)
    assert perf["success_rate"] == pytest.approx(32 / 33)
    # Durations of the evaluations that ran (completed or errored), as results.jsonl records them.
    ran = sorted(float(r.latency_ms) for r in demo.run.read_results() if r.status in ("completed", "failed"))
    assert perf["average_duration_ms"] == pytest.approx(sum(ran) / len(ran))
    position = (len(ran) - 1) * 0.95  # linear interpolation between the closest ranks
    low = int(position)
    assert perf["p95_duration_ms"] == pytest.approx(ran[low] + (ran[low + 1] - ran[low]) * (position - low))
    assert perf["total_cost_usd"] is None  # no judge, no cost: unknown, not 0
    flaky = perf["by_evaluator"]["flaky"]
    assert (flaky["successful_evaluations"], flaky["failed_evaluations"], flaky["success_rate"]) == (0, 1, 0.0)


def test_quality_gives_agreement_correlation_and_confidence(demo: RunOutcome, capsys: Any) -> None:
    quality = _json(capsys, ["runs", "analytics", str(demo.run.path), "--json"])["evaluation_quality"]
    # Same verdict from both judging evaluators on 12 of the 16 cells (not fast c4, c6; slow c3, c7).
    assert quality["cells_compared"] == 16
    assert quality["evaluator_agreement"] == pytest.approx(0.75)
    xs = [ANSWER_QUALITY[v][c] for v in ("fast", "slow") for c in sorted(ANSWER_QUALITY[v])]
    ys = [CONTEXT_PRECISION[v][c] for v in ("fast", "slow") for c in sorted(CONTEXT_PRECISION[v])]
    correlation = quality["inter_evaluator_correlation"]
    assert correlation == {"answer_quality_vs_context_precision": pytest.approx(_pearson(xs, ys))}
    # answer_quality reports confidence 0.9 on fast (high) and 0.6 on slow (medium); the others none.
    assert quality["results_with_confidence"] == 16
    assert quality["confidence_distribution"] == {
        "high_confidence": 0.5,
        "medium_confidence": 0.5,
        "low_confidence": 0.0,
    }


def test_analytics_prints_readable_lines(demo: RunOutcome, capsys: Any) -> None:
    assert main(["runs", "analytics", str(demo.run.path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "48 evaluations, 32 completed, 1 errored, 15 not evaluated; success rate 97.0%" in out
    assert "evaluator agreement 75.0% over 16 cell(s)" in out
    assert "confidence (16 results): high 50.0%, medium 50.0%, low 0.0%" in out


def test_preference_by_an_evaluator_has_wilson_interval_and_sign_test(demo: RunOutcome, capsys: Any) -> None:
    argv = ["runs", "preference", str(demo.run.path), "fast", "slow", "--evaluator", "answer_quality", "--json"]
    ab = _json(capsys, argv)
    # fast scores higher on c1 c2 c3 c5 c7 c8, equal on c4 c6, never lower.
    assert (ab["wins"], ab["losses"], ab["ties"], ab["sample_size"]) == (6, 0, 2, 8)
    assert ab["preference_score"] == 1.0
    z = 1.959963984540054
    assert ab["confidence_interval"] == pytest.approx([1 / (1 + z * z / 6), 1.0])  # Wilson at p = 1, n = 6
    assert ab["p_value"] == pytest.approx(2 / 2**6)  # both tails of 6 of 6
    assert ab["statistical_significance"] is True


def test_preference_by_share_of_passes_can_be_not_significant(demo: RunOutcome, capsys: Any) -> None:
    ab = _json(capsys, ["runs", "preference", str(demo.run.path), "fast", "slow", "--json"])
    # Share of judging evaluators passed: fast wins c1 c3 c5 c6 c7, loses c4, ties c2 c8.
    assert (ab["wins"], ab["losses"], ab["ties"]) == (5, 1, 2)
    assert ab["preference_score"] == pytest.approx(5 / 6)
    assert ab["p_value"] == pytest.approx(2 * (1 + 6) / 2**6)
    assert ab["statistical_significance"] is False
    assert main(["runs", "preference", str(demo.run.path), "fast", "slow"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "5 wins, 1 losses, 2 ties" in out and "sign test p = 0.2188: not significant" in out


def test_preference_of_an_unknown_variant_exits_2_naming_it(demo: RunOutcome, capsys: Any) -> None:
    assert main(["runs", "preference", str(demo.run.path), "fast", "nope"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "variant 'nope' has no judged evaluation in this run (judged variants: fast, slow)" in err
    assert main(["runs", "preference", str(demo.run.path), "fast", "slow", "--evaluator", "flaky"]) == 2
    assert "evaluator 'flaky' judged nothing" in " ".join(capsys.readouterr().err.split())


def test_human_versus_ai_agreement(demo: RunOutcome, tmp_path: Path, capsys: Any) -> None:
    human = tmp_path / "human.jsonl"
    rows = [
        {"case_id": "c1", "variant": "fast", "score": 0.8, "passed": True, "annotator_id": "ann"},  # AI 0.9 pass
        {"case_id": "c6", "variant": "fast", "score": 0.9, "passed": True},  # AI 0.3 fail
        {"case_id": "c3", "variant": "slow", "score": 0.3, "passed": False},  # AI 0.2 fail
        {"case_id": "missing", "variant": "slow", "score": 0.5},
    ]
    human.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["runs", "agreement", str(demo.run.path), "--human", str(human), "--evaluator", "answer_quality"]
    report = _json(capsys, [*argv, "--json"])
    assert (report["pairs"], report["unmatched"]) == (3, 1)
    assert report["mean_absolute_difference"] == pytest.approx((0.1 + 0.6 + 0.1) / 3)
    assert report["agreement_score"] == pytest.approx(1 - (0.1 + 0.6 + 0.1) / 3)
    assert report["verdict_agreement"] == pytest.approx(2 / 3)
    assert report["correlation"] == pytest.approx(_pearson([0.8, 0.9, 0.3], [0.9, 0.3, 0.2]))
    assert [(d["case_id"], d["variant"]) for d in report["discrepancies"]] == [("c6", "fast")]
    assert main(argv) == 0
    assert "discrepancy c6 × fast (answer_quality): human 0.90, AI 0.30" in capsys.readouterr().out


def test_human_scores_are_validated_with_the_entry_named(demo: RunOutcome, tmp_path: Path, capsys: Any) -> None:
    human = tmp_path / "human.yaml"
    human.write_text(yaml.safe_dump([{"case_id": "c1", "variant": "fast", "evaluator": "answer_quality",
                                      "score": 0.5}, {"case_id": "c2", "score": 7}]))  # fmt: skip
    assert main(["runs", "agreement", str(demo.run.path), "--human", str(human)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "entry 1: score: Input should be less than or equal to 1" in err
    human.write_text(yaml.safe_dump([{"case_id": "c2", "variant": "fast", "score": 0.5}]))
    assert main(["runs", "agreement", str(demo.run.path), "--human", str(human)]) == 2
    assert "names no evaluator: pass --evaluator" in " ".join(capsys.readouterr().err.split())


def _copy_with_pass_rate(source: Path, runs: Path, index: int, rate: float) -> None:
    target = runs / f"2026-01-0{index}T00-00-00_insights_demo"
    shutil.copytree(source, target)
    run = RunDirectory(target)
    summary = run.read_summary()
    variants = [v.model_copy(update={"pass_rate": rate}) if v.name == "fast" else v for v in summary.variants]
    started = dt.datetime(2026, 1, index, tzinfo=dt.UTC)
    run.write_summary(summary.model_copy(update={"run_id": target.name, "started_at": started,
                                                 "finished_at": started, "variants": variants}))  # fmt: skip


def test_trend_over_runs(demo: RunOutcome, tmp_path: Path, capsys: Any) -> None:
    runs = tmp_path / "runs"
    for index, rate in ((3, 0.75), (1, 0.5), (2, 0.6)):  # written out of order: the trend sorts by start time
        _copy_with_pass_rate(demo.run.path, runs, index, rate)
    trend = _json(capsys, ["runs", "trend", "fast", "--runs-dir", str(runs), "--json"])
    assert trend["historical_scores"] == [0.5, 0.6, 0.75]
    assert trend["current_score"] == 0.75
    assert trend["trend"] == "improving"
    assert trend["change_rate"] == pytest.approx(0.125)
    assert trend["stability_score"] == pytest.approx(1 - pstdev([0.5, 0.6, 0.75]))
    by_evaluator = _json(capsys, ["runs", "trend", "slow", "--runs-dir", str(runs), "--evaluator",
                                  "answer_quality", "--json"])  # fmt: skip
    assert by_evaluator["trend"] == "stable" and by_evaluator["change_rate"] == pytest.approx(0.0)
    assert by_evaluator["historical_scores"] == pytest.approx([0.4125] * 3)
    one = _json(capsys, ["runs", "trend", "fast", "--runs-dir", str(runs), "-n", "1", "--json"])
    assert one["trend"] == "insufficient_data" and one["run_ids"] == ["2026-01-03T00-00-00_insights_demo"]


def test_trend_of_a_variant_in_no_run_exits_2_naming_it(demo: RunOutcome, tmp_path: Path, capsys: Any) -> None:
    runs = tmp_path / "runs"
    _copy_with_pass_rate(demo.run.path, runs, 1, 0.5)
    assert main(["runs", "trend", "fsat", "--runs-dir", str(runs)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"variant 'fsat' is not in any of the 1 runs in {runs}; variants: fast, slow" in err
    assert main(["runs", "trend", "fast", "--runs-dir", str(tmp_path / "empty")]) == 2
    assert "is not in any run (there is none)" in " ".join(capsys.readouterr().err.split())
