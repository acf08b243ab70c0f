"""Decorator spans without captured input start with their static attributes validated once (``SpanSpec.preset``).

What the SDK's per-span check gave must still hold: samplers that read attributes see them, ``on_start``
processors see them on the span being started, context stamps and user attributes land as before, and a value
the preset cannot hold (a sequence) takes the SDK's path. Real SDK providers, in-memory exporters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.context import ContextAttributesProcessor
from langfuse_observation import langfuse_observation_type


@pytest.fixture(autouse=True)
def capture_off() -> Iterator[None]:
    saved = settings.current
    settings.replace(settings.CaptureSettings(capture_content=False))
    yield
    settings.replace(saved)


class AttributesAtStart(SpanProcessor):
    """Records what ``span.attributes`` holds when each span starts."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen[span.name] = dict(span.attributes or {})


class KindSampler(Sampler):
    """Samples only tool spans, by their ``evaltrace.span.kind`` start attribute."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        sampled = (attributes or {}).get("evaltrace.span.kind") == "tool"
        return SamplingResult(Decision.RECORD_AND_SAMPLE if sampled else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "KindSampler"


def provider_with(*processors: SpanProcessor, sampler: Sampler | None = None) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        tracing.set_tracer_provider(previous)
        provider.shutdown()


def attributes_of(exporter: InMemorySpanExporter) -> dict[str, Mapping[str, Any]]:
    return {span.name: dict(span.attributes or {}) for span in exporter.get_finished_spans()}


def test_on_start_processors_see_the_static_attributes_of_the_span_being_started() -> None:
    recorder = AttributesAtStart()

    @evaltrace.tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    for exporter in provider_with(recorder):
        assert lookup("Paris") == "Paris"
        ended = attributes_of(exporter)["execute_tool lookup"]
    expected = {
        "evaltrace.span.kind": "tool",
        "langfuse.observation.type": "tool",
        "openinference.span.kind": "TOOL",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look a city up.",
    }
    assert recorder.seen["execute_tool lookup"] == expected
    assert ended == expected


def test_a_sampler_that_reads_attributes_gets_the_decorators_attributes() -> None:
    @evaltrace.tool
    def lookup(city: str) -> str:
        return city

    @evaltrace.trace
    def step(city: str) -> str:
        return city

    for exporter in provider_with(sampler=KindSampler()):
        assert lookup("Paris") == "Paris"
        assert step("Rome") == "Rome"
        names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["execute_tool lookup"]


def test_context_stamps_and_user_attributes_land_with_the_static_ones() -> None:
    @evaltrace.agent(name="helper", attributes={"team": "search", "tags": ("a", "b")})
    def helper(question: str) -> str:
        return question

    @evaltrace.trace(attributes={"tier": 2, "openinference.span.kind": "RETRIEVER"})
    def fetch(question: str) -> str:
        return question

    for exporter in provider_with(ContextAttributesProcessor()):  # stamps set in on_start, before the preset
        with evaltrace.context(session_id="s-1", user_id="u-1"):
            helper("q")
            fetch("q")
        spans = attributes_of(exporter)
    agent = spans["invoke_agent helper"]
    assert agent["evaltrace.span.kind"] == "agent"
    assert agent["team"] == "search"
    assert agent["tags"] == ("a", "b")  # a sequence: the SDK's own path, unchanged
    assert agent["session.id"] == "s-1"
    assert agent["user.id"] == "u-1"
    assert langfuse_observation_type(agent) == "agent"
    retriever = spans["fetch"]
    assert retriever["tier"] == 2
    assert retriever["session.id"] == "s-1"
    # The user replaced the OpenInference kind: Langfuse's own attribute, read first, still shows ours.
    assert retriever["openinference.span.kind"] == "RETRIEVER"
    assert retriever["langfuse.observation.type"] == "chain"
    assert langfuse_observation_type(retriever) == "chain"


def test_configure_pipeline_gives_ended_spans_the_same_attributes_with_evaluation_on() -> None:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="t",
        exporters=[exporter],
        local_store=False,
        evaluation=True,
        handle_sigterm=False,
        capture_content=False,
    )
    try:

        @evaltrace.workflow
        def pipeline(x: int) -> int:
            return x

        with evaltrace.context(session_id="s-2"):
            assert pipeline(1) == 1
        assert handle.force_flush(5_000)
        (span,) = exporter.get_finished_spans()
    finally:
        handle.shutdown()
        tracing.set_tracer_provider(None)
    assert isinstance(span, ReadableSpan)
    assert dict(span.attributes or {}) == {
        "session.id": "s-2",
        "evaltrace.span.kind": "workflow",
        "langfuse.observation.type": "chain",
        "openinference.span.kind": "CHAIN",
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "pipeline",
    }
    assert span.dropped_attributes == 0


def test_context_stamps_survive_a_count_limit_a_large_preset_would_reach() -> None:
    """126 user attributes + the session/user stamps pass the default limit of 128: the SDK evicts the oldest
    static keys, never the stamps (the preset start used to set the preset last, evicting the stamps)."""

    @evaltrace.trace(attributes={f"k{i}": i for i in range(126)})
    def busy() -> int:
        return 1

    for exporter in provider_with(ContextAttributesProcessor()):
        with evaltrace.context(session_id="s-1", user_id="u-1"):
            assert busy() == 1
        (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["session.id"] == "s-1"
    assert attributes["user.id"] == "u-1"
    assert attributes["k125"] == 125
    assert span.dropped_attributes > 0


class WritingSampler(Sampler):
    """A sampler that (against its contract) writes into the attributes it is handed."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        assert attributes is not None
        attributes["sampled.by"] = "writer"  # type: ignore[index]
        attributes["calls"] = int(attributes.get("calls", 0)) + 1  # type: ignore[index]
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "WritingSampler"


def test_a_sampler_writing_into_its_attributes_breaks_neither_the_call_nor_later_spans() -> None:
    @evaltrace.trace
    def step(x: int) -> int:
        return x

    for exporter in provider_with(sampler=WritingSampler()):
        assert step(1) == 1
        assert step(2) == 2
        spans = exporter.get_finished_spans()
    assert [dict(s.attributes or {}).get("calls") for s in spans] == [1, 1]  # each span its own dict
    assert all(dict(s.attributes or {})["sampled.by"] == "writer" for s in spans)


def test_enum_attribute_values_are_stored_as_their_plain_values() -> None:
    import enum

    class Tier(enum.StrEnum):
        GOLD = "gold"

    class Level(enum.IntEnum):
        HIGH = 3

    @evaltrace.trace(attributes={"tier": Tier.GOLD, "level": Level.HIGH})
    def step() -> int:
        return 1

    for exporter in provider_with():
        assert step() == 1
        (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert (attributes["tier"], attributes["level"]) == ("gold", 3)
    assert type(attributes["tier"]) is str and type(attributes["level"]) is int
