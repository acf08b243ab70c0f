"""``evaltrace worker`` end to end over real sockets on 127.0.0.1: OTLP in, enriched spans and scores out."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from otlp_receivers import poll

import evaltrace
from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.schema import Score
from evaltrace.worker import EvaluationWorker

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
ROOT_ID = 0x00F067AA0BA902B7
CHILD_ID = 0x53995C3F42CD8AD8


@evaluator(name="answered")
def answered(trace: Any) -> bool:
    return bool(trace.output.final_answer)


def make_spans() -> list[ReadableSpan]:
    """A root and a child carrying every AnyValue kind, events, a link, an error status and a scope."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    root_ctx = SpanContext(TRACE_ID, ROOT_ID, False, flags)
    child_ctx = SpanContext(TRACE_ID, CHILD_ID, False, flags)
    resource = Resource({"service.name": "remote-app", "deployment.environment.name": "test"})
    scope = InstrumentationScope("remote.scope", "1.2.3", None, {"scope.attr": "x"})
    child = ReadableSpan(
        name="chat gpt-4o-mini",
        context=child_ctx,
        parent=root_ctx,
        resource=resource,
        attributes={
            "str": "s",
            "bool": True,
            "int": 42,
            "double": 0.5,
            "bytes": b"\x00\x01",
            "ints": (1, 2, 3),
            "mixed": ("a", 1, None),
            "map": {"k": "v", "nested": {"n": 1}},
            semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM,
        },
        events=[Event("token", {"index": 1}, timestamp=1_700_000_000_500_000_000)],
        links=[Link(SpanContext(0xABC, 0xDEF, False, flags), {"link.attr": "l"})],
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, "rate limited"),
        start_time=1_700_000_000_100_000_000,
        end_time=1_700_000_000_900_000_000,
        instrumentation_scope=scope,
    )
    root = ReadableSpan(
        name="invoke_agent remote",
        context=root_ctx,
        resource=resource,
        attributes={semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT, semconv.OUTPUT_VALUE: "It is sunny."},
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK),
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_001_000_000_000,
        instrumentation_scope=scope,
    )
    return [child, root]


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def worker(exported: InMemorySpanExporter, tmp_path: Path) -> Iterator[EvaluationWorker]:
    spec = EvaluatorSpec(answered, span_kinds={semconv.KIND_AGENT})
    options = {"dead_letter_dir": None, "sink_schedule_delay_s": 0.05, "emit_log_events": False}
    with EvaluationWorker(
        [spec], [JsonlScoreSink(tmp_path / "scores.jsonl")], [exported], port=0, grpc_port=0, batch=False,
        evaluation_options=options,
    ) as running:  # fmt: skip
        yield running


def read_scores(path: Path) -> list[Score]:
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[
        : text.rfind("\n") + 1
    ]  # polled while the worker writes: a last line without its newline is unfinished
    return [Score.model_validate_json(line) for line in complete.splitlines() if line.strip()]


def by_id(exporter: InMemorySpanExporter) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in exporter.get_finished_spans() if s.context is not None}


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_spans_round_trip_and_get_enriched_and_scored(
    transport: str, worker: EvaluationWorker, exported: InMemorySpanExporter, tmp_path: Path
) -> None:
    assert worker.grpc is not None
    sender = HttpExporter(endpoint=worker.url + "/v1/traces") if transport == "http" else GrpcExporter(
        endpoint=worker.grpc.endpoint, insecure=True
    )  # fmt: skip
    assert sender.export(make_spans()) is SpanExportResult.SUCCESS
    sender.shutdown()
    spans = poll(lambda: (d := by_id(exported)) and len(d) == 2 and d)
    assert worker.force_flush(10_000)

    child, root = spans[CHILD_ID], spans[ROOT_ID]
    original = make_spans()[0]
    assert child.name == original.name and child.kind is SpanKind.CLIENT
    assert child.parent is not None and child.parent.span_id == ROOT_ID and not child.parent.is_remote
    assert child.context is not None and child.context.trace_id == TRACE_ID
    assert child.status.status_code is StatusCode.ERROR and child.status.description == "rate limited"
    assert (child.start_time, child.end_time) == (original.start_time, original.end_time)
    assert dict(child.attributes or {}) == {**dict(original.attributes or {}), "mixed": ("a", 1, None)}
    assert [(e.name, dict(e.attributes or {}), e.timestamp) for e in child.events] == [
        ("token", {"index": 1}, 1_700_000_000_500_000_000)
    ]
    (link,) = child.links
    assert (link.context.trace_id, link.context.span_id, dict(link.attributes or {})) == (
        0xABC,
        0xDEF,
        {"link.attr": "l"},
    )
    assert child.resource.attributes["service.name"] == "remote-app"
    scope = child.instrumentation_scope
    assert scope is not None and (scope.name, scope.version) == ("remote.scope", "1.2.3")
    assert dict(scope.attributes or {}) == {"scope.attr": "x"}
    assert child.events[-1].name != semconv.GEN_AI_EVALUATION_RESULT_EVENT  # not matched by the evaluator

    events = [e for e in root.events if e.name == semconv.GEN_AI_EVALUATION_RESULT_EVENT]
    assert [(e.attributes or {}).get(semconv.GEN_AI_EVALUATION_NAME) for e in events] == ["answered"]
    assert (root.attributes or {})["evaltrace.eval.answered.passed"] is True

    scores = poll(lambda: read_scores(tmp_path / "scores.jsonl"))
    assert [(s.name, s.trace_id, s.observation_id) for s in scores] == [
        ("answered", format(TRACE_ID, "032x"), format(ROOT_ID, "016x"))
    ]
    assert worker.stats()["accepted_spans"] == 2


