"""``build_trace`` of a lone span, cut by s20-evtrace2: the same Trace as before, for every span shape.

Four cuts in ``_build._lazy_single`` / ``_mapping.build_trace`` (the evaluation row's mapping, per evaluated span):
the decorated span's output mapped inside ``_lazy_single`` (``build_trace`` passes ``lone_output``; no reads of the
built Trace's slots afterwards); the floor divisions of the "ends before its start" test skipped for two ints with
end >= start; the trace id read as ``ctx[0]`` from an exact SDK SpanContext (probed at import) and written as
``to_bytes(16).hex()`` for an int of 0..2**128-1; ``is None`` before ``isinstance`` for the identity attributes, and
no bound ``get``. Differential: the old ``build_trace`` (its lone shortcut) and ``_lazy_single`` are kept verbatim
below, and both are asked about the recorded provider spans, real decorated spans with every output shape and ~200
edited copies, odd and foreign spans (``test_build_trace_output_read``'s sets), plus spans edited where the cuts
branch: identity attributes of each type, ends before/at/after the start (within one microsecond too), no start,
trace ids at and past the edges, other context objects, and the probe forced off. Compared: the same failure or the
same class, the very dict published at build (keys in order, values), fields set, source parts, every field in three
read orders, dumps, ``repr``, equality and the monitor's query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace._internal import semconv as sc
from evaltrace.evaluation import _mapping
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.evaluation._preview import deferred_query
from evaltrace.mapping import _build, _lone_span, _values
from evaltrace.mapping._lazy import _DICT, _PRIVATE, FIELDS, SET_DICT, SET_EXTRA, SET_FIELDS_SET, SET_PRIVATE, LazyTrace
from evaltrace.mapping._spans import plain_attrs
from evaltrace.schema import SCHEMA_VERSION, Trace, TraceOutput
from readable_spans import rebuilt
from test_mapping_conventions import span
from test_mapping_lone_fields import _decorated_spans, _variants

from .test_build_trace_foreign_lone import VARIANTS
from .test_build_trace_foreign_lone import _span as foreign_span
from .test_build_trace_output_read import _golden_spans, _odd_spans

# ---- the old code, verbatim (its module globals bound from where they live) --------------------------------------
_new = object.__new__
_FIELDS_SET, _FIELDS_SET_NO_LLM = _build._FIELDS_SET, _build._FIELDS_SET_NO_LLM
_Fields, _Lone, _service_name = _build._Fields, _build._Lone, _values._service_name
_GET_DICT: Any = _DICT.__get__
_GET_PRIVATE: Any = _PRIVATE.__get__


def old_lazy_single(root: ReadableSpan) -> Trace | None:
    """``_build._lazy_single`` before this change, verbatim."""
    state = root.__dict__
    try:  # the five fields read (one missing: the general path); no subset test of the dict's keys (~2k)
        raw = state["_attributes"]
        end = state["_end_time"]
        start = state["_start_time"]
        ctx = state["_context"]
        resource = state["_resource"]
    except KeyError:
        return None
    root_attrs = raw.copy() if type(raw) is dict else plain_attrs(root)
    kind = root_attrs.get(sc.EVALTRACE_SPAN_KIND)
    if kind is None or (end and end // 1000 < (start or 0) // 1000):
        return None  # a foreign kind to derive, or a trace ending before its start (the eager path's error)
    llm = kind == sc.KIND_LLM
    tool = kind == sc.KIND_TOOL or root_attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
    # What _lazy_trace(), _identity() (the root alone) and lazy_trace() do, in this one frame: three Python calls
    # fewer on every evaluated span.
    trace_id = "%032x" % (ctx.trace_id if ctx else 0)  # format(id, "032x")'s text, without parsing a format spec
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
    source = _new(_Fields if llm or tool else _Lone)
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
    """``_mapping.build_trace`` before this change, verbatim (the logging left out; the old ``_lazy_single``)."""
    try:
        mapping = _mapping._MAPPING[0] if _mapping._MAPPING else _mapping._mapping()
        if len(spans) == 1 and spans[0] is root and type(root) is ReadableSpan:
            original, _, general, lone_source, lone_output = _mapping._LONE[0]
            lone = old_lazy_single
            if mapping.trace_from_spans is original:
                single = lone(root)
                if single is not None:
                    source = _GET_PRIVATE(single)
                    if type(source) is lone_source:
                        try:
                            output = lone_output(source.root_attrs)
                        except Exception:  # left lazy: its first read fails alone, as before, not the whole job
                            output = None
                        if output is not None:
                            source.parts["output_notes"] = []
                            _GET_DICT(single)["output"] = output
                    return single
                return general(list(spans), root, True, True)
        trace: Trace = mapping.trace_from_spans(list(spans), root=root, lazy=True)
        return trace
    except Exception as exc:
        raise MappingFailed(f"{type(exc).__name__}: {exc}") from exc


# ---- the comparison ----------------------------------------------------------------------------------------------


def _outcome(build: Any, *args: Any) -> Any:
    try:
        return build(*args)
    except Exception as exc:  # the same failure, type and text
        return f"failed: {type(exc).__name__}: {exc}"


def _read(trace: Trace, name: str) -> Any:
    try:
        return getattr(trace, name)
    except Exception as exc:  # a field whose mapping fails: the same failure on both
        return f"{type(exc).__name__}: {exc}"


def _same_trace(old: Any, new: Any, root: ReadableSpan, order: Sequence[str]) -> None:
    if old is None or isinstance(old, str) or new is None or isinstance(new, str):
        assert new == old
        return
    assert type(new) is type(old)
    assert new.model_fields_set == old.model_fields_set
    assert list(new.model_fields_set) == list(old.model_fields_set)  # the same iteration order too
    if type(old) is LazyTrace:  # what was published at build: the same keys in the same order, the same values
        old_dict, new_dict = _DICT.__get__(old), _DICT.__get__(new)
        assert list(new_dict) == list(old_dict)
        for key, want in old_dict.items():
            got = new_dict[key]
            assert type(got) is type(want), key
            assert got == want, key
            if isinstance(want, TraceOutput):
                assert _DICT.__get__(got) == _DICT.__get__(want)
                assert list(got.model_fields_set) == list(want.model_fields_set)
        old_source, new_source = _PRIVATE.__get__(old), _PRIVATE.__get__(new)
        assert type(new_source) is type(old_source)
        assert new_source.parts == old_source.parts
        assert new_source.trace_id == old_source.trace_id
        assert (new_source.mapped, new_source.ends, len(new_source.llm_read)) == (
            old_source.mapped,
            old_source.ends,
            len(old_source.llm_read),
        )
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
    if type(new) is LazyTrace:
        assert _PRIVATE.__get__(new).parts == _PRIVATE.__get__(old).parts
    assert new.model_dump_json() == old.model_dump_json()
    assert repr(new) == repr(old)
    assert new == old
    assert new.latency_ms == old.latency_ms


def _same_everywhere(root: ReadableSpan) -> None:
    orders = (FIELDS, tuple(reversed(FIELDS)), ("output", "input", *FIELDS))
    for order in orders:
        old, new = _outcome(old_build_trace, [root], root), _outcome(build_trace, [root], root)
        _same_trace(old, new, root, order)
        # trace_from_spans(lazy=True)'s own shortcut (no output mapping passed): the old _lazy_single's Trace
        _same_trace(_outcome(old_lazy_single, root), _outcome(_build._lazy_single, root), root, order)


# ---- the spans ---------------------------------------------------------------------------------------------------


def _at(base: ReadableSpan, **changes: Any) -> ReadableSpan:
    """``base`` rebuilt with its private fields changed (``_start_time``, ``_end_time``, ``_context``, ...)."""
    copy = rebuilt(base, dict(base.attributes or {}))
    copy.__dict__.update(changes)
    return copy


class _Context(SpanContext):
    """A SpanContext subclass whose ``trace_id`` is not its tuple's first item (read through the attribute)."""

    @property
    def trace_id(self) -> int:
        return 0xABC


