"""Links keep their trace state through the OTLP/JSON export (the SDK's encoder leaves it out) and back in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, TraceFlags, TraceState

from evaltrace.cli import main
from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.otlp_json import otlp_json_line
from evaltrace.worker.decode import CONTENT_JSON, parse_request, spans_from_request

_STATE = TraceState([("vendor", "abc"), ("rojo", "00f067aa0ba902b7")])
_LINKED = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174, True, TraceFlags(1), _STATE)
_PLAIN = SpanContext(0x5B8EFFF798038103D269B633813FC60D, 0xEEE19B7EC3C1B175, False, TraceFlags(1))


def _spans(*exporters: object) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "linker"}))
    for exporter in (memory, *exporters):
        provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[arg-type]
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("consume", links=[Link(_LINKED, {"why": "batch"}), Link(_PLAIN)]):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _links(line: str) -> list[dict[str, object]]:
    span = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    links: list[dict[str, object]] = span["links"]
    return links


def test_otlp_json_line_writes_each_links_trace_state() -> None:
    links = _links(otlp_json_line(_spans()))
    assert links[0]["traceState"] == "vendor=abc,rojo=00f067aa0ba902b7"
    assert links[0]["spanId"] == "eee19b7ec3c1b174"
    assert "traceState" not in links[1]  # none: nothing written, as the encoder does for spans


def test_link_trace_state_survives_the_json_round_trip() -> None:
    line = otlp_json_line(_spans())
    (span,) = spans_from_request(parse_request(line.encode(), CONTENT_JSON))
    linked, plain = span.links
    assert linked.context.trace_state == _STATE
    assert linked.context.span_id == _LINKED.span_id and linked.attributes == {"why": "batch"}
    assert not plain.context.trace_state


def test_cli_export_writes_link_trace_state_from_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / ".evaltrace"
    _spans(LocalStoreExporter(root))
    out = tmp_path / "traces.jsonl"
    assert main(["traces", "export", "--format", "otlp-json", "--output", str(out), "--store", str(root)]) == 0
    (line,) = out.read_text().splitlines()
    assert _links(line)[0]["traceState"] == "vendor=abc,rojo=00f067aa0ba902b7"
