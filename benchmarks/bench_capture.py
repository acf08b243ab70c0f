"""Capture cost of huge arguments: bounded serialisation vs an undecorated call and vs serialise-then-truncate.

Run: python benchmarks/bench_capture.py [--rounds 5] [--calls 20]

For a 100 MB string argument and a dict argument with 1M keys, reported per call (median over rounds): the
undecorated function (baseline), the same function under ``@evaltrace.trace`` with default capture (a real
TracerProvider with a BatchSpanProcessor in front of a discarding exporter), and the previous behaviour
(serialise everything with the C encoder, then truncate) for reference. Budget (issue 13): the decorated call
costs microseconds, not the 0.68 s / 2.4 s per call that serialise-then-truncate cost.
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
from evaltrace._internal.jsonutil import _dumps, truncation_marker


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def plain(value: Any) -> int:
    return 1


def serialise_then_truncate(value: Any) -> int:
    """What capture cost before: the whole value through the C encoder, then the marker."""
    truncation_marker(_dumps(value), settings.current.max_attribute_length)
    return 1


def median_us(fn: Callable[[Any], int], value: Any, rounds: int, calls: int) -> float:
    samples = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn(value)
        samples.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardExporter(), max_queue_size=1 << 16))
    tracing.set_tracer_provider(provider)
    settings.replace(settings.CaptureSettings(capture_content=True))
    decorated = evaltrace.trace(plain)

    values = {
        "100 MB string": "x" * 100_000_000,
        "1M-key dict": {f"key{i}": i for i in range(1_000_000)},
    }
    print(f"{'argument':14} {'variant':32} {'median us/call':>15} {'x baseline':>11}")
    for label, value in values.items():
        decorated(value)  # warm-up
        base = median_us(plain, value, args.rounds, args.calls)
        capture = median_us(decorated, value, args.rounds, args.calls)
        before = median_us(serialise_then_truncate, value, max(1, args.rounds // 2), 1)
        for name, cost in (
            ("undecorated (baseline)", base),
            ("@evaltrace.trace (bounded)", capture),
            ("serialise-then-truncate (before)", before),
        ):
            print(f"{label:14} {name:32} {cost:15.2f} {cost / base:11.0f}")
        print(f"{label:14} bounded capture is {before / capture:.0f}x cheaper than serialise-then-truncate")
    provider.shutdown()


if __name__ == "__main__":
    main()
