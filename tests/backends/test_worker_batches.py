"""``evaltrace worker`` accepts what the OpenTelemetry Collector sends: batches of 8,192 spans and more.

The collector's batch processor sends up to 8,192 spans per request by default (more without
``send_batch_max_size``). The worker used to refuse any request of more than 4,096 spans with 503, for ever,
even idle. Work in flight is bounded by bytes now: an idle worker takes a request of any size (up to the body
limit) alone, and answers 503 + ``Retry-After`` only while the budget is in use, until it is given back.
"""

from __future__ import annotations

import threading
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from otlp_receivers import poll

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, ExportSampling, evaluator
from evaltrace.worker import EvaluationWorker
from evaltrace.worker.decode import spans_from_request
from evaltrace.worker.limits import ReceiverLimits
from evaltrace.worker.pipeline import WorkerPipeline

PROTOBUF = {"Content-Type": "application/x-protobuf"}
# Every span waits for its verdict, however loaded the machine (no unenriched span with a late evaluation span).
OPTIONS = {"dead_letter_dir": None, "emit_log_events": False, "hold_timeout_s": 600.0, "evaluator_timeout_s": 300.0}
KIB = 1024


@evaluator(name="answered")
def answered(trace: Any) -> bool:
    return bool(trace.output.final_answer)


