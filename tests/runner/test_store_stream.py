"""Cells streamed into the run stores as they finish (:mod:`evaltrace.runner.store_stream`): a store that fails is
dropped from the stream with a note, the others keep receiving cells."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

from evaltrace.runner import SqliteRunStore
from evaltrace.runner.store_stream import CellStream
from evaltrace.runner.stores import StoreSpec
from evaltrace.schema import EvaluationResult, RunSummary, Trace

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)


def _trace(case: str) -> Trace:
    return Trace(run_id="r1", case_id=case, variant_name="v", started_at=T0, finished_at=T0, input={"q": case})


def _result(case: str) -> EvaluationResult:
    return EvaluationResult(run_id="r1", case_id=case, variant_name="v", evaluator="e", passed=True)


def test_a_failing_store_is_dropped_with_a_note_and_the_others_keep_every_cell(tmp_path: Path) -> None:
    placeholder = RunSummary(
        run_id="r1", started_at=T0, finished_at=T0, config_path="eval.yaml", config_hash="h", cases_total=3
    )
    specs = [
        StoreSpec("local_files", entry="output[0]"),  # the run directory: not a database, skipped
        StoreSpec("postgres", dsn="postgresql://u:secret@127.0.0.1:1/db", entry="output[1]"),  # nothing listens
        StoreSpec("sqlite", path=str(tmp_path / "runs.db"), run_namespace={"team": "a"}, entry="--sqlite"),
    ]
    with CellStream(specs, placeholder, eval_name="bot", run_namespace={"branch": "main"}) as stream:
        stream.start([_trace("c1")], [_result("c1")])  # a resume's saved cell
        stream.cell(_trace("c2"), [_result("c2")])
        stream.cell(_trace("c3"), [_result("c3")])
    (note,) = stream.notes
    assert "output[1]" in note and "at the end" in note and "secret" not in note
    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = store.get_run("r1")
        assert (run.finished, run.run_namespace) == (False, {"team": "a", "branch": "main"})
        assert [t.case_id for t in store.traces("r1")] == ["c1", "c2", "c3"]
        assert [r.case_id for r in store.results("r1")] == ["c1", "c2", "c3"]
    with sqlite3.connect(tmp_path / "runs.db") as db:  # every row carries its run's namespace
        for table in ("traces", "results"):
            rows = db.execute(f"SELECT DISTINCT run_namespace FROM {table}").fetchall()
            assert rows == [('{"branch":"main","team":"a"}',)]
