"""Instructions per piece of one evaluated span's job side (callgrind), on ``bench_evaluation.py``'s span.

Run: python benchmarks/bench_evaluation_publish.py [--calls 300]

Finer than ``bench_evaluation_steps.py``'s ``publish``, ``copy`` and ``lane`` steps, and cheaper to run on a loaded
machine: one process under callgrind sets the pipeline up once, then calls each piece ``--calls`` times in the main
thread on one real result of the inline variant (captured from the pipeline), zeroing callgrind's counts before a
piece and dumping them after it (client requests); the ``noop`` piece's count is subtracted from each. Compare two
trees by running this file from each (a ``git archive`` copy for the old one). Pieces:

  stats    ``PipelineStats.record`` (the outcome passed in, as ``_publish`` does)
  monitor  ``ProductionMonitor.record`` (the query as ``_record`` hands it over)
  metrics  ``PipelineMetrics.record_result`` (the pipeline's own, no meter provider)
  query    ``_preview.deferred_query`` and the read of ``output``, as ``_record`` makes them
  publish  ``JobRunner._publish`` (stats, metrics, monitor; no sink)
  record   ``JobRunner._record`` (``query`` and ``publish``)
  event    ``convert.evaluation_event_attributes``
  spanattr ``convert.span_result_attributes``
  copy     ``spans.enriched_copy``
  deliver  ``JobRunner._deliver`` (a new Job, the enriched copy, its count, the forward to a no-op)
  lane     ``JobRunner.run_now`` on a fast-lane worker (the whole job: mapping, call, stamp, record, deliver)
  build    ``_mapping.build_trace`` alone (the lazy Trace before any read)
  output   ``build`` and the first read of ``output`` (what the cheap evaluator reads)
  dq       ``_preview.deferred_query`` alone, on a fresh lazy Trace whose ``output`` was read
  estimate ``export_queue.estimated_bytes`` of the enriched copy (the export queue's size estimate)
  qend     ``ExportQueue.on_end`` of the enriched copy (a queue with a no-op exporter: the forward's own work)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import _callgrind
from _evaluators import cheap
from bench_evaluation_steps import _HANDLE, _inputs

PIECES = ("noop", "stats", "monitor", "metrics", "query", "publish", "record", "event", "spanattr", "copy", "deliver",
          "lane", "build", "output", "dq", "estimate", "qend")  # fmt: skip


def child(calls: int) -> None:
    """Under callgrind: each piece ``calls`` times between a zero and a dump of the counts."""
    from evaltrace._internal.export_queue import ExportQueue, estimated_bytes
    from evaltrace.evaluation import _mapping
    from evaltrace.evaluation._fast_lane import Worker
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
    runner.ctx = dataclasses.replace(runner.ctx, forward=lambda span: None)  # the job's own work only
    runner._on_done = lambda job: None
    ctx = runner.ctx
    spec = processor._resolve(root.attributes["evaltrace.evaluators.ref"])[0]
    query = deferred_query(root, trace)
    output = trace.output.final_answer
    fresh = _mapping.build_trace(members, root)
    _ = fresh.output
    lane = processor._engine.lane
    lane.slow_call_s = float("inf")  # callgrind's slowdown would mark the cheap evaluator slow
    lane._slow.clear()
    worker = Worker(lane)

    copy = enriched_copy(root, [result], provenance=False)
    queue = ExportQueue(_NoExport(), "bench", max_queue_size=1 << 30, max_batch_size=1 << 30, schedule_delay_s=1e6)

    def job() -> Any:
        return Job(root, [spec], [], members, len(members), admitted_at=time.monotonic())

    pieces: dict[str, Callable[[], Any]] = {
        "noop": lambda: None,
        "stats": lambda: ctx.stats.record(result, outcome),
        "monitor": lambda: ctx.monitor.record(result, query, output, outcome),
        "metrics": lambda: ctx.metrics.record_result(result, outcome),
        "query": lambda: (deferred_query(root, trace), trace.output.final_answer),
        "publish": lambda: runner._publish(root, query, output, spec, result),
        "record": lambda: runner._record(root, trace, spec, result),
        "event": lambda: evaluation_event_attributes(result, None),
        "spanattr": lambda: span_result_attributes([result]),
        "copy": lambda: enriched_copy(root, [result], provenance=False),
        "deliver": lambda: runner._deliver(job(), [result]),
        "lane": lambda: runner.run_now(job(), worker),
        "build": lambda: _mapping.build_trace(members, root),
        "output": lambda: _mapping.build_trace(members, root).output,
        "dq": lambda: deferred_query(root, fresh),
        "estimate": lambda: estimated_bytes(copy),
        "qend": lambda: queue.on_end(copy),
    }
    for work in pieces.values():  # each once before counting: first-call caches
        work()
    gc.collect()
    gc.disable()
    request = _callgrind._client_request
    for name in PIECES:
        work = pieces[name]
        request(_callgrind._ZERO_STATS)
        for _ in range(calls):
            work()
        request(_callgrind._DUMP_STATS)
    os._exit(0)


class _NoExport:
    """An exporter that takes every batch (the ``qend`` piece's queue never exports during the count)."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _totals(out_dir: str) -> list[int]:
    """The main thread's count of each dump, in order."""
    parts = sorted(
        (int(m.group(1)), path)
        for path in glob.glob(os.path.join(out_dir, "cg.*.*-01"))
        if (m := re.search(r"\.(\d+)-01$", path)) is not None
    )
    totals = []
    for _, path in parts:
        with open(path) as lines:
            totals.append(next(int(line.split()[1]) for line in lines if line.startswith(("summary:", "totals:"))))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.calls)
        return
    with tempfile.TemporaryDirectory(prefix="callgrind-") as out_dir:
        command = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                   f"--callgrind-out-file={out_dir}/cg.%p", sys.executable, __file__, "--child", f"--calls={args.calls}"]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        totals = dict(zip(PIECES, _totals(out_dir), strict=True))
    print(f"instructions per piece (callgrind, main thread, {args.calls} calls, the noop piece subtracted)")
    for name in PIECES[1:]:
        print(f"{name:9} {(totals[name] - totals['noop']) / args.calls:12,.0f}")


if __name__ == "__main__":
    main()
