"""Trace completion: app-thread cost per span with 10k open traces waiting, and the buffer's memory.

Run: ``python benchmarks/bench_completion.py`` (``--quick`` for a short run). Prints medians of microseconds per
``span.end()`` on the application thread for:

- ``baseline``: EvaluationSpanProcessor with a span-level evaluator that matches nothing (no completion buffer);
- ``completion``: the same plus a trace-level evaluator, with 10k traces open in the completion buffer (their
  roots started, not ended) while the measured spans end into them;

then the ratio, and the completion buffer's memory (tracemalloc) for 10k open traces of N spans each (the spans
themselves excluded: they exist anyway, the buffer holds references).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags, set_span_in_context

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.evaluation.completion import CompletionBuffer
from evaltrace.schema import Trace

OPEN_TRACES = 10_000


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@evaluator(name="cheap")
def cheap(trace: Trace) -> bool:
    return trace.latency_ms >= 0


def per_end_us(with_completion: bool, rounds: int, spans_per_round: int) -> float:
    """Median app-thread CPU microseconds per child ``span.end()`` while 10k traces are open."""
    specs = [EvaluatorSpec(cheap, span_kinds={"never"})]
    if with_completion:
        specs.append(EvaluatorSpec(cheap, trace_level=True))
    processor = EvaluationSpanProcessor(
        downstream=[SimpleSpanProcessor(NullExporter())],
        evaluators=specs,
        dead_letter_dir=None,
        trace_quiet_period_s=3600,
        trace_completion_max_traces=2 * OPEN_TRACES,
        emit_log_events=False,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    roots = [tracer.start_span(f"root{i}") for i in range(OPEN_TRACES)]
    contexts = [set_span_in_context(root) for root in roots]
    samples = []
    for r in range(rounds):
        spans = [tracer.start_span("step", context=contexts[(r * spans_per_round + i) % OPEN_TRACES])
                 for i in range(spans_per_round)]  # fmt: skip
        start = time.thread_time_ns()
        for span in spans:
            span.end()
        samples.append((time.thread_time_ns() - start) / spans_per_round / 1000)
    if with_completion:
        open_traces = processor.stats()["completion"]["open_traces"]
        assert open_traces == OPEN_TRACES, open_traces
    processor.shutdown(5_000)  # the roots never end: counted trace_incomplete, nothing to evaluate or drain
    del roots
    return statistics.median(samples)


def buffer_memory(spans_per_trace: int) -> tuple[int, float]:
    """Bytes the completion buffer allocates for 10k open traces (spans pre-built), and per trace."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    spans = [
        ReadableSpan(name="s", context=SpanContext(t + 1, s + 2, False, flags), parent=SpanContext(t + 1, 1, False, flags))
        for t in range(OPEN_TRACES)
        for s in range(spans_per_trace)
    ]  # fmt: skip
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    buffer = CompletionBuffer(2.0, 30.0, 300.0, max_traces=2 * OPEN_TRACES, max_spans=2048)
    for span in spans:
        buffer.add(span, create=True, marker=False)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(buffer) == OPEN_TRACES
    return used, used / OPEN_TRACES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, per_round = (5, 2000) if args.quick else (15, 5000)
    base = per_end_us(False, rounds, per_round)
    with_buffer = per_end_us(True, rounds, per_round)
    print(f"app-thread CPU per span.end(), median of {rounds} rounds x {per_round} spans:")
    print(f"  baseline (no trace-level evaluator):     {base:7.2f} us")
    print(f"  completion, {OPEN_TRACES} open traces:       {with_buffer:7.2f} us   ratio {with_buffer / base:.2f}x")
    for n in (1, 10):
        used, per_trace = buffer_memory(n)
        print(
            f"completion buffer, {OPEN_TRACES} open traces x {n:2d} spans: {used / 1e6:6.2f} MB ({per_trace:.0f} B/trace)"
        )


if __name__ == "__main__":
    main()
