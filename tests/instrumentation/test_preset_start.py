"""LLM spans start with their sampling-relevant attributes, validated once per shape instead of once per span.

With the SDK's own samplers (which never look at attributes) the span is started without them and they are put
in before anyone can read them; any other sampler is handed them as usual. Either way samplers, ``on_start``
processors and exporters see exactly what ``start_span(attributes=...)`` would have given them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai_replay import client, json_interaction
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from evaltrace._internal import deferred_attributes, tracing

try:  # opentelemetry-sdk >= 1.3x; the supported floor (1.30) has no AlwaysRecordSampler
    from opentelemetry.sdk.trace.sampling import AlwaysRecordSampler
except ImportError:  # pragma: no cover - oldest-SDK CI step
    AlwaysRecordSampler = None  # type: ignore[assignment,misc]

CHAT = "/v1/chat/completions"
pytestmark = pytest.mark.usefixtures("instrumented")  # conftest: OpenAIInstrumentor, content captured
START = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "server.address": "api.openai.com",
    "server.port": 443,
    "evaltrace.span.kind": "llm",
    # Fixed per endpoint kind, so set with the preset rather than built per call.
    "openai.api.type": "chat_completions",
    "langfuse.observation.type": "generation",
}


class Recording(Sampler):
    """Samples everything, as ALWAYS_ON does, and remembers the attributes it was given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

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
        self.seen.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "Recording"


class OnStart(SpanProcessor):
    """Reads the span's attributes when it starts, and optionally writes some (before or after reading), as
    context processors do."""

    def __init__(self, writes: dict[str, Any] | None = None, write_first: bool = False) -> None:
        self.writes = writes or {}
        self.write_first = write_first
        self.seen: list[dict[str, Any]] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.write_first and self.writes:
            span.set_attributes(self.writes)
        self.seen.append(dict(span.attributes or {}))
        if not self.write_first and self.writes:
            span.set_attributes(self.writes)

    def on_end(self, span: ReadableSpan) -> None:
        pass


def _traced_call(
    sampler: Sampler, processor: SpanProcessor | None = None, limits: SpanLimits | None = None
) -> ReadableSpan:
    """One instrumented chat call through the real client under a provider with ``sampler``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, span_limits=limits)
    if processor is not None:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(provider)
    try:
        api, _ = client([json_interaction(CHAT, _completion())], False)
        api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    finally:
        tracing.set_tracer_provider(previous)
    (span,) = exporter.get_finished_spans()
    return span


def _completion() -> dict[str, Any]:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    ).model_dump(mode="json")


def _start_attributes(span: ReadableSpan) -> dict[str, Any]:
    attributes = dict(span.attributes or {})
    return {key: attributes[key] for key in START if key in attributes}


def test_a_sampler_that_may_look_is_given_the_start_attributes() -> None:
    sampler = Recording()
    span = _traced_call(ParentBased(sampler))  # a custom root inside ParentBased: it may look too
    assert sampler.seen == [START]
    assert _start_attributes(span) == START


@pytest.mark.parametrize(
    "sampler", [DEFAULT_ON, ALWAYS_ON, ParentBasedTraceIdRatio(1.0)], ids=["default", "always-on", "parent-ratio"]
)
def test_on_start_processors_see_the_start_attributes(sampler: Sampler) -> None:
    processor = OnStart()
    span = _traced_call(sampler, processor)
    assert processor.seen == [START]
    assert _start_attributes(span) == START


def test_a_span_nobody_reads_at_start_gets_them_too() -> None:
    span = _traced_call(DEFAULT_ON)
    assert list(dict(span.attributes or {}))[: len(START)] == list(START)  # first, as start attributes are
    assert _start_attributes(span) == START


@pytest.mark.parametrize(
    "limits",
    [
        None,
        SpanLimits(max_span_attribute_length=5),  # truncates "gpt-4o", "openai", "api.openai.com"
        SpanLimits(max_span_attributes=8),  # on_start's two writes and the start six fill it: later ones evict
        SpanLimits(max_span_attributes=7),  # one too few for both: which key is evicted is the SDK's choice
        SpanLimits(max_span_attributes=4),
    ],
    ids=["no-limits", "value-length", "count-8", "count-7", "count-4"],
)
@pytest.mark.parametrize("write_first", [False, True], ids=["read-then-write", "write-then-read"])
def test_spans_are_the_same_as_with_start_span_attributes(limits: SpanLimits | None, write_first: bool) -> None:
    """Limits, and on_start writes of the same keys (theirs win, being later), as the SDK applies them."""
    writes = {"gen_ai.provider.name": "set-on-start", "session.id": "s-1"}
    fast_reader, slow_reader = OnStart(writes, write_first), OnStart(writes, write_first)
    fast = _traced_call(DEFAULT_ON, fast_reader, limits)
    slow = _traced_call(Recording(), slow_reader, limits)  # the usual path: attributes to start_span
    assert fast_reader.seen == slow_reader.seen  # what on_start saw, in order
    assert list((fast.attributes or {}).items()) == list((slow.attributes or {}).items())
    assert fast.dropped_attributes == slow.dropped_attributes
    if limits is None:
        assert (fast.attributes or {})["gen_ai.provider.name"] == "set-on-start"


class InheritsFromParent(SpanProcessor):
    """Copies the parent span's ``app.*`` attributes onto each new span, reading the parent at on_start."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        parent = trace.get_current_span(parent_context)
        if isinstance(parent, ReadableSpan):
            span.set_attributes({k: v for k, v in (parent.attributes or {}).items() if k.startswith("app.")})

    def on_end(self, span: ReadableSpan) -> None:
        pass


