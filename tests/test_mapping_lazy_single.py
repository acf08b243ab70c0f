"""The lazy Trace of an evaluated span without descendants, read from the SDK ReadableSpan's fields.

``trace_from_spans([span], root=span, lazy=True)`` (what the live pipeline asks for the span it evaluates) reads an
exact ``ReadableSpan`` with a kind attribute from its fields (``_build._lazy_single``). Every span shape here is
checked field by field, in reverse, whole, pickled and copied against the eager Trace of the same span
(``lazy_mapping.check_lazy``), and the shapes it must leave to the general path are checked to take it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from pydantic import ValidationError

from evaltrace.mapping import _build
from lazy_mapping import ORIGINAL, check_lazy
from readable_spans import rebuilt

USER = '[{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]}]'
ANSWER = '[{"role":"assistant","parts":[{"type":"text","content":"<think>sunny?</think>Sunny."}]}]'
ASKS = '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Paris"}}]}]'
QUESTION = '{"question":"What is the capital of France?","context":{"user":"ada","locale":"en-GB","turn":3}}'

# name -> (attributes, takes the fast path)
SHAPES: dict[str, tuple[dict[str, Any], bool]] = {
    "decorated agent (the benchmark's span)": (
        {
            "evaltrace.span.kind": "agent",
            "openinference.span.kind": "AGENT",
            "gen_ai.operation.name": "invoke_agent",
            "input.value": QUESTION,
            "output.value": '"Paris is the capital of France."',
        },
        True,
    ),
    "agent answering with inline reasoning": (
        {"evaltrace.span.kind": "agent", "input.value": '"hi"', "output.value": '"<think>hm</think>Hello."'},
        True,
    ),
    "agent with a structured output and run identity": (
        {
            "evaltrace.span.kind": "agent",
            "evaltrace.run_id": "run-1",
            "evaltrace.case_id": "case-7",
            "evaltrace.variant": "v2",
            "input.value": '{"a":[1,2,{"b":null}]}',
            "output.value": '{"answer":42,"why":"because"}',
        },
        True,
    ),
    "agent whose input was truncated at capture": (
        {
            "evaltrace.span.kind": "agent",
            "input.value": '{"_evaltrace_truncated":true,"original_length":99999,"preview":"abc"}',
            "output.value": "not json at all",
        },
        True,
    ),
    "model call (kind llm) with messages and usage": (
        {
            "evaltrace.span.kind": "llm",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": USER,
            "gen_ai.output.messages": ANSWER,
            "gen_ai.usage.input_tokens": 7,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.response.finish_reasons": ("stop",),
        },
        True,
    ),
    "model call that asked for a tool": (
        {"evaltrace.span.kind": "llm", "gen_ai.input.messages": USER, "gen_ai.output.messages": ASKS},
        True,
    ),
    "tool (kind tool)": (
        {
            "evaltrace.span.kind": "tool",
            "gen_ai.tool.name": "weather",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}',
            "gen_ai.tool.call.result": '"sunny"',
        },
        True,
    ),
    "agent kind with a tool operation": (
        {"evaltrace.span.kind": "agent", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather"},
        True,
    ),
    "a kind that is not text": ({"evaltrace.span.kind": 3, "output.value": '"x"'}, True),
    "no kind: a model call by its operation": (
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": USER, "gen_ai.output.messages": ANSWER},
        False,
    ),
    "no kind: a foreign convention's": (
        {"openinference.span.kind": "LLM", "input.value": "hi", "output.value": "hello"},
        False,
    ),
    "no attributes": ({}, False),
}


def _finished(attributes: dict[str, Any], error: bool = False) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("work", attributes=attributes) as span:
        if error:
            span.record_exception(ValueError("boom"))
            span.set_status(Status(StatusCode.ERROR, "it failed"))
    (finished,) = exporter.get_finished_spans()
    return finished


def _copies(span: ReadableSpan) -> Iterator[tuple[str, ReadableSpan]]:
    """``span`` as the pipeline holds it (a ReadableSpan copy) with each attribute container the SDK allows."""
    for container, attributes in (
        ("plain dict", dict(span.attributes or {})),
        ("bounded", BoundedAttributes(attributes=dict(span.attributes or {}), immutable=True)),
        ("view", span.attributes),
    ):
        yield container, rebuilt(span, attributes)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("error", [False, True], ids=["ok", "error"])
def test_the_lazy_trace_of_a_lone_span_read_from_its_fields_equals_the_eager_trace(shape: str, error: bool) -> None:
    attributes, fast = SHAPES[shape]
    original = _finished(attributes, error)
    for container, span in _copies(original):
        assert (_build._lazy_single(span) is not None) is fast, container
        eager = ORIGINAL([span], span)
        assert eager == ORIGINAL([span])  # the root given or found: the same Trace
        check_lazy([span], span, eager)
    # The SDK's own span (a subclass, read through its properties): the general path, the same Trace.
    check_lazy([original], original, ORIGINAL([original], original))


def test_a_lone_span_ending_before_it_starts_is_refused_at_mapping_as_eagerly() -> None:
    span = _finished(SHAPES["decorated agent (the benchmark's span)"][0])
    broken = ReadableSpan(
        name=span.name,
        context=span.context,
        attributes=dict(span.attributes or {}),
        start_time=span.end_time,
        end_time=span.start_time,
        resource=span.resource,
    )
    assert _build._lazy_single(broken) is None
    with pytest.raises(ValidationError, match="before started_at"):
        _build.trace_from_spans([broken], broken, lazy=True)


def test_a_lone_span_with_no_resource_or_context_maps_as_eagerly() -> None:
    span = ReadableSpan(name="bare", attributes={"evaltrace.span.kind": "agent", "output.value": '"ok"'})
    assert _build._lazy_single(span) is not None
    check_lazy([span], span, ORIGINAL([span], span))
