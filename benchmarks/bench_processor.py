"""Cost of the EvaluationSpanProcessor on the application thread, and its evaluation throughput.

Run: ``python benchmarks/bench_processor.py`` (add ``--quick`` for a short run). Prints medians of
microseconds per ``span.end()`` on the application thread for:

- ``baseline``: SimpleSpanProcessor -> no-op exporter (what OTel costs anyway);
- ``forward``: EvaluationSpanProcessor in front, no evaluator applies (span forwarded inline);
- ``enqueue``: an evaluator applies (span admitted to the queue; evaluation runs on the workers meanwhile);

then the evaluation throughput (spans/s, end of the first span to a completed ``force_flush``) for a cheap
deterministic evaluator, run on the thread pool (default) and ``inline`` on the evaluation loop.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.schema import Trace


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@evaluator(name="cheap")
def cheap(trace: Trace) -> bool:
    return trace.latency_ms >= 0


def per_end_us(processor: SpanProcessor, rounds: int, batch: int) -> tuple[float, float]:
    """Return the medians of (app-thread CPU time, wall time) per span.end(), in microseconds.

    CPU time of the calling thread (``time.thread_time_ns``) is the work done on the application thread and
    is stable on a busy machine; wall time also includes waiting for the GIL while workers evaluate.
    """
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    cpu, wall = [], []
    for _ in range(rounds):
        spans = [tracer.start_span("chat bench", attributes={"evaltrace.span.kind": "llm"}) for _ in range(batch)]
        start_cpu, start_wall = time.thread_time_ns(), time.perf_counter_ns()
        for span in spans:
            span.end()
        cpu.append((time.thread_time_ns() - start_cpu) / batch / 1000)
        wall.append((time.perf_counter_ns() - start_wall) / batch / 1000)
        processor.force_flush(60_000)
    provider.shutdown()
    return statistics.median(cpu), statistics.median(wall)


def throughput(spans: int, inline: bool) -> tuple[float, dict[str, Any]]:
    processor = EvaluationSpanProcessor(
        downstream=[SimpleSpanProcessor(NullExporter())],
        evaluators=[EvaluatorSpec(cheap, inline=inline)],
        max_queue_size=spans,
        emit_log_events=False,
        dead_letter_dir=None,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    pending = [tracer.start_span("s") for _ in range(spans)]
    start = time.perf_counter()
    for span in pending:
        span.end()
    processor.force_flush(120_000)
    elapsed = time.perf_counter() - start
    stats = processor.stats()
    provider.shutdown()
    return spans / elapsed, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds, batch, spans = (5, 500, 2_000) if args.quick else (15, 2_000, 10_000)

    def evaluation(evaluators: list[Any]) -> EvaluationSpanProcessor:
        return EvaluationSpanProcessor(
            downstream=[SimpleSpanProcessor(NullExporter())],
            evaluators=evaluators,
            max_queue_size=batch,
            emit_log_events=False,
            dead_letter_dir=None,
        )

    base = per_end_us(SimpleSpanProcessor(NullExporter()), rounds, batch)
    forward = per_end_us(evaluation([EvaluatorSpec(cheap, span_kinds={"tool"})]), rounds, batch)
    enqueue = per_end_us(evaluation([cheap]), rounds, batch)
    rate, stats = throughput(spans, inline=False)
    inline_rate, inline_stats = throughput(spans, inline=True)
    print(f"span.end() on the app thread, median of {rounds} rounds x {batch} spans (thread CPU / wall):")
    for label, (cpu, wall) in (
        ("baseline (SimpleSpanProcessor, no-op exporter)", base),
        ("+ EvaluationSpanProcessor, no evaluator applies", forward),
        ("+ EvaluationSpanProcessor, evaluator applies", enqueue),
    ):
        print(f"  {label:<48} {cpu:6.2f} us (+{cpu - base[0]:5.2f}) / {wall:6.2f} us wall")
    print(f"evaluation throughput, cheap sync evaluator, {spans} spans ended in one burst:")
    for label, value, data in (("thread pool", rate, stats), ("inline=True", inline_rate, inline_stats)):
        print(
            f"  {label:<12} {value:8,.0f} spans/s  (evaluated={data['evaluated']} enriched={data['enriched']}"
            f" held past hold_timeout={data['held_timeout']})"
        )


if __name__ == "__main__":
    main()
