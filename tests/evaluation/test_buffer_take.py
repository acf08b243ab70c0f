"""A local root's end takes its buffered trace in one step (``TraceBuffer.take``): the same job, spans and counts.

``_admission.plan`` used to buffer an ending local root (``TraceBuffer.add``) and release its trace a few steps later
(``pop`` in ``_job_spans``); with no trace-level evaluator it now does both in one locked call. The replaced code is
kept verbatim below as the reference: ``take`` against ``add`` then ``pop`` over every buffer state (tracked or not,
``create``, the span cap, eviction by count and by age), and the old ``plan`` against today's, span by span, over
the shapes a trace can have (lone root, children first, remote parent, no ``on_start``, span cap, a trace-level
evaluator), through the real processor: same jobs, same span lists, same buffer, same counters.
"""

from __future__ import annotations

import itertools
import types
from time import monotonic
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace._internal import semconv
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation._admission import _NO_STATE, _READ_FIELDS, _new_job
from evaltrace.evaluation._jobs import Job
from evaltrace.evaluation.buffer import TraceBuffer
from evaltrace.mapping.conventions import span_kind
from evaltrace.schema import Trace

from .conftest import MakePipeline

# --- the replaced code, verbatim (main before s16-evalout) ------------------------------------------------------


def old_add(self: Any, span: ReadableSpan, *, create: bool) -> None:
    """Buffer ``span`` if its trace is tracked (or ``create`` is set); O(1)."""
    trace_id = span.context.trace_id if span.context is not None else 0
    with self._lock:
        entry = self._traces.get(trace_id)
        if entry is None:
            if not create:
                return
            entry = self._insert(trace_id)
        if len(entry.spans) >= self._max_spans:
            self.stats.dropped_spans += 1
            return
        entry.spans.append(span)


def old_pop(self: Any, trace_id: int) -> list[ReadableSpan]:
    """Stop buffering ``trace_id`` and return its spans."""
    with self._lock:
        entry = self._traces.pop(trace_id, None)
        self.stats.traces = len(self._traces)
    return entry.spans if entry is not None else []


def old_plan(self: Any, span: ReadableSpan) -> Any:  # noqa: C901  (verbatim, the reference)
    # An exact SDK ReadableSpan (what on_end is given) is read from its fields: the same values as its
    # properties give (the attributes as the same read-only view), without their frames. This runs in every
    # span's end on the application thread, as do the inline steps below (each the call it replaces, in the usual
    # case: one Python frame fewer each).
    state = span.__dict__ if type(span) is ReadableSpan else _NO_STATE  # a stand-in may have no __dict__
    if _READ_FIELDS <= state.keys():
        context, parent, raw = state["_context"], state["_parent"], state["_attributes"]
        attributes: Any = MappingProxyType(raw) if raw else {}  # ``span.attributes or {}``
    else:
        context, parent, attributes = span.context, span.parent, span.attributes or {}
    if context is None or self._shutdown:
        return None
    if self._suppressed and context.span_id in self._suppressed:
        self._suppressed.discard(context.span_id)
        return None
    trace_id = context.trace_id
    ref = attributes.get(semconv.EVALTRACE_EVALUATORS_REF)
    if not ref and self._passes_by(span, attributes, trace_id):  # a span with a ref never passes by
        return None
    kind = attributes.get(semconv.EVALTRACE_SPAN_KIND)
    if not isinstance(kind, str):  # span_kind()'s first step, inline
        kind = span_kind(attributes)  # derived from a foreign convention
    # Our own evaluation spans, and a judge call's trace (fed without on_start, in the worker): never evaluated.
    if kind == semconv.KIND_EVALUATION or attributes.get(semconv.EVALTRACE_JUDGE):
        return None
    # Spans that reach us without on_start (an OTLP receiver feeding on_end) were never tracked: buffer
    # every trace then, since which ancestor will need them is unknown until it ends.
    buffer_all = self.options.buffer_all_traces or not self._saw_start
    tracked = buffer_all or self._buffer.is_tracked(trace_id)
    if tracked:
        self._buffer.add(span, create=buffer_all)  # the span itself too: a root's job reads it from the list
    root = parent is None or parent.is_remote  # is_root(span)
    # Only with trace-level evaluators: the root waits below, every other span joins its trace (O(1)).
    trace_root = self._completion is not None and self._is_trace_root(span)
    if self._completion is not None and not trace_root:
        self._offer_completion(self._completion, span, attributes, buffer_all)
    if not ref and not (root and tracked) and not trace_root and self._only_kinds is not None:
        if kind not in self._only_kinds:
            return None  # fast path: no global evaluator can match this kind and nothing else applies
    skipped: list[tuple[EvaluatorSpec, str]] = []
    specs = self._matching(self._span_specs, span, attributes, kind, skipped) if self._span_specs else []
    if isinstance(ref, str) and ref:
        unconditional = self._unconditional.get(ref)
        if unconditional is not None and not specs and not self._limits.active:
            specs.extend(unconditional)  # _admitted_attached's first answer, inline
        else:
            specs.extend(self._admitted_attached(ref, specs, attributes, trace_id, skipped))
    trace_specs: list[EvaluatorSpec] = []
    complete: Any = None
    if trace_root:
        trace_specs, complete = self._at_trace_root(span, attributes, kind, skipped)
    spans, count = self._job_spans(trace_id, root and tracked, tracked and bool(specs), complete)
    if not specs and not trace_specs:
        return None
    if complete is None:  # _new_job's job, inline
        return Job(span, specs, trace_specs, spans, count, monotonic(), skipped)
    return _new_job(span, specs, trace_specs, spans, count, skipped, complete)


