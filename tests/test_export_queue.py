"""The export queue in front of our exporters: no span lost from a burst the store absorbs, every loss counted."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal.export_queue import ATTRIBUTE_BYTES, SPAN_BYTES, ExportQueue, estimated_bytes
from evaltrace.exporters import LocalTraceStore


class GatedExporter(SpanExporter):
    """A real exporter that blocks until the test opens the gate (a backend slower than the application)."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS, wait_s: float = 10) -> None:
        self.gate = threading.Event()
        self.result = result
        self.received = 0
        self.wait_s = wait_s

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.wait(self.wait_s)
        self.received += len(spans)
        return self.result


def _tracer(queue: ExportQueue) -> tuple[TracerProvider, object]:
    provider = TracerProvider()
    provider.add_span_processor(queue)
    return provider, provider.get_tracer("test")


def test_overflow_is_counted_and_logged_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    exporter = GatedExporter()
    queue = ExportQueue(exporter, "slow", max_queue_size=10, max_batch_size=5, schedule_delay_s=0.05)
    provider, tracer = _tracer(queue)
    with caplog.at_level(logging.WARNING, logger="evaltrace.export"):
        for i in range(100):
            tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
        exporter.gate.set()
        # Everything queued went out: the processor's flush says so (the handle's flush reports the losses).
        assert queue.force_flush(10_000) is True
    assert queue.lost == queue.stats()["lost"] > 0
    stats = queue.stats()
    assert stats["received"] == 100
    assert stats["exported"] == exporter.received
    assert stats["dropped_queue_full"] == 100 - exporter.received > 0
    assert stats["lost"] == stats["dropped_queue_full"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # one when the episode starts, one when it is over, not one per span
    assert "slow" in warnings[0] and "queue full" in warnings[0]
    assert f"{stats['dropped_queue_full']} span(s) lost" in warnings[1]
    provider.shutdown()


def test_exporter_failure_and_spans_after_shutdown_are_counted() -> None:
    exporter = GatedExporter(SpanExportResult.FAILURE)
    exporter.gate.set()
    queue = ExportQueue(exporter, "broken", schedule_delay_s=0.05)
    provider, tracer = _tracer(queue)
    for i in range(7):
        tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
    queue.force_flush(5_000)
    queue.shutdown(5_000)
    tracer.start_span("late").end()  # type: ignore[attr-defined]
    stats = queue.stats()
    assert (stats["export_failed"], stats["dropped_shutdown"], stats["received"], stats["lost"]) == (7, 1, 8, 8)


def test_shutdown_counts_what_a_hung_exporter_never_took() -> None:
    exporter = GatedExporter()  # never opened: the backend hangs
    queue = ExportQueue(exporter, "hung", max_batch_size=2, schedule_delay_s=0.01)
    provider, tracer = _tracer(queue)
    for i in range(6):
        tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
    queue.shutdown(300)  # returns at its deadline, not when the backend answers
    stats = queue.stats()
    assert stats["received"] == 6
    assert stats["exported"] + stats["dropped_shutdown"] + stats["queued"] == 6
    assert stats["dropped_shutdown"] >= 4  # at most one batch was in flight
    exporter.gate.set()


def test_a_burst_the_local_store_absorbs_loses_no_span(tmp_path: Path) -> None:
    # Default configuration (local store, evaluation processor on): 40,000 decorated calls from 4 threads as fast
    # as they go, with payloads the size of a typical captured output: about 2 s of work that the store writes in
    # about 2.5 s. The SDK's batch processor (queue 2,048) lost two thirds of this burst with nothing counted.
    handle = evaltrace.configure(service_name="burst", local_store=tmp_path, handle_sigterm=False)
    try:

        @evaltrace.trace
        def step(i: int) -> dict[str, object]:
            return {"i": i, "text": "some output text " * 50, "items": list(range(50))}

        def work() -> None:
            for i in range(10_000):
                step(i)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert handle.force_flush(60_000)
        exporters = handle.evaluation_processor.stats()["exporters"]
        assert exporters["local_store"]["lost"] == 0
        assert exporters["local_store"]["exported"] == 40_000
        assert LocalTraceStore(tmp_path).counts()["spans"] == 40_000
    finally:
        handle.shutdown()


def test_stats_and_metrics_report_export_losses() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    exporter.shutdown()  # a shut exporter answers FAILURE to every export
    handle = evaltrace.configure(
        service_name="m", local_store=False, exporters=[exporter], handle_sigterm=False,
        evaluation_options={"meter_provider": MeterProvider(metric_readers=[reader])},
    )  # fmt: skip
    try:
        with evaltrace.context(session_id="s"):
            tracer = handle.provider.get_tracer("t")
            for _ in range(3):
                tracer.start_span("x").end()
        handle.force_flush(5_000)
        assert handle.evaluation_processor.stats()["exporters"]["custom[0]"]["export_failed"] == 3
        data = reader.get_metrics_data()
        points = {
            (dict(p.attributes)["evaltrace.exporter"], dict(p.attributes)["evaltrace.export.outcome"]): p.value
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "evaltrace.export.spans"
            for p in m.data.data_points
        }
        assert points[("custom[0]", "export_failed")] == 3
    finally:
        handle.shutdown()


class BatchRecorder(SpanExporter):
    """Records each batch's size; the first export blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.gate.wait(10)
        self.sizes.append(len(spans))
        return SpanExportResult.SUCCESS


def test_spans_arriving_during_an_export_wait_for_a_full_batch_the_delay_or_a_flush() -> None:
    """A queue woken by a full batch exports full batches, not the trickle that arrived meanwhile in tiny ones."""
    exporter = BatchRecorder()
    queue = ExportQueue(exporter, "batches", max_queue_size=1000, max_batch_size=10, schedule_delay_s=60)
    provider, tracer = _tracer(queue)
    for i in range(10):
        tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
    assert exporter.entered.wait(10)  # the full batch is being exported
    for i in range(15):
        tracer.start_span(f"late{i}").end()  # type: ignore[attr-defined]
    exporter.gate.set()
    deadline = threading.Event()
    while len(exporter.sizes) < 2 and not deadline.wait(0.01):
        pass
    deadline.wait(0.2)  # time for a (wrong) export of the 5 left over
    assert exporter.sizes == [10, 10]  # the 5 left wait: no export of a few spans each
    assert queue.stats()["queued"] == 5
    assert queue.force_flush(5_000)
    assert exporter.sizes == [10, 10, 5] and queue.stats()["exported"] == 25
    provider.shutdown()


def test_a_partial_batch_goes_out_at_the_schedule_delay() -> None:
    exporter = BatchRecorder()
    exporter.gate.set()
    queue = ExportQueue(exporter, "delay", max_queue_size=1000, max_batch_size=10, schedule_delay_s=0.05)
    provider, tracer = _tracer(queue)
    for i in range(3):
        tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
    waited = threading.Event()
    while not exporter.sizes and not waited.wait(0.01):
        pass
    assert exporter.sizes == [3]
    provider.shutdown()


PROMPT = "p" * 30_000  # a 30 kB prompt, as in the app of issue 24 that reached 2.95 GB


@pytest.mark.parametrize("setting", ["argument", "environment"])
def test_the_queue_is_bounded_by_bytes_and_its_drops_are_counted_and_reported(
    setting: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bound = 2_000_000
    exporter = GatedExporter(wait_s=120)  # the backend is stuck: everything the app ends piles up in the queue
    options: dict[str, object] = {"export_queue_max_bytes": bound}
    if setting == "environment":
        monkeypatch.setenv("EVALTRACE_EXPORT_QUEUE_MAX_BYTES", "2MB")
        options = {}
    handle = evaltrace.configure(
        service_name="bytes", local_store=False, exporters=[exporter], handle_sigterm=False, **options
    )  # type: ignore[arg-type]
    try:
        tracer = handle.provider.get_tracer("t")
        highest = 0
        with caplog.at_level(logging.WARNING, logger="evaltrace.export"):
            for i in range(300):
                with tracer.start_as_current_span(f"chat {i}", attributes={"input.value": PROMPT}) as span:
                    span.add_event("gen_ai.user.message", {"content": PROMPT})
                highest = max(highest, handle.evaluation_processor.stats()["exporters"]["custom[0]"]["queued_bytes"])
        stats = handle.evaluation_processor.stats()["exporters"]["custom[0]"]
        assert 0 < highest <= bound  # resident spans (queued and in flight) never passed the bound
        # Each span holds ~60 kB: about 33 fit. A bound blind to the payload would have held all 300 (~600 kB).
        assert stats["received"] == 300
        assert stats["dropped_queue_bytes"] >= 300 - bound // 60_000
        assert stats["dropped_queue_full"] == 0 and stats["lost"] == stats["dropped_queue_bytes"]
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1 and "export_queue_max_bytes" in warnings[0] and "custom[0]" in warnings[0]
        exporter.gate.set()
        assert handle.force_flush(10_000) is False  # what was queued went out, but spans were lost
        stats = handle.evaluation_processor.stats()["exporters"]["custom[0]"]
        assert stats["exported"] == exporter.received == 300 - stats["dropped_queue_bytes"]
        assert stats["queued_bytes"] == 0 and stats["queued"] == 0
        assert handle.force_flush(10_000)  # nothing lost since
    finally:
        exporter.gate.set()
        handle.shutdown()


def test_a_bad_byte_bound_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(evaltrace.ConfigError, match="export_queue_max_bytes.*a size such as"):
        evaltrace.configure(local_store=False, handle_sigterm=False, export_queue_max_bytes="lots")
    monkeypatch.setenv("EVALTRACE_EXPORT_QUEUE_MAX_BYTES", "-5MB")
    with pytest.raises(evaltrace.ConfigError, match="EVALTRACE_EXPORT_QUEUE_MAX_BYTES"):
        evaltrace.configure(local_store=False, handle_sigterm=False)


def test_byte_drops_are_an_outcome_of_the_export_metric() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    exporter = GatedExporter(wait_s=120)
    handle = evaltrace.configure(
        service_name="m", local_store=False, exporters=[exporter], handle_sigterm=False,
        export_queue_max_bytes=100_000, evaluation_options={"meter_provider": MeterProvider(metric_readers=[reader])},
    )  # fmt: skip
    try:
        tracer = handle.provider.get_tracer("t")
        for _ in range(10):
            tracer.start_span("x", attributes={"input.value": PROMPT}).end()
        dropped = handle.evaluation_processor.stats()["exporters"]["custom[0]"]["dropped_queue_bytes"]
        assert dropped >= 7
        points = {
            dict(p.attributes)["evaltrace.export.outcome"]: p.value
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "evaltrace.export.spans"
            for p in m.data.data_points
        }
        assert points["dropped_queue_bytes"] == dropped
    finally:
        exporter.gate.set()
        handle.shutdown()


@pytest.mark.parametrize("batch", [True, False], ids=["batched", "synchronous"])
def test_force_flush_says_false_when_spans_were_lost_since_the_previous_flush(batch: bool) -> None:
    # With batch=False the SDK's SimpleSpanProcessor ignored a FAILURE: no count, and every flush said True.
    exporter = GatedExporter(SpanExportResult.FAILURE)  # the backend refuses: every span of the batch is lost
    exporter.gate.set()
    handle = evaltrace.configure(
        service_name="f", local_store=False, exporters=[exporter], handle_sigterm=False, batch=batch
    )
    try:
        tracer = handle.provider.get_tracer("t")
        for i in range(3):
            tracer.start_span(f"refused {i}").end()
        assert handle.force_flush(10_000) is False  # nothing is left queued, but nothing got through either
        assert handle.evaluation_processor.stats()["exporters"]["custom[0]"]["export_failed"] == 3
        exporter.result = SpanExportResult.SUCCESS  # the backend is back
        tracer.start_span("accepted").end()
        assert handle.force_flush(10_000) is True  # nothing lost since the previous flush
    finally:
        handle.shutdown()


class _RacingDeque(collections.deque):  # type: ignore[type-arg]
    """The queue as the worker sees it when a timed-out shutdown empties it between the worker's len() and popleft()."""

    def __init__(self, worker_name: str) -> None:
        super().__init__()
        self.worker_name = worker_name
        self.raced = threading.Event()
        self.lies = 2  # the worker's first look at a non-empty queue (its loop test, its batch size) is stale

    def __len__(self) -> int:
        real = super().__len__()
        if real and threading.current_thread().name == self.worker_name and self.lies:
            self.lies -= 1
            if not self.lies:
                self.raced.set()
            return real + 3  # counted before the shutdown's pops: three of these spans are gone by popleft()
        return real


def test_the_worker_survives_a_shutdown_popping_the_queue_under_it_and_every_span_stays_counted() -> None:
    exporter = GatedExporter()
    exporter.gate.set()
    queue = ExportQueue(exporter, "raced", max_batch_size=100, schedule_delay_s=0.05)
    racing = _RacingDeque("evaltrace-export-raced")
    queue._queue = racing
    provider, tracer = _tracer(queue)
    for i in range(4):
        tracer.start_span(f"s{i}").end()  # type: ignore[attr-defined]
    assert racing.raced.wait(30)
    assert queue.force_flush(30_000)  # the worker is alive and drained the queue
    assert queue._thread is not None and queue._thread.is_alive()
    tracer.start_span("later").end()  # type: ignore[attr-defined]
    assert queue.force_flush(30_000)
    stats = queue.stats()
    assert (stats["received"], stats["exported"], stats["queued"], stats["lost"]) == (5, 5, 0, 0)
    queue.shutdown(5_000)


def test_the_size_estimate_of_a_long_list_attribute_reads_its_first_items_only() -> None:
    # Span end stays O(1): a list of 100,000 strings is estimated from its first 16 (their average times its length).
    provider = TracerProvider()
    tracer = provider.get_tracer("t")
    span = tracer.start_span("long list")
    span.set_attribute("documents", ["x" * 100] * 16 + [""] * 99_984)
    span.end()
    short = tracer.start_span("short list")
    short.set_attribute("documents", ["x" * 100, ""])
    short.end()
    assert estimated_bytes(span) == SPAN_BYTES + ATTRIBUTE_BYTES + 100 * 100_000  # not the exact 1,600
    assert estimated_bytes(short) == SPAN_BYTES + ATTRIBUTE_BYTES + 100  # short lists are counted exactly


def test_a_loss_leaves_the_providers_flush_to_the_applications_own_processors_and_is_reported_by_the_handle() -> None:
    # On SDK 1.30 a provider's force_flush stops at the first processor saying False: after one lost span, the
    # application's own processors added after ours were never flushed by provider.force_flush() again.
    provider = TracerProvider()
    refusing = GatedExporter(SpanExportResult.FAILURE)
    refusing.gate.set()
    handle = evaltrace.configure(
        service_name="f", local_store=False, exporters=[refusing], handle_sigterm=False, tracer_provider=provider
    )
    mine = InMemorySpanExporter()
    provider.add_span_processor(BatchSpanProcessor(mine, schedule_delay_millis=600_000))  # the app's, after ours
    try:
        tracer = provider.get_tracer("t")
        tracer.start_span("refused by our backend").end()
        assert provider.force_flush(30_000) is True  # every processor flushed in time: what the provider asks
        assert [s.name for s in mine.get_finished_spans()] == ["refused by our backend"]
        tracer.start_span("second").end()
        assert provider.force_flush(30_000) is True
        assert len(mine.get_finished_spans()) == 2
        # The provider's flushes did not consume the losses: the handle's flush still reports them.
        assert handle.force_flush(30_000) is False
        assert handle.evaluation_processor.stats()["exporters"]["custom[0]"]["export_failed"] == 2
        assert handle.force_flush(30_000) is True  # nothing lost since the handle's previous flush
    finally:
        handle.shutdown()


def test_a_flush_of_the_provider_does_not_consume_a_loss_the_handles_flush_has_not_reported() -> None:
    # An instrumentation (or another thread) flushing the provider used to reset the "lost since" marker.
    refusing = GatedExporter(SpanExportResult.FAILURE)
    refusing.gate.set()
    handle = evaltrace.configure(service_name="f", local_store=False, exporters=[refusing], handle_sigterm=False)
    try:
        handle.provider.get_tracer("t").start_span("refused").end()
        handle.provider.force_flush(30_000)  # someone else's flush, first
        handle.provider.force_flush(30_000)
        assert handle.force_flush(30_000) is False  # the user's flush still hears of the loss
        assert handle.force_flush(30_000) is True
    finally:
        handle.shutdown()


def _reference_bytes(attributes: dict[str, object]) -> int:
    """The estimate's rule written plainly: per attribute a fixed cost, plus its string's length, or per item of a
    sequence (16 at most read) its string's length or 8."""
    size = 0
    for value in attributes.values():
        size += ATTRIBUTE_BYTES
        if type(value) is str:
            size += len(value)
        elif type(value) in (tuple, list):
            items = list(value)  # type: ignore[call-overload]
            sampled = sum(len(i) if type(i) is str else 8 for i in items[:16])
            size += sampled if len(items) <= 16 else sampled * len(items) // 16
    return size


class _Text(str):
    """A str subclass: the estimate counts only exact strings, as it always did."""


@pytest.mark.parametrize(
    "attributes",
    [
        {"a": "x" * 10, "n": 3, "f": 1.5, "b": True},
        {"reasons": ("stop", "length"), "ids": (1, 2, 3), "text": "héllo", "flags": (True,)},
        {"docs": ["a" * 40] * 20, "more": ["b", "cc"], "s": ""},
        {"n": 1, "f": 2.0},
        {"sub": _Text("subclass"), "plain": "abc", "t": ("x",)},
    ],
    ids=["scalars", "tuples", "lists", "no-strings", "str-subclass"],
)
def test_the_size_estimate_counts_every_string_whatever_the_mix_of_value_types(attributes: dict[str, object]) -> None:
    # The common case is summed in C (exact value types only); a subclass takes the per-value loop: both give the
    # figure of the plain rule, on a span ended through the real SDK and on a plain dict of attributes.
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("mixed")
    for key, value in attributes.items():
        span.set_attribute(key, value)  # type: ignore[arg-type]
    span.end()
    stored = dict(span.attributes or {})
    assert estimated_bytes(span) == SPAN_BYTES + _reference_bytes(stored)
    ended = ReadableSpan(name="plain", attributes=attributes)  # type: ignore[arg-type]
    assert estimated_bytes(ended) == SPAN_BYTES + _reference_bytes(attributes)


class _RecordOnlyByName:
    """A real SDK sampler: records every span, samples only those not named ``unsampled*`` (RECORD_ONLY)."""

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None):  # type: ignore[no-untyped-def]
        from opentelemetry.sdk.trace.sampling import Decision, SamplingResult

        decision = Decision.RECORD_ONLY if name.startswith("unsampled") else Decision.RECORD_AND_SAMPLE
        return SamplingResult(decision, attributes)

    def get_description(self) -> str:
        return "record-only by name"


