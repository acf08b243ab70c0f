"""Assembly of the Trace: root and subtree, identity, input, output, error, conversation and metrics.

The entry point (:func:`trace_from_spans`) and the eager assembly (:func:`mapped_trace`) live here; the lazy Trace's
field source is :mod:`evaltrace.mapping._lazy_fields`, the lone span's shortcut :mod:`evaltrace.mapping._lone_span`.
Their names stay importable from here, where the pipeline and the tests look them up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal.span_fields import TUPLE_TRACE_ID as TUPLE_TRACE_ID
from evaltrace._internal.trusted_models import trusted
from evaltrace.mapping._conversation import build_conversation
from evaltrace.mapping._ends import mapping_errors, with_conversation_ends
from evaltrace.mapping._lazy_fields import _FIELD_MAKERS as _FIELD_MAKERS
from evaltrace.mapping._lazy_fields import _FIELDS_SET as _FIELDS_SET
from evaltrace.mapping._lazy_fields import _FIELDS_SET_NO_LLM as _FIELDS_SET_NO_LLM
from evaltrace.mapping._lazy_fields import _NO_LLM_METRICS, _lazy_trace
from evaltrace.mapping._lazy_fields import _Fields as _Fields
from evaltrace.mapping._lazy_fields import _Lone as _Lone
from evaltrace.mapping._lone_span import _lazy_single
from evaltrace.mapping._metrics import build_metrics
from evaltrace.mapping._retrieval import PROVIDER_SOURCES, provider_sources, retrieved_contexts
from evaltrace.mapping._spans import is_llm, is_tool, plain_attrs, select_root, subtree, timestamp
from evaltrace.mapping._spans import loads as loads
from evaltrace.mapping._values import (  # looked up here by the eager assembly: _error, _output, ...
    _error,
    _identity,
    _input,
    _last_step,
    _llm_steps,
    _output,
)
from evaltrace.mapping._values import (
    lone_output as lone_output,
)
from evaltrace.schema import Trace, TraceMessage, TraceMetrics


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
    sources = provider_sources(llm_read)
    if sources:  # what the provider retrieved itself, read with the tool results (context_chunks)
        extra[PROVIDER_SOURCES] = sources
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


def _ends_before_start(root: ReadableSpan) -> bool:
    """Whether ``finished_at < started_at`` would hold (``timestamp()`` keeps whole microseconds)."""
    end = root.end_time
    return bool(end) and end // 1000 < (root.start_time or 0) // 1000  # type: ignore[operator]
