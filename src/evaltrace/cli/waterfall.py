"""Render a trace's spans as a terminal waterfall: tree, kinds, timing bars, tokens, cost and scores.

Each evaluation shows its outcome in words, not only in colour: ``pass`` / ``fail`` (with the score), ``ERROR``
with its ``error.type`` when the evaluation itself failed, ``not evaluated`` with the skip reason. The caption
counts the trace's results by outcome, and says ``not evaluated`` when nothing was judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evaltrace._internal import semconv
from evaltrace.cli._untrusted import clean, plain
from evaltrace.report.model import ScoreRow, outcome_counts, span_scores

_BAR_WIDTH = 32
_KIND_COLOURS = {
    semconv.KIND_LLM: "magenta",
    semconv.KIND_EMBEDDING: "magenta",
    semconv.KIND_TOOL: "yellow",
    semconv.KIND_AGENT: "cyan",
    semconv.KIND_WORKFLOW: "blue",
    semconv.KIND_TASK: "white",
    semconv.KIND_EVALUATION: "green",
}


def _tree_order(spans: Sequence[ReadableSpan]) -> list[tuple[int, ReadableSpan]]:
    """Depth-first order of the spans with their depth; orphans (parent not stored) are roots."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    ordered: list[tuple[int, ReadableSpan]] = []
    stack = [(0, s) for s in sorted(children.get(None, []), key=lambda s: s.start_time or 0, reverse=True)]
    while stack:
        depth, span = stack.pop()
        ordered.append((depth, span))
        kids = children.get(span.context.span_id if span.context else None, [])
        stack.extend((depth + 1, k) for k in sorted(kids, key=lambda s: s.start_time or 0, reverse=True))
    return ordered


def _bar(span: ReadableSpan, start: int, total: int, colour: str) -> Text:
    begin = int(((span.start_time or start) - start) / total * _BAR_WIDTH)
    length = max(1, int(((span.end_time or start) - (span.start_time or start)) / total * _BAR_WIDTH))
    begin = min(begin, _BAR_WIDTH - 1)
    length = min(length, _BAR_WIDTH - begin)
    return Text(" " * begin + "█" * length + " " * (_BAR_WIDTH - begin - length), style=colour)


# (style, word) per outcome; "other" is a foreign result that carries only a label.
_OUTCOME_STYLES = {
    "pass": ("green", "pass"),
    "fail": ("red", "fail"),
    "error": ("bold yellow", "ERROR"),
    "not_evaluated": ("dim", "not evaluated"),
    "pending": ("dim", "pending"),
}
_SUMMARY_WORDS = {"not_evaluated": "not evaluated", "error": "error"}


def describe(row: ScoreRow) -> str:
    """One evaluation as the terminal shows it, e.g. ``relevance=0.82 pass`` or ``judge=ERROR(timeout)``."""
    _, word = _OUTCOME_STYLES.get(row.outcome or "", ("white", row.label or "?"))
    if row.outcome == "error":
        return f"{row.name}={word}({row.error_type or 'unknown'})"
    if row.outcome in ("not_evaluated", "pending"):
        return f"{row.name}={word}" + (f" ({row.explanation})" if row.explanation else "")
    score = f"{row.score:.2f} " if row.score is not None else ""
    return f"{row.name}={score}{word}"


def _scores_text(rows: Sequence[ScoreRow]) -> Text:
    text = Text()
    for row in sorted(rows, key=lambda r: r.name):
        style, _ = _OUTCOME_STYLES.get(row.outcome or "", ("white", ""))
        text.append(clean(describe(row), single_line=True) + " ", style=style)
    return text


def summary_line(rows: Sequence[ScoreRow]) -> str:
    """``evaluations: 2 pass · 1 fail · 1 error · 1 not evaluated``; ``evaluations: not evaluated`` for none."""
    counts = outcome_counts(rows)
    if not counts:
        return "evaluations: not evaluated"
    order = ("pass", "fail", "error", "not_evaluated", "pending", "other")
    return "evaluations: " + " · ".join(f"{counts[o]} {_SUMMARY_WORDS.get(o, o)}" for o in order if counts.get(o))


def _tokens(attributes: Mapping[str, Any]) -> Text:
    tokens_in = attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
    if tokens_in is None and tokens_out is None:
        return Text()
    shown = f"{tokens_in if tokens_in is not None else '-'}→{tokens_out if tokens_out is not None else '-'}"
    return plain(shown, single_line=True)  # attributes a foreign exporter wrote may hold any string


def render_waterfall(console: Console, spans: Sequence[ReadableSpan], details: bool = False) -> None:
    """Print ``spans`` (one trace) as a tree with timing bars, token and cost columns and scores."""
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or s.start_time or 0 for s in spans)
    total = max(end - start, 1)
    first = spans[0].get_span_context()
    trace_hex = f"{first.trace_id:032x}" if first else "?"
    ordered = _tree_order(spans)
    # Each result is on exactly one span (the enriched span, or its own late ``evaluation`` span): no double count.
    scores = {id(span): span_scores(span) if span.context is not None else [] for _, span in ordered}
    caption = summary_line([row for rows in scores.values() for row in rows])
    table = Table(title=f"trace {trace_hex} · {total / 1e6:.1f} ms", caption=plain(caption), expand=False)
    for column in ("span", "kind", "duration", "timeline", "tokens", "cost $", "scores"):
        table.add_column(column, no_wrap=column != "scores")
    for depth, span in ordered:
        attributes = dict(span.attributes or {})
        kind = str(attributes.get(semconv.EVALTRACE_SPAN_KIND, span.kind.name.lower()))
        colour = _KIND_COLOURS.get(kind, "white")
        name = Text("  " * depth + ("└ " if depth else "") + clean(span.name, single_line=True))
        if span.status.status_code is StatusCode.ERROR:
            name.append(" ✗", style="bold red")
        cost = attributes.get(semconv.EVALTRACE_COST_USD)
        duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        table.add_row(
            name,
            plain(kind, colour, single_line=True),
            f"{duration:.1f} ms",
            _bar(span, start, total, colour),
            _tokens(attributes),
            f"{cost:.6f}" if isinstance(cost, float) else "",
            _scores_text(scores[id(span)]),
        )
    console.print(table)
    if details:
        _print_details(console, spans)


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_details(console: Console, spans: Sequence[ReadableSpan]) -> None:
    for _, span in _tree_order(spans):
        attributes = dict(span.attributes or {})
        lines = [
            f"  {key}: {_short(attributes[key])}"
            for key in (
                semconv.INPUT_VALUE,
                semconv.OUTPUT_VALUE,
                semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
                semconv.GEN_AI_TOOL_CALL_RESULT,
                semconv.GEN_AI_INPUT_MESSAGES,
                semconv.GEN_AI_OUTPUT_MESSAGES,
            )
            if key in attributes
        ]
        for row in span_scores(span) if span.context is not None else []:
            shown = row.explanation and row.outcome not in ("not_evaluated", "pending")  # describe() has those
            explanation = f" {_short(row.explanation, 200)}" if shown else ""
            lines.append(f"  evaluation {describe(row)}{explanation}")
        if lines:
            console.print(plain(span.name, "bold"))
            for line in lines:
                console.print(plain(line))
