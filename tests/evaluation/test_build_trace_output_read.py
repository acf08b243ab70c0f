"""``build_trace`` maps a lone decorated span's output when it builds the Trace, and nothing a reader sees changes.

The pipeline reads ``trace.output`` on every judgement (the monitor's answer), so ``build_trace`` now publishes the
output of a lone decorated span (the ``_Lone`` source) when it maps in one step, as its first read would have; and
``_lazy_single`` reads the span's five fields with ``try`` instead of a subset test of the span's dict. Differential:
the old ``build_trace`` and ``_lazy_single`` and the old ``_Lone`` output read are kept verbatim below, and both are
asked about the recorded instrumentation spans (``tests/snapshots/instrumentation_golden.json``, the spans the
recorded provider fixtures replay to), real decorated spans with every output shape and ~200 edited copies, foreign
lone spans, model, tool and error spans, spans without a field or with odd attribute types, and a root with many
children: the same Trace (or the same failure) field by field in three read orders, the same fields set, dumps,
``repr``, equality, notes kept for ``extra``, and monitor query.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace.evaluation import _mapping
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.evaluation._preview import deferred_query
from evaltrace.mapping import _build, _values
from evaltrace.mapping._lazy import _DICT, _PRIVATE, FIELDS, SET_DICT, SET_EXTRA, SET_FIELDS_SET, SET_PRIVATE, LazyTrace
from evaltrace.mapping._spans import _SCAN, plain_attrs
from evaltrace.schema import SCHEMA_VERSION, Trace, TraceOutput
from readable_spans import rebuilt
from test_mapping_conventions import OPENINFERENCE, span
from test_mapping_lone_fields import _decorated_spans, _variants

from .test_build_trace_foreign_lone import VARIANTS
from .test_build_trace_foreign_lone import _span as foreign_span

GOLDEN = Path(__file__).resolve().parents[1] / "snapshots" / "instrumentation_golden.json"
_new = object.__new__

# ---- the old code, verbatim (its module globals bound from where they live) --------------------------------------
_READ_FIELDS = frozenset(("_attributes", "_start_time", "_end_time", "_context", "_resource"))
_FIELDS_SET, _FIELDS_SET_NO_LLM, _Fields = _build._FIELDS_SET, _build._FIELDS_SET_NO_LLM, _build._Fields
_service_name, loads, TRUNCATED_KEY = _values._service_name, _build.loads, "evaltrace.truncated"


class _OldLone(_Fields):
    """``_build._Lone`` before this change, verbatim (``field``)."""

    __slots__ = ()

    def field(self, name: str) -> Any:
        if name == "output":
            root_attrs = self.root_attrs
            raw = root_attrs.get(sc.OUTPUT_VALUE)
            if type(raw) is str:
                value: Any = raw
                if root_attrs.get(sc.OUTPUT_MIME_TYPE) != sc.MIME_TEXT:
                    try:  # loads() of compact JSON text: a string's depth needs no check
                        value, end = _SCAN(raw, 0)
                    except Exception:
                        end = -1
                    if end != len(raw):
                        value = None  # not one compact JSON value: _output() decides
                if type(value) is str and "think>" not in value:
                    self.parts.setdefault("output_notes", [])
                    output = _new(TraceOutput)  # _answer(value, None): no messages, so no reasoning
                    SET_DICT(output, {"final_answer": value, "thinking": None, "structured": None})
                    SET_FIELDS_SET(output, {"final_answer", "thinking"})
                    SET_EXTRA(output, None)
                    SET_PRIVATE(output, None)
                    return output
            return self._map_output()
        if name == "input":
            root_attrs = self.root_attrs
            raw = root_attrs.get(sc.INPUT_VALUE)
            if type(raw) is str:
                value = raw if root_attrs.get(sc.INPUT_MIME_TYPE) == sc.MIME_TEXT else loads(raw)
                if type(value) is not dict:
                    self.parts.setdefault("input_notes", [])
                    return {"input": value}
                if value.get(TRUNCATED_KEY) is not True:  # a truncation marker is noted: _input() does it
                    self.parts.setdefault("input_notes", [])
                    return value
            return self._map_input()
        return _build._FIELD_MAKERS[name](self)


def old_lazy_single(root: ReadableSpan) -> Trace | None:
    """``_build._lazy_single`` before this change, verbatim (its ``_Lone`` is the old one)."""
    state = root.__dict__
    if not _READ_FIELDS <= state.keys():
        return None
    raw = state["_attributes"]
    root_attrs = raw.copy() if type(raw) is dict else plain_attrs(root)
    kind = root_attrs.get(sc.EVALTRACE_SPAN_KIND)
    end = state["_end_time"]
    if kind is None or (end and end // 1000 < (state["_start_time"] or 0) // 1000):
        return None  # a foreign kind to derive, or a trace ending before its start (the eager path's error)
    llm = kind == sc.KIND_LLM
    tool = kind == sc.KIND_TOOL or root_attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
    ctx = state["_context"]
    trace_id = "%032x" % (ctx.trace_id if ctx else 0)  # format(id, "032x")'s text, without parsing a format spec
    resource = state["_resource"]
    seen, service = _values._last_service  # _service_name()'s memo: the usual span has the last resource seen
    if resource is not seen:
        service = _service_name(resource)
    get = root_attrs.get
    run_id, case_id, variant = get(sc.EVALTRACE_RUN_ID), get(sc.EVALTRACE_CASE_ID), get(sc.EVALTRACE_VARIANT)
    ready = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id if isinstance(run_id, str) and run_id else "live",
        "case_id": case_id if isinstance(case_id, str) and case_id else trace_id,
        "variant_name": variant
        if isinstance(variant, str) and variant
        else (str(service) if service else "unknown_service"),
    }
    read = [(root, root_attrs)]
    source = _new(_Fields if llm or tool else _OldLone)
    source.failures = {}
    source.root, source.selected, source.read, source.root_attrs = root, [root], read, root_attrs
    source.llm_read, source.mapped, source.trace_id, source.ends = read if llm else [], llm or tool, trace_id, True
    source.parts = {}
    trace = _new(LazyTrace)
    SET_DICT(trace, ready)
    SET_FIELDS_SET(trace, set(_FIELDS_SET if llm else _FIELDS_SET_NO_LLM))
    SET_EXTRA(trace, None)
    SET_PRIVATE(trace, source)
    return trace


def old_build_trace(spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace:
    """``_mapping.build_trace`` before this change, verbatim (the lone shortcut; the logging left out)."""
    try:
        mapping = _mapping._MAPPING[0] if _mapping._MAPPING else _mapping._mapping()
        if len(spans) == 1 and spans[0] is root and type(root) is ReadableSpan:
            original, lone, general = mapping.trace_from_spans, old_lazy_single, _build.mapped_trace
            if mapping.trace_from_spans is original:
                single = lone(root)
                if single is not None:
                    return single
                return general(list(spans), root, True, True)
        trace: Trace = mapping.trace_from_spans(list(spans), root=root, lazy=True)
        return trace
    except Exception as exc:
        raise MappingFailed(f"{type(exc).__name__}: {exc}") from exc


# ---- the spans ---------------------------------------------------------------------------------------------------


def _golden_spans() -> Iterator[ReadableSpan]:
    """Each span the recorded provider fixtures replay to, rebuilt from its snapshot (variable values left out)."""
    for records in json.loads(GOLDEN.read_text()).values():
        for record in records:
            attributes = {
                key: ast.literal_eval(value) for key, value in record["attributes"].items() if value != "<variable>"
            }
            events = [
                Event(
                    event["name"],
                    {k: ast.literal_eval(v) for k, v in event["attributes"].items() if v != "<variable>"},
                    timestamp=1_700_000_000_500_000_000,
                )
                for event in record["events"]
            ]
            made = span(record["name"], attributes, events=events)
            if record["status"][0] == "ERROR":
                made._status = Status(StatusCode.ERROR, record["status"][1])
            yield made
            # The same call seen as a decorated function returning its answer (the _Lone source's spans).
            answer = attributes.get("gen_ai.output.messages", "")
            yield span("agent", {"evaltrace.span.kind": "agent", "output.value": json.dumps(answer)[:300]})


def _odd_spans(agent: ReadableSpan) -> Iterator[ReadableSpan]:
    """Edited and odd spans: missing state, odd attribute types, model/tool/error kinds, <think>, many children."""
    attributes = dict(agent.attributes or {})
    for kind in ("llm", "tool", "workflow", "agent", "retriever", 7, ""):
        yield rebuilt(agent, {**attributes, "evaltrace.span.kind": kind})
    for value in (7, 1.5, True, ("a", "b"), b"x".decode(), '"<think>x</think>y"', '"a"  ', ' "a"', '"\\u00e9"'):
        yield rebuilt(agent, {**attributes, "output.value": value})
    yield rebuilt(agent, {**attributes, "evaltrace.run_id": "r1", "evaltrace.case_id": "c1", "evaltrace.variant": 3})
    yield rebuilt(agent, {**attributes, "gen_ai.operation.name": "execute_tool"})
    answered = '[{"role":"assistant","parts":[{"type":"text","content":"From the messages."}]}]'
    for kind in ("llm", "tool"):  # an output.value besides the messages: the general source's output, never _Lone's
        changes = {"evaltrace.span.kind": kind, "gen_ai.operation.name": "chat", "gen_ai.output.messages": answered}
        yield rebuilt(agent, {**attributes, **changes})
    yield rebuilt(agent, {**attributes, **OPENINFERENCE})
    errored = rebuilt(agent, attributes)
    errored._status = Status(StatusCode.ERROR, "boom")
    errored._events = [Event("exception", {"exception.type": "ValueError", "exception.message": "bad"})]
    yield errored
    for missing in ("_attributes", "_start_time", "_end_time", "_context", "_resource"):
        copy = rebuilt(agent, attributes)
        del copy.__dict__[missing]  # a span object without that field: the general path (or its failure)
        yield copy
    no_resource = rebuilt(agent, attributes)
    no_resource._resource = None  # type: ignore[assignment]
    yield no_resource
    no_context = rebuilt(agent, attributes)
    no_context._context = None  # type: ignore[assignment]
    yield no_context


def _mapped(build: Any, spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace | str:
    try:
        return build(list(spans), root)  # type: ignore[no-any-return]
    except MappingFailed as exc:
        return f"failed: {exc}"


def _read(trace: Trace, name: str) -> Any:
    try:
        return getattr(trace, name)
    except Exception as exc:  # a field whose mapping fails: the same failure on both
        return f"{type(exc).__name__}: {exc}"


def _same_everywhere(spans: Sequence[ReadableSpan], root: ReadableSpan) -> None:
    orders = (FIELDS, tuple(reversed(FIELDS)), ("output", "input", *FIELDS))
    for order in orders:
        old, new = _mapped(old_build_trace, spans, root), _mapped(build_trace, spans, root)
        if isinstance(old, str) or isinstance(new, str):
            assert old == new
            return
        assert type(new) is type(old)
        assert new.model_fields_set == old.model_fields_set
        old_query, new_query = deferred_query(root, old), deferred_query(root, new)
        assert (old_query is None) == (new_query is None)
        if old_query is not None and new_query is not None:
            assert (new_query.text, new_query.as_text, new_query.render()) == (
                old_query.text,
                old_query.as_text,
                old_query.render(),
            )
        for name in order:
            got, want = _read(new, name), _read(old, name)
            assert type(got) is type(want), name
            assert got == want, name
            if isinstance(want, TraceOutput):
                assert got.model_fields_set == want.model_fields_set
                assert got.model_dump_json() == want.model_dump_json()
        if type(new) is LazyTrace:  # the notes kept for extra, the parts mapped
            assert _PRIVATE.__get__(new).parts == _PRIVATE.__get__(old).parts
        assert new.model_dump_json() == old.model_dump_json()
        assert repr(new) == repr(old)
        assert new == old
        assert new.latency_ms == old.latency_ms


def test_the_recorded_providers_spans_map_as_before() -> None:
    spans = list(_golden_spans())
    assert len(spans) > 300  # every recorded case, each as itself and as a decorated function
    for root in spans:
        _same_everywhere([root], root)


@pytest.mark.usefixtures("provider")
def test_decorated_spans_and_edited_copies_map_as_before(exporter: InMemorySpanExporter) -> None:
    decorated = _decorated_spans(exporter)
    for root in decorated:
        _same_everywhere([root], root)
    for root in _variants(decorated[0]):
        _same_everywhere([root], root)
    for root in _odd_spans(decorated[0]):
        _same_everywhere([root], root)


def test_foreign_lone_spans_and_many_children_map_as_before() -> None:
    for _, attributes, events, end_offset in VARIANTS:
        root = foreign_span(attributes, events, end_offset)
        _same_everywhere([root], root)
    parent = span("agent", {"evaltrace.span.kind": "agent", "output.value": '"Paris."', "input.value": '{"q":"?"}'})
    children = [
        span(
            f"step {i}",
            {"evaltrace.span.kind": "tool" if i % 2 else "llm", "gen_ai.operation.name": "chat"},
            parent=parent,
            start=i,
        )  # fmt: skip
        for i in range(40)
    ]
    _same_everywhere([parent, *children], parent)
    _same_everywhere([*children, parent], parent)


def test_a_decorated_spans_output_is_mapped_with_its_trace_and_nothing_else() -> None:
    """The cut itself: the output published at build time (a read of it maps nothing), every other field lazy."""
    root = span("agent", {"evaltrace.span.kind": "agent", "output.value": '"Paris."', "input.value": '"Where?"'})
    trace = build_trace([root], root)
    assert type(trace) is LazyTrace
    assert set(_DICT.__get__(trace)) == {"schema_version", "run_id", "case_id", "variant_name", "output"}
    assert _PRIVATE.__get__(trace).parts == {"output_notes": []}
    assert trace.output.final_answer == "Paris."
    # Not for an output that takes _output() (a <think> block): it is mapped on its first read, as before.
    thinking = span("agent", {"evaltrace.span.kind": "agent", "output.value": '"<think>x</think>Paris."'})
    assert "output" not in _DICT.__get__(build_trace([thinking], thinking))
    # Nor for trace_from_spans(lazy=True): only the pipeline's build_trace, which reads it on every judgement.
    assert "output" not in _DICT.__get__(_build.trace_from_spans([root], root, lazy=True))


def test_an_output_mapping_that_raises_at_build_leaves_the_output_lazy_not_the_job_failed() -> None:
    """Were the early output mapping to raise (no real value is known to make it), the Trace is still built and its
    output stays lazy: only its own first read could fail, as before the cut, never the whole job as
    ``MappingFailed`` (review of s17-evtrace)."""
    root = span("agent", {"evaltrace.span.kind": "agent", "output.value": '"Paris."', "input.value": '"Where?"'})
    build_trace([root], root)  # fills _mapping._LONE
    original, lone, general, lone_source, _ = _mapping._LONE[0]

    def raising(attributes: Any) -> Any:
        raise RuntimeError("a bug of ours in the early output mapping")

    saved = _mapping._LONE[0]
    _mapping._LONE[0] = (original, lone, general, lone_source, raising)
    try:
        trace = build_trace([root], root)
    finally:
        _mapping._LONE[0] = saved
    assert "output" not in _DICT.__get__(trace)  # left to its lazy read
    assert trace.output.final_answer == "Paris."
