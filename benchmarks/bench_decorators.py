"""Decorator overhead: undecorated call vs a raw OTel span (the floor) vs @evaltrace.trace (capture on / off).

Run: python benchmarks/bench_decorators.py [--rounds 15] [--calls 2000] [--instructions]

What users run is measured: the decorated variants go through ``evaltrace.configure()`` (context stamps, the
evaluation processor, a batching export queue) into an exporter that reads every attribute of every span, so work
deferred to the export thread is counted. The floors are raw OTel spans on a plain SDK TracerProvider with OTel's
BatchSpanProcessor into the same reading exporter: one with no attributes, one with the same JSON capture of the
arguments and result as the decorator's. Variants run interleaved round by round so machine noise hits them alike;
reported are the median per-call time over rounds and ratios to the floor measured in the same run.

``--instructions`` counts instructions per call under callgrind instead (deterministic on a noisy machine), on the
application thread and over all threads (export and evaluation threads included): see ``_callgrind.py``.
Budget (issue 17): <= 1.2x the floor with capture, <= 1.05x without.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import _callgrind
from _pipeline import ReadingExporter, evaltrace_pipeline, raw_otel_tracer

import evaltrace
from evaltrace._internal import settings

FLOOR = "raw OTel span (floor)"
FLOOR_CAPTURE = "raw OTel span + JSON capture"
CAPTURE_ON = "@evaltrace.trace (capture on)"
CAPTURE_OFF = "@evaltrace.trace (capture off)"
VARIANTS = ("undecorated", FLOOR, FLOOR_CAPTURE, CAPTURE_ON, CAPTURE_OFF)
BUDGETS = ((CAPTURE_ON, FLOOR_CAPTURE, 1.2), (CAPTURE_OFF, FLOOR, 1.05))
QUESTION, CONTEXT = "What is the weather in Paris today?", {"user": "ada", "locale": "en-GB", "turn": 3}


def plain(question: str, context: dict[str, Any]) -> str:
    return question + str(len(context))


class Bench:
    """Both pipelines and every variant, set up once per process."""

    def __init__(self) -> None:
        self.handle = evaltrace_pipeline(ReadingExporter())
        self.floor_provider, tracer = raw_otel_tracer(ReadingExporter())

        def floor(question: str, context: dict[str, Any]) -> str:
            with tracer.start_as_current_span("plain"):
                return plain(question, context)

        def floor_capture(question: str, context: dict[str, Any]) -> str:
            with tracer.start_as_current_span("plain") as span:
                span.set_attribute("input.value", json.dumps({"question": question, "context": context}))
                result = plain(question, context)
                span.set_attribute("output.value", json.dumps(result))
                return result

        decorated = evaltrace.trace(plain)
        on = settings.CaptureSettings(capture_content=True)
        off = settings.CaptureSettings(capture_content=False)
        fns = (plain, floor, floor_capture, decorated, decorated)
        self.variants: dict[str, tuple[Callable[..., Any], settings.CaptureSettings]] = {
            name: (fn, off if name == CAPTURE_OFF else on) for name, fn in zip(VARIANTS, fns, strict=True)
        }

    def run(self, name: str, calls: int) -> None:
        fn, capture = self.variants[name]
        settings.replace(capture)
        for _ in range(calls):
            fn(QUESTION, CONTEXT)

    def flush(self) -> None:
        self.handle.force_flush()
        self.floor_provider.force_flush()

    def shutdown(self) -> None:
        self.handle.shutdown()
        self.floor_provider.shutdown()


def callgrind_child(variant: str, calls: int) -> None:
    """One variant, ``calls`` calls after a warm-up; everything its spans cause is flushed before exit."""
    bench = Bench()
    bench.run(variant, 200)
    bench.flush()
    gc.collect()
    bench.run(variant, calls)
    bench.flush()
    bench.shutdown()


def instructions(calls: int) -> None:
    results = _callgrind.measure(__file__, [n for n in VARIANTS if n != "undecorated"], calls)
    print(f"instructions per call (callgrind, {calls} calls, PYTHONHASHSEED=0)")
    _callgrind.report(results, FLOOR)
    for variant, floor, budget in BUDGETS:
        for scope in ("app_thread", "all_threads"):
            ratio = getattr(results[variant], scope) / getattr(results[floor], scope)
            verdict = "OK" if ratio <= budget else "OVER"
            print(f"budget {variant} <= {budget:.2f}x {floor} ({scope}): {ratio:.2f}x {verdict}")


def timings(rounds: int, calls: int) -> None:
    bench = Bench()
    samples: dict[str, list[float]] = {name: [] for name in bench.variants}
    for _ in range(3):  # warm-up
        for name in bench.variants:
            bench.run(name, 200)
    bench.flush()
    for _ in range(rounds):
        for name in bench.variants:
            gc.collect()
            start = time.perf_counter_ns()
            bench.run(name, calls)
            samples[name].append((time.perf_counter_ns() - start) / calls / 1000)
        bench.flush()

    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["undecorated"]
    print(f"{'variant':34} {'median us/call':>15} {'overhead us':>12} {'x floor':>8}")
    for name, value in medians.items():
        print(f"{name:34} {value:15.2f} {value - base:12.2f} {value / medians[FLOOR]:8.2f}")
    for variant, floor, budget in BUDGETS:
        ratio = medians[variant] / medians[floor]
        print(f"budget {variant} <= {budget:.2f}x {floor}: {ratio:.2f}x {'OK' if ratio <= budget else 'OVER'}")
    bench.shutdown()


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        callgrind_child(*child)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--instructions", action="store_true", help="count instructions with callgrind")
    args = parser.parse_args()
    if args.instructions:
        instructions(args.calls)
    else:
        timings(args.rounds, args.calls)


if __name__ == "__main__":
    main()
