"""What sampling and a rate limit save: app-thread cost per span and processor throughput, against a baseline.

Run: ``python benchmarks/bench_sampling.py`` (``--quick`` for a short run). Every case ends the same spans
(each its own trace, kind ``llm``) through a ``TracerProvider``, in the same process and run:

- ``baseline``: SimpleSpanProcessor -> no-op exporter, no evaluation processor (what OTel costs anyway);
- ``no evaluator``: EvaluationSpanProcessor in front with no evaluator;
- ``sample 1%`` / ``10%`` / ``100%``: one cheap sync evaluator (``inline``) at that ``sample_rate``;
- ``100% + 100/s``: the same at 100%, with ``Limits(evaluations_per_second=100)``: the rest is skipped as
  ``rate_limited`` in ``on_end``.

Printed, as medians over rounds: thread CPU and wall microseconds per ``span.end()`` on the application
thread (which includes ``on_end``), and throughput in spans/s (first ``end()`` to a completed
``force_flush()``: every span evaluated or skipped, and forwarded), each with its ratio to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, Limits, evaluator
from evaltrace.schema import Trace

RATE_LIMIT = 100.0


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@evaluator(name="cheap")
def cheap(trace: Trace) -> bool:
    return trace.latency_ms >= 0


@dataclass
class Result:
    cpu_us: float
    wall_us: float
    spans_per_s: float
    evaluated: int
    skipped: dict[str, int]


def evaluation(specs: list[EvaluatorSpec], queue: int) -> EvaluationSpanProcessor:
    return EvaluationSpanProcessor(
        downstream=[SimpleSpanProcessor(NullExporter())],
        evaluators=specs,
        max_queue_size=queue,
        emit_log_events=False,
        dead_letter_dir=None,
    )


def run(make: Callable[[], SpanProcessor], rounds: int, batch: int) -> Result:
    """Median per-span cost and throughput of ``rounds`` bursts of ``batch`` spans, a fresh processor each."""
    cpu, wall, rates = [], [], []
    evaluated = 0
    skipped: dict[str, int] = {}
    for _ in range(rounds):
        processor = make()
        provider = TracerProvider()
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("bench")
        spans = [tracer.start_span("chat bench", attributes={"evaltrace.span.kind": "llm"}) for _ in range(batch)]
        start_cpu, start_wall = time.thread_time_ns(), time.perf_counter_ns()
        for span in spans:
            span.end()
        end_cpu, end_wall = time.thread_time_ns(), time.perf_counter_ns()
        processor.force_flush(120_000)
        done = time.perf_counter_ns()
        cpu.append((end_cpu - start_cpu) / batch / 1000)
        wall.append((end_wall - start_wall) / batch / 1000)
        rates.append(batch / ((done - start_wall) / 1e9))
        if isinstance(processor, EvaluationSpanProcessor):
            stats: dict[str, Any] = processor.stats()
            evaluated += stats["evaluated"]
            for reason, count in stats.get("not_evaluated_by_reason", {}).items():
                skipped[reason] = skipped.get(reason, 0) + count
        provider.shutdown()
    return Result(statistics.median(cpu), statistics.median(wall), statistics.median(rates), evaluated, skipped)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller rounds")
    args = parser.parse_args()
    rounds, batch = (3, 500) if args.quick else (9, 2_000)

    def sampled(rate: float, limits: Limits | None = None) -> Callable[[], SpanProcessor]:
        return lambda: evaluation([EvaluatorSpec(cheap, sample_rate=rate, inline=True, limits=limits)], batch)

    cases: list[tuple[str, Callable[[], SpanProcessor]]] = [
        ("baseline (no evaluation processor)", lambda: SimpleSpanProcessor(NullExporter())),
        ("no evaluator", lambda: evaluation([], batch)),
        ("sample 1%", sampled(0.01)),
        ("sample 10%", sampled(0.10)),
        ("sample 100%", sampled(1.0)),
        (f"sample 100% + {RATE_LIMIT:g}/s limit", sampled(1.0, Limits(evaluations_per_second=RATE_LIMIT))),
    ]
    run(cases[-2][1], 1, min(batch, 200))  # warm-up: imports, thread pools, first-call caches
    results = [(label, run(make, rounds, batch)) for label, make in cases]
    base = results[0][1]
    print(f"{rounds} rounds x {batch} spans (one trace each, kind llm); medians; ratio = case / baseline")
    print(
        f"{'case':<34} {'CPU us/span':>11} {'ratio':>6} {'wall us/span':>12} {'ratio':>6} "
        f"{'spans/s':>9} {'ratio':>6}  evaluated / skipped"
    )
    for label, r in results:
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(r.skipped.items())) or "-"
        print(
            f"{label:<34} {r.cpu_us:11.2f} {r.cpu_us / base.cpu_us:6.2f} {r.wall_us:12.2f} "
            f"{r.wall_us / base.wall_us:6.2f} {r.spans_per_s:9,.0f} {r.spans_per_s / base.spans_per_s:6.2f}  "
            f"{r.evaluated} / {skipped}"
        )


if __name__ == "__main__":
    main()
