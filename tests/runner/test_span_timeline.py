"""The compact span timeline a run keeps per case (``Trace.extra["spans"]``), from real SDK spans."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from evaltrace.runner.span_timeline import DROPPED_KEY, MAX_SPANS, TIMELINE_KEY, read_timeline, span_timeline


def _record(children: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        for index in range(children):
            with tracer.start_as_current_span(f"child {index}") as span:
                if index == 0:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_the_timeline_is_the_tree_in_order_with_offsets_and_no_content() -> None:
    extra = span_timeline(_record(2))
    rows = read_timeline(extra)
    assert [(r.name, r.depth, r.error) for r in rows] == [
        ("root", 0, False),
        ("child 0", 1, True),
        ("child 1", 1, False),
    ]
    assert rows[0].start_ms == 0 and all(r.start_ms >= 0 and r.duration_ms >= 0 for r in rows)
    assert rows[1].start_ms <= rows[2].start_ms
    assert set(extra[TIMELINE_KEY][0]) == {"name", "kind", "depth", "start_ms", "duration_ms", "error"}
    assert DROPPED_KEY not in extra


def test_a_case_with_too_many_spans_keeps_the_first_and_counts_the_rest() -> None:
    extra = span_timeline(_record(MAX_SPANS + 4))
    assert len(extra[TIMELINE_KEY]) == MAX_SPANS and extra[DROPPED_KEY] == 5


def test_a_malformed_or_missing_timeline_reads_as_none() -> None:
    assert read_timeline({}) == []
    assert read_timeline({TIMELINE_KEY: [{"name": "x"}]}) == []
    assert read_timeline({TIMELINE_KEY: "nope"}) == []