def _edge_spans(agent: ReadableSpan) -> Iterator[ReadableSpan]:
    """The decorated span edited where the cuts branch."""
    attributes = dict(agent.attributes or {})
    # identity attributes: absent, empty, a string, a str subclass, other types (the isinstance path)
    for value in (None, "", "r1", type("Name", (str,), {})("sub"), 3, False, 0.0, ("a",)):
        for key in (sc.EVALTRACE_RUN_ID, sc.EVALTRACE_CASE_ID, sc.EVALTRACE_VARIANT):
            edited = {**attributes, key: value} if value is not None else attributes
            yield rebuilt(agent, edited)
    start = 1_700_000_000_000_000_500  # not on a whole microsecond
    # ends: after, at, before within the same microsecond, one microsecond before, long before, zero, None
    for end in (start + 1, start, start - 1, start - 500, start - 501, start - 1000, 1, 0, None):
        yield _at(agent, _start_time=start, _end_time=end)
    for end in (5, 0, None):
        yield _at(agent, _start_time=None, _end_time=end)  # no start: ``start or 0``
    yield _at(agent, _start_time=start, _end_time=float(start - 1000))  # not ints: the floor divisions as before
    yield _at(agent, _start_time=float(start), _end_time=start + 1)
    yield _at(agent, _start_time="late", _end_time=start)  # an error: the same one (MappingFailed's text)
    yield _at(agent, _start_time=start, _end_time=True)
    # trace ids at and past the edges, and context objects that are not an exact SpanContext
    for trace_id in (0, 1, 0x0102030405060708090A0B0C0D0E0F10, 2**128 - 1, 2**128, 2**200, -1):
        yield _at(agent, _context=SpanContext(trace_id, 0x51, False, TraceFlags(1)))
    yield _at(agent, _context=_Context(0x123, 0x51, False, TraceFlags(1)))
    yield _at(agent, _context=SimpleNamespace(trace_id=0x77, span_id=0x51, is_valid=True, trace_flags=TraceFlags(1)))
    yield _at(agent, _context=SimpleNamespace(trace_id=True, span_id=0x51, is_valid=True, trace_flags=TraceFlags(1)))
    yield _at(agent, _context=SimpleNamespace(trace_id=1.5, span_id=0x51, is_valid=True, trace_flags=TraceFlags(1)))
    yield _at(agent, _context=None)
    # model and tool kinds at the same edges (their general source, output left lazy)
    for kind in ("llm", "tool"):
        yield _at(rebuilt(agent, {**attributes, "evaltrace.span.kind": kind}), _start_time=start, _end_time=start - 1)
        yield _at(rebuilt(agent, {**attributes, "evaltrace.span.kind": kind}), _context=SpanContext(2**128, 1, False))


