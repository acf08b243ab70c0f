"""``run --engine ray``: a run's cells as Ray tasks on a real two-node cluster on 127.0.0.1.

One cluster (head with 1 CPU, a worker node with 2) serves the module; the node-loss test removes the worker node,
so it runs last. No test asserts on wall-clock time: waits are for events (a file appears), bounded generously.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("ray")

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, SqliteRunStore, run_eval
from evaltrace.runner.ray_engine import RayEngine, RayEngineError
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from ray_cluster import LOOPBACK_ENV, descendants, listening_addresses, two_node_cluster
from run_report_project import forget, write_project

from .test_shards import _results, _summary

# One worker runs every Ray module, one cluster at a time (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    with two_node_cluster() as running:
        yield running


@pytest.fixture
def eval_path(tmp_path: Path) -> Iterator[Path]:
    path, _ = write_project(tmp_path / "project")
    yield path
    forget(tmp_path / "project")


SLOW_SUT = """
import os, time

import evaltrace

MARKS = {marks!r}
GATE = os.path.join(MARKS, "open")
GATE_FROM = {gate_from!r}


def _node() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:
        return "local"


@evaltrace.agent(name="slow")
def answer(question: str) -> str:
    # One line per execution (O_APPEND: whole lines from any process), naming the node that ran it.
    with open(os.path.join(MARKS, "calls.log"), "a", encoding="utf-8") as log:
        log.write(f"{{question}} {{_node()}}\\n")
    if GATE_FROM is not None and int(question[1:]) >= GATE_FROM:
        # Held until the test opens the gate: what is in flight when it kills something is known, not a race.
        deadline = time.monotonic() + 300
        while not os.path.exists(GATE) and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep({pause})
    return f"answer to {{question}}"
"""


def _slow_project(root: Path, cells: int, pause: float, gate_from: int | None = None) -> Path:
    """An eval of ``cells`` cases (one variant) whose system logs each call and then sleeps ``pause`` s.

    With ``gate_from``, the cases from that index on wait (after logging their call) until :func:`_open` is called.
    """
    marks = root / "marks"
    marks.mkdir(parents=True)
    module = f"slow_sut_{root.name}"
    source = SLOW_SUT.format(marks=str(marks), pause=pause, gate_from=gate_from)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    cases = [{"id": f"c{i:02d}", "input": {"question": f"q{i:02d}"}, "expected": {"answer_should_include": ["q"]}}
             for i in range(cells)]  # fmt: skip
    (root / "cases.yaml").write_text(yaml.safe_dump(cases))
    config = {
        "name": "ray_demo",
        "cases": "cases.yaml",
        "variants": [{"name": "v1", "adapter": "python_function", "config": {"target": f"{module}:answer"}}],
        "evaluators": [{"name": "contains_text"}],
        "concurrency": 3,
    }
    path = root / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _open(root: Path) -> None:
    (root / "marks" / "open").touch()


def _calls(root: Path) -> list[tuple[str, str]]:
    log = root / "marks" / "calls.log"
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def _wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _stored(db: Path) -> int:
    """Trace rows in the SQLite store so far (0 before it exists)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM traces").fetchone()[0])
        except sqlite3.OperationalError:  # the tables are not made yet
            return 0


def _cells(run: Path) -> Counter[tuple[str, str]]:
    return Counter((t.case_id, t.variant_name) for t in RunDirectory(run).read_traces())


def test_ray_run_equals_local_run_and_listens_on_loopback_only(
    cluster: tuple[Any, Any], tmp_path: Path, eval_path: Path, capsys: Any
) -> None:
    whole = run_eval(eval_path, runs_dir=tmp_path / "local").run.path
    runs_dir = tmp_path / "ray"
    db = tmp_path / "runs.db"
    args = ["--runs-dir", str(runs_dir), "--sqlite", str(db), "--no-progress"]
    assert main(["run", str(eval_path), "--engine", "ray", *args]) == 0
    (on_ray,) = runs_dir.iterdir()
    assert "report_demo" in capsys.readouterr().out
    assert main(["runs", "list", "--sqlite", str(db)]) == 0
    assert capsys.readouterr().out.count("report_demo") == 1  # saved to the store, once
    assert _results(on_ray) == _results(whole)
    assert _summary(on_ray) == _summary(whole)
    assert sum(_cells(on_ray).values()) == 10 and set(_cells(on_ray).values()) == {1}
    # Every socket any process of the cluster listens on is on loopback, never the machine's address.
    addresses = listening_addresses(descendants(os.getpid()) | {os.getpid()})
    assert addresses, "the cluster listens somewhere"
    assert all(loopback for _, loopback in addresses), addresses