# --- the buffer: take() against add() then pop() ---------------------------------------------------------------


# One resource for every span built here: without one, ReadableSpan builds Resource.create({}), which scans the
# installed entry points on older SDKs (1.30), once per span. Nothing here reads a span's resource.
_RESOURCE = Resource({})


def _span(trace_id: int, span_id: int, name: str, attributes: Any = None, parent: SpanContext | None = None) -> Any:
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
        parent=parent,
        attributes=attributes,
        start_time=1_000,
        end_time=2_000,
        resource=_RESOURCE,
    )


def _state(buffer: TraceBuffer) -> tuple[Any, ...]:
    entries = [(trace_id, [s.name for s in entry.spans]) for trace_id, entry in buffer._traces.items()]
    stats = buffer.stats
    return entries, stats.traces, stats.evicted_traces, stats.dropped_spans, len(buffer)


OPS = ("track", "add", "add_create", "root", "root_create")


@pytest.mark.parametrize("max_age_s", [300.0, 0.0])
@pytest.mark.parametrize("max_spans", [1, 2, 3])
@pytest.mark.parametrize("max_traces", [1, 2, 3])
def test_take_leaves_the_buffer_and_returns_the_list_as_add_then_pop(
    max_traces: int, max_spans: int, max_age_s: float
) -> None:
    # Every sequence of three operations over two traces (and a fourth for longer runs): track, add (with and
    # without create), and a root's end (new: take; old: add then pop). Age 0 evicts every older trace on insert.
    sequences = list(itertools.product(OPS, (1, 2), repeat=3))
    assert len(sequences) == 1000
    for sequence in sequences:
        ops = [(sequence[i], sequence[i + 1]) for i in range(0, 6, 2)] + [("root", 1)]
        new = TraceBuffer(max_traces, max_spans, max_age_s)
        old = TraceBuffer(max_traces, max_spans, max_age_s)
        for n, (op, trace_id) in enumerate(ops):
            span = _span(trace_id, n + 1, f"{op}-{n}")
            got_new: Any = None
            got_old: Any = None
            if op == "track":
                new.track(trace_id)
                old.track(trace_id)
            elif op in ("add", "add_create"):
                new.add(span, create=op == "add_create")
                old_add(old, span, create=op == "add_create")
            else:
                got_new = new.take(trace_id, span, create=op == "root_create")
                old_add(old, span, create=op == "root_create")
                got_old = old_pop(old, trace_id)
                assert [s.name for s in got_new] == [s.name for s in got_old], (sequence, n)
                assert type(got_new) is list
            assert _state(new) == _state(old), (sequence, n, op)


def test_the_list_taken_is_the_one_spans_were_buffered_into() -> None:
    # A job reads the trace's list: take() hands over that very list (with the root appended), as pop() did.
    buffer = TraceBuffer()
    buffer.track(7)
    child = _span(7, 1, "child")
    buffer.add(child, create=False)
    (listed,) = [entry.spans for entry in buffer._traces.values()]
    root = _span(7, 2, "root")
    taken = buffer.take(7, root, create=False)
    assert taken is listed and taken == [child, root]
    assert not buffer.is_tracked(7) and buffer.stats.traces == 0


