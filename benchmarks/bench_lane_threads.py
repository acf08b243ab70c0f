"""Instructions per evaluated span by thread, with every job kept on the fast lane: the steady figure.

Run: python benchmarks/bench_lane_threads.py [--calls 400]

``bench_evaluation.py --instructions`` measures what users run, so its cheap-evaluator figure moves by 60-500k
between runs: under callgrind (~50x slower) on a loaded machine a cheap call can look slow, and the lane then
sends jobs to the loop (slow marking for 10 s, demotion, the hold-margin move). Here the same callgrind child
runs with the lane's slow marking and supervision turned off, so each job runs on the lane in every run and two
trees (before and after a change, each on ``PYTHONPATH``) compare like for like. Printed per call: each
thread (1 is the application's thread; the lane is the last one started) and all threads, for "no evaluator"
and the cheap evaluator, and their difference (the evaluation work per span). A measurement aid only: the
lane's real routing is what ``bench_evaluation.py`` measures.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

import _callgrind
import bench_evaluation


def _child(variant: str, calls: int) -> None:
    from evaltrace.evaluation import _fast_lane

    _fast_lane.FastLane.note_call = lambda self, evaluator, took_s: None  # type: ignore[method-assign]
    _fast_lane.FastLane.supervise = lambda self: None  # type: ignore[method-assign]
    bench_evaluation.callgrind_child(variant, calls)


def _per_thread(variant: str, calls: int) -> tuple[dict[int, float], float]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        empty, full = pool.map(lambda n: _callgrind._run(__file__, variant, n), (0, calls))
    threads = {t: (full.get(t, 0) - empty.get(t, 0)) / calls for t in sorted(set(full) | set(empty))}
    return threads, (sum(full.values()) - sum(empty.values())) / calls


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        _child(*child)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    calls = parser.parse_args().calls
    totals: dict[str, float] = {}
    for variant in (bench_evaluation.NO_EVALUATOR, bench_evaluation.THREAD):
        threads, total = _per_thread(variant, calls)
        totals[variant] = total
        shown = ", ".join(f"{t}: {v:,.0f}" for t, v in threads.items())
        print(f"{variant:36} all threads {total:10,.0f}   by thread {{{shown}}}")
    work = totals[bench_evaluation.THREAD] - totals[bench_evaluation.NO_EVALUATOR]
    print(f"evaluation work per span (all threads, lane only): {work:,.0f}")


if __name__ == "__main__":
    main()