def test_configure_in_an_app_feeds_the_worker(worker: EvaluationWorker, exported: InMemorySpanExporter) -> None:
    @evaltrace.agent(name="greeter")
    def greet(name: str) -> str:
        return f"hello {name}"

    handle = evaltrace.configure("app-behind-worker", otlp_endpoint=worker.url, local_store=False)
    try:
        assert greet("ada") == "hello ada"
        assert handle.force_flush()
    finally:
        handle.shutdown()
    (span,) = poll(lambda: exported.get_finished_spans())
    assert span.name == "invoke_agent greeter"
    assert span.resource.attributes["service.name"] == "app-behind-worker"
    assert (span.attributes or {})["evaltrace.eval.answered.passed"] is True


def post(worker: EvaluationWorker, body: bytes, **headers: str) -> httpx.Response:
    headers.setdefault("Content-Type", "application/x-protobuf")
    return httpx.post(worker.url + "/v1/traces", content=body, headers=headers, timeout=10)


def json_payload(span_id: str = "00f067aa0ba902b7") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-app"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "json"},
                        "spans": [
                            {
                                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                                "spanId": span_id,
                                "name": "json span",
                                "kind": 3,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000000500000000",
                                "attributes": [
                                    {"key": "n", "value": {"intValue": "7"}},
                                    {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
                                ],
                                "status": {"code": 2, "message": "boom"},
                            }
                        ],
                    }
                ],
            }
        ]
    }


def test_otlp_json_with_hex_ids_is_accepted(worker: EvaluationWorker, exported: InMemorySpanExporter) -> None:
    response = post(worker, json.dumps(json_payload()).encode(), **{"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    (span,) = poll(lambda: exported.get_finished_spans())
    assert span.context is not None
    assert (format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    assert dict(span.attributes or {}) == {"n": 7, "a": ("x",)}
    assert span.kind is SpanKind.CLIENT and span.status.description == "boom"


def proto_with_bad_span_id() -> bytes:
    bad = Span(trace_id=b"\x01" * 16, span_id=b"\x02\x03\x04", name="bad")
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[bad])])])
    return request.SerializeToString()


