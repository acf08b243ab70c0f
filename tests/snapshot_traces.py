"""Deterministic traces for the CLI snapshot tests: fixed ids, fixed times, every column and outcome filled.

Spans go through the real OTel SDK (a fixed id generator, explicit start/end times) into the real local store
exporter, so ``evaltrace traces list/show`` read them back exactly as they read an application's spans.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from evaltrace._internal import semconv
from evaltrace.exporters.local_store import LocalStoreExporter

T0 = 1_772_366_400_000_000_000  # 2026-03-01 12:00:00 UTC, in ns
MS = 1_000_000
AGENT_TRACE = "5f2b8c1e9d3a47b6a0c4e8f1d2b3a4c5"
BATCH_TRACE = "5f2b8c1e9d3a47ff00112233445566ff"  # shares 14 digits with AGENT_TRACE: prefixes must grow
FAILED_TRACE = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"


class FixedIds(IdGenerator):
    """The trace id given for the next trace; span ids counting up from 1."""

    def __init__(self) -> None:
        self.trace_id = 0
        self._span = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        self._span += 1
        return self._span


def _eval(name: str, outcome: str, **extra: Any) -> dict[str, Any]:
    prefix = f"{semconv.EVALTRACE_EVAL_PREFIX}{name}"
    attributes: dict[str, Any] = {prefix + semconv.EVALTRACE_EVAL_OUTCOME_SUFFIX: outcome}
    for suffix, value in extra.items():
        attributes[f"{prefix}.{suffix}"] = value
    return attributes


def _chat(tokens: tuple[int, int], cost: float) -> dict[str, Any]:
    return {
        semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM,
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1],
        semconv.EVALTRACE_COST_USD: cost,
        semconv.OUTPUT_VALUE: json.dumps({"answer": "sunny"}),
    }


def _span(
    tracer: trace.Tracer,
    name: str,
    start_ms: float,
    end_ms: float,
    attributes: dict[str, Any],
    parent: trace.Span | None = None,
    error: str | None = None,
) -> trace.Span:
    context = trace.set_span_in_context(parent) if parent is not None else None
    kind = SpanKind.CLIENT if attributes.get(semconv.EVALTRACE_SPAN_KIND) == semconv.KIND_LLM else SpanKind.INTERNAL
    span = tracer.start_span(
        name, context=context, kind=kind, attributes=attributes, start_time=T0 + int(start_ms * MS)
    )
    if error:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end(end_time=T0 + int(end_ms * MS))
    return span


def write_fixture_store(store: Path) -> None:
    """Write three traces into the local store at ``store``: an evaluated agent run, a batch, a failure."""
    ids = FixedIds()
    provider = TracerProvider(resource=Resource({"service.name": "weather-app"}), id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
    tracer = provider.get_tracer("snapshots")
    who = {semconv.SESSION_ID: "sess-7f3a", semconv.USER_ID: "user-42"}

    ids.trace_id = int(AGENT_TRACE, 16)
    root = tracer.start_span("POST /ask", attributes=who, start_time=T0)
    agent_attributes = {
        **who,
        semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT,
        **_eval("relevance", "pass", score=0.82, passed=True),
        **_eval("concise", "fail", score=0.5, passed=False),
        **_eval("judge", "error", error_type="ConnectionError"),
        **_eval("faithful", "not_evaluated", skip_reason="no reference answer"),
    }
    agent = tracer.start_span(
        "invoke_agent weather-assistant",
        context=trace.set_span_in_context(root),
        attributes=agent_attributes,
        start_time=T0 + 2 * MS,
    )
    _span(tracer, "chat gpt-4o-mini", 3, 812.4, {**who, **_chat((52, 31), 0.00002535)}, agent)
    tool = {semconv.EVALTRACE_SPAN_KIND: semconv.KIND_TOOL}
    _span(tracer, "execute_tool get_weather", 813, 813.85, tool, agent)
    _span(tracer, "execute_tool lookup_timezone", 814, 5_014, tool, agent, error="TimeoutError")
    _span(tracer, "chat gpt-4o-mini", 5_015, 6_240, {**who, **_chat((1_297, 12), 0.0000165)}, agent)
    agent.end(end_time=T0 + 6_241 * MS)
    root.end(end_time=T0 + 6_243 * MS)

    ids.trace_id = int(BATCH_TRACE, 16)
    batch = _span(tracer, "nightly batch", 60_000, 185_000, {semconv.EVALTRACE_SPAN_KIND: semconv.KIND_WORKFLOW})
    del batch

    ids.trace_id = int(FAILED_TRACE, 16)
    _span(tracer, "POST /ask", 300_000, 300_000.85, {semconv.USER_ID: "user-9"}, error="ValueError")
    provider.shutdown()
