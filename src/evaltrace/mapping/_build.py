"""Assembly of the Trace: root and subtree, identity, input, output, error, conversation and metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.span_fields import TUPLE_TRACE_ID
from evaltrace._internal.trusted_models import trusted
from evaltrace.mapping import _values
from evaltrace.mapping._conversation import build_conversation
from evaltrace.mapping._ends import completed_messages, mapping_errors, with_conversation_ends
from evaltrace.mapping._lazy import (
    SET_DICT,
    SET_EXTRA,
    SET_FIELDS_SET,
    SET_PRIVATE,
    FieldSource,
    LazyTrace,
    lazy_trace,
)
from evaltrace.mapping._metrics import build_metrics
from evaltrace.mapping._retrieval import retrieved_contexts
from evaltrace.mapping._spans import is_llm, is_tool, loads, plain_attrs, select_root, subtree, timestamp
from evaltrace.mapping._values import (  # looked up here (tests patch them in this module): _error, _output, ...
    _error,
    _identity,
    _input,
    _last_step,
    _llm_steps,
    _output,
    _service_name,
    lone_output,
)
from evaltrace.schema import (
    SCHEMA_VERSION,
    LlmStep,
    Trace,
    TraceError,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
)

_new = object.__new__
# The metrics of a subtree without LLM spans (every value None), as the field values a validated TraceMetrics sets.
_NO_LLM_METRICS = {name: getattr(m, name) for m in (build_metrics([]),) for name in m.model_fields_set}
# The fields an eagerly mapped Trace reports as set (``llm_steps`` only when the subtree has model calls).
_FIELDS_SET = frozenset(
    {"run_id", "case_id", "variant_name", "started_at", "finished_at", "input", "output", "messages", "metrics"}
    | {"error", "extra", "llm_steps", "tool_calls", "tool_results"}
)
_FIELDS_SET_NO_LLM = _FIELDS_SET - {"llm_steps"}


def trace_from_spans(
    spans: Sequence[ReadableSpan],
    root: ReadableSpan | int | str | None = None,
    *,
    lazy: bool = False,
    conversation_ends: bool = True,
) -> Trace:
    """Build the Trace of one trace, or of the subtree under ``root``, from finished spans.

    Args:
        spans: Spans of one trace, in any order (other traces' spans are ignored).
        root: The root span, or its span id (int or 16-hex string); only it and its descendants are read.
            None selects the span whose parent is not among ``spans`` (the earliest if several).
        lazy: Map only the identity now and every other field on its first read (``_lazy.LazyTrace``): the
            same values, for a reader (an evaluator) that reads a few fields. Whole reads (dumps, pickling,
            ``==``) map the rest first and make it a plain Trace.
        conversation_ends: Give a trace whose spans recorded no user turn or no final assistant message those
            (a decorator-only agent), as offline runs do. The offline runner passes False: it completes the
            trace itself once it has the adapter's return value.

    Returns:
        The Trace. Live defaults apply when the root carries no ``evaltrace.run_id`` / ``case_id`` /
        ``variant``: run_id ``"live"``, case_id the 32-hex trace id, variant_name the resource's service name.

    Raises:
        ValueError: ``spans`` is empty, or ``root`` is an id not found among them.
    """
    if lazy and conversation_ends and len(spans) == 1 and type(root) is ReadableSpan and spans[0] is root:
        single = _lazy_single(root)  # the live pipeline's evaluated span without descendants, usually
        if single is not None:
            return single
    return mapped_trace(spans, root, lazy, conversation_ends)


def mapped_trace(
    spans: Sequence[ReadableSpan], root: ReadableSpan | int | str | None, lazy: bool, conversation_ends: bool
) -> Trace:
    """``trace_from_spans`` past its lone-span shortcut (its caller tried ``_lazy_single`` already, or may not)."""
    root_span = root if isinstance(root, ReadableSpan) else select_root(spans, root)
    notes: list[str] = []
    # Each span's attributes are read once, into a plain dict: reading them one by one through the SDK's view
    # was a large part of mapping a small subtree (an evaluated span is mapped on every evaluation).
    if len(spans) == 1 and spans[0] is root_span:  # the evaluated span without descendants: nothing to walk
        selected = [root_span]
        root_attrs = plain_attrs(root_span)
        read = [(root_span, root_attrs)]
        llm_read = read if is_llm(root_span, root_attrs) else []
        mapped = bool(llm_read) or is_tool(root_span, root_attrs)
    else:
        selected = subtree(spans, root_span)
        read = [(span, plain_attrs(span)) for span in selected]
        root_attrs = next(a for s, a in read if s is root_span)
        llm_read = [(s, a) for s, a in read if is_llm(s, a)]
        mapped = bool(llm_read) or any(is_tool(s, a) for s, a in read)
    if lazy and not _ends_before_start(root_span):  # a trace ending before its start: the eager path's error
        return _lazy_trace(
            root_span,
            selected,
            read,
            root_attrs,
            llm_read,
            mapped,
            conversation_ends,
            root_span.context,
            root_span.resource,
        )
    llm_spans = [s for s, _ in llm_read]
    own: list[TraceMessage] = []  # the root's own output messages, when it is a model call
    step: list[TraceMessage] | None = None  # those of the last model call to end that recorded output
    root_is_llm = bool(llm_spans) and any(s is root_span for s in llm_spans)
    if mapped:
        conversation = build_conversation(selected, notes)
        messages = conversation.finish()
        if root_is_llm:
            own = next((outputs for span, outputs in conversation.steps if span is root_span), [])
        step = own or _last_step(conversation.steps)
        metrics = build_metrics(llm_read)
    else:
        # Nothing for the conversation or the metrics to read (a decorated function without model or tool
        # calls under it): the builders would return an empty conversation and all-None metrics.
        messages = []
        metrics = trusted(TraceMetrics, set(_NO_LLM_METRICS), **_NO_LLM_METRICS, custom={})
    root_ctx = root_span.context
    extra: dict[str, Any] = {
        "trace_id": format(root_ctx.trace_id if root_ctx else 0, "032x"),
        "span_id": format(root_ctx.span_id if root_ctx else 0, "016x"),
    }
    contexts = retrieved_contexts(read, notes)
    if contexts:  # what RAG evaluators read as the retrieved context (evaluators._base.context_chunks)
        extra["contexts"] = contexts
    run_id, case_id, variant = _identity(root_span.resource, root_attrs, read, extra["trace_id"])
    started = timestamp(root_span.start_time)
    end_time = root_span.end_time
    finished = timestamp(end_time) if end_time else started
    values: dict[str, Any] = {
        "run_id": run_id,
        "case_id": case_id,
        "variant_name": variant,
        "started_at": started,
        "finished_at": finished,
        "input": _input(root_span, root_attrs, root_is_llm, notes, llm_spans[0] if llm_spans else None),
        "output": _output(root_span, root_attrs, messages, own, step, notes),
        "messages": messages,
        "metrics": metrics,
        "error": _error(root_span, root_attrs),
        "extra": extra,
    }
    if conversation_ends:
        with_conversation_ends(
            values, root_span, root_attrs
        )  # text turns only: the tool views below, from `messages`, are the same
    if llm_spans:  # set only when there are model calls, so a trace without any dumps as before the field
        values["llm_steps"] = _llm_steps(llm_read)
    if finished < started:
        trace = Trace(**values)  # validation names the broken invariant
    else:
        # Every value is built here, of its field's type already (validated nested models, aware UTC times in
        # order, JSON-parsed input with finite numbers), so re-validating it all was pure cost on every
        # evaluated span. The after-validator's work is done here: the tool views derived from the messages,
        # passed explicitly so that the fields set (and so exclude_unset dumps) match a validated Trace.
        tool_calls, tool_results = conversation.tool_views() if mapped else ([], [])
        trace = trusted(Trace, None, **values, tool_calls=tool_calls, tool_results=tool_results)
    if notes:
        trace.extra["enrichment_errors"] = mapping_errors(notes)
    return trace


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


def _ends_before_start(root: ReadableSpan) -> bool:
    """Whether ``finished_at < started_at`` would hold (``timestamp()`` keeps whole microseconds)."""
    end = root.end_time
    return bool(end) and end // 1000 < (root.start_time or 0) // 1000  # type: ignore[operator]


_Read = list[tuple[ReadableSpan, dict[str, Any]]]


def _lazy_trace(
    root: ReadableSpan,
    selected: list[ReadableSpan],
    read: _Read,
    root_attrs: dict[str, Any],
    llm_read: _Read,
    mapped: bool,
    ends: bool,
    root_ctx: Any,
    resource: Any,
) -> Trace:
    """The Trace trace_from_spans() builds, with only its identity mapped now (see ``_lazy``).

    ``root_ctx``, ``resource``: the root's ``context`` and ``resource``, read by the caller.
    """
    # format(id, "032x")'s text; %-formatting skips parsing the format spec (~2k instructions per evaluated span).
    trace_id = "%032x" % (root_ctx.trace_id if root_ctx else 0)
    run_id, case_id, variant = _identity(resource, root_attrs, read, trace_id)
    ready = {"schema_version": SCHEMA_VERSION, "run_id": run_id, "case_id": case_id, "variant_name": variant}
    fields_set = set(_FIELDS_SET_NO_LLM if not llm_read else _FIELDS_SET)
    # The source's slots set here, not in an __init__: a Python __init__ costs a frame and type_call's dispatch.
    source = _new(_Fields)
    source.failures = {}
    source.root, source.selected, source.read, source.root_attrs = root, selected, read, root_attrs
    source.llm_read, source.mapped, source.trace_id, source.ends = llm_read, mapped, trace_id, ends
    source.parts = {}
    return lazy_trace(ready, fields_set, source)


class _Fields(FieldSource):
    """Maps each field of one Trace on demand, exactly as trace_from_spans() maps it whole.

    Parts shared by several fields (the conversation) and each part's notes are kept once published
    (``dict.setdefault``); ``extra`` holds the notes of every part in the eager mapping's order.
    """

    __slots__ = ("ends", "llm_read", "mapped", "parts", "read", "root", "root_attrs", "selected", "trace_id")

    # Set by _lazy_trace() (no __init__: one Python frame fewer per evaluated span). ``parts`` holds the parts
    # shared by several fields, each published once.
    root: ReadableSpan
    selected: list[ReadableSpan]
    read: _Read
    root_attrs: dict[str, Any]
    llm_read: _Read
    mapped: bool
    trace_id: str
    ends: bool
    parts: dict[str, Any]

    def _part(self, name: str) -> Any:
        parts = self.parts
        if name not in parts:
            parts.setdefault(name, _PARTS[name](self))
        return parts[name]

    def field(self, name: str) -> Any:
        """The value of Trace field ``name`` (identity and ``schema_version`` are set at construction).

        The LazyTrace publishes it (once, in its own dict); parts shared by several fields are kept here.
        """
        return _FIELD_MAKERS[name](self)

    def _map_started_at(self) -> Any:
        return timestamp(self.root.start_time)

    def _map_finished_at(self) -> Any:
        end = self.root.end_time
        return timestamp(end if end else self.root.start_time)

    def _map_conversation(
        self,
    ) -> tuple[list[TraceMessage], list[TraceMessage], list[TraceMessage] | None, list[str], tuple[list[Any], ...]]:
        """(messages, the root's own output messages, the last answering step's, notes, tool views).

        As trace_from_spans maps them. The tool views are derived here, before any evaluator holds the messages:
        one that edits ``trace.messages`` in place must not change what a later reader sees as tool calls.
        """
        notes: list[str] = []
        if not self.mapped:
            return [], [], None, notes, ([], [])
        conversation = build_conversation(self.selected, notes)
        messages = conversation.finish()
        own: list[TraceMessage] = []
        if any(s is self.root for s, _ in self.llm_read):
            own = next((outputs for span, outputs in conversation.steps if span is self.root), [])
        views = conversation.tool_views()
        return messages, own, own or _last_step(conversation.steps), notes, views

    def _map_messages(self) -> list[TraceMessage]:
        messages: list[TraceMessage] = self._part("conversation")[0]
        if self.ends:  # as trace_from_spans' with_conversation_ends(), from the same input and output values
            completed = completed_messages(
                self.field("input"), messages, self.field("output"), self.root, self.root_attrs
            )
            if completed is not None:
                return completed  # a new list already
        # A list of its own: appending to or clearing trace.messages leaves what ``output`` is mapped from as is.
        return list(messages)

    def _map_tool_calls(self) -> list[Any]:
        calls: list[Any] = self._part("conversation")[4][0]
        return calls

    def _map_tool_results(self) -> list[Any]:
        results: list[Any] = self._part("conversation")[4][1]
        return results

    def _map_metrics(self) -> TraceMetrics:
        if self.mapped:
            return build_metrics(self.llm_read)
        return trusted(TraceMetrics, set(_NO_LLM_METRICS), **_NO_LLM_METRICS, custom={})

    def _map_llm_steps(self) -> list[LlmStep]:
        return _llm_steps(self.llm_read) if self.llm_read else []

    def _map_error(self) -> TraceError | None:
        return _error(self.root, self.root_attrs)

    def _map_input(self) -> dict[str, Any]:
        notes: list[str] = []
        llm_read = self.llm_read
        root_is_llm = bool(llm_read) and any(s is self.root for s, _ in llm_read)
        value = _input(self.root, self.root_attrs, root_is_llm, notes, llm_read[0][0] if llm_read else None)
        self.parts.setdefault("input_notes", notes)  # for extra (equal notes whichever thread publishes)
        return value

    def _map_output(self) -> TraceOutput:
        notes: list[str] = []
        if self.mapped:
            messages, own, step, _, _ = self._part("conversation")
        else:  # nothing for the conversation to read (what trace_from_spans passes then)
            messages, own, step = [], [], None
        value = _output(self.root, self.root_attrs, messages, own, step, notes)
        self.parts.setdefault("output_notes", notes)
        return value

    def _notes_of(self, name: str) -> list[str]:
        """The notes mapping field ``name`` (input or output) wrote: it is mapped again if it was not yet."""
        if name + "_notes" not in self.parts:
            self.field(name)
        notes: list[str] = self.parts[name + "_notes"]
        return notes

    def _map_contexts(self) -> tuple[list[str], list[str]]:
        notes: list[str] = []
        return retrieved_contexts(self.read, notes), notes

    def _map_extra(self) -> dict[str, Any]:
        root_ctx = self.root.context
        extra: dict[str, Any] = {
            "trace_id": self.trace_id,
            "span_id": format(root_ctx.span_id if root_ctx else 0, "016x"),
        }
        contexts, context_notes = self._part("contexts")
        if contexts:
            extra["contexts"] = contexts
        # The notes in the order the eager mapping writes them: conversation, contexts, input, output.
        notes = [*self._part("conversation")[3], *context_notes, *self._notes_of("input"), *self._notes_of("output")]
        if notes:
            extra["enrichment_errors"] = mapping_errors(notes)
        return extra


# Parts several fields share, each with its notes; and each lazily mapped field's maker.
_PARTS: dict[str, Any] = {name: getattr(_Fields, "_map_" + name) for name in ("conversation", "contexts")}
_FIELD_MAKERS: dict[str, Any] = {
    name: getattr(_Fields, "_map_" + name)
    for name in (
        "started_at",
        "finished_at",
        "input",
        "output",
        "messages",
        "tool_calls",
        "tool_results",
        "metrics",
        "llm_steps",
        "error",
        "extra",
    )
}


class _Lone(_Fields):
    """The source of a lone span that is neither a model call nor a tool (a decorated function, usually).

    Its ``output`` and ``input``, read on every evaluated span, are mapped in this one frame when the root's
    ``output.value`` / ``input.value`` is a plain JSON text whose value needs nothing more (a string without
    ``think>``; an input that is not a truncation marker), exactly as ``_output()`` / ``_input()`` map them for
    such a root (no messages, no model call): five Python frames fewer per read. Anything else takes ``_Fields``.
    """

    __slots__ = ()

    def field(self, name: str) -> Any:
        """The value of Trace field ``name``, as ``_Fields.field`` gives it."""
        if name == "output":
            output = lone_output(self.root_attrs)
            if output is not None:
                self.parts.setdefault("output_notes", [])
                return output
            return self._map_output()
        if name == "input":
            root_attrs = self.root_attrs
            raw = root_attrs.get(sc.INPUT_VALUE)
            value: Any
            if type(raw) is str:
                value = raw if root_attrs.get(sc.INPUT_MIME_TYPE) == sc.MIME_TEXT else loads(raw)
                if type(value) is not dict:
                    self.parts.setdefault("input_notes", [])
                    return {"input": value}
                if value.get(TRUNCATED_KEY) is not True:  # a truncation marker is noted: _input() does it
                    self.parts.setdefault("input_notes", [])
                    return value
            return self._map_input()
        return _FIELD_MAKERS[name](self)
