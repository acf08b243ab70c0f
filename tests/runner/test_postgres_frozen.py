"""A PostgreSQL server frozen with SIGSTOP (every process of it, as a hung host would be) while a run is saved to it:
each wait is bounded, ``evaltrace run`` exits 3 with the run complete on disk, and ``runs push`` saves it later."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from evaltrace.cli import main
from evaltrace.runner.postgres_store import _MIGRATION_LOCK, PostgresRunStore, PostgresStoreError

from .conftest import Project
from .postgres_server import PostgresServer
from .test_postgres_store import _project_config, _results, _summary, _traces

CLI = [sys.executable, "-c", "from evaltrace.cli import main; raise SystemExit(main())"]


def test_a_store_frozen_mid_save_gives_up_within_its_statement_timeout(
    postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    # The bound as a user sets it, in the dsn: 2 s per statement, so the client gives up 4 s into a freeze.
    store = PostgresRunStore(f"{postgres_dsn}?options=-c%20statement_timeout%3D2s")
    outcome: list[BaseException | None] = []

    def save() -> None:
        try:
            store.save_run(_summary("r1"), _traces("r1"), _results("r1", True), eval_name="bot")
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    try:
        with postgres_server.frozen():
            started = time.monotonic()
            saver = threading.Thread(target=save, daemon=True)
            saver.start()
            saver.join(timeout=30)  # before the fix: never returned (a thread, so the test fails instead of hanging)
            elapsed = time.monotonic() - started
            assert not saver.is_alive(), "the save was still waiting for the frozen server after 30 s"
            # A new connection to the frozen server is given up too (the startup exchange never gets an answer).
            with pytest.raises(PostgresStoreError, match="cannot connect: connection timeout expired"):
                PostgresRunStore(postgres_dsn, connect_timeout_s=1)
    finally:
        store.close()
    (error,) = outcome
    assert isinstance(error, PostgresStoreError), error
    assert "no answer within 4 s; the server is frozen" in str(error) and "127.0.0.1" in str(error)
    assert 3.5 < elapsed < 20, elapsed  # the stated bound (2 s + 2 s grace), with room for a loaded machine
    # Nothing half-saved; once the server is back, the same run saves whole.
    with PostgresRunStore(postgres_dsn) as again:
        assert again.list_runs() == []
        again.save_run(_summary("r1"), _traces("r1"), _results("r1", True), eval_name="bot")
        assert len(again.traces("r1")) == 2 and len(again.results("r1")) == 2


def test_the_dsn_sets_the_timeouts(postgres_dsn: str) -> None:
    from evaltrace.runner._pg_timeouts import Timeouts, connect_params

    params: dict[str, object] = {"host": "db"}
    assert connect_params(params, 10, 30) == Timeouts(32, 30000)
    assert params == {"host": "db", "connect_timeout": "10"}  # no startup options: a PgBouncer would refuse them
    own: dict[str, object] = {"connect_timeout": "3", "options": "-c search_path=x -c statement_timeout=5s"}
    assert connect_params(own, 10, 30) == Timeouts(7, None)
    assert own == {"connect_timeout": "3", "options": "-c search_path=x -c statement_timeout=5s"}
    unbounded: dict[str, object] = {"options": "-c statement_timeout=0"}  # the dsn's owner wants no bound
    assert connect_params(unbounded, 10, 30) == Timeouts(None, None)
    # On a real server: the default is in force on the store's session, and the dsn's own value wins.
    with PostgresRunStore(postgres_dsn) as store:
        assert store._db.execute("SHOW statement_timeout").fetchone() == ("30s",)
    with PostgresRunStore(f"{postgres_dsn}?options=-c%20statement_timeout%3D5s") as store:
        assert store._db.execute("SHOW statement_timeout").fetchone() == ("5s",)


@pytest.mark.parametrize(
    "options",
    [
        "--statement-timeout=5s",
        "--statement_timeout=5000",
        "-cstatement_timeout=5s",
        "-c statement_timeout=1min -c statement_timeout=5s",
    ],
    ids=["long_option_dashes", "long_option_underscore", "c_without_space", "last_one_wins"],
)
def test_every_form_libpq_options_take_sets_the_dsns_own_statement_timeout(options: str, postgres_dsn: str) -> None:
    from urllib.parse import quote

    from evaltrace.runner._pg_timeouts import Timeouts, connect_params

    assert connect_params({"options": options}, 10, 30) == Timeouts(7, None)  # 5 s, and no SET of our own
    # On a real server: the dsn's value is in force, not evaltrace's 30 s default set over it.
    with PostgresRunStore(f"{postgres_dsn}?options={quote(options)}") as store:
        assert store._db.execute("SHOW statement_timeout").fetchone() == ("5s",)


def _lock_waiter(admin: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        ("%pg_advisory_xact_lock%",),
    ).fetchone()
    return bool(row and row[0])


def test_cli_run_against_a_server_frozen_during_the_save_exits_3_and_push_saves_it_later(
    project: Project, postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    path = _project_config(project)
    # Small timeouts, set as a user would, in the dsn: 8 s per statement, so the client gives up 10 s into a freeze.
    dsn = f"{postgres_dsn}?connect_timeout=3&options=-c%20statement_timeout%3D8000"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        # Holding the schema lock parks the run's save inside its first transaction, connected: the freeze then
        # lands mid-save, every time, instead of whenever a timer happens to fire.
        admin.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        process = subprocess.Popen(
            [*CLI, "run", str(path), "--runs-dir", str(project.runs_dir), "--postgres", dsn, "--no-progress"],
            cwd=project.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "250"},
        )
        try:
            deadline = time.monotonic() + 120
            while not _lock_waiter(admin):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the run never reached its save"
                time.sleep(0.02)
            with postgres_server.frozen():
                frozen_at = time.monotonic()
                # Before the fix the run waited for ever here; the bounded wait turns that into a failure.
                out, err = process.communicate(timeout=90)
                elapsed = time.monotonic() - frozen_at
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        admin.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    assert process.returncode == 3, (out, err)
    assert elapsed < 60, elapsed  # stated bound: 8 s + 2 s grace; the rest is room for a loaded machine
    assert "Traceback" not in err
    assert "store failed: postgres" in err and "no answer within 10 s" in err
    (run_dir,) = project.runs_dir.iterdir()
    assert f"evaltrace runs push {run_dir}" in " ".join(err.split())
    assert {"traces.jsonl", "results.jsonl", "summary.yaml"} <= {p.name for p in run_dir.iterdir()}

    # The server is back: the run saves, whole.
    push = ["runs", "push", run_dir.name, "--runs-dir", str(project.runs_dir), "--postgres", postgres_dsn]
    assert main(push) == 0
    with PostgresRunStore(postgres_dsn) as store:
        (stored,) = store.list_runs()
        assert stored.run_id == run_dir.name
        assert len(store.traces(stored.run_id)) == 3 and len(store.results(stored.run_id)) == 3


def test_ctrl_c_while_a_store_holds_the_save_says_the_run_is_complete_and_how_to_push_it(
    project: Project, postgres_dsn: str
) -> None:
    path = _project_config(project)
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))  # the save waits: Ctrl-C lands in it
        process = subprocess.Popen(
            [*CLI, "run", str(path), "--runs-dir", str(project.runs_dir), "--postgres", postgres_dsn, "--no-progress"],
            cwd=project.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "250"},
        )
        try:
            deadline = time.monotonic() + 120
            while not _lock_waiter(admin):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the run never reached its save"
                time.sleep(0.02)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        admin.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err
    (run_dir,) = project.runs_dir.iterdir()
    assert f"interrupted while saving to the stores: the run is complete in {run_dir}" in err
    (line,) = [line for line in err.splitlines() if line.startswith("save it with: ")]
    words = shlex.split(line.removeprefix("save it with: "))
    assert words[:4] == ["evaltrace", "runs", "push", str(run_dir)] and words[4] == "--postgres"
    pushed = subprocess.run([*CLI, *words[1:]], cwd=project.root, capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    with PostgresRunStore(postgres_dsn) as store:
        (stored,) = store.list_runs()
        assert stored.run_id == run_dir.name and len(store.results(stored.run_id)) == 3
