"""SQLite stores: the run namespace is on every row (runs, traces, results), as data-model.md's layout says."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

from evaltrace.cli import main
from evaltrace.runner import SqliteRunStore
from evaltrace.runner.sqlite_store import SCHEMA_USER_VERSION
from evaltrace.schema import EvaluationResult, RunSummary, Trace

from .conftest import Project

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)


def _namespaces(db_path: Path, table: str) -> set[tuple[str, str]]:
    db = sqlite3.connect(db_path)
    try:
        return {(row[0], row[1]) for row in db.execute(f"SELECT run_id, run_namespace FROM {table}")}
    finally:
        db.close()


def test_every_row_of_a_run_carries_its_namespace_and_follows_a_change(project: Project) -> None:
    path = project.write({
        "name": "rows",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"name": "contains_text"}, {"name": "tool_called"}],
    })  # fmt: skip
    db = project.root / "runs.db"
    base = ["run", str(path), "--runs-dir", str(project.runs_dir), "--sqlite", str(db), "--no-progress"]
    assert main([*base, "--namespace", "project=bot", "--namespace", "branch=main"]) == 0
    assert main([*base, "--namespace", "project=other"]) == 0
    with SqliteRunStore(db) as store:
        runs = {r.run_id: r.run_namespace for r in store.list_runs()}
    assert len(runs) == 2
    for table in ("traces", "results"):
        rows = _namespaces(db, table)
        assert {run for run, _ in rows} == set(runs)  # rows of both runs, each with its own run's namespace
        assert {(run, json.dumps(runs[run], sort_keys=True, separators=(",", ":"))) for run in runs} == rows

    # A run saved again under another namespace: its trace and result rows follow, the other run's stay.
    first = min(runs)
    assert main(["runs", "push", first, "--runs-dir", str(project.runs_dir), "--sqlite", str(db),
                 "--namespace", "project=moved"]) == 0  # fmt: skip
    for table in ("traces", "results"):
        rows = dict(_namespaces(db, table))
        assert json.loads(rows[first]) == {"project": "moved"}
        assert json.loads(rows[max(runs)]) == {"project": "other"}


def test_an_older_database_gets_the_namespace_on_its_trace_and_result_rows(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, eval_name TEXT NOT NULL, started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL, config_hash TEXT NOT NULL, summary TEXT NOT NULL,
            run_namespace TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE traces (run_id TEXT NOT NULL, case_id TEXT NOT NULL, variant_name TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, variant_name, case_id));
        CREATE TABLE results (run_id TEXT NOT NULL, case_id TEXT NOT NULL, variant_name TEXT NOT NULL,
            evaluator TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, variant_name, case_id, evaluator));
        PRAGMA user_version = 2;
        """
    )
    summary = RunSummary(
        run_id="old", started_at=T0, finished_at=T0, config_path="eval.yaml", config_hash="h", cases_total=1
    )
    trace = Trace(run_id="old", case_id="c1", variant_name="v", started_at=T0, finished_at=T0, input={})
    result = EvaluationResult(run_id="old", case_id="c1", variant_name="v", evaluator="e", passed=True)
    db.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("old", "a", T0.isoformat(), T0.isoformat(), "h", summary.model_dump_json(), '{"team":"search"}'),
    )
    db.execute("INSERT INTO traces VALUES ('old', 'c1', 'v', ?)", (trace.model_dump_json(),))
    db.execute("INSERT INTO results VALUES ('old', 'c1', 'v', 'e', ?)", (result.model_dump_json(),))
    db.commit()
    db.close()

    with SqliteRunStore(path) as store:
        assert store.traces("old") == [trace] and [r.passed for r in store.results("old")] == [True]
    assert _namespaces(path, "traces") == _namespaces(path, "results") == {("old", '{"team":"search"}')}
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_USER_VERSION == 4
    db.close()
    SqliteRunStore(path).close()  # opening again changes nothing
    assert _namespaces(path, "traces") == {("old", '{"team":"search"}')}
