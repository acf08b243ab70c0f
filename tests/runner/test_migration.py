"""Migration on read of produced files: a run directory written by evaltrace 1.0 (tests/fixtures/runs_1_0)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, SqliteRunStore, promote_run
from evaltrace.runner.migrate import current_summary, summary_predates_outcomes
from evaltrace.runner.summary import case_outcomes, summarise_run
from evaltrace.schema import SCHEMA_VERSION, EvaluationResult
from evaltrace.schema.migrations import MIGRATIONS, migrate_record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs_1_0"
RUN_ID = "2026-01-15T09-00-00_support_bot"
# (variant, case, evaluator) -> status the 1.0 record means.
EXPECTED_STATUS = {
    ("v1", "weather", "tool_called"): "completed",
    ("v1", "weather", "contains_text"): "completed",
    ("v1", "smalltalk", "tool_called"): "skipped",
    ("v1", "smalltalk", "contains_text"): "completed",
    ("v1", "noexpect", "tool_called"): "skipped",
    ("v1", "noexpect", "contains_text"): "skipped",
    ("v2", "weather", "tool_called"): "completed",
    ("v2", "weather", "contains_text"): "completed",
    ("v2", "smalltalk", "tool_called"): "skipped",
    ("v2", "smalltalk", "contains_text"): "failed",
    ("v2", "noexpect", "tool_called"): "skipped",
    ("v2", "noexpect", "contains_text"): "skipped",
}


@pytest.fixture
def old_run(tmp_path: Path) -> RunDirectory:
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / RUN_ID, runs / RUN_ID)
    return RunDirectory(runs / RUN_ID)


def _bytes(run: RunDirectory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.path.iterdir()) if p.is_file()}


def test_fixture_is_in_the_1_0_shape() -> None:
    # Guards the fixture itself: no record may already carry the fields the migrations add.
    for line in (FIXTURES / RUN_ID / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert "status" not in record and "evaluation_id" not in record and record["schema_version"] == "1.0"
    # The last line is a skip; read as a plain model (what reading did before migrations) it is "completed".
    assert EvaluationResult.model_validate_json(line).status == "completed"


def test_old_results_read_with_their_meaning_skips_are_not_failures(old_run: RunDirectory) -> None:
    before = _bytes(old_run)
    results = old_run.read_results()
    assert {(r.variant_name, r.case_id, r.evaluator): r.status for r in results} == EXPECTED_STATUS
    crashed = next(r for r in results if r.status == "failed")
    assert crashed.error is not None and crashed.error.message == "boom"
    assert all(r.schema_version == SCHEMA_VERSION and r.evaluation_id.startswith("eval_") for r in results)
    # Stable ids: reading twice gives equal records; and the files were not rewritten.
    assert old_run.read_results() == results
    assert _bytes(old_run) == before


def test_old_trace_has_inline_reasoning_moved_out_of_the_answer(old_run: RunDirectory) -> None:
    traces = {(t.variant_name, t.case_id): t for t in old_run.read_traces()}
    thanked = traces[("v1", "noexpect")]
    assert thanked.output.final_answer == "You're welcome."
    assert thanked.output.thinking == "The user only says thanks; reply politely."
    assert thanked.messages[-1].content == "You're welcome." and thanked.messages[-1].thinking is not None
    assert traces[("v1", "weather")].output.final_answer == "It is 18 °C in Paris."
    assert [c.name for c in traces[("v1", "weather")].tool_calls] == ["get_weather"]


def test_summary_regenerated_from_the_old_files_is_right(old_run: RunDirectory) -> None:
    old = old_run.read_summary()  # loads as written: counts unknown, pass rate counting skips as failures
    assert summary_predates_outcomes(old) and old.variants[0].pass_rate == pytest.approx(1 / 3)

    summary, outcomes = summarise_run(
        run_id=RUN_ID,
        started_at=old.started_at,
        finished_at=old.finished_at,
        config_path=old.config_path,
        config_hash=old.config_hash,
        variant_names=["v1", "v2"],
        traces=old_run.read_traces(),
        results=old_run.read_results(),
    )
    assert outcomes == {
        "v1": {"weather": "pass", "smalltalk": "pass", "noexpect": "not_evaluated"},
        "v2": {"weather": "fail", "smalltalk": "error", "noexpect": "not_evaluated"},
    }
    v1, v2 = summary.variants
    assert (v1.cases_passed, v1.cases_failed, v1.cases_eval_errors, v1.cases_not_evaluated) == (2, 0, 0, 1)
    assert v1.pass_rate == 1.0
    assert (v2.cases_passed, v2.cases_failed, v2.cases_eval_errors, v2.cases_not_evaluated) == (0, 1, 1, 1)
    assert v1.not_evaluated_reasons == {
        "tool_called: skipped: the case names no tool": 1,
        "contains_text: skipped: the case names no text to look for": 1,
    }
    # current_summary does the same for readers (runs list, runs push), leaving summary.yaml as written.
    assert current_summary(old_run).variants == summary.variants
    assert yaml.safe_load((old_run.path / "summary.yaml").read_text())["variants"][0]["cases_passed"] == 1


def test_promoting_an_old_run_records_skips_as_not_evaluated(old_run: RunDirectory) -> None:
    target = promote_run(old_run, old_run.path.parent)
    outcomes = json.loads((target / "case_outcomes.json").read_text())
    assert outcomes["v1"] == {"weather": "pass", "smalltalk": "pass", "noexpect": "not_evaluated"}


def test_push_of_an_old_run_stores_migrated_records_and_summary(old_run: RunDirectory, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    args = ["runs", "push", RUN_ID, "--runs-dir", str(old_run.path.parent), "--sqlite", str(db)]
    assert main([*args, "--namespace", "project=bot"]) == 0
    with SqliteRunStore(db) as store:
        (stored,) = store.list_runs(run_namespace={"project": "bot"})
        assert stored.eval_name == "support_bot" and stored.summary.variants[0].cases_not_evaluated == 1
        statuses = {(r.variant_name, r.case_id, r.evaluator): r.status for r in store.results(RUN_ID)}
        assert statuses == EXPECTED_STATUS


def test_old_rows_in_a_sqlite_store_are_migrated_on_read(old_run: RunDirectory, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    SqliteRunStore(db).close()
    with sqlite3.connect(db) as raw:  # rows as a 1.0 release stored them: the jsonl lines verbatim
        for line in (old_run.path / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            raw.execute(
                "INSERT INTO results (run_id, case_id, variant_name, evaluator, data) VALUES (?, ?, ?, ?, ?)",
                (RUN_ID, record["case_id"], record["variant_name"], record["evaluator"], line),
            )
    with SqliteRunStore(db) as store:
        assert {(r.variant_name, r.case_id, r.evaluator): r.status for r in store.results(RUN_ID)} == EXPECTED_STATUS


def test_migrations_are_idempotent_and_leave_current_records_alone() -> None:
    old = json.loads((FIXTURES / RUN_ID / "results.jsonl").read_text().splitlines()[2])
    once = migrate_record("result", old)
    assert once.applied == (MIGRATIONS[0].name,) and once.data["status"] == "skipped"
    twice = migrate_record("result", once.data)
    assert twice.applied == () and twice.data == once.data
    current = EvaluationResult(evaluator="e", passed=False, status="completed", reason="skipped lunch").model_dump(
        mode="json"
    )
    assert migrate_record("result", current).applied == ()  # has status: its own word counts
    newer = {**old, "schema_version": "1.1"}
    assert migrate_record("result", newer).applied == ()  # 1.0 rules never touch a newer minor version


def test_a_passing_1_0_result_with_a_skip_word_in_its_reason_stays_a_pass() -> None:
    record = {"evaluator": "e", "passed": True, "reason": "no skip here", "detail": {}}
    assert migrate_record("result", record).data["status"] == "completed"


def test_outcomes_without_migration_would_be_failures(old_run: RunDirectory) -> None:
    # What this module fixes: the same lines read as plain models (no migration) turn skips into failures.
    raw = [
        EvaluationResult.model_validate_json(line)
        for line in (old_run.path / "results.jsonl").read_bytes().splitlines()
    ]
    assert case_outcomes(old_run.read_traces(), raw)["v1"]["smalltalk"] == "fail"
    assert case_outcomes(old_run.read_traces(), old_run.read_results())["v1"]["smalltalk"] == "pass"