# ---- the tests ---------------------------------------------------------------------------------------------------


def test_the_recorded_providers_spans_map_as_before() -> None:
    spans = list(_golden_spans())
    assert len(spans) > 300
    for root in spans:
        _same_everywhere(root)


@pytest.mark.usefixtures("provider")
def test_decorated_spans_edited_copies_and_edges_map_as_before(exporter: InMemorySpanExporter) -> None:
    decorated = _decorated_spans(exporter)
    for root in decorated:
        _same_everywhere(root)
    for root in _variants(decorated[0]):
        _same_everywhere(root)
    for root in _odd_spans(decorated[0]):
        _same_everywhere(root)
    edges = list(_edge_spans(decorated[0]))
    assert len(edges) > 40
    for root in edges:
        _same_everywhere(root)


@pytest.mark.usefixtures("provider")
def test_without_the_tuple_probe_the_trace_id_is_read_through_the_property(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK whose SpanContext the probe does not recognise: the property is read, the same Trace results.

    The probe's answer is patched where ``_lazy_single`` reads it (``_lone_span``; ``_build`` only re-exports it).
    """
    assert _lone_span.TUPLE_TRACE_ID is SpanContext.__dict__["trace_id"]  # this SDK's SpanContext is the probed tuple
    monkeypatch.setattr(_lone_span, "TUPLE_TRACE_ID", object())
    decorated = _decorated_spans(exporter)
    for root in [*decorated, *_edge_spans(decorated[0])]:
        _same_everywhere(root)


def test_foreign_lone_spans_map_as_before() -> None:
    for _, attributes, events, end_offset in VARIANTS:
        _same_everywhere(foreign_span(attributes, events, end_offset))
    root = span("agent", {"evaltrace.span.kind": "agent", "output.value": '"Paris."', "input.value": '{"q":"?"}'})
    _same_everywhere(root)


@pytest.mark.usefixtures("provider")
def test_a_trace_id_property_patched_after_import_is_read_as_before(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``ctx[0]`` read holds only while SpanContext still has the probed property: a later patch is seen."""
    decorated = _decorated_spans(exporter)
    monkeypatch.setattr(SpanContext, "trace_id", property(lambda self: 0xBEEF))
    for root in decorated:
        _same_everywhere(root)
        assert _build._lazy_single(root) is None or _build._lazy_single(root).case_id.endswith("beef")  # type: ignore[union-attr]
