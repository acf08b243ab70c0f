"""Instructions per piece of one result's publishing and enriched copy (callgrind), on ``bench_evaluation.py``'s span.

Run: python benchmarks/bench_evaluation_publish.py [--calls 1000] [--pieces stats,monitor,...]

Finer than ``bench_evaluation_steps.py``'s ``publish`` and ``copy`` steps: each piece is called ``--calls`` times in
the main thread on one real result of the inline variant (captured from the pipeline), and the run with 0 calls is
subtracted. Pieces:

  stats    ``PipelineStats.record`` (the outcome passed in, as ``_publish`` does)
  monitor  ``ProductionMonitor.record`` (the query as ``_record`` hands it over)
  metrics  ``PipelineMetrics.record_result`` (the pipeline's own, no meter provider)
  query    ``_preview.deferred_query`` and the read of ``output`` as ``_record`` makes them
  publish  ``JobRunner._publish`` (stats, metrics, monitor, no sink)
  event    ``convert.evaluation_event_attributes``
  spanattr ``convert.span_result_attributes``
  copy     ``spans.enriched_copy``
  deliver  ``JobRunner._deliver`` (the enriched copy, its stats count and the forward, to a no-op)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import _callgrind
from _evaluators import cheap
from bench_evaluation_steps import _HANDLE, _inputs

PIECES = ("stats", "monitor", "metrics", "query", "publish", "event", "spanattr", "copy", "deliver")


def callgrind_child(piece: str, calls: int) -> None:
    from evaltrace.evaluation import _mapping
    from evaltrace.evaluation._jobs import Job
    from evaltrace.evaluation._preview import deferred_query
    from evaltrace.evaluation.convert import evaluation_event_attributes, result_outcome, span_result_attributes
    from evaltrace.evaluation.runner import call_evaluator, now, stamp
    from evaltrace.evaluation.spans import enriched_copy

    members, root = _inputs()
    trace = _mapping.build_trace(members, root)
    produced, _ = call_evaluator(cheap, trace)
    result = stamp(produced, cheap, trace, now())
    outcome = result_outcome(result)
    processor = _HANDLE[0].evaluation_processor
    runner = processor._runner
    runner.ctx = dataclasses.replace(runner.ctx, forward=lambda span: None)
    ctx = runner.ctx
    spec = processor._resolve(root.attributes["evaltrace.evaluators.ref"])[0]
    query = deferred_query(root, trace)
    output = trace.output.final_answer

    def job() -> Any:
        return Job(root, [spec], [], members, len(members), admitted_at=time.monotonic())

    one: dict[str, Callable[[], Any]] = {
        "stats": lambda: ctx.stats.record(result, outcome),
        "monitor": lambda: ctx.monitor.record(result, query, output, outcome),
        "metrics": lambda: ctx.metrics.record_result(result, outcome),
        "query": lambda: (deferred_query(root, trace), trace.output.final_answer),
        "publish": lambda: runner._publish(root, query, output, spec, result),
        "event": lambda: evaluation_event_attributes(result, None),
        "spanattr": lambda: span_result_attributes([result]),
        "copy": lambda: enriched_copy(root, [result], provenance=False),
        "deliver": lambda: runner._deliver(job(), [result]),
    }
    work = one[piece]
    gc.collect()
    gc.disable()
    for _ in range(calls):
        work()
    os._exit(0)


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        callgrind_child(*child)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--pieces", default=",".join(PIECES))
    args = parser.parse_args()
    pieces = args.pieces.split(",")
    unknown = [p for p in pieces if p not in PIECES]
    if unknown:
        parser.error(f"unknown piece(s) {unknown}; choose from {','.join(PIECES)}")
    results = _callgrind.measure(__file__, pieces, args.calls)
    print(f"instructions per piece (callgrind, {args.calls} calls vs 0, PYTHONHASHSEED=0)")
    print(f"{'piece':9} {'main thread':>12}")
    for piece in pieces:
        print(f"{piece:9} {results[piece].app_thread:12,.0f}")


if __name__ == "__main__":
    main()
