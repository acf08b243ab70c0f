"""Decorator overhead: undecorated call vs a raw OTel span (the floor) vs @evaltrace.trace (capture on / off).

Run: python benchmarks/bench_decorators.py [--rounds 15] [--calls 2000]

All variants share one real TracerProvider with a BatchSpanProcessor in front of a discarding exporter (what
production looks like), and run interleaved round by round so machine noise hits them alike. Reported: the
median per-call time over rounds, and ratios against the floor measured in the same run.
Budget (issue 2): <= 1.5x the floor with default capture, <= 1.2x with capture off.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import evaltrace
from evaltrace._internal import settings, tracing


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def plain(question: str, context: dict[str, Any]) -> str:
    return question + str(len(context))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardExporter(), max_queue_size=1 << 16))
    tracing.set_tracer_provider(provider)
    tracer = provider.get_tracer("floor")

    def floor(question: str, context: dict[str, Any]) -> str:
        with tracer.start_as_current_span("plain"):
            return plain(question, context)

    decorated = evaltrace.trace(plain)
    question, context = "What is the weather in Paris today?", {"user": "ada", "locale": "en-GB", "turn": 3}
    capture_on = settings.CaptureSettings(capture_content=True)
    capture_off = settings.CaptureSettings(capture_content=False)

    variants: dict[str, tuple[Callable[..., Any], settings.CaptureSettings]] = {
        "undecorated": (plain, capture_on),
        "raw OTel span (floor)": (floor, capture_on),
        "@evaltrace.trace (capture on)": (decorated, capture_on),
        "@evaltrace.trace (capture off)": (decorated, capture_off),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(3):  # warm-up
        for fn, capture in variants.values():
            settings.replace(capture)
            for _ in range(200):
                fn(question, context)
    for _ in range(args.rounds):
        for name, (fn, capture) in variants.items():
            settings.replace(capture)
            gc.collect()
            start = time.perf_counter_ns()
            for _ in range(args.calls):
                fn(question, context)
            samples[name].append((time.perf_counter_ns() - start) / args.calls / 1000)
        provider.force_flush()

    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["undecorated"]
    floor_cost = medians["raw OTel span (floor)"]
    print(f"{'variant':34} {'median us/call':>15} {'overhead us':>12} {'x floor':>8}")
    for name, value in medians.items():
        print(f"{name:34} {value:15.2f} {value - base:12.2f} {value / floor_cost:8.2f}")
    on = medians["@evaltrace.trace (capture on)"] / floor_cost
    off = medians["@evaltrace.trace (capture off)"] / floor_cost
    print(f"budget capture on  <= 1.50x floor: {on:.2f}x {'OK' if on <= 1.5 else 'OVER'}")
    print(f"budget capture off <= 1.20x floor: {off:.2f}x {'OK' if off <= 1.2 else 'OVER'}")
    provider.shutdown()


if __name__ == "__main__":
    main()
