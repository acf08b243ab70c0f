"""``run --engine ray`` against the local runner: overhead per cell, and cells per second on one and two nodes.

Run: python benchmarks/bench_ray.py [--cells 48] [--work-ms 0,50] [--rounds 3] [--quick]

The same eval (``--cells`` cases, one python_function variant that sleeps ``--work-ms`` like an LLM call, and
the ``contains_text`` evaluator; ``concurrency: 8``) runs in this process (the local runner), then as Ray tasks
on a cluster of one node and of two nodes of this machine (``ray.cluster_utils.Cluster``; each node 4 logical
CPUs, so one node runs 4 cells at once and two nodes 8, as the local runner does; everything on 127.0.0.1, no
dashboard). Each engine gets one warm-up run (Ray starts its worker processes, which import evaltrace), then
``--rounds`` timed runs; medians. "slots" are the cells that can run at once (the local runner: ``concurrency``;
Ray: the cluster's CPUs, at most ``concurrency``); "overhead ms/cell" is (wall x slots - local wall x local
slots) / cells: what one cell costs its slot beyond the local runner's; "x local" is the wall-time ratio. With
``--work-ms 0`` a cell is all overhead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # connect through 127.0.0.1, not the machine's IP

CONCURRENCY = 8
NODE_CPUS = 4
_NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False, "object_store_memory": 80 * 1024 * 1024}


def _project(root: Path, cells: int, work_ms: int) -> Path:
    module = f"bench_ray_sut_{work_ms}"
    (root / f"{module}.py").write_text(
        textwrap.dedent(f"""
        import time

        def answer(question: str) -> str:
            time.sleep({work_ms / 1000!r})
            return "answer to " + question
        """)
    )
    cases = [{"id": f"c{i:03d}", "input": {"question": f"q{i}"}, "expected": {"answer_should_include": ["q"]}}
             for i in range(cells)]  # fmt: skip
    (root / "cases.yaml").write_text(yaml.safe_dump(cases))
    config = {
        "name": f"bench_ray_{work_ms}",
        "cases": "cases.yaml",
        "variants": [{"name": "v1", "adapter": "python_function", "config": {"target": f"{module}:answer"}}],
        "evaluators": [{"name": "contains_text"}],
        "concurrency": CONCURRENCY,
    }
    path = root / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _timed(eval_path: Path, runs_dir: Path, engine: Any, rounds: int) -> float:
    from evaltrace.runner import run_eval

    run_eval(eval_path, runs_dir=runs_dir, engine=engine)  # warm-up
    walls = []
    for _ in range(rounds):
        started = time.perf_counter()
        outcome = run_eval(eval_path, runs_dir=runs_dir, engine=engine)
        walls.append(time.perf_counter() - started)
        assert len(outcome.traces) == len(outcome.results)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=48)
    parser.add_argument("--work-ms", default="0,50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="16 cells, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.cells, args.rounds = 16, 1
    works = [int(w) for w in args.work_ms.split(",")]

    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    from evaltrace.runner.ray_engine import RayEngine

    ray_constants.ENABLE_RAY_CLUSTER = False  # as the environment variable above, for this already imported module
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = {}
        for w in works:
            (root / f"w{w}").mkdir()
            sys.path.insert(0, str(root / f"w{w}"))
            paths[w] = _project(root / f"w{w}", args.cells, w)
        rows: list[tuple[str, int, int, float]] = []
        for w, path in paths.items():
            rows.append(("local runner", CONCURRENCY, w, _timed(path, root / "runs", None, args.rounds)))
        cluster = Cluster(initialize_head=True, head_node_args={**_NODE, "num_cpus": NODE_CPUS})
        try:
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
            for w, path in paths.items():
                rows.append(("ray, 1 node", NODE_CPUS, w, _timed(path, root / "runs", RayEngine(), args.rounds)))
            cluster.add_node(**_NODE, num_cpus=NODE_CPUS)
            cluster.wait_for_nodes()
            for w, path in paths.items():
                slots = min(CONCURRENCY, 2 * NODE_CPUS)
                rows.append(("ray, 2 nodes", slots, w, _timed(path, root / "runs", RayEngine(), args.rounds)))
        finally:
            ray.shutdown()
            cluster.shutdown()
    local = {w: wall for name, _, w, wall in rows if name == "local runner"}
    print(f"{args.cells} cells, concurrency {CONCURRENCY}, {NODE_CPUS} CPUs a node, median of {args.rounds}")
    print("| engine | slots | work ms/cell | wall s | cells/s | x local | overhead ms/cell |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, slots, w, wall in rows:
        overhead = (wall * slots - local[w] * CONCURRENCY) / args.cells * 1000
        print(
            f"| {name} | {slots} | {w} | {wall:.2f} | {args.cells / wall:,.1f} | {wall / local[w]:.2f} |"
            f" {overhead:+.1f} |"
        )


if __name__ == "__main__":
    main()
