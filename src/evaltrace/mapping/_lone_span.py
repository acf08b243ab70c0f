"""The lone span's lazy Trace: an SDK ``ReadableSpan`` without descendants, read from its fields in one frame.

Split from :mod:`evaltrace.mapping._build`: the live pipeline's usual evaluated span (a decorated or instrumented span
evaluated alone) takes this shortcut; anything it does not take goes to ``_build.mapped_trace``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from evaltrace._internal import semconv as sc
from evaltrace._internal.span_fields import TUPLE_TRACE_ID
from evaltrace.mapping import _values
from evaltrace.mapping._lazy import SET_DICT, SET_EXTRA, SET_FIELDS_SET, SET_PRIVATE, LazyTrace
from evaltrace.mapping._lazy_fields import _FIELDS_SET, _FIELDS_SET_NO_LLM, _Fields, _Lone, _new
from evaltrace.mapping._spans import plain_attrs
from evaltrace.mapping._values import _service_name
from evaltrace.schema import SCHEMA_VERSION, Trace, TraceOutput


def _lazy_single(root: ReadableSpan, output_map: Callable[[Any], TraceOutput | None] | None = None) -> Trace | None:
    """The lazy Trace of ``root`` alone (no descendants) read from its fields, or None to take the general path.

    For an SDK ``ReadableSpan`` (what the pipeline's jobs hold) with a kind attribute (every decorated or
    instrumented span of ours): the same values as through its properties, without their frames (a view built
    for the attributes), and ``is_llm``/``is_tool`` inline (with a kind, they are the tests below).

    ``output_map`` (``lone_output``, passed by the pipeline's ``build_trace`` only): a decorated span's output
    (the ``_Lone`` source) is mapped with it now and published with its empty notes, as its first read would
    publish it, when it maps in one step (anything else, or its raising, leaves the output lazy).
    """
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
    if kind is None:
        return None  # a foreign kind to derive
    # A trace ending before its start (the eager path's error): whole microseconds compared, as timestamp() keeps
    # them. Two ints with end >= start never give an earlier microsecond: the floor divisions are skipped then;
    # anything else (no start, another type) takes them as before (the same result, or the same error).
    if end and (type(end) is not int or type(start) is not int or end < start):
        if end // 1000 < (start or 0) // 1000:
            return None
    llm = kind == sc.KIND_LLM
    tool = kind == sc.KIND_TOOL or root_attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
    # What _lazy_trace(), _identity() (the root alone) and lazy_trace() do, in this one frame. An exact SpanContext
    # whose trace_id is still the probed tuple read (span_fields) is read as ctx[0]: the property is a Python frame.
    trace_int = (
        (ctx[0] if type(ctx) is SpanContext and SpanContext.trace_id is TUPLE_TRACE_ID else ctx.trace_id) if ctx else 0
    )
    # For an int of 0..2**128-1, its 16 big-endian bytes in hex are format(id, "032x")'s 32 digits (~0.3k cheaper);
    # anything else gets %032x's text, or its error, as before.
    if type(trace_int) is int:
        try:
            trace_id = trace_int.to_bytes(16).hex()
        except OverflowError:
            trace_id = "%032x" % trace_int  # noqa: UP031  # the old text exactly (format() parses a spec)
    else:
        trace_id = "%032x" % trace_int  # noqa: UP031  # the old text exactly
    seen, service = _values._last_service  # _service_name()'s memo: the usual span has the last resource seen
    if resource is not seen:
        service = _service_name(resource)
    # Three method calls, not a bound ``get`` kept (building and freeing it costs more than it saves).
    run_id = root_attrs.get(sc.EVALTRACE_RUN_ID)
    case_id = root_attrs.get(sc.EVALTRACE_CASE_ID)
    variant = root_attrs.get(sc.EVALTRACE_VARIANT)
    # ``is None`` first: a live span carries none of the three (isinstance() is a call each).
    ready: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": "live" if run_id is None else (run_id if isinstance(run_id, str) and run_id else "live"),
        "case_id": trace_id if case_id is None else (case_id if isinstance(case_id, str) and case_id else trace_id),
        "variant_name": variant
        if variant is not None and isinstance(variant, str) and variant
        else (str(service) if service else "unknown_service"),
    }
    read = [(root, root_attrs)]
    parts: dict[str, Any] = {}
    if llm or tool:
        source = _new(_Fields)
    else:
        source = _new(_Lone)
        if output_map is not None:
            try:
                output = output_map(root_attrs)
            except Exception:  # left lazy: its first read fails alone, as before, not the whole job
                output = None
            if output is not None:
                parts["output_notes"] = []
                ready["output"] = output
    source.failures = {}
    source.root, source.selected, source.read, source.root_attrs = root, [root], read, root_attrs
    source.llm_read, source.mapped, source.trace_id, source.ends = read if llm else [], llm or tool, trace_id, True
    source.parts = parts
    trace = _new(LazyTrace)
    SET_DICT(trace, ready)
    SET_FIELDS_SET(trace, set(_FIELDS_SET if llm else _FIELDS_SET_NO_LLM))
    SET_EXTRA(trace, None)
    SET_PRIVATE(trace, source)
    return trace
