"""What a trace report shows, gathered from the spans of one trace: waterfall rows, scores, and the Trace.

Each row carries its span's tokens and recorded cost (:func:`span_usage`) and, for a model call, its chat
(:mod:`evaltrace.report.chat`); the report carries session, user and tags (the first span, root first, that
has each) and the trace's evaluation badge (:func:`trace_verdict`).

Scores are read from the three places the evaluation pipeline writes them: ``gen_ai.evaluation.result`` span
events and ``evaltrace.eval.<name>.*`` attributes on the evaluated span, and child ``evaluation {name}`` spans
for results that came after the span was exported. One row per (span, evaluator), each with one outcome:
``pass``, ``fail``, ``error`` (the evaluation itself failed), ``not_evaluated`` (skipped, with its reason) or
None for a foreign result that carries only a label. Traces recorded before ``.outcome`` existed are read
right too: an event with ``error.type`` is an error whatever ``.passed`` said, a ``skipped`` label is not
evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv
from evaltrace._internal.span_scores import (
    OUTCOMES,
    ScoreRow,
    as_text,
    hex_id,
    outcome_counts,
    span_scores,
    trace_verdict,
)
from evaltrace._internal.span_scores import late_score as _late_score
from evaltrace.mapping import conventions
from evaltrace.mapping._spans import is_llm
from evaltrace.report.chat import SpanChat, span_chat
from evaltrace.schema import Trace

__all__ = [
    "OUTCOMES",
    "ReportData",
    "ScoreRow",
    "SpanRow",
    "SpanUsage",
    "build_report",
    "outcome_counts",
    "span_scores",
    "span_usage",
    "trace_verdict",
]

# Where session, user and tags are found: ours (``evaltrace.context``), then Langfuse's and OpenInference's.
_SESSION_KEYS = (semconv.SESSION_ID, semconv.LANGFUSE_SESSION_ID)
_USER_KEYS = (semconv.USER_ID, semconv.LANGFUSE_USER_ID)
_TAG_KEYS = (semconv.LANGFUSE_TRACE_TAGS, "tag.tags")


@dataclass
class SpanUsage:
    """Tokens and cost of one span (or, summed over the model calls, of a trace); None when not recorded.

    ``cost_usd`` is the cost the instrumentation recorded (``evaltrace.cost_usd`` or a foreign alias); the
    report never prices a call itself, so a model without a known price shows no cost rather than a guess.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    """A part of ``output_tokens``, not added to them."""
    cache_read_tokens: int | None = None
    """A part of ``input_tokens``."""
    cost_usd: float | None = None

    @property
    def empty(self) -> bool:
        """Whether nothing at all was recorded."""
        return all(
            value is None for value in (self.input_tokens, self.output_tokens, self.reasoning_tokens, self.cost_usd)
        )


