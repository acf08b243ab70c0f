"""Test-set selection: --case, --tag, --where, --sample/--seed, --limit; recorded, resumed, compared."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, resume_run, run_eval
from evaltrace.runner.rundir import META_FILE, RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from evaltrace.runner.select import SelectionError, select_cases
from evaltrace.schema import EvalCase
from evaltrace.schema.runs import CaseSelection
from run_report_project import CASES, forget, write_project

DATASET = [EvalCase.model_validate(c) for c in CASES]  # ok, bad, crash, skip, xss


def ids(**criteria: object) -> list[str]:
    chosen, record = select_cases(DATASET, CaseSelection.model_validate(criteria))
    assert record.selected == [c.id for c in chosen] and record.cases_total == len(DATASET)
    return record.selected


def test_case_ids_and_globs_any_of_them() -> None:
    assert ids(cases=["xss", "ok"]) == ["ok", "xss"]  # dataset order, whatever the flag order
    assert ids(cases=["*a*"]) == ["bad", "crash"]
    assert ids(cases=["s?ip", "ok"]) == ["ok", "skip"]


def test_unknown_case_id_is_an_error_naming_it() -> None:
    with pytest.raises(SelectionError, match=r"--case 'okk': no such case \(cases: ok, bad, crash, skip, xss\)"):
        ids(cases=["okk"])


def test_tags_from_metadata_tags_list_or_string() -> None:
    assert ids(tags=["smoke"]) == ["ok", "bad"]
    assert ids(tags=["hard"]) == ["bad", "crash"]  # crash has tags: "hard" (a single string)
    assert ids(tags=["web", "hard"]) == ["bad", "crash", "xss"]  # any of them


def test_where_dotted_paths_typed_values_all_of_them() -> None:
    assert ids(where=["metadata.level=2"]) == ["bad", "crash"]  # 2 is read as a number and matches int 2
    assert ids(where=["metadata.lang=fr"]) == ["xss"]
    assert ids(where=["metadata.level=2", "input.question=bad"]) == ["bad"]
    assert ids(where=["expected.answer_should_include=alpha"]) == ["ok", "crash"]  # a list: any element
    assert ids(where=["id=skip"]) == ["skip"]
    assert ids(tags=["smoke"], where=["metadata.level=1"]) == ["ok"]  # different flags: AND


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("level=2", r"'level' is not a case field .*; for metadata write metadata.level"),
        ("metadata.level", r"--where expects dotted.path=value"),
        ("metadata..x=1", r"--where expects dotted.path=value"),
    ],
)
def test_malformed_where_is_a_clear_error(where: str, message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        ids(where=[where])


def test_no_match_is_an_error() -> None:
    with pytest.raises(SelectionError, match=r"--tag nope, --where metadata.level=9 matches none of the 5 cases"):
        ids(tags=["nope"], where=["metadata.level=9"])


def test_sample_is_seeded_and_deterministic_then_limit() -> None:
    first = ids(sample=3, seed=7)
    assert len(first) == 3 and first == ids(sample=3, seed=7)
    assert [c for c in [c.id for c in DATASET] if c in first] == first  # dataset order kept
    draws = {tuple(ids(sample=2, seed=s)) for s in range(20)}
    assert len(draws) > 1  # the seed matters
    assert ids(sample=3) == ids(sample=3, seed=0)  # no seed: seed 0, still deterministic
    _, record = select_cases(DATASET, CaseSelection(sample=3))
    assert record.seed == 0  # recorded, so the run says how to draw it again
    assert ids(sample=10) == [c.id for c in DATASET]  # more than there are: every case
    assert ids(limit=2) == ["ok", "bad"]
    assert ids(sample=4, seed=1, limit=2) == ids(sample=4, seed=1)[:2]


@pytest.mark.parametrize("flag", ["sample", "limit"])
def test_counts_must_be_positive(flag: str) -> None:
    with pytest.raises(SelectionError, match=f"--{flag} expects a positive number"):
        ids(**{flag: 0})


def _run(tmp_path: Path, *args: str) -> int:
    path, _ = write_project(tmp_path / "project")
    try:
        return main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-progress", *args])
    finally:
        forget(tmp_path / "project")


def _only_run(tmp_path: Path) -> RunDirectory:
    (path,) = [p for p in (tmp_path / "runs").iterdir() if p.name != "baselines"]
    return RunDirectory(path)


def test_cli_flags_run_only_the_selection_and_record_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run(tmp_path, "--tag", "smoke", "--tag", "web", "--where", "metadata.level=2", "--limit", "5")
    assert code == 0, capsys.readouterr().err
    run = _only_run(tmp_path)
    assert {(t.case_id, t.variant_name) for t in run.read_traces()} == {("bad", "v1"), ("bad", "v2")}
    assert [c.id for c in run.read_cases()] == ["bad"]
    meta = json.loads((run.path / META_FILE).read_text())
    assert meta["selection"]["selected"] == ["bad"] and meta["selection"]["tags"] == ["smoke", "web"]
    summary = yaml.safe_load((run.path / SUMMARY_FILE).read_text())
    assert summary["selection"]["where"] == ["metadata.level=2"] and summary["selection"]["cases_total"] == 5
    assert summary["cases_total"] == 1
    assert "Selection: 1 of 5 cases" in capsys.readouterr().out


def test_cli_case_and_sample_flags(tmp_path: Path) -> None:
    assert _run(tmp_path, "--case", "o*", "--case", "skip") == 0
    assert {t.case_id for t in _only_run(tmp_path).read_traces()} == {"ok", "skip"}


def test_cli_sample_flag(tmp_path: Path) -> None:
    assert _run(tmp_path, "--sample", "2", "--seed", "3") == 0
    expected = select_cases(DATASET, CaseSelection(sample=2, seed=3))[1].selected
    assert sorted({t.case_id for t in _only_run(tmp_path).read_traces()}) == sorted(expected)


def test_cli_selection_matching_nothing_exits_2_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path, "--tag", "nightly") == 2
    err = capsys.readouterr().err
    assert "--tag nightly matches none of the 5 cases" in " ".join(err.split())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_selection_flags_are_refused_with_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--resume", "whatever", "--runs-dir", str(tmp_path), "--tag", "x", "--no-progress"])
    assert code == 2
    assert "cannot be combined with --resume" in capsys.readouterr().err


def test_config_hash_covers_the_selected_cases(tmp_path: Path) -> None:
    path, _ = write_project(tmp_path / "project")
    try:
        full = run_eval(path, runs_dir=tmp_path / "runs")
        part = run_eval(path, runs_dir=tmp_path / "runs", selection=CaseSelection(cases=["ok", "bad"]))
        again = run_eval(path, runs_dir=tmp_path / "runs", selection=CaseSelection(cases=["bad", "ok"]))
    finally:
        forget(tmp_path / "project")
    assert full.summary.config_hash != part.summary.config_hash  # a partial run is not the full run
    assert part.summary.config_hash == again.summary.config_hash  # the same cases: the same inputs
    assert full.summary.selection is None


def _kill_after_first_trace(run: RunDirectory) -> None:
    """Make the run look killed after its first cell: one trace, no results, no summary."""
    traces = run.path / TRACES_FILE
    first = traces.read_text().splitlines()[0]
    traces.chmod(stat.S_IRUSR | stat.S_IWUSR)
    traces.write_text(first + "\n")
    (run.path / RESULTS_FILE).unlink()
    (run.path / SUMMARY_FILE).unlink()


@pytest.mark.parametrize("verbatim", [True, False])
def test_resume_uses_the_recorded_cases(tmp_path: Path, verbatim: bool) -> None:
    path, _ = write_project(tmp_path / "project")
    if not verbatim:  # a literal secret is masked in config.yaml: the resume rebuilds from eval.yaml + selection
        config = yaml.safe_load(path.read_text())
        config["variants"][0]["metadata"] = {"api_token": "literal-secret"}
        path.write_text(yaml.safe_dump(config))
    try:
        first = run_eval(path, runs_dir=tmp_path / "runs", selection=CaseSelection(sample=2, seed=5))
        assert json.loads((first.run.path / META_FILE).read_text())["config_verbatim"] is verbatim
        chosen = first.summary.selection.selected if first.summary.selection else []
        _kill_after_first_trace(first.run)
        resumed = resume_run(first.run)
    finally:
        forget(tmp_path / "project")
    assert sorted({t.case_id for t in resumed.traces}) == sorted(chosen) and len(chosen) == 2
    assert len(resumed.traces) == 4
    assert resumed.summary.selection is not None and resumed.summary.selection.selected == chosen
    assert resumed.summary.config_hash == first.summary.config_hash


def test_drift_of_a_partial_run_compares_only_the_selected_cases(tmp_path: Path) -> None:
    path, _ = write_project(tmp_path / "project")
    runs = tmp_path / "runs"
    try:
        full = run_eval(path, runs_dir=runs)
        assert main(["promote", full.run.run_id, "--runs-dir", str(runs)]) == 0
        part = run_eval(path, runs_dir=runs, drift=True, selection=CaseSelection(cases=["ok", "skip"]))
    finally:
        forget(tmp_path / "project")
    report = part.summary.comparison
    assert report is not None and report.kind == "drift"
    v1, v2 = report.deltas
    # Over ok and skip only: v1 judged ok (pass) on both sides, so nothing moved; the full baseline's 1/3 pass
    # rate (ok pass; bad, xss fail) would have made this look like +66.7 points.
    assert v1.pass_rate_delta == 0.0 and v1.regressions == [] and v1.improvements == []
    assert v2.pass_rate_delta == 0.0  # v2 fails ok on both sides
    # compare <run> (against the promoted baseline) narrows the same way.
    assert main(["compare", part.run.run_id, "--runs-dir", str(runs), "--fail-on-regression"]) == 0