class _OwnContext(ReadableSpan):
    """A span class whose ``context`` is its own property (not the SDK's ``_context`` field): the queue asks it."""

    def __init__(self, name: str, shown: object) -> None:
        from opentelemetry.trace import SpanContext, TraceFlags

        super().__init__(name=name, context=SpanContext(1, 2, False, TraceFlags(TraceFlags.SAMPLED)))
        self.shown = shown

    @property
    def context(self):  # type: ignore[no-untyped-def,override]
        return self.shown


@pytest.mark.parametrize("batch", [True, False], ids=["queued", "synchronous"])
def test_a_recorded_but_unsampled_span_is_never_exported_whatever_its_class(batch: bool) -> None:
    # The SDK's spans have their flag read off the context tuple (no property calls); any other class is asked
    # through its ``context``: both keep a RECORD_ONLY span out, and neither counts it as received.
    from opentelemetry.sdk.trace import _Span
    from opentelemetry.trace import SpanContext, TraceFlags

    from evaltrace._internal.deferred_attributes import DIRECT_CONTEXT_TYPES

    assert {ReadableSpan, _Span} <= DIRECT_CONTEXT_TYPES  # the fast read is what runs on this SDK
    exporter = InMemorySpanExporter()
    queue = ExportQueue(exporter, "memory", synchronous=not batch, schedule_delay_s=0.05)
    provider = TracerProvider(sampler=_RecordOnlyByName())  # type: ignore[arg-type]
    provider.add_span_processor(queue)
    tracer = provider.get_tracer("t")
    tracer.start_span("unsampled").end()
    tracer.start_span("sampled").end()
    unsampled, sampled = (SpanContext(3, 4, False, TraceFlags(flags)) for flags in (0, TraceFlags.SAMPLED))
    queue.on_end(ReadableSpan(name="unsampled plain", context=unsampled))
    queue.on_end(ReadableSpan(name="plain", context=sampled))
    queue.on_end(ReadableSpan(name="no context"))  # none to say it is unsampled: exported
    queue.on_end(_OwnContext("unsampled by its property", unsampled))  # its _context says sampled: not read
    queue.on_end(_OwnContext("sampled by its property", sampled))
    assert queue.force_flush(10_000)
    assert sorted(s.name for s in exporter.get_finished_spans()) == sorted(
        ["sampled", "plain", "no context", "sampled by its property"]
    )
    assert queue.stats()["received"] == queue.stats()["exported"] == 4
    queue.shutdown(5_000)