@dataclass
class SpanRow:
    """One waterfall row."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str
    depth: int
    offset_ms: float
    duration_ms: float
    error: str | None
    attributes: dict[str, Any]
    events: list[tuple[str, float, dict[str, Any]]]
    scores: list[ScoreRow] = field(default_factory=list)
    usage: SpanUsage = field(default_factory=SpanUsage)
    chat: SpanChat | None = None
    """The messages of a model call, shown as a chat instead of their JSON attributes."""


@dataclass
class ReportData:
    """Everything the HTML page renders."""

    trace_id: str
    root_name: str
    service: str
    started_ns: int
    duration_ms: float
    spans: list[SpanRow]
    scores: list[ScoreRow]
    trace: Trace | None
    trace_error: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    tags: list[str] = field(default_factory=list)
    usage: SpanUsage = field(default_factory=SpanUsage)
    """Summed over the model calls only (an agent span repeating its calls' usage is not counted twice)."""
    verdict: str = semconv.OUTCOME_NOT_EVALUATED
    """The trace's evaluation badge, from :func:`trace_verdict`."""


def _first_number(attributes: Mapping[str, Any], key: str) -> float | None:
    """Attribute ``key``, else its first foreign alias that holds a finite number."""
    for name in conventions.usage_keys(key):
        value = attributes.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _tokens(attributes: Mapping[str, Any], key: str) -> int | None:
    value = _first_number(attributes, key)
    return None if value is None else int(value)


def span_usage(attributes: Mapping[str, Any]) -> SpanUsage:
    """Tokens and recorded cost of a span, from ``gen_ai.usage.*`` and ``evaltrace.cost_usd`` (or their aliases)."""
    return SpanUsage(
        input_tokens=_tokens(attributes, semconv.GEN_AI_USAGE_INPUT_TOKENS),
        output_tokens=_tokens(attributes, semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
        reasoning_tokens=_tokens(attributes, semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
        cache_read_tokens=_tokens(attributes, semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        cost_usd=_first_number(attributes, semconv.EVALTRACE_COST_USD),
    )


def _sum(values: Sequence[int | None]) -> int | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _total_usage(rows: Sequence[SpanUsage]) -> SpanUsage:
    costs = [usage.cost_usd for usage in rows if usage.cost_usd is not None]
    return SpanUsage(
        input_tokens=_sum([usage.input_tokens for usage in rows]),
        output_tokens=_sum([usage.output_tokens for usage in rows]),
        reasoning_tokens=_sum([usage.reasoning_tokens for usage in rows]),
        cache_read_tokens=_sum([usage.cache_read_tokens for usage in rows]),
        cost_usd=sum(costs) if costs else None,
    )


def _first_text(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    return next((value for key in keys if (value := as_text(attributes.get(key)))), None)


def _who(ordered: Sequence[ReadableSpan]) -> tuple[str | None, str | None, list[str]]:
    """Session, user and tags: the first span (root first) that has each; tags from every span, in order."""
    session = user = None
    tags: list[str] = []
    for span in ordered:
        attributes = span.attributes or {}
        session = session or _first_text(attributes, _SESSION_KEYS)
        user = user or _first_text(attributes, _USER_KEYS)
        for key in _TAG_KEYS:
            value = attributes.get(key)
            values = [value] if isinstance(value, str) else value if isinstance(value, Sequence) else ()
            tags.extend(tag for tag in values if isinstance(tag, str) and tag and tag not in tags)
    return session, user, tags


def _depths(spans: Sequence[ReadableSpan]) -> dict[int, int]:
    ids = {s.context.span_id for s in spans if s.context is not None}
    parents = {s.context.span_id: s.parent.span_id if s.parent else None for s in spans if s.context is not None}
    depths: dict[int, int] = {}
    for span_id in ids:
        depth, current, seen = 0, parents.get(span_id), {span_id}
        while current is not None and current in ids and current not in seen:
            seen.add(current)
            depth += 1
            current = parents.get(current)
        depths[span_id] = depth
    return depths


def _ordered(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Depth-first, children by start time, so each subtree is contiguous in the waterfall."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    out: list[ReadableSpan] = []
    stack = sorted(children.get(None, []), key=lambda s: s.start_time or 0, reverse=True)
    while stack:
        span = stack.pop()
        out.append(span)
        assert span.context is not None
        stack.extend(sorted(children.get(span.context.span_id, []), key=lambda s: s.start_time or 0, reverse=True))
    return out


def build_report(spans: Sequence[ReadableSpan], trace: Trace | None, trace_error: str | None = None) -> ReportData:
    """Gather the report of one trace from its spans (and the ``Trace`` mapped from them, when available)."""
    ordered = _ordered([s for s in spans if s.context is not None])
    if not ordered:
        raise ValueError("no spans to report on")
    start = min(s.start_time or 0 for s in ordered)
    end = max(s.end_time or s.start_time or 0 for s in ordered)
    depths = _depths(ordered)
    names = {s.context.span_id: s.name for s in ordered if s.context is not None}
    rows: list[SpanRow] = []
    scores: list[ScoreRow] = []
    for span in ordered:
        assert span.context is not None
        attributes = dict(span.attributes or {})
        status = span.status
        error = (status.description or "error") if status.status_code is StatusCode.ERROR else None
        row = SpanRow(
            span_id=hex_id(span.context.span_id, 16),
            parent_id=hex_id(span.parent.span_id, 16) if span.parent is not None else None,
            name=span.name,
            kind=str(attributes.get(semconv.EVALTRACE_SPAN_KIND) or span.kind.name.lower()),
            depth=depths.get(span.context.span_id, 0),
            offset_ms=((span.start_time or start) - start) / 1e6,
            duration_ms=((span.end_time or span.start_time or start) - (span.start_time or start)) / 1e6,
            error=error,
            attributes=attributes,
            events=[(e.name, (e.timestamp - start) / 1e6, dict(e.attributes or {})) for e in span.events],
            scores=span_scores(span),
            usage=span_usage(attributes),
            chat=span_chat(span),
        )
        rows.append(row)
        parent_name = names.get(span.parent.span_id, "?") if span.parent is not None else "?"
        late = _late_score(span, parent_name)
        if late is not None:
            scores.append(late)  # the evaluation span's own row.scores is the same result: counted once
        else:
            scores.extend(row.scores)
    root = ordered[0]
    assert root.context is not None
    session, user, tags = _who(ordered)
    return ReportData(
        trace_id=hex_id(root.context.trace_id, 32),
        root_name=root.name,
        service=str(root.resource.attributes.get(semconv.SERVICE_NAME, "")),
        started_ns=start,
        duration_ms=(end - start) / 1e6,
        spans=rows,
        scores=scores,
        trace=trace,
        trace_error=trace_error,
        session_id=session,
        user_id=user,
        tags=tags,
        usage=_total_usage([row.usage for row, span in zip(rows, ordered, strict=True) if is_llm(span)]),
        verdict=trace_verdict(scores),
    )