def collector_batch(spans: int, first_trace: int = 1) -> bytes:
    """One OTLP/HTTP protobuf request of ``spans`` LLM spans, one per trace (the SDK's own encoder)."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    resource = Resource({"service.name": "behind-a-collector"})
    batch = [
        ReadableSpan(
            name="chat gpt-4o-mini",
            context=SpanContext(first_trace + index, index + 1, False, flags),
            resource=resource,
            attributes={semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM, semconv.OUTPUT_VALUE: "It is sunny."},
            kind=SpanKind.CLIENT,
            start_time=1_700_000_000_000_000_000,
            end_time=1_700_000_000_500_000_000,
        )
        for index in range(spans)
    ]
    return encode_spans(batch).SerializeToString()


@pytest.mark.parametrize("spans", [8192, 20_000])
def test_an_idle_worker_accepts_a_collector_batch_and_evaluates_and_forwards_every_span(spans: int) -> None:
    exported = InMemorySpanExporter()
    spec = EvaluatorSpec(answered, span_kinds={semconv.KIND_LLM})
    with EvaluationWorker([spec], [], [exported], port=0, evaluation_options=OPTIONS) as worker:
        response = httpx.post(worker.url + "/v1/traces", content=collector_batch(spans), headers=PROTOBUF, timeout=120)
        assert response.status_code == 200, response.text
        poll(lambda: len(exported.get_finished_spans()) >= spans, timeout=300)
        assert worker.force_flush(60_000)
        forwarded = exported.get_finished_spans()
        stats = worker.stats()
    assert len({s.context.span_id for s in forwarded if s.context is not None}) == spans == len(forwarded)
    assert all((s.attributes or {}).get("evaltrace.eval.answered.passed") is True for s in forwarded)
    assert stats["accepted_spans"] == spans and stats["refused_spans"] == 0
    assert (stats["inflight"], stats["inflight_bytes"], stats["undelivered_spans"]) == (0, 0, 0)


def test_over_grpc_as_the_loadbalancing_exporter_sends_an_idle_worker_accepts_a_collector_batch() -> None:
    exported = InMemorySpanExporter()
    spec = EvaluatorSpec(answered, span_kinds={semconv.KIND_LLM})
    request = ExportTraceServiceRequest.FromString(collector_batch(8192))
    with EvaluationWorker([spec], [], [exported], port=0, grpc_port=0, evaluation_options=OPTIONS) as worker:
        assert worker.grpc is not None
        with grpc.insecure_channel(f"127.0.0.1:{worker.grpc.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            stub.Export(request, timeout=120)  # raises on any status but OK
        poll(lambda: len(exported.get_finished_spans()) >= 8192, timeout=300)
        stats = worker.stats()
    assert stats["accepted_spans"] == 8192 and stats["refused_spans"] == 0
    assert all(
        (s.attributes or {}).get("evaltrace.eval.answered.passed") is True for s in exported.get_finished_spans()
    )


def test_a_request_over_the_whole_budget_is_taken_alone_and_a_busy_worker_answers_503_until_it_is_done() -> None:
    release = threading.Event()

    @evaluator(name="held")
    def held(trace: Any) -> bool:
        return release.wait(60)

    exported = InMemorySpanExporter()
    spec = EvaluatorSpec(held, span_kinds={semconv.KIND_LLM})
    limits = ReceiverLimits(max_inflight_bytes=64 * KIB)
    first, second = collector_batch(8192), collector_batch(10, first_trace=100_000)
    assert len(first) > 4 * limits.max_inflight_bytes  # the request alone is far over the budget
    with EvaluationWorker(
        [spec], [], [exported], port=0, grpc_port=None, retry_after_s=2, limits=limits, evaluation_options=OPTIONS
    ) as worker:  # fmt: skip
        url = worker.url + "/v1/traces"
        with httpx.Client(timeout=120) as client:
            assert client.post(url, content=first, headers=PROTOBUF).status_code == 200  # idle: taken alone
            busy = client.post(url, content=second, headers=PROTOBUF)  # its spans are held: the budget is in use
            assert (busy.status_code, busy.headers.get("Retry-After")) == (503, "2"), busy.text
            assert "memory budget" in busy.text
            assert worker.stats()["inflight_bytes"] >= len(first) // 2
            release.set()
            poll(lambda: worker.stats()["inflight_bytes"] == 0, timeout=300)  # exported: the budget is given back
            assert client.post(url, content=second, headers=PROTOBUF).status_code == 200  # the retry succeeds
        poll(lambda: len(exported.get_finished_spans()) == 8192 + 10, timeout=120)
        assert worker.stats()["refused_spans"] == 0  # refused while reading, before any span was admitted


def test_the_optional_span_cap_also_takes_a_larger_request_alone_and_evaluates_all_of_it() -> None:
    exported = InMemorySpanExporter()
    spec = EvaluatorSpec(answered, span_kinds={semconv.KIND_LLM})
    with EvaluationWorker(
        [spec], [], [exported], port=0, max_inflight_spans=10, evaluation_options=OPTIONS
    ) as worker:  # fmt: skip
        response = httpx.post(worker.url + "/v1/traces", content=collector_batch(50), headers=PROTOBUF, timeout=60)
        assert response.status_code == 200, response.text
        poll(lambda: len(exported.get_finished_spans()) >= 50, timeout=120)
        stats = worker.stats()
    assert all(
        (s.attributes or {}).get("evaltrace.eval.answered.passed") is True for s in exported.get_finished_spans()
    )
    assert stats["evaluation"]["dropped"] == 0  # none forwarded unevaluated for a full evaluation queue


def test_spans_export_sampling_discards_free_the_budget_at_once_and_are_not_undelivered() -> None:
    exported = InMemorySpanExporter()
    spec = EvaluatorSpec(answered, span_kinds={semconv.KIND_LLM})
    options = {**OPTIONS, "export_sampling": ExportSampling(keep_rate=0.0)}  # every passing trace is discarded
    limits = ReceiverLimits(max_inflight_bytes=64 * KIB)
    first, second = collector_batch(50), collector_batch(50, first_trace=1000)
    with EvaluationWorker(
        [spec], [], [exported], port=0, grpc_port=None, limits=limits, evaluation_options=options
    ) as worker:  # fmt: skip
        url = worker.url + "/v1/traces"
        with httpx.Client(timeout=60) as client:
            assert client.post(url, content=first, headers=PROTOBUF).status_code == 200
            poll(lambda: discarded(worker) == 50, timeout=120)
            # The discarded spans are done with: nothing in flight, the budget free, the next request taken.
            assert worker.pipeline.wait_idle(60)
            stats = worker.stats()
            assert (stats["inflight"], stats["inflight_bytes"], stats["undelivered_spans"]) == (0, 0, 0)
            assert stats["sampled_out_spans"] == 50
            assert client.post(url, content=second, headers=PROTOBUF).status_code == 200
        poll(lambda: discarded(worker) == 100, timeout=120)
        assert worker.pipeline.wait_idle(60)
        stats = worker.stats()
    assert (stats["sampled_out_spans"], stats["undelivered_spans"], stats["inflight_bytes"]) == (100, 0, 0)
    assert exported.get_finished_spans() == ()


def discarded(worker: EvaluationWorker) -> int:
    return int(worker.stats()["evaluation"]["export_sampling"]["discarded_spans"])


class SecondExportWaits(SpanExporter):
    """Exports at once, except the second call, which waits until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Any) -> SpanExportResult:
        self.calls += 1
        if self.calls == 2:
            self.waiting.set()
            self.release.wait(60)
        return SpanExportResult.SUCCESS


def test_a_span_twice_in_one_request_holds_its_bytes_until_both_copies_are_exported() -> None:
    exporter = SecondExportWaits()
    pipeline = WorkerPipeline([], exporters=[exporter], batch=False, evaluation_options=OPTIONS)
    request = ExportTraceServiceRequest.FromString(collector_batch(1))
    (span,) = spans_from_request(request)
    try:
        with pipeline.budget.reservation() as reservation:
            reservation.grow(1000)
            submitting = threading.Thread(target=pipeline.submit, args=([span, span], reservation, 1000))
            submitting.start()
            assert exporter.waiting.wait(60)  # the first copy is exported, the second is being exported
            # Still in flight: the second copy's export holds the span's bytes until it is done.
            assert (pipeline.inflight, pipeline.budget.used) == (1, 1000)
            exporter.release.set()
            submitting.join(60)
        assert (pipeline.inflight, pipeline.budget.used, pipeline.undelivered()) == (0, 0, 0)
    finally:
        exporter.release.set()
        pipeline.shutdown(5000)
