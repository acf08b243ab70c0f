"""Run stores against a real PostgreSQL server (and SQLite for parity): namespaces, migration on open, eval.yaml
``output:``, failures that keep the run, and ``evaltrace runs list/push``."""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from evaltrace.cli import main
from evaltrace.runner import EvalConfig, RunConfigError, SqliteRunStore
from evaltrace.runner.postgres_store import (
    SCHEMA_MIGRATIONS,
    PostgresRunStore,
    PostgresStoreError,
    redact_dsn,
)
from evaltrace.runner.stores import RunStore, StoreSpec, configured_runs_dir, parse_outputs, save_to_stores
from evaltrace.schema import EvaluationResult, RunSummary, Trace

from .conftest import Project
from .postgres_server import PostgresServer

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)

StoreFactory = Callable[[], RunStore]


def _summary(run_id: str) -> RunSummary:
    return RunSummary(
        run_id=run_id, started_at=T0, finished_at=T0, config_path="eval.yaml", config_hash="h", cases_total=2
    )


def _traces(run_id: str) -> list[Trace]:
    return [
        Trace(run_id=run_id, case_id=c, variant_name="v", started_at=T0, finished_at=T0, input={"q": c})
        for c in ("c1", "c2")
    ]


def _results(run_id: str, passed: bool) -> list[EvaluationResult]:
    return [
        EvaluationResult(
            run_id=run_id, case_id="c1", variant_name="v", evaluator="e", passed=passed, started_at=T0, finished_at=T0
        ),
        EvaluationResult(
            run_id=run_id,
            case_id="c2",
            variant_name="v",
            evaluator="e",
            passed=False,
            status="skipped",
            reason="skipped: no tool",
            started_at=T0,
            finished_at=T0,
        ),
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Opens the same database again on each call: SQLite in tmp, or a fresh database on the real server."""
    if request.param == "sqlite":
        return lambda: SqliteRunStore(tmp_path / "runs.db")
    dsn = request.getfixturevalue("postgres_dsn")
    return lambda: PostgresRunStore(dsn)


def test_namespaces_round_trip(open_store: StoreFactory) -> None:
    layout = {
        "r1": ("bot", {"project": "x", "branch": "main"}),
        "r2": ("bot", {"project": "x", "branch": "dev"}),
        "r3": ("other", {"project": "y", "branch": "main"}),
    }
    results = {run_id: _results(run_id, True) for run_id in layout}  # evaluation ids are random: keep them
    with open_store() as store:
        for run_id, (eval_name, namespace) in layout.items():
            store.save_run(
                _summary(run_id), _traces(run_id), results[run_id], eval_name=eval_name, run_namespace=namespace
            )
    with open_store() as store:
        assert [r.run_id for r in store.list_runs()] == ["r3", "r2", "r1"]
        assert [r.run_id for r in store.list_runs(run_namespace={"project": "x"})] == ["r2", "r1"]
        assert [r.run_id for r in store.list_runs(run_namespace={"project": "x", "branch": "main"})] == ["r1"]
        assert [r.run_id for r in store.list_runs(run_namespace={"branch": "main"})] == ["r3", "r1"]
        assert store.list_runs(run_namespace={"project": "z"}) == []
        assert [r.run_id for r in store.list_runs(eval_name="bot", run_namespace={"branch": "main"})] == ["r1"]
        stored = store.get_run("r2")
        assert (stored.eval_name, stored.run_namespace, stored.summary) == ("bot", layout["r2"][1], _summary("r2"))
        assert store.traces("r1") == _traces("r1")
        assert store.results("r1") == results["r1"]
        assert [r.status for r in store.results("r1")] == ["completed", "skipped"]

        # A re-evaluation: results replaced, traces kept (write-once), namespace kept when none is given.
        store.save_run(_summary("r1"), _traces("r1")[:1], _results("r1", False)[:1], eval_name="bot")
        assert [r.passed for r in store.results("r1")] == [False]
        assert len(store.traces("r1")) == 2
        assert store.get_run("r1").run_namespace == layout["r1"][1]
        # A namespace given again replaces the stored one.
        store.save_run(_summary("r1"), [], [], eval_name="bot", run_namespace={"project": "x", "branch": "release"})
        assert [r.run_id for r in store.list_runs(run_namespace={"branch": "release"})] == ["r1"]


def _versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as db:
        return [row[0] for row in db.execute("SELECT version FROM evaltrace_schema_migrations ORDER BY version")]


def test_open_twice_is_idempotent_and_indexes_the_namespace(postgres_dsn: str) -> None:
    PostgresRunStore(postgres_dsn).close()
    with PostgresRunStore(postgres_dsn) as store:
        assert store.schema_versions() == [v for v, _, _ in SCHEMA_MIGRATIONS]
    assert _versions(postgres_dsn) == [1, 2, 3]
    with psycopg.connect(postgres_dsn) as db:
        (index,) = db.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'evaltrace_runs_namespace_idx'"
        ).fetchone() or ("",)
        assert "gin" in index and "jsonb_path_ops" in index
        # The containment query of list_runs can use it (sequential scans off, so the planner must if it can).
        db.execute("SET enable_seqscan = off")
        plan = db.execute(
            "EXPLAIN SELECT run_id FROM evaltrace_runs WHERE run_namespace @> %s::jsonb", ('{"project": "x"}',)
        ).fetchall()
        assert "evaltrace_runs_namespace_idx" in "\n".join(row[0] for row in plan)


def test_concurrent_first_opens_do_not_fail(postgres_dsn: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_once() -> None:
        start.wait()
        try:
            PostgresRunStore(postgres_dsn).close()
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=open_once) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert _versions(postgres_dsn) == [1, 2, 3]


def test_database_with_the_older_layout_is_migrated_on_open(postgres_dsn: str) -> None:
    _, description, statements = SCHEMA_MIGRATIONS[0]
    with psycopg.connect(postgres_dsn) as db:  # what a release with schema version 1 left behind
        db.execute(
            "CREATE TABLE evaltrace_schema_migrations"
            " (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for statement in statements:
            db.execute(statement)
        db.execute("INSERT INTO evaltrace_schema_migrations (version, description) VALUES (%s, %s)", (1, description))
        db.execute(
            "INSERT INTO evaltrace_runs VALUES (%s, %s, %s, %s, %s, %s::jsonb)",
            ("old", "bot", T0, T0, "h", _summary("old").model_dump_json()),
        )
        query = "SELECT column_name FROM information_schema.columns WHERE table_name = 'evaltrace_runs'"
        columns = [row[0] for row in db.execute(query)]
        assert "run_namespace" not in columns

    with PostgresRunStore(postgres_dsn) as store:
        assert store.schema_versions() == [1, 2, 3]
        assert store.get_run("old").run_namespace == {}
        assert store.get_run("old").summary == _summary("old")
        store.save_run(_summary("new"), [], [], eval_name="bot", run_namespace={"project": "p"})
        assert [r.run_id for r in store.list_runs(run_namespace={"project": "p"})] == ["new"]
        assert [r.run_id for r in store.list_runs()] == ["old", "new"]  # run ids sort newest first; "o" > "n"


def test_unreachable_server_is_named_without_its_password() -> None:
    dsn = "postgresql://alice:hunter2@127.0.0.1:1/evals"
    with pytest.raises(PostgresStoreError) as caught:
        PostgresRunStore(dsn, connect_timeout_s=2)
    message = str(caught.value)
    assert "postgres" in message and "127.0.0.1" in message and "cannot connect" in message
    assert "hunter2" not in message
    assert "hunter2" not in redact_dsn(dsn) and "alice" in redact_dsn(dsn)


def test_save_to_stores_reports_a_failing_store_and_still_saves_the_others(tmp_path: Path) -> None:
    specs = [
        StoreSpec("postgres", dsn="postgresql://u:secret@127.0.0.1:1/db", entry="output[0]"),
        StoreSpec("sqlite", path=str(tmp_path / "ok.db"), run_namespace={"project": "x"}, entry="output[1]"),
        StoreSpec("postgres", dsn="postgresql://u@127.0.0.1:1/${EVALTRACE_TEST_UNSET_VAR}", entry="output[2]"),
    ]
    stored, errors = save_to_stores(
        specs, _summary("r1"), _traces("r1"), [], eval_name="bot", run_namespace={"branch": "main"}
    )
    assert stored == [f"sqlite {tmp_path / 'ok.db'}"]
    assert len(errors) == 2
    assert errors[0].startswith("postgres ") and "(output[0])" in errors[0] and "secret" not in errors[0]
    assert "EVALTRACE_TEST_UNSET_VAR is not set" in errors[1]
    with SqliteRunStore(tmp_path / "ok.db") as store:  # the store's namespace, with the command line's keys added
        assert store.get_run("r1").run_namespace == {"project": "x", "branch": "main"}


def _project_config(project: Project, **extra: object) -> Path:
    return project.write(
        {
            "name": "stored",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
            "evaluators": [{"name": "contains_text"}],
            **extra,
        }
    )


def test_cli_run_and_list_by_namespace_on_postgres(
    project: Project, postgres_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # run ids whole in the table
    path = _project_config(project)
    base = ["run", str(path), "--runs-dir", str(project.runs_dir), "--postgres", postgres_dsn, "--no-progress"]
    assert main([*base, "--namespace", "project=x", "--namespace", "branch=main"]) == 0
    assert main([*base, "--namespace", "project=x", "--namespace", "branch=dev"]) == 0
    assert main([*base, "--namespace", "project=y", "--namespace", "branch=main"]) == 0
    with PostgresRunStore(postgres_dsn) as store:
        runs = store.list_runs(run_namespace={"project": "x"})
        assert [r.run_namespace["branch"] for r in runs] == ["dev", "main"]
        assert len(store.results(runs[0].run_id)) == 3
        main_run = runs[1].run_id
    capsys.readouterr()
    args = ["runs", "list", "--postgres", postgres_dsn, "--namespace", "project=x", "--namespace", "branch=main"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert main_run in out and out.count("_stored") == 1


def test_cli_store_failure_keeps_the_run_and_push_saves_it_later(
    project: Project, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _project_config(project)
    dead = "postgresql://u:pw@127.0.0.1:1/evals"
    code = main(["run", str(path), "--runs-dir", str(project.runs_dir), "--postgres", dead, "--no-progress"])
    captured = capsys.readouterr()
    assert code == 3
    assert "store failed: postgres" in captured.err and "127.0.0.1" in captured.err and "pw@" not in captured.err
    (run_dir,) = project.runs_dir.iterdir()
    assert {"traces.jsonl", "results.jsonl", "summary.yaml"} <= {p.name for p in run_dir.iterdir()}

    push = ["runs", "push", run_dir.name, "--runs-dir", str(project.runs_dir), "--postgres", postgres_dsn]
    assert main([*push, "--namespace", "project=x"]) == 0
    with PostgresRunStore(postgres_dsn) as store:
        (stored,) = store.list_runs(run_namespace={"project": "x"})
        assert stored.run_id == run_dir.name and stored.eval_name == "stored"
        assert len(store.traces(stored.run_id)) == 3 and len(store.results(stored.run_id)) == 3


def test_eval_yaml_output_saves_every_store_after_run_resume_and_re_evaluate(
    project: Project, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = f"evaltrace_output_{project.module}"
    postgres_server.create_database(database)
    monkeypatch.setenv("EVALTRACE_TEST_PG_DATABASE", database)
    monkeypatch.chdir(project.root)  # store and runs paths are relative to the working directory, like runs_dir
    dsn = postgres_server.dsn_for("${EVALTRACE_TEST_PG_DATABASE}")
    path = _project_config(
        project,
        output=[
            {"type": "local_files", "path": "elsewhere"},
            {"type": "sqlite", "path": "runs.db", "run_namespace": {"project": "bot"}},
            {"type": "postgres", "dsn": dsn, "run_namespace": {"project": "bot"}},
        ],
    )
    assert main(["run", str(path), "--no-progress", "--namespace", "branch=main"]) == 0
    (run_dir,) = (project.root / "elsewhere").iterdir()  # local_files.path is the runs directory
    config_text = (run_dir / "config.yaml").read_text()
    assert "${EVALTRACE_TEST_PG_DATABASE}" in config_text and database not in config_text  # never expanded on disk

    expected = {"project": "bot", "branch": "main"}
    with SqliteRunStore(project.root / "runs.db") as lite, PostgresRunStore(postgres_server.dsn_for(database)) as pg:
        for store in (lite, pg):
            (stored,) = store.list_runs(run_namespace={"project": "bot"})
            assert (stored.run_id, stored.eval_name, stored.run_namespace) == (run_dir.name, "stored", expected)
            assert len(store.traces(run_dir.name)) == 3 and len(store.results(run_dir.name)) == 3

    # re-evaluate with other evaluators: the stores get the new results (traces kept, namespace kept).
    other = project.root / "other.yaml"
    other.write_text(path.read_text().replace("contains_text", "tool_called"))
    assert main(["re-evaluate", str(run_dir), "--config", str(other), "--no-progress"]) == 0
    with PostgresRunStore(postgres_server.dsn_for(database)) as pg:
        assert {r.evaluator for r in pg.results(run_dir.name)} == {"tool_called"}
        assert pg.get_run(run_dir.name).run_namespace == expected
    # resume of the finished run (re-summarised) saves again; --runs-dir comes from local_files.path too.
    assert main(["run", str(path), "--resume", run_dir.name, "--no-progress", "--namespace", "branch=release"]) == 0
    with SqliteRunStore(project.root / "runs.db") as lite:
        assert lite.get_run(run_dir.name).run_namespace == {"project": "bot", "branch": "release"}


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (
            [{"type": "mysql", "path": "x"}],
            "output[0].type: unknown store 'mysql'; known: local_files, sqlite, postgres",
        ),
        ([{"type": "postgres"}], "output[0].dsn: expected a non-empty string"),
        ([{"type": "sqlite", "path": "a.db", "run_namespace": ["x"]}], "output[0].run_namespace: expected a mapping"),
        ([{"type": "local_files", "path": "a"}, {"type": "local_files", "path": "b"}], "name different directories"),
    ],
)
def test_malformed_output_entries_are_named(tmp_path: Path, output: object, message: str) -> None:
    with pytest.raises(RunConfigError, match=re.escape(message)):
        parse_outputs(tmp_path / "eval.yaml", output)


def test_local_files_path_is_the_runs_dir_and_may_not_contradict_runs_dir(tmp_path: Path) -> None:
    def config(raw: dict[str, object]) -> EvalConfig:
        return EvalConfig(name="e", path=tmp_path / "eval.yaml", raw=raw, cases=[], variants=[])

    assert configured_runs_dir(config({"output": [{"type": "local_files", "path": "out"}]})) == Path("out")
    assert configured_runs_dir(config({"output": [{"type": "sqlite", "path": "r.db"}]})) == Path("runs")
    same = {"runs_dir": "out", "output": [{"type": "local_files", "path": "out"}]}
    assert configured_runs_dir(config(same)) == Path("out")
    with pytest.raises(RunConfigError, match=r"output\[0\]\.path: differs from runs_dir 'elsewhere'"):
        configured_runs_dir(config({"runs_dir": "elsewhere", "output": [{"type": "local_files", "path": "out"}]}))


def test_a_run_arrives_cell_by_cell_unfinished_until_saved_and_nothing_twice(open_store: StoreFactory) -> None:
    """``run --engine ray`` streams cells: begin_run, save_cells per cell (again on resume), save_run at the end."""
    traces, results = _traces("r1"), _results("r1", True)
    with open_store() as store:
        store.begin_run(_summary("r1"), eval_name="bot", run_namespace={"project": "x"})
        (listed,) = store.list_runs(run_namespace={"project": "x"})
        assert (listed.run_id, listed.finished) == ("r1", False)
        store.save_cells("r1", traces[:1], results[:1])
    with open_store() as store:  # a killed driver: the cell it saved is there, the run unfinished
        assert store.traces("r1") == traces[:1] and store.results("r1") == results[:1]
        assert store.get_run("r1").finished is False
        # A resume begins the run again and sends its saved cells again with the new ones: none is stored twice.
        store.begin_run(_summary("r1"), eval_name="bot", run_namespace={"project": "other"})
        store.save_cells("r1", traces, results)
        assert store.traces("r1") == traces and store.results("r1") == results
        assert store.get_run("r1").run_namespace == {"project": "x"}  # the run's row is kept as it was begun
        store.save_run(_summary("r1"), traces, results, eval_name="bot")
        assert store.get_run("r1").finished is True
        store.begin_run(_summary("r1"), eval_name="bot")  # a finished run is never made unfinished again
        (listed,) = store.list_runs()
        assert listed.finished is True and store.traces("r1") == traces and len(store.results("r1")) == 2
