"""Instructions per step of one evaluated span's job, on the span ``bench_evaluation.py`` makes (callgrind).

Run: python benchmarks/bench_evaluation_steps.py [--calls 1000] [--steps map,lazy,call,stamp,copy,arun,attrs,...]

The pipeline figure (``bench_evaluation.py``, ``smoke.py``'s ``evaluation`` row) depends on the path the jobs take
(under callgrind's slowdown the cheap evaluator looks slow and its jobs go to the loop; on a loaded machine spans
pass their hold deadline). This one is deterministic: each step is called ``--calls`` times in the main thread on
the same inputs, after the pipeline made them once, and the run with 0 calls is subtracted (the main thread's
figure is the step's). Steps:

  map    ``trace_from_spans`` (eager: every field)
  lazy   ``evaluation._mapping.build_trace`` (the lazy Trace) and the reads the pipeline makes: ``output``, ``input``
  build  ``evaluation._mapping.build_trace`` alone (the lazy Trace before any read; not in the default set)
  preview  ``build``, the read of ``output`` and the monitor's query as ``JobRunner._record`` hands it over (kept to
         render on read for a short input text, else ``str`` of the input; not in the default set)
  call   ``runner.call_evaluator`` (suppression, ``evaluate``, the unvalidated result)
  stamp  ``runner.stamp``
  copy   ``spans.enriched_copy``
  plan   admission on the application thread: ``EvaluationSpanProcessor._plan`` (matching, the span list, the Job)
  loop   one job on the evaluation loop, as the engine runs it when the evaluator looks slow (under callgrind it
         does): ``JobRunner.run`` awaited in a running loop (mapping, call, stamp, record, the enriched copy,
         forwarding to a no-op, the done count); includes map-lazy, call, stamp and copy
  lane   the same job on the fast lane: ``JobRunner.run_now`` on a lane worker (what a cheap evaluator's job
         takes outside callgrind)
  batch  the same jobs handed to the engine's loop as the dispatcher hands them (``Engine._start_batch``, 50 jobs a
         batch, on a fresh engine whose loop runs in the main thread): ``loop`` plus what the loop itself spends per
         job (a task, its step and done callbacks, unless the job runs eagerly; not in the default set)
  publish  ``JobRunner._record`` of one result (stats, metrics, monitor; the reads of input and output)
  arun   ``runner.arun_evaluator`` of the inline sync evaluator, driven without a loop (the loop path's call, its
         result check and stamp; not in the default set)
  attrs  one result's ``convert.evaluation_event_attributes`` and ``span_result_attributes`` and
         ``PipelineMetrics.record_result`` (no meter provider: the API's proxies; not in the default set)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import _callgrind
from _evaluators import cheap
from _pipeline import ReadingExporter
from bench_evaluation import CONTEXT, QUESTION, answer

import evaltrace
from evaltrace.evaluation import EvaluatorSpec

STEPS = (
    "map",
    "lazy",
    "call",
    "stamp",
    "copy",
    "plan",
    "loop",
    "lane",
    "publish",
    "arun",
    "attrs",
    "build",
    "preview",
    "batch",
)
DEFAULT_STEPS = STEPS[:9]  # arun, attrs, build, preview and batch are opt-in


_HANDLE: list[Any] = []


def _inputs() -> tuple[list[Any], Any]:
    """The members and root of one real job of the inline variant (captured from the pipeline)."""
    from evaltrace.evaluation import _jobs

    captured: dict[str, Any] = {}
    original = _jobs.build_trace

    def spy(members: Any, root: Any) -> Any:
        captured["args"] = (list(members), root)
        return original(members, root)

    _jobs.build_trace = spy  # type: ignore[assignment]
    handle = evaltrace.configure(
        service_name="bench",
        exporters=[ReadingExporter()],
        local_store=False,
        evaluation_options={"emit_log_events": False, "dead_letter_dir": None},
        handle_sigterm=False,
    )
    _HANDLE.append(handle)
    fn = evaltrace.agent(evaluators=[EvaluatorSpec(cheap, inline=True)])(answer)
    for _ in range(20):
        fn(QUESTION, CONTEXT)
    handle.force_flush(10_000)
    _jobs.build_trace = original
    members, root = captured["args"]
    return members, root


def callgrind_child(step: str, calls: int) -> None:
    from evaltrace.evaluation import _mapping
    from evaltrace.evaluation._fast_lane import Worker
    from evaltrace.evaluation._jobs import Job
    from evaltrace.evaluation.convert import evaluation_event_attributes, span_result_attributes
    from evaltrace.evaluation.runner import RunOptions, arun_evaluator, call_evaluator, now, stamp
    from evaltrace.evaluation.spans import enriched_copy
    from evaltrace.evaluation.telemetry import PipelineMetrics
    from evaltrace.mapping import trace_from_spans

    members, root = _inputs()
    trace = trace_from_spans(members, root)
    produced, _ = call_evaluator(cheap, trace)
    started = now()
    result = stamp(produced, cheap, trace, started)
    processor = _HANDLE[0].evaluation_processor
    runner = processor._runner
    runner.ctx = dataclasses.replace(runner.ctx, forward=lambda span: None)  # the job's own work only
    runner._on_done = lambda job: None
    spec = processor._resolve(root.attributes["evaltrace.evaluators.ref"])[0]
    worker = None
    if step == "lane":
        lane = processor._engine.lane
        lane.slow_call_s = float("inf")  # callgrind's slowdown would mark the cheap evaluator slow: its job would leave
        lane._slow.clear()
        worker = Worker(lane)

    def job() -> Any:
        return Job(root, [spec], [], members, len(members), admitted_at=time.monotonic())

    if step == "batch":
        # 50 jobs are made before the first runs: under callgrind the last would pass the default 2 s hold deadline
        # and take the late path (a child span per result), which a healthy pipeline does not.
        runner.ctx = dataclasses.replace(
            runner.ctx, options=dataclasses.replace(runner.ctx.options, hold_timeout_s=600.0)
        )
        _batches(runner, job, calls)
        os._exit(0)

    if step == "loop":
        loop = asyncio.new_event_loop()

        async def jobs() -> None:
            for _ in range(calls):
                await runner.run(job())

        gc.collect()
        gc.disable()
        loop.run_until_complete(jobs())
        os._exit(0)

    options = RunOptions()
    metrics = PipelineMetrics(None, lambda: 0, dict, dict)

    def attrs() -> None:
        evaluation_event_attributes(result, None)
        span_result_attributes([result])
        metrics.record_result(result)

    def lazy() -> None:
        built = _mapping.build_trace(members, root)
        _ = built.output.final_answer, built.input

    one: dict[str, Callable[[], Any]] = {
        "map": lambda: trace_from_spans(members, root),
        "lazy": lazy,
        "build": lambda: _mapping.build_trace(members, root),
        "preview": _preview_step(members, root),
        "call": lambda: call_evaluator(cheap, trace),
        "stamp": lambda: stamp(produced, cheap, trace, started),
        "copy": lambda: enriched_copy(root, [result], provenance=False),
        "plan": lambda: processor._plan(root),
        "lane": lambda: runner.run_now(job(), worker),
        "publish": lambda: runner._record(root, trace, spec, result),
        "arun": lambda: _drive(arun_evaluator(cheap, trace, None, options=options)),
        "attrs": attrs,
    }
    work = one[step]  # one call frame more per step than inline code: a few hundred instructions
    gc.collect()
    gc.disable()
    for _ in range(calls):
        work()
    os._exit(0)  # no shutdown work in the counts


def _preview_step(members: list[Any], root: Any) -> Callable[[], None]:
    """The ``preview`` step: the lazy Trace, its ``output``, and the query ``JobRunner._record`` hands the monitor."""
    from evaltrace.evaluation import _mapping

    try:  # kept to render on read when the input is a short text
        from evaltrace.evaluation._preview import deferred_query
    except ImportError:  # a tree before it: made at once
        deferred_query = None

    def preview() -> None:
        built = _mapping.build_trace(members, root)
        _ = built.output.final_answer
        if deferred_query is not None and deferred_query(root, built) is not None:
            return
        raw = built.input.get("input")  # as JobRunner._record reads it
        _ = raw if isinstance(raw, str) else str(built.input or "")

    return preview


def _batches(runner: Any, job: Callable[[], Any], calls: int) -> None:
    """``calls`` jobs through ``Engine._start_batch`` on a fresh engine's loop, run here (50 jobs a batch)."""
    from evaltrace.evaluation._engine import Engine

    engine = Engine(1, 1)
    eager = getattr(runner, "eager", None)  # (a tree without eager starts: every job a task)
    if eager is not None:
        engine.start(runner.run, eager=eager)
    else:
        engine.start(runner.run)
    loop = engine.loop

    async def feed() -> None:
        left = calls
        while left:
            batch = [job() for _ in range(min(50, left))]
            left -= len(batch)
            engine._start_batch(batch)
            while engine._tasks:  # their steps, then their done callbacks
                await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.set_event_loop(loop)
    gc.collect()
    gc.disable()
    loop.run_until_complete(feed())


def _drive(coroutine: Any) -> Any:
    """Run a coroutine that never suspends (an inline sync evaluator's) to its result, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine suspended")


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        callgrind_child(*child)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--steps", default=",".join(DEFAULT_STEPS))
    args = parser.parse_args()
    steps = args.steps.split(",")
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {unknown}; choose from {','.join(STEPS)}")
    results = _callgrind.measure(__file__, steps, args.calls)
    # Every step runs on the main thread: its figure is the main thread's. All threads adds the background work
    # of the pipeline set up around it (export timers), which differs between the two runs: noise, not the step.
    print(f"instructions per step (callgrind, {args.calls} calls vs 0, PYTHONHASHSEED=0)")
    print(f"{'step':8} {'main thread':>12} {'all threads':>12}")
    for step in steps:
        print(f"{step:8} {results[step].app_thread:12,.0f} {results[step].all_threads:12,.0f}")


if __name__ == "__main__":
    main()
