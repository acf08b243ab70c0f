"""A distributed trace in ``evaltrace worker``: spans of one trace from two services, in two OTLP/HTTP requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags
from otlp_receivers import poll

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace
from evaltrace.worker import EvaluationWorker

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
FLAGS = TraceFlags(TraceFlags.SAMPLED)
SEEN: list[Trace] = []


@evaluator(name="whole_trace")
def whole_trace(trace: Trace) -> bool:
    SEEN.append(trace)
    return True


def _span(service: str, name: str, span_id: int, parent: int | None, *, remote: bool = False) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE_ID, span_id, False, FLAGS),
        parent=SpanContext(TRACE_ID, parent, remote, FLAGS) if parent is not None else None,
        resource=Resource({"service.name": service}),
        attributes={semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM, "gen_ai.usage.input_tokens": 5}
        if name.startswith("chat")
        else {semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT},
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_001_000_000_000,
    )


@pytest.fixture(params=[{}])
def worker(request: pytest.FixtureRequest) -> Iterator[tuple[EvaluationWorker, InMemorySpanExporter]]:
    SEEN.clear()
    exported = InMemorySpanExporter()
    options: dict[str, Any] = {"dead_letter_dir": None, "emit_log_events": False, "trace_quiet_period_s": 0.2}
    options.update(request.param)
    with EvaluationWorker(
        [EvaluatorSpec(whole_trace, trace_level=True)], [], [exported], port=0, grpc_port=None, batch=False,
        evaluation_options=options,
    ) as running:  # fmt: skip
        yield running, exported


def _send(url: str, spans: list[ReadableSpan]) -> None:
    sender = HttpExporter(endpoint=url + "/v1/traces")
    assert sender.export(spans) is SpanExportResult.SUCCESS
    sender.shutdown()


def test_a_trace_from_two_services_is_evaluated_once_with_all_its_spans(
    worker: tuple[EvaluationWorker, InMemorySpanExporter],
) -> None:
    running, exported = worker
    # Service "tools" (called by the gateway): its entry span has a remote parent; it is not the trace's root.
    entry = _span("tools", "handle search", 0x11, 0x01, remote=True)
    _send(running.url, [_span("tools", "chat inner", 0x12, 0x11), entry])
    # Service "gateway" sends last, with the true root (no parent).
    _send(running.url, [_span("gateway", "chat outer", 0x02, 0x01), _span("gateway", "invoke_agent", 0x01, None)])
    evaluated = poll(lambda: [s for s in exported.get_finished_spans() if s.name == "evaluation whole_trace"])
    assert running.force_flush(10_000)
    assert len(SEEN) == 1  # once for the trace, not once per service entry span
    assert SEEN[0].metrics.token_input == 10  # both services' LLM spans
    (child,) = evaluated
    assert child.parent is not None and child.parent.span_id == 0x01
    assert child.attributes is not None and child.attributes["evaltrace.evaluation.revision"] == 1
    assert len([s for s in exported.get_finished_spans() if s.name != "evaluation whole_trace"]) == 4


def test_a_trace_whose_root_never_arrives_is_counted_incomplete(
    worker: tuple[EvaluationWorker, InMemorySpanExporter],
) -> None:
    running, exported = worker
    _send(
        running.url,
        [_span("tools", "chat inner", 0x12, 0x11), _span("tools", "handle search", 0x11, 0x01, remote=True)],
    )
    poll(lambda: len(exported.get_finished_spans()) == 2)
    running.pipeline.shutdown(5_000)  # what stopping the worker does: an open trace without its root
    stats = running.pipeline.stats()["evaluation"]
    assert SEEN == [] and stats["not_evaluated_by_reason"] == {"trace_incomplete": 1}


def _one_trace() -> list[ReadableSpan]:
    return [_span("gateway", "chat outer", 0x02, 0x01), _span("gateway", "invoke_agent", 0x01, None)]


def test_a_re_sent_request_is_not_evaluated_again(worker: tuple[EvaluationWorker, InMemorySpanExporter]) -> None:
    running, exported = worker
    _send(running.url, _one_trace())
    poll(lambda: [s for s in exported.get_finished_spans() if s.name == "evaluation whole_trace"])
    _send(running.url, _one_trace())  # the client's retry after a lost response: the same spans again
    assert running.force_flush(10_000)
    assert len(SEEN) == 1 and len([s for s in exported.get_finished_spans() if s.name.startswith("evaluation")]) == 1
    stats = running.pipeline.stats()["evaluation"]
    assert stats["completion"]["duplicate_spans"] == 2 and stats["completion"]["reopened"] == 0


@pytest.mark.parametrize("worker", [{"trace_late_window_s": 0}], indirect=True)
def test_spans_after_the_late_window_are_forwarded_never_judged_or_counted_incomplete(
    worker: tuple[EvaluationWorker, InMemorySpanExporter],
) -> None:
    running, exported = worker
    _send(running.url, _one_trace())
    poll(lambda: [s for s in exported.get_finished_spans() if s.name == "evaluation whole_trace"])
    _send(running.url, [_span("tools", "chat straggler", 0x13, 0x02)])  # after the (zero) late window
    _send(running.url, [_span("gateway", "invoke_agent", 0x01, None)])  # the root re-sent by an exporter retry
    poll(lambda: len(exported.get_finished_spans()) == 5)
    running.pipeline.shutdown(5_000)
    stats = running.pipeline.stats()["evaluation"]
    assert len(SEEN) == 1 and stats["not_evaluated_by_reason"] == {}  # no root-only verdict, nothing incomplete
    assert stats["completion"]["late_after_window"] == 2 and stats["completion"]["open_traces"] == 0