@pytest.mark.parametrize(
    ("body", "headers", "status", "reason"),
    [
        (b"\xff\xff\xff not protobuf", {}, 400, "not a protobuf ExportTraceServiceRequest"),
        (b"{not json", {"Content-Type": "application/json"}, 400, "not JSON"),
        (json.dumps(json_payload("zz")).encode(), {"Content-Type": "application/json"}, 400, "not hex"),
        (json.dumps([1]).encode(), {"Content-Type": "application/json"}, 400, "must be an object"),
        (proto_with_bad_span_id(), {}, 400, "span_id must be 8 bytes, got 3"),
        (b"plain", {"Content-Encoding": "gzip"}, 400, "not valid gzip"),
        # mtime=0: a gzip header holds its compression time, and a test id differing between the xdist workers that
        # collected it in different seconds fails the run ("Different tests were collected").
        (gzip.compress(b"x", mtime=0), {"Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
        (b"x", {"Content-Type": "text/plain"}, 415, "unsupported Content-Type"),
    ],
)
def test_bad_payloads_get_a_reason_and_the_worker_keeps_serving(
    worker: EvaluationWorker, body: bytes, headers: dict[str, str], status: int, reason: str
) -> None:
    response = post(worker, body, **headers)
    assert response.status_code == status
    assert reason in response.text  # google.rpc.Status: the message is readable in the protobuf or JSON body
    assert httpx.get(worker.url + "/healthz", timeout=5).json()["status"] == "ok"


def test_wrong_path_and_oversized_body(worker: EvaluationWorker) -> None:
    assert httpx.post(worker.url + "/v1/logs", content=b"", timeout=5).status_code == 404
    small = EvaluationWorker([], port=0, max_body_bytes=10, batch=False)
    with small:
        response = httpx.post(small.url + "/v1/traces", content=b"x" * 11, timeout=5)
        assert response.status_code == 413 and "exceeds" in response.text


def test_grpc_invalid_request_is_invalid_argument(worker: EvaluationWorker) -> None:
    assert worker.grpc is not None
    with grpc.insecure_channel(f"127.0.0.1:{worker.grpc.port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        request = ExportTraceServiceRequest.FromString(proto_with_bad_span_id())
        with pytest.raises(grpc.RpcError) as info:
            stub.Export(request, timeout=10)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "span_id must be 8 bytes" in (info.value.details() or "")


def test_full_queue_answers_503_with_retry_after_then_recovers(tmp_path: Path) -> None:
    release = threading.Event()

    @evaluator(name="slow")
    def slow(trace: Any) -> bool:
        return release.wait(20)

    exported = InMemorySpanExporter()
    options = {"hold_timeout_s": 30.0, "dead_letter_dir": None, "emit_log_events": False}
    with EvaluationWorker(
        [slow], [], [exported], port=0, grpc_port=0, max_inflight_spans=2, retry_after_s=3, batch=False,
        evaluation_options=options,
    ) as worker:  # fmt: skip
        sender = HttpExporter(endpoint=worker.url + "/v1/traces")
        assert sender.export(make_spans()) is SpanExportResult.SUCCESS  # 2 spans: now full
        body = ExportTraceServiceRequest.FromString(proto_for(make_spans())).SerializeToString()
        refused = post(worker, body)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "3"
        assert "queue full" in refused.text
        assert worker.grpc is not None
        with grpc.insecure_channel(f"127.0.0.1:{worker.grpc.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as info:
                stub.Export(ExportTraceServiceRequest.FromString(body), timeout=10)
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        assert exported.get_finished_spans() == ()  # held for their scores
        release.set()
        poll(lambda: worker.stats()["inflight"] == 0)
        assert post(worker, body).status_code == 200
        assert worker.stats()["refused_spans"] == 4
        sender.shutdown()


def proto_for(spans: list[ReadableSpan]) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans).SerializeToString()


def test_a_stopping_worker_answers_503_instead_of_accepting_what_it_can_no_longer_process(
    exported: InMemorySpanExporter,
) -> None:
    # Exporters keep their connection open between exports: a handler thread can outlive the listening socket.
    # Past the start of stop(), what arrives on such a connection must be refused (the sender retries
    # elsewhere), never acknowledged and then dropped by a pipeline that has shut down.
    worker = EvaluationWorker([], [], [exported], port=0, batch=False).start()
    body = proto_for(make_spans())
    headers = {"Content-Type": "application/x-protobuf"}
    with httpx.Client(timeout=5) as sender, httpx.Client(timeout=5) as probe:
        assert sender.post(worker.url + "/v1/traces", content=body, headers=headers).status_code == 200
        assert probe.get(worker.url + "/healthz").json()["status"] == "ok"
        worker.stop(5)
        late = sender.post(worker.url + "/v1/traces", content=body, headers=headers)
        health = probe.get(worker.url + "/healthz")
    assert (late.status_code, late.headers["retry-after"]) == (503, "1")
    assert "shutting down" in late.text
    assert (health.status_code, health.json()) == (503, {"status": "stopping"})
    assert len(exported.get_finished_spans()) == 2  # the accepted export, drained by stop()
    assert worker.stats()["accepted_spans"] == 2
