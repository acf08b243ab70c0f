"""Admission (``EvaluationSpanProcessor._plan``) reads an exact SDK ReadableSpan from its fields.

What ``span.end()`` hands the processor under ``configure()`` is an exact ``ReadableSpan``; ``_plan`` reads its
context, parent and attributes without the properties' frames and takes a few usual steps inline. Each span shape
here is planned once as that exact ReadableSpan and once as a subclass (read through its properties, the general
path): the same job, and the same read-only attributes handed to a sampler.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace._internal import semconv
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline


@evaluator(name="always")
def always(trace: Trace) -> bool:
    return True


@evaluator(name="attached")
def attached(trace: Trace) -> bool:
    return True


_REF: dict[int, str] = {}  # one registration: both plans see the same ref


class _Subclass(ReadableSpan):
    """A ReadableSpan subclass: planned through its properties."""


TRACE = 0x1234
LOCAL_PARENT = SpanContext(TRACE, 0x99, is_remote=False, trace_flags=TraceFlags(1))
REMOTE_PARENT = SpanContext(TRACE, 0x98, is_remote=True, trace_flags=TraceFlags(1))


def _span(cls: type[ReadableSpan], span_id: int, name: str, attributes: Any, parent: SpanContext | None) -> Any:
    return cls(
        name=name,
        context=SpanContext(TRACE, span_id, is_remote=False, trace_flags=TraceFlags(1)),
        parent=parent,
        attributes=attributes,
        start_time=1_000,
        end_time=2_000,
    )


def _shapes(ref: str) -> list[tuple[str, Any, SpanContext | None]]:
    kind = semconv.EVALTRACE_SPAN_KIND
    return [
        ("g-decorated", {semconv.EVALTRACE_EVALUATORS_REF: ref, kind: "agent"}, None),
        ("other-decorated", {semconv.EVALTRACE_EVALUATORS_REF: ref}, LOCAL_PARENT),
        ("g-remote-child", {kind: "tool", "x": 1}, REMOTE_PARENT),
        ("g-local-child", {kind: "llm"}, LOCAL_PARENT),
        ("g-no-attributes", {}, None),
        ("g-none-attributes", None, None),
        ("g-foreign-kind", {"openinference.span.kind": "LLM"}, None),
        ("g-evaluation", {kind: semconv.KIND_EVALUATION}, None),
        ("g-judge", {semconv.EVALTRACE_JUDGE: True}, None),
        ("other", {kind: "agent"}, None),
    ]


def _plan(make_pipeline: MakePipeline, cls: type[ReadableSpan]) -> list[Any]:
    seen: list[Any] = []

    def sampler(attributes: Any) -> bool:
        seen.append((type(attributes), dict(attributes)))
        return True

    pipeline = make_pipeline([EvaluatorSpec(always, name_glob="g-*", sampler=sampler)])
    ref = _REF[0] if _REF else _REF.setdefault(0, register_evaluators("tests.admission_fields", [attached]))
    planned: list[Any] = []
    for i, (name, attributes, parent) in enumerate(_shapes(ref)):
        span = _span(cls, 0x100 + i, name, attributes, parent)
        job = pipeline.processor._plan(span)
        if job is None:
            planned.append((name, None))
            continue
        planned.append(
            (
                name,
                [spec.evaluator.name for spec in job.specs],
                [spec.evaluator.name for spec in job.trace_specs],
                [s.name for s in job.spans],
                job.span_count,
                job.skipped,
                job.span is span,
            )
        )
    return [planned, seen]


def test_an_exact_readable_span_is_planned_as_through_its_properties(make_pipeline: MakePipeline) -> None:
    exact, general = _plan(make_pipeline, ReadableSpan), _plan(make_pipeline, _Subclass)
    assert exact == general
    planned, seen = exact
    by_name = {row[0]: row for row in planned}
    assert by_name["g-decorated"][1] == ["always", "attached"]
    assert by_name["other-decorated"][1] == ["attached"]
    assert by_name["g-evaluation"][1] is None and by_name["g-judge"][1] is None
    # A sampler is handed the span's attributes as the property gives them: a read-only view, or {} for none.
    assert {t for t, _ in seen} == {MappingProxyType, dict}
    assert all(t is dict for t, values in seen if not values)


def test_the_view_a_sampler_gets_of_an_exact_readable_span_is_read_only(make_pipeline: MakePipeline) -> None:
    kept: list[Any] = []

    def sampler(attributes: Any) -> bool:
        kept.append(attributes)
        return True

    pipeline = make_pipeline([EvaluatorSpec(always, sampler=sampler)])
    span = _span(ReadableSpan, 0x200, "work", {"a": 1}, None)
    assert pipeline.processor._plan(span) is not None
    (attributes,) = kept
    with pytest.raises(TypeError):
        attributes["a"] = 2
    assert span.attributes == {"a": 1}


def test_span_start_reads_a_live_spans_attributes_once_with_the_same_answers(make_pipeline: MakePipeline) -> None:
    # on_start copies a live span's attributes (a view over the SDK's BoundedAttributes) once: a judge call's span
    # is remembered as suppressed, a decorated span's trace is buffered, any other span's is not.
    pipeline = make_pipeline([EvaluatorSpec(always, span_kinds=["llm"])])
    ref = _REF[0] if _REF else _REF.setdefault(0, register_evaluators("tests.admission_fields", [attached]))
    processor = pipeline.processor
    tracer = pipeline.tracer
    with tracer.start_as_current_span("judge", attributes={semconv.EVALTRACE_JUDGE: True}) as judge:
        assert judge.get_span_context().span_id in processor._suppressed
    with tracer.start_as_current_span("decorated", attributes={semconv.EVALTRACE_EVALUATORS_REF: ref}) as decorated:
        assert processor._buffer.is_tracked(decorated.get_span_context().trace_id)
    with tracer.start_as_current_span("model", attributes={semconv.EVALTRACE_SPAN_KIND: "llm"}) as model:
        assert processor._buffer.is_tracked(model.get_span_context().trace_id)  # a global spec may match it
    with tracer.start_as_current_span("plain", attributes={semconv.EVALTRACE_SPAN_KIND: "tool"}) as plain:
        assert not processor._buffer.is_tracked(plain.get_span_context().trace_id)
    pipeline.flush()
    assert processor.stats()["evaluated"] == 2  # the decorated span and the model call, not the judge's


def test_a_span_object_without_an_instance_dict_is_planned_through_its_properties(make_pipeline: MakePipeline) -> None:
    class Slotted:
        """A stand-in span (no ``__dict__``): what a bridge from another tracer may hand ``on_end``."""

        __slots__ = ("attributes", "context", "name", "parent")

        def __init__(self) -> None:
            self.name = "g-slotted"
            self.context = SpanContext(TRACE, 0x300, is_remote=False, trace_flags=TraceFlags(1))
            self.parent = None
            self.attributes = {semconv.EVALTRACE_SPAN_KIND: "agent"}

    pipeline = make_pipeline([EvaluatorSpec(always, name_glob="g-*")])
    span: Any = Slotted()
    job = pipeline.processor._plan(span)
    assert job is not None and [spec.evaluator.name for spec in job.specs] == ["always"]
