"""What a backfill judges in one stored trace or session: the targets, each with the evaluators that apply.

Span scope judges each span an evaluator's filters match, with its subtree, as live per-span evaluation does;
trace scope judges the whole trace once, from its root; session scope judges a session's traces as one
:class:`~evaltrace.schema.Conversation`. Spans become Traces through the mapping live evaluation uses
(:func:`evaltrace.evaluation._mapping.build_trace`). Evaluation spans already in a trace are never judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.evaluation.buffer import subtree
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.mapping.conventions import span_kind
from evaltrace.schema import Conversation, Trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["SCOPES", "Target", "Unit", "root_of", "session_unit", "trace_unit"]

SCOPES = ("span", "trace", "session")


@dataclass
class Target:
    """One thing judged: a span's subtree, a trace, or a conversation, and the span its results hang on."""

    span: ReadableSpan
    """The evaluated span (span scope), the root (trace scope), or the last turn's root (session scope)."""
    judged: Trace | Conversation | None
    """None when the mapping failed: its evaluators are recorded as not evaluated (``mapping_failed``)."""
    specs: list[EvaluatorSpec]
    session_id: str | None = None
    revision: int = 1
    """Session scope: the revision of the session's scores (its number of turns: a grown session's is higher)."""


@dataclass
class Unit:
    """What one checkpoint line stands for: a trace (span and trace scope) or a session."""

    key: str
    targets: list[Target]
    spans: list[ReadableSpan] = field(default_factory=list)
    """The source spans (written to the store with the results when the source is not the store)."""
    traces: int = 1
    selected: int = 1
    """Selected traces this unit accounts for in the progress (session scope: those read since the last unit)."""


def root_of(spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    """The earliest span whose parent is not in the trace (a remote parent counts as absent), as the store decides."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    candidates = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    return min(candidates, key=lambda s: s.start_time or 0, default=None)


def _mapped(spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace | None:
    try:
        return build_trace(spans, root)
    except MappingFailed:
        return None


def _judged_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The application's spans: evaluation spans (results of earlier judgements) are neither judged nor mapped."""
    return [s for s in spans if span_kind(s.attributes or {}) != semconv.KIND_EVALUATION]


def trace_unit(trace_id: str, spans: Sequence[ReadableSpan], specs: Sequence[EvaluatorSpec], scope: str) -> Unit:
    """The targets of one trace at span or trace scope (none when nothing matches)."""
    own = _judged_spans(spans)
    targets: list[Target] = []
    if scope == "trace":
        root = root_of(own)
        if root is None:
            return Unit(trace_id, [], list(spans))
        attributes: Any = root.attributes or {}
        # As live trace-level evaluation: an evaluator's filters apply to the root.
        matching = [s for s in specs if s.matches(root.name, attributes, span_kind(attributes))]
        if matching:
            targets.append(Target(root, _mapped(own, root), matching))
    else:
        for span in own:
            attributes = span.attributes or {}
            kind = span_kind(attributes)
            matching = [spec for spec in specs if spec.matches(span.name, attributes, kind)]
            if matching:
                targets.append(Target(span, _mapped(subtree(span, own), span), matching))
    return Unit(trace_id, targets, list(spans))


def session_unit(
    session_id: str, traces: Sequence[tuple[str, Sequence[ReadableSpan]]], specs: Sequence[EvaluatorSpec]
) -> Unit:
    """The one target of a session: its traces as a Conversation, results on the last turn's root span."""
    mapped: list[tuple[ReadableSpan, Trace | None]] = []
    every: list[ReadableSpan] = []
    for _, spans in traces:
        every.extend(spans)
        own = _judged_spans(spans)
        root = root_of(own)
        if root is not None:
            mapped.append((root, _mapped(own, root)))
    if not mapped:
        return Unit(session_id, [], every, traces=len(traces))
    last_root = max(mapped, key=lambda pair: pair[0].start_time or 0)[0]
    judged: Conversation | None = None
    if all(trace is not None for _, trace in mapped):
        judged = Conversation.from_traces(session_id, [trace for _, trace in mapped if trace is not None])
    target = Target(last_root, judged, list(specs), session_id, revision=len(mapped))
    return Unit(session_id, [target], every, traces=len(traces))