# --- the processor: the old plan() against today's -------------------------------------------------------------


@evaluator(name="take_global")
def take_global(trace: Trace) -> bool:
    return True


@evaluator(name="take_attached")
def take_attached(trace: Trace) -> bool:
    return True


@evaluator(name="take_trace")
def take_trace(trace: Trace) -> bool:
    return True


_REF: dict[int, str] = {}
TRACE = 0xABC


def _ref() -> str:
    return _REF[0] if _REF else _REF.setdefault(0, register_evaluators("tests.buffer_take", [take_attached]))


def _shapes(ref: str) -> dict[str, list[tuple[int, str, Any, int | None, bool]]]:
    """Traces as (span id, name, attributes, parent span id or None, parent remote), in end order."""
    kind = semconv.EVALTRACE_SPAN_KIND
    decorated = {semconv.EVALTRACE_EVALUATORS_REF: ref, kind: "agent"}
    return {
        "lone decorated root": [(1, "root", decorated, None, False)],
        "children then decorated root": [
            (3, "grandchild", {kind: "tool"}, 2, False),
            (2, "child", {kind: "llm"}, 1, False),
            (1, "root", decorated, None, False),
        ],
        "decorated child then plain root": [
            (2, "child", decorated, 1, False),
            (1, "root", {kind: "workflow"}, None, False),
        ],
        "decorated entry span with a remote parent": [
            (2, "child", {kind: "llm"}, 1, False),
            (1, "entry", decorated, 0x77, True),
        ],
        "global kind only": [(2, "child", {kind: "tool"}, 1, False), (1, "root", {kind: "llm"}, None, False)],
        "plain lone root": [(1, "root", {kind: "tool"}, None, False)],
        "many children": [(n, f"c{n}", {kind: "tool"}, 1, False) for n in range(2, 7)]
        + [(1, "root", decorated, None, False)],
        "evaluation span": [(1, "eval", {kind: semconv.KIND_EVALUATION}, None, False)],
    }


def _readable(span_id: int, name: str, attributes: Any, parent: int | None, remote: bool) -> Any:
    parent_context = None if parent is None else SpanContext(TRACE, parent, is_remote=remote, trace_flags=TraceFlags(1))
    return _span(TRACE, span_id, name, attributes, parent_context)


def _run(processor: Any, spans: list[Any], start: bool) -> list[Any]:
    if start:  # on_start in start order (the root first): what tracks the trace
        for span in reversed(spans):
            processor.on_start(span)
    seen: list[Any] = []
    for span in spans:
        job = processor._plan(span)
        row: Any = None
        if job is not None:
            row = (
                [spec.evaluator.name for spec in job.specs],
                [spec.evaluator.name for spec in job.trace_specs],
                [s.name for s in job.spans],
                job.span_count,
                job.skipped,
                job.span is span,
                job.revision,
                job.gate_held,
            )
        seen.append((span.name, row, _state(processor._buffer)))
    return seen


CONFIGS = {
    "global span-level": [EvaluatorSpec(take_global, span_kinds=["llm", "agent"])],
    "attached only": [],
    "global and trace-level": [
        EvaluatorSpec(take_global, span_kinds=["llm"]),
        EvaluatorSpec(take_trace, scope="trace"),
    ],
}


@pytest.mark.parametrize("max_spans", [2048, 2])
@pytest.mark.parametrize("start", [True, False], ids=["on_start", "no on_start"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_span_is_planned_as_by_the_old_plan(
    make_pipeline: MakePipeline, config: str, start: bool, max_spans: int
) -> None:
    ref = _ref()
    for shape, spans in _shapes(ref).items():
        results = []
        for planner in ("new", "old"):
            pipeline = make_pipeline(CONFIGS[config], trace_buffer_max_spans=max_spans)
            processor = pipeline.processor
            if planner == "old":
                processor._plan = types.MethodType(old_plan, processor)
            results.append(_run(processor, [_readable(*s) for s in spans], start))
            stats = processor.stats()
            results.append({k: v for k, v in stats.items() if k != "uptime_s"} if isinstance(stats, dict) else stats)
        assert results[0] == results[2], (config, start, max_spans, shape)
        assert results[1] == results[3], (config, start, max_spans, shape)
