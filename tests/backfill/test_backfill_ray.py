"""``evaluate --engine ray``: the backfill's traces judged as Ray tasks on a real two-node cluster on 127.0.0.1,
under limits held by one actor for the whole cluster.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

import evaltrace
from evaltrace.cli import main
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import Limits
from evaltrace.exporters.store_db import DB_NAME
from ray_cluster import two_node_cluster

from .backfill_evaluators import Exclusive, Gated, TurnCount, costly, has_answer, short_answer
from .stored import build_store

# One worker runs every Ray module, one cluster at a time (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    with two_node_cluster() as running:
        yield running


def _rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / DB_NAME) as conn:
        return conn.execute(sql).fetchall()


def _intervals(log: Path) -> list[tuple[float, float, int]]:
    starts: dict[int, float] = {}
    spans = []
    for line in log.read_text().splitlines():
        kind, pid, at = line.split()
        if kind == "start":
            starts[int(pid)] = float(at)
        else:
            spans.append((starts.pop(int(pid)), float(at), int(pid)))
    return sorted(spans)


def test_ray_backfill_judges_like_local_and_holds_max_concurrent_across_the_cluster(
    cluster: tuple[Any, Any], tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # `-e backfill_evaluators:...`, here and on workers
    local_store, ray_store = tmp_path / "local", tmp_path / "ray"
    build_store(local_store, 10)
    build_store(ray_store, 10)
    local = evaltrace.evaluate_traces([short_answer], store=local_store)
    assert main(["evaluate", "--store", str(ray_store), "-e", "backfill_evaluators:short_answer", "--engine", "ray",
                 "--no-progress"]) == 0  # fmt: skip
    assert "10 evaluation(s)" in capsys.readouterr().out
    query = "SELECT evaluator, outcome, count(*) FROM evals GROUP BY evaluator, outcome ORDER BY 1, 2"
    assert _rows(ray_store, query) == _rows(local_store, query)
    assert local.outcomes == {"pass": 5, "fail": 5}

    log = tmp_path / "exclusive.log"
    spec = EvaluatorSpec(Exclusive(str(log)), limits=Limits(max_concurrent=1))
    report = evaltrace.evaluate_traces([spec], store=ray_store, engine="ray", concurrency=4)
    assert report.evaluations == 10 and report.stopped is None
    intervals = _intervals(log)
    assert len(intervals) == 10
    assert len({pid for _, _, pid in intervals}) >= 2, "the evaluations ran in one process: nothing was shown"
    for (_, end, _), (start, _, _) in zip(intervals, intervals[1:], strict=False):
        assert start >= end, "two evaluations of a max_concurrent=1 evaluator overlapped on the cluster"
    # Judged again: the same rows are replaced, none added.
    evaltrace.evaluate_traces([spec], store=ray_store, engine="ray", concurrency=4, resume=False)
    assert _rows(ray_store, "SELECT count(*) FROM evals WHERE evaluator = 'exclusive'") == [(10,)]


def test_a_judge_budget_holds_across_the_cluster_and_a_later_run_judges_the_rest(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    build_store(store, 20)
    concurrency = 3
    report = evaltrace.evaluate_traces(
        [costly], store=store, limits={"max_tokens_per_hour": 450}, concurrency=concurrency, engine="ray"
    )
    # 100 tokens an evaluation: the fifth reaches the budget; at most the evaluations in flight overshoot it.
    # A budget per process would let each worker process spend 450 tokens.
    assert report.stopped == "over_budget"
    assert 5 <= report.evaluations <= 5 + concurrency - 1
    assert _rows(store, "SELECT count(*) FROM evals") == [(report.evaluations,)]
    rest = evaltrace.evaluate_traces([costly], store=store, limits={"max_tokens_per_hour": 10_000}, engine="ray")
    assert rest.stopped is None and rest.evaluations + report.evaluations == 20
    assert _rows(store, "SELECT count(*) FROM evals") == [(20,)]


def test_session_scope_shards_by_session_and_scores_like_local(cluster: tuple[Any, Any], tmp_path: Path) -> None:
    local_store, ray_store = tmp_path / "local", tmp_path / "ray"
    build_store(local_store, 9, sessions=3)
    build_store(ray_store, 9, sessions=3)
    local = evaltrace.evaluate_traces([TurnCount()], store=local_store, scope="session")
    on_ray = evaltrace.evaluate_traces([TurnCount()], store=ray_store, scope="session", engine="ray")
    assert (on_ray.sessions, on_ray.evaluations, on_ray.outcomes) == (3, 3, local.outcomes)
    query = "SELECT session_id, evaluator, score_id, outcome, value FROM session_evals ORDER BY session_id"
    assert _rows(ray_store, query) == _rows(local_store, query) and len(_rows(ray_store, query)) == 3


def test_a_lost_worker_node_mid_backfill_loses_and_duplicates_nothing_and_scores_like_local(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    """Runs last in the module: the worker node is removed while evaluations on it are in flight."""
    build_store(tmp_path / "local", 8)
    shutil.copytree(tmp_path / "local", tmp_path / "ray")  # the same traces (ids and all) in both stores
    (tmp_path / "open").touch()
    local = evaltrace.evaluate_traces([Gated(str(tmp_path / "local.log"), str(tmp_path / "open"))],
                                      store=tmp_path / "local")  # fmt: skip
    log, gate = tmp_path / "ray.log", tmp_path / "gate"
    head, worker = cluster
    outcome: dict[str, Any] = {}

    def drive() -> None:
        try:
            outcome["report"] = evaltrace.evaluate_traces(
                # A budget it never reaches: every evaluation asks the cluster's limits actor, which must outlive
                # the lost node.
                [Gated(str(log), str(gate))],
                store=tmp_path / "ray",
                engine="ray",
                concurrency=3,
                limits={"max_tokens_per_hour": 1_000_000},
            )
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    def calls() -> list[list[str]]:
        return [line.split() for line in log.read_text().splitlines()] if log.exists() else []

    thread = threading.Thread(target=drive)
    thread.start()
    try:
        deadline = time.monotonic() + 180
        while not any(node == worker.node_id for _, node in calls()):
            assert time.monotonic() < deadline and thread.is_alive(), "no evaluation reached the worker node"
            time.sleep(0.05)
        head.remove_node(worker, allow_graceful=False)
    finally:
        gate.touch()
        thread.join(180)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    report = outcome["report"]
    on_worker = {trace for trace, node in calls() if node == worker.node_id}
    judged = Counter(trace for trace, _ in calls())
    assert on_worker and all(judged[trace] >= 2 for trace in on_worker), judged  # retried elsewhere
    assert (report.evaluations, report.outcomes, report.stopped) == (8, local.outcomes, None)
    query = "SELECT trace_id, span_id, evaluator, outcome FROM evals ORDER BY 1, 2, 3"
    rows = _rows(tmp_path / "ray", query)
    assert len(rows) == 8 and len({row[0] for row in rows}) == 8  # every trace once: none lost, none twice
    assert rows == _rows(tmp_path / "local", query)  # the same scores, under the same ids, as a local backfill


def test_engine_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(evaltrace.ConfigError, match="engine"):
        evaltrace.evaluate_traces([has_answer], store=tmp_path / "s", engine="spark")
    with pytest.raises(evaltrace.ConfigError, match="address"):
        evaltrace.evaluate_traces([has_answer], store=tmp_path / "s", address="auto")
