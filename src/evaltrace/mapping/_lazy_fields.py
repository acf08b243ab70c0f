"""The lazy Trace's field source: each field of a mapped subtree built on its first read, as the eager mapping builds it.

Split from :mod:`evaltrace.mapping._build` (which keeps the entry point and the eager assembly): :func:`_lazy_trace`
makes the Trace whose identity is mapped now, :class:`_Fields` maps every other field on demand, and :class:`_Lone`
is the one-frame source of a lone decorated span (see :mod:`evaltrace.mapping._lone_span`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.trusted_models import trusted
from evaltrace.mapping._conversation import build_conversation
from evaltrace.mapping._ends import completed_messages, mapping_errors
from evaltrace.mapping._lazy import FieldSource, lazy_trace
from evaltrace.mapping._metrics import build_metrics
from evaltrace.mapping._retrieval import PROVIDER_SOURCES, provider_sources, retrieved_contexts
from evaltrace.mapping._spans import loads, timestamp
from evaltrace.mapping._values import (  # looked up here (tests patch them in this module): _error, _output, ...
    _error,
    _identity,
    _input,
    _last_step,
    _llm_steps,
    _output,
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
        if self.llm_read and (sources := provider_sources(self.llm_read)):
            extra[PROVIDER_SOURCES] = sources
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
