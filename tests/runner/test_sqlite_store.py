"""The SQLite run store: save, list by eval and namespace, read back, and migration of an old database."""

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


def _summary(run_id: str) -> RunSummary:
    return RunSummary(
        run_id=run_id, started_at=T0, finished_at=T0, config_path="eval.yaml", config_hash="h", cases_total=1
    )


def _trace(run_id: str) -> Trace:
    return Trace(run_id=run_id, case_id="c1", variant_name="v", started_at=T0, finished_at=T0, input={"q": 1})


def _result(run_id: str, passed: bool) -> EvaluationResult:
    return EvaluationResult(run_id=run_id, case_id="c1", variant_name="v", evaluator="e", passed=passed)


def test_save_list_and_read_back(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db") as store:
        store.save_run(
            _summary("r1"), [_trace("r1")], [_result("r1", True)], eval_name="a", run_namespace={"branch": "main"}
        )
        store.save_run(
            _summary("r2"), [_trace("r2")], [_result("r2", False)], eval_name="a", run_namespace={"branch": "dev"}
        )
        store.save_run(_summary("r3"), [], [], eval_name="b")
        assert [r.run_id for r in store.list_runs()] == ["r3", "r2", "r1"]
        assert [r.run_id for r in store.list_runs(eval_name="a")] == ["r2", "r1"]
        assert [r.run_id for r in store.list_runs(run_namespace={"branch": "main"})] == ["r1"]
        assert store.get_run("r3").run_namespace == {}
        assert store.traces("r1") == [_trace("r1")]
        assert [r.passed for r in store.results("r2")] == [False]
        # A re-evaluation replaces results, keeps traces and (when not given) the namespace.
        store.save_run(_summary("r1"), [_trace("r1")], [_result("r1", False)], eval_name="a")
        assert [r.passed for r in store.results("r1")] == [False]
        assert len(store.traces("r1")) == 1
        assert store.get_run("r1").run_namespace == {"branch": "main"}


def test_old_database_without_run_namespace_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        """CREATE TABLE runs (run_id TEXT PRIMARY KEY, eval_name TEXT NOT NULL, started_at TEXT NOT NULL,
           finished_at TEXT NOT NULL, config_hash TEXT NOT NULL, summary TEXT NOT NULL)"""
    )
    db.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
        ("old", "a", T0.isoformat(), T0.isoformat(), "h", _summary("old").model_dump_json()),
    )
    db.commit()
    db.close()

    with SqliteRunStore(path) as store:
        assert store.get_run("old").run_namespace == {}
        assert store.get_run("old").summary.run_id == "old"
        store.save_run(_summary("new"), [], [], eval_name="a", run_namespace={"project": "p"})
        assert [r.run_id for r in store.list_runs(run_namespace={"project": "p"})] == ["new"]

    db = sqlite3.connect(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
    assert columns[-2:] == ["run_namespace", "finished"] and "summary" in columns  # schema 4 added "finished"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_USER_VERSION
    db.close()
    # Opening again is a no-op.
    SqliteRunStore(path).close()


def test_cli_run_writes_to_sqlite_with_namespace(project: Project) -> None:
    path = project.write(
        {
            "name": "sql",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "evaluators": [{"name": "contains_text"}],
        }
    )
    db = project.root / "runs.db"
    args = ["run", str(path), "--runs-dir", str(project.runs_dir), "--sqlite", str(db), "--no-progress"]
    assert main([*args, "--namespace", "branch=main", "--namespace", "project=demo"]) == 0
    with SqliteRunStore(db) as store:
        (stored,) = store.list_runs(run_namespace={"branch": "main"})
        assert stored.eval_name == "sql" and stored.run_namespace == {"branch": "main", "project": "demo"}
        run_dir = project.runs_dir / stored.run_id
        on_disk = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
        assert sorted(t.case_id for t in store.traces(stored.run_id)) == sorted(t["case_id"] for t in on_disk)
        assert len(store.results(stored.run_id)) == 3


def test_cli_rejects_malformed_namespace(project: Project) -> None:
    path = project.write(
        {
            "name": "sql",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        }
    )
    assert main(["run", str(path), "--namespace", "novalue", "--no-progress"]) == 2