def test_address_needs_engine_ray_and_workspaces_are_refused(
    cluster: tuple[Any, Any], tmp_path: Path, eval_path: Path, capsys: Any
) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(["run", str(eval_path), "--address", "auto", *runs]) == 2
    assert "--address names a Ray cluster: give it with --engine ray" in capsys.readouterr().err.replace("\n", "")
    config = yaml.safe_load(eval_path.read_text())
    (eval_path.parent / "ws").mkdir()
    module = f"ws_sut_{tmp_path.name}"
    (eval_path.parent / f"{module}.py").write_text("def answer(question, workspace, note=''):\n    return question\n")
    config["variants"][0]["config"]["target"] = f"{module}:answer"
    config["variants"][0]["workspace"] = {"kind": "tempdir_snapshot", "path": "ws"}
    eval_path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(RayEngineError, match=r"variants\[0\]\.workspace"):
        run_eval(eval_path, runs_dir=tmp_path / "runs", engine=RayEngine())
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_killed_driver_resumes_without_rerunning_finished_cells(
    cluster: tuple[Any, Any], tmp_path: Path, capsys: Any
) -> None:
    root = tmp_path / "killed"
    eval_path = _slow_project(root, cells=9, pause=0.1, gate_from=3)
    runs_dir = tmp_path / "runs"
    db = tmp_path / "runs.db"  # cells are stored as they finish, not at the run's end
    code = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["run", str(eval_path), "--engine", "ray", "--address", cluster[0].address, "--runs-dir", str(runs_dir)]
    args += ["--sqlite", str(db)]
    driver = subprocess.Popen(
        [sys.executable, "-c", code, *args, "--no-progress"],
        env={**os.environ, **LOOPBACK_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def saved() -> int:
            traces = list(runs_dir.glob(f"*/{TRACES_FILE}"))
            return len(traces[0].read_text().splitlines()) if traces else 0

        _wait_for(lambda: saved() >= 3 and _stored(db) >= 3 or driver.poll() is not None, "three saved cells")
        driver.kill()  # SIGKILL: no cleanup, whatever was in flight is lost
        driver.wait(60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(60)  # reaped here: a Popen collected while its child runs warns in whichever test runs then
    (run,) = runs_dir.iterdir()
    assert not (run / SUMMARY_FILE).exists(), "the driver finished before it was killed: nothing to resume"
    finished = set(_cells(run))
    assert len(finished) == 3  # c00-c02: the others were held at the gate when the driver died
    with SqliteRunStore(db) as store:  # the store holds every finished cell already, its run unfinished
        assert store.get_run(run.name).finished is False
        assert {(t.case_id, t.variant_name) for t in store.traces(run.name)} == finished
        assert len(store.results(run.name)) == 3
    capsys.readouterr()
    assert main(["runs", "list", "--sqlite", str(db)]) == 0
    assert "unfinished" in capsys.readouterr().out
    calls_before = len(_calls(root))
    _open(root)
    resume = ["run", "--resume", run.name, "--runs-dir", str(runs_dir), "--engine", "ray", "--no-progress"]
    assert main([*resume, "--sqlite", str(db)]) == 0
    with SqliteRunStore(db) as store:  # the resume added the rest, none twice (rows are per cell and evaluator)
        assert store.get_run(run.name).finished is True
        stored = Counter((t.case_id, t.variant_name) for t in store.traces(run.name))
        assert set(stored) == {(f"c{i:02d}", "v1") for i in range(9)} and set(stored.values()) == {1}
        assert len(store.results(run.name)) == 9
    cells = _cells(run)
    assert set(cells) == {(f"c{i:02d}", "v1") for i in range(9)} and set(cells.values()) == {1}
    rerun = {question for question, _ in _calls(root)[calls_before:]}
    assert not rerun & {f"q{case[1:]}" for case, _ in finished}, "a finished cell ran again on resume"
    results = [line for line in (run / RESULTS_FILE).read_text().splitlines() if line]
    assert len(results) == 9  # one contains_text result per cell, none twice


ENRICHERS = """
import os
import threading


def _node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


class Where:
    name = "where"

    def enrich(self, trace):
        # Which process and node enriched the trace: the test compares them with where the system ran.
        extra = {**trace.extra, "enriched_in": [os.getpid(), _node()]}
        return trace.model_copy(update={"extra": extra})


def broken(trace):
    raise ConnectionError("platform down")


def liar(trace):
    return trace.model_copy(update={"case_id": "someone else"})


class Locked:
    name = "locked"

    def __init__(self):
        self.lock = threading.Lock()  # cannot be pickled: cannot reach the workers

    def enrich(self, trace):
        return None
"""


def test_enrichers_run_on_the_worker_that_built_the_trace_with_the_local_errors(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    root = tmp_path / "enriched"
    eval_path = _slow_project(root, cells=4, pause=0)
    module = f"enrich_{tmp_path.name}"
    (root / f"{module}.py").write_text(ENRICHERS)
    config = yaml.safe_load(eval_path.read_text())
    config["enrichers"] = [{"import": f"{module}:broken"}, {"import": f"{module}:liar", "name": "liar"}]
    eval_path.write_text(yaml.safe_dump(config, sort_keys=False))
    local = run_eval(eval_path, runs_dir=tmp_path / "local").traces
    enriched = importlib.import_module(module)
    on_ray = run_eval(eval_path, runs_dir=tmp_path / "ray", engine=RayEngine(), enrichers=[enriched.Where()])
    saved = {t.case_id: t for t in RunDirectory(on_ray.run.path).read_traces()}  # what the driver wrote
    calls = {(f"c{question[1:]}", node) for question, node in _calls(root)}
    assert len(saved) == 4
    for trace in local:
        errors = saved[trace.case_id].extra["enrichment_errors"]
        assert errors == trace.extra["enrichment_errors"] and [e["enricher"] for e in errors] == ["broken", "liar"]
        pid, node = saved[trace.case_id].extra["enriched_in"]
        assert pid != os.getpid() and (trace.case_id, node) in calls  # in a task, on the node that ran the cell
    with pytest.raises(RayEngineError, match="enricher 'locked' cannot be sent to the Ray workers"):
        run_eval(eval_path, runs_dir=tmp_path / "refused", engine=RayEngine(), enrichers=[enriched.Locked()])
    assert not (tmp_path / "refused").exists()  # refused before anything ran
    forget(root)


def test_without_address_a_loopback_cluster_is_started_for_the_run_and_stopped_after(tmp_path: Path) -> None:
    """The CLI with no ``--address`` (and no connection of its own) starts Ray on 127.0.0.1 for the run only."""
    root = tmp_path / "own"
    eval_path = _slow_project(root, cells=4, pause=0.5)
    runs_dir = tmp_path / "runs"
    code = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # nothing to find: a cluster of its own
    driver = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(eval_path), "--engine", "ray", "--runs-dir", str(runs_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: set[int] = set()
    addresses: list[tuple[str, bool]] = []
    try:
        _wait_for(lambda: bool(_calls(root)) or driver.poll() is not None, "the first cell on the run's cluster")
        seen = descendants(driver.pid)  # Ray's processes, mid-run
        addresses = listening_addresses(seen)
        assert driver.wait(180) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(60)  # reaped here: a Popen collected while its child runs warns in whichever test runs then
    assert addresses and all(loopback for _, loopback in addresses), addresses
    (run,) = runs_dir.iterdir()
    assert (run / SUMMARY_FILE).is_file() and sum(_cells(run).values()) == 4
    _wait_for(lambda: not [pid for pid in seen if _alive(pid)], "the run's Ray processes to exit", timeout=60)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def test_lost_worker_node_loses_and_duplicates_nothing(cluster: tuple[Any, Any], tmp_path: Path) -> None:
    """Runs last: the worker node is killed mid-run and its cells are retried on the head."""
    root = tmp_path / "project"
    eval_path = _slow_project(root, cells=8, pause=0.1, gate_from=0)
    _open(root)
    local = run_eval(eval_path, runs_dir=tmp_path / "local_runs").run.path
    (root / "marks" / "open").unlink()  # the Ray run's cells are held until the worker node is gone
    offset = len(_calls(root))  # the local run's calls; the Ray run's follow

    def ray_calls() -> list[tuple[str, str]]:
        return _calls(root)[offset:]

    head, worker = cluster
    outcome: dict[str, Any] = {}

    def drive() -> None:
        try:
            outcome["run"] = run_eval(eval_path, runs_dir=tmp_path / "ray_runs", engine=RayEngine()).run.path
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=drive)
    thread.start()
    try:
        _wait_for(lambda: any(node == worker.node_id for _, node in ray_calls()), "a cell on the worker node")
        head.remove_node(worker, allow_graceful=False)
        _open(root)
    finally:
        _open(root)
        thread.join(180)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    run = outcome["run"]
    cells = _cells(run)
    assert sum(cells.values()) == 8 and set(cells.values()) == {1}  # nothing lost, nothing twice
    results = [line for line in (run / RESULTS_FILE).read_text().splitlines() if line]
    assert len(results) == 8
    on_worker = {q for q, node in ray_calls() if node == worker.node_id}
    assert on_worker, "the worker node ran cells before it was lost"
    # Each of them was in flight when the node died, so Ray ran it again elsewhere: called twice, saved once.
    again = Counter(q for q, _ in ray_calls())
    assert all(again[q] >= 2 for q in on_worker), again
    assert _results(run) == _results(local)
    assert _summary(run) == _summary(local)
