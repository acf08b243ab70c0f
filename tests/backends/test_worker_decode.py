"""OTLP payload decoding in the worker: encodings, OTLP/JSON specifics, id validation."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receivers import poll
from test_worker import CHILD_ID, make_spans

from evaltrace.worker import EvaluationWorker, PayloadError, parse_request, spans_from_request
from evaltrace.worker.decode import decode_body


def test_gzip_from_the_real_exporter_is_accepted(tmp_path: Path) -> None:
    exported = InMemorySpanExporter()
    with EvaluationWorker([], [], [exported], port=0, batch=False) as worker:
        sender = OTLPSpanExporter(endpoint=worker.url + "/v1/traces", compression=Compression.Gzip)
        assert sender.export(make_spans()) is SpanExportResult.SUCCESS
        sender.shutdown()
        spans = poll(lambda: len(exported.get_finished_spans()) == 2 and exported.get_finished_spans())
    assert {s.context.span_id for s in spans if s.context} >= {CHILD_ID}


def test_deflate_and_identity_and_inflation_limit() -> None:
    assert decode_body(zlib.compress(b"abc"), "deflate", 10) == b"abc"
    assert decode_body(b"abc", None, 10) == b"abc"
    with pytest.raises(PayloadError, match="exceeds the limit of 10 bytes") as refused:
        decode_body(zlib.compress(b"x" * 1000), "deflate", 10)  # a zip bomb is cut off, not inflated
    assert refused.value.status == 413


def test_otlp_json_kvlist_bytes_links_and_remote_parent() -> None:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "parentSpanId": "00f067aa0ba902b7",
        "flags": 0x300 | 1,  # has-is-remote + is-remote + sampled
        "name": "remote child",
        "attributes": [
            {"key": "map", "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}}},
            {"key": "raw", "value": {"bytesValue": base64.b64encode(b"\x01\x02").decode()}},
            {"key": "empty", "value": {}},
        ],
        "links": [{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "53995c3f42cd8ad8"}],
        "events": [{"name": "e", "timeUnixNano": "5"}],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    (decoded,) = spans_from_request(parse_request(body, "application/json; charset=utf-8"))
    assert dict(decoded.attributes or {}) == {"map": {"a": True}, "raw": b"\x01\x02", "empty": None}
    assert decoded.parent is not None and decoded.parent.is_remote and decoded.parent.span_id == 0x00F067AA0BA902B7
    assert decoded.links[0].context.span_id == 0x53995C3F42CD8AD8
    assert [(e.name, e.timestamp) for e in decoded.events] == [("e", 5)]


def test_empty_request_is_fine_and_zero_ids_are_not() -> None:
    assert spans_from_request(parse_request(b"", "application/x-protobuf")) == []
    zero = {"traceId": "0" * 32, "spanId": "b7ad6b7169203331", "name": "x"}
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [zero]}]}]}).encode()
    with pytest.raises(PayloadError, match=r"spans\[0\]: trace_id is all zeros"):
        spans_from_request(parse_request(body, "application/json"))
