"""summary.yaml and the terminal list failing / errored / not-evaluated cases, what changed, insights, traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, compare_runs, run_eval
from evaltrace.runner.rundir import SUMMARY_FILE, TRACES_FILE
from evaltrace.schema import RunSummary
from evaltrace.schema.runs import CaseReport
from run_report_project import EXPECTED, XSS, forget, run_project, write_project


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    outcome = run_project(tmp_path_factory.mktemp("details"))
    # What a reader gets is the file: read it back rather than trusting the object in memory.
    return RunSummary.model_validate(yaml.safe_load((outcome.run.path / SUMMARY_FILE).read_text()))


def _cells(reports: list[CaseReport]) -> list[tuple[str, str]]:
    return [(r.case_id, r.variant) for r in reports]


def _expected(outcome: str) -> list[tuple[str, str]]:
    return [(c, v) for v, cases in EXPECTED.items() for c, o in cases.items() if o == outcome]


def test_each_cell_that_did_not_pass_is_listed_under_its_outcome(demo: RunSummary) -> None:
    assert sorted(_cells(demo.failed_cases)) == sorted(_expected("fail"))
    assert sorted(_cells(demo.eval_error_cases)) == sorted(_expected("error"))
    assert sorted(_cells(demo.not_evaluated_cases)) == sorted(_expected("not_evaluated"))
    # Counts and listings come from the same outcomes.
    for variant in demo.variants:
        assert variant.cases_failed == sum(r.variant == variant.name for r in demo.failed_cases)
        assert variant.cases_eval_errors == sum(r.variant == variant.name for r in demo.eval_error_cases)


def test_failures_name_the_evaluator_and_reason_or_the_system_error(demo: RunSummary) -> None:
    by_cell = {(r.case_id, r.variant): r for r in demo.failed_cases}
    bad = by_cell["bad", "v1"]
    assert [(v.evaluator, v.outcome, v.score, v.reason) for v in bad.evaluators] == [
        ("contains_text", "fail", 0.0, "missing: 'missing'")
    ]
    assert bad.system_error is None
    crashed = by_cell["xss", "v2"]
    assert crashed.system_error is not None and crashed.system_error.startswith("exception: RuntimeError: v2 exploded")
    (error,) = {(r.case_id, r.variant): r for r in demo.eval_error_cases}["crash", "v1"].evaluators
    assert (error.evaluator, error.outcome, error.error_type) == ("picky", "error", "exception")
    assert "ZeroDivisionError: picky evaluator bug" in error.reason
    skipped = {(r.case_id, r.variant): r for r in demo.not_evaluated_cases}["skip", "v1"]
    assert {(v.evaluator, v.outcome) for v in skipped.evaluators} == {
        ("contains_text", "not_evaluated"),
        ("picky", "not_evaluated"),
    }
    assert "picky has no opinion" in {v.reason for v in skipped.evaluators}


def test_each_listed_case_points_at_its_own_trace(tmp_path: Path) -> None:
    outcome = run_project(tmp_path)
    lines = (outcome.run.path / TRACES_FILE).read_text().splitlines()
    listed = [*outcome.summary.failed_cases, *outcome.summary.eval_error_cases, *outcome.summary.not_evaluated_cases]
    assert listed
    for report in listed:
        assert report.trace_line is not None
        trace = json.loads(lines[report.trace_line - 1])
        assert (trace["case_id"], trace["variant_name"]) == (report.case_id, report.variant)
        assert report.trace_id == trace["extra"]["trace_id"] and len(report.trace_id) == 32


def test_ad_hoc_regression_says_which_evaluator_flipped(demo: RunSummary) -> None:
    assert demo.comparison is not None and demo.comparison.kind == "ad_hoc"
    (delta,) = demo.comparison.deltas
    assert delta.variant == "v2" and delta.regressions == ["ok"]
    (change,) = delta.changes
    assert (change.case_id, change.kind, change.before, change.now) == ("ok", "regression", "pass", "fail")
    (moved,) = change.evaluators
    assert moved.evaluator == "contains_text" and moved.before is not None and moved.now is not None
    assert (moved.before.outcome, moved.before.score, moved.before.reason) == ("pass", 1.0, "all texts present")
    assert (moved.now.outcome, moved.now.score, moved.now.reason) == ("fail", 0.0, "missing: 'alpha'")
    assert change.trace_line is not None


def test_insights_are_in_the_summary(demo: RunSummary) -> None:
    insights = demo.insights
    assert insights is not None
    assert insights.best_variant == "v1"  # 1 pass of 3 judged, against 0 of 3
    assert (insights.hardest_case, insights.hardest_case_failures) == ("bad", 2)  # failed on both variants
    assert insights.fastest_variant in ("v1", "v2")
    (contains,) = [e for e in insights.evaluators if e.evaluator == "contains_text"]
    assert contains.best_variant == "v1" and contains.hardest_case == "bad"
    assert any("below the threshold" in p for p in insights.problems)


def test_insights_report_flips_after_a_perturbation(tmp_path: Path) -> None:
    path, _ = write_project(tmp_path / "project")
    cases = yaml.safe_load((tmp_path / "project" / "cases.yaml").read_text())
    # "bad2" is "ok" reworded: the verdict of contains_text flips between them.
    cases.append({"id": "bad2", "input": {"question": "bad"}, "metadata": {"perturbation_of": "ok"},
                  "expected": {"answer_should_include": ["never"]}})  # fmt: skip
    (tmp_path / "project" / "cases.yaml").write_text(yaml.safe_dump(cases))
    try:
        outcome = run_eval(path, runs_dir=tmp_path / "runs")
    finally:
        forget(tmp_path / "project")
    assert outcome.summary.insights is not None
    flips = [p for p in outcome.summary.insights.problems if "perturbed case 'bad2'" in p]
    assert flips == ["contains_text: variant 'v1' fails perturbed case 'bad2' but passes its original 'ok'"]


def test_drift_change_reads_the_baseline_runs_results(tmp_path: Path) -> None:
    path, module = write_project(tmp_path / "project")
    runs = tmp_path / "runs"
    try:
        good = run_eval(path, runs_dir=runs)
        assert main(["promote", good.run.run_id, "--runs-dir", str(runs)]) == 0
        # The system changes: v1 now answers like v2 (ok fails, xss raises).
        source = (tmp_path / "project" / f"{module}.py").read_text()
        (tmp_path / "project" / f"{module}.py").write_text(source.replace("def answer(", "def old_answer("))
        with (tmp_path / "project" / f"{module}.py").open("a") as handle:
            handle.write("\nanswer = answer_v2\n")
        forget(tmp_path / "project")
        bad = run_eval(path, runs_dir=runs, drift=True)
        shutil.rmtree(good.run.path)  # the baseline run is gone: only the promoted summary and outcomes remain
        blind = run_eval(path, runs_dir=runs, drift=True)
    finally:
        forget(tmp_path / "project")
    assert bad.summary.comparison is not None and bad.summary.comparison.kind == "drift"
    v1 = bad.summary.comparison.deltas[0]
    (change,) = v1.changes
    assert (change.case_id, change.before, change.now) == ("ok", "pass", "fail")
    (moved,) = change.evaluators
    assert moved.before is not None and moved.before.reason == "all texts present"
    assert moved.now is not None and moved.now.reason == "missing: 'alpha'"
    # Without the baseline's results, the old side is unknown but the new reason is still given.
    assert blind.summary.comparison is not None
    (blind_change,) = blind.summary.comparison.deltas[0].changes
    (blind_moved,) = blind_change.evaluators
    assert blind_moved.before is None and blind_moved.now is not None and blind_moved.now.outcome == "fail"
    # `compare A B` describes the same change.
    assert compare_runs(RunDirectory(bad.run.path), RunDirectory(blind.run.path)).deltas[0].changes == []


def test_terminal_lists_failures_changes_insights_and_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path, _ = write_project(tmp_path / "project")
    try:
        assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    finally:
        forget(tmp_path / "project")
    out = capsys.readouterr().out
    assert "Failed (5):" in out
    assert "bad × v1: contains_text fail 0.00: missing: 'missing'  [trace traces.jsonl:" in out
    assert "xss × v2: system exception: RuntimeError: v2 exploded on " + XSS[:20] in out  # printed as text
    assert "Evaluation errors (no verdict) (2):" in out and "picky error (exception)" in out
    assert "Not evaluated (2):" in out and "picky not evaluated: picky has no opinion" in out
    assert "regression ok in v2: pass -> fail; contains_text: pass 1.00: all texts present => fail 0.00:" in out
    assert "Insights: best variant v1, hardest case bad (failed on 2 variant(s))" in out
    run_dir = next((tmp_path / "runs").iterdir())
    assert f"Traces: {run_dir / TRACES_FILE}, line per case and variant" in out
    assert f"evaltrace report {run_dir.name} -o run.html" in out
    listed = [line.split() for line in out.splitlines() if line.startswith("  ok  ")]
    assert listed and {cell.split(":")[0] for cell in listed[0][1:]} == {"v1", "v2"}


def test_summaries_written_before_these_fields_still_load(demo: RunSummary) -> None:
    data = demo.model_dump(mode="json")
    for key in ("failed_cases", "eval_error_cases", "not_evaluated_cases", "insights", "selection"):
        data.pop(key)
    assert data["comparison"] is not None
    for delta in data["comparison"]["deltas"]:
        delta.pop("changes")
    old = RunSummary.model_validate(data)
    assert old.failed_cases == [] and old.insights is None and old.selection is None
    assert old.comparison is not None and old.comparison.deltas[0].changes == []
    assert RunSummary.model_validate_json(demo.model_dump_json()) == demo  # and the new fields round-trip