def test_a_parent_read_at_start_is_not_taken_for_the_new_span() -> None:
    """A framework's span may be named like ours ("chat {model}", CLIENT); reading it must not give it our preset."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(InheritsFromParent())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(provider)
    try:
        api, _ = client([json_interaction(CHAT, _completion())], False)
        with provider.get_tracer("framework").start_as_current_span(
            "chat gpt-4o", kind=SpanKind.CLIENT, attributes={"app.user": "u1"}
        ):
            api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    finally:
        tracing.set_tracer_provider(previous)
    ours, framework = exporter.get_finished_spans()
    assert dict(framework.attributes or {}) == {"app.user": "u1"}
    assert _start_attributes(ours) == START and (ours.attributes or {})["app.user"] == "u1"


class TaggingTracer:
    """A tracer wrapper (as vendor SDKs write them) whose start_span reads the attributes it is given."""

    def __init__(self, inner: trace.Tracer) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # so it even exposes the SDK tracer's sampler

    def start_span(self, name: str, context: Any = None, kind: Any = SpanKind.INTERNAL, attributes: Any = None) -> Any:
        tagged = {**(attributes or {}), "team.tag": (attributes or {}).get("gen_ai.operation.name")}
        return self._inner.start_span(name, context, kind, tagged)


def test_a_wrapping_tracer_is_given_the_start_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "get_tracer", lambda: TaggingTracer(provider.get_tracer("evaltrace")))
    api, _ = client([json_interaction(CHAT, _completion())], False)
    api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["team.tag"] == "chat"
    assert _start_attributes(span) == START


@pytest.mark.parametrize(
    ("sampler", "ignores"),
    [
        (ALWAYS_ON, True),
        (ALWAYS_OFF, True),
        (DEFAULT_ON, True),
        (TraceIdRatioBased(0.5), True),
        (ParentBasedTraceIdRatio(0.5), True),
        (ParentBased(TraceIdRatioBased(0.5), local_parent_sampled=ALWAYS_OFF), True),
        (ParentBased(ALWAYS_ON, remote_parent_sampled=Recording()), False),
        (Recording(), False),
        pytest.param(
            AlwaysRecordSampler(ALWAYS_ON) if AlwaysRecordSampler is not None else None,
            False,  # keeps no attributes on spans it records after a DROP
            marks=pytest.mark.skipif(
                AlwaysRecordSampler is None, reason="this opentelemetry-sdk has no AlwaysRecordSampler"
            ),
        ),
        (type("Sub", (StaticSampler,), {})(ALWAYS_ON._decision), False),  # type: ignore[attr-defined]
    ],
    ids=[
        "always-on",
        "always-off",
        "default",
        "ratio",
        "parent-ratio",
        "parent-based-builtins",
        "parent-based-custom-delegate",
        "custom",
        "always-record",
        "static-subclass",
    ],
)
def test_which_samplers_ignore_attributes(sampler: Sampler, ignores: bool) -> None:
    assert deferred_attributes._ignores_attributes(sampler, 0) is ignores
