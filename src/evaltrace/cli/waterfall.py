"""Render a trace's spans as a terminal waterfall: tree, kinds, timing bars, tokens, cost and scores."""

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


def scores_of(attributes: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{evaluator: (score, passed)}`` from ``evaltrace.eval.<name>.score/.passed`` attributes."""
    scores: dict[str, tuple[Any, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(semconv.EVALTRACE_EVAL_PREFIX) or key == semconv.EVALTRACE_EVAL_FAILED:
            continue
        name, _, field = key[len(semconv.EVALTRACE_EVAL_PREFIX) :].rpartition(".")
        score, passed = scores.get(name, (None, None))
        if field == "score":
            score = value
        elif field == "passed":
            passed = value
        else:
            continue
        scores[name] = (score, passed)
    return scores


def _scores_text(attributes: Mapping[str, Any]) -> Text:
    text = Text()
    for name, (score, passed) in sorted(scores_of(attributes).items()):
        style = "green" if passed is True else "red" if passed is False else "white"
        shown = f"{score:.2f}" if isinstance(score, float) else ("pass" if passed else "fail")
        text.append(f"{name}={shown} ", style=style)
    return text


def _tokens(attributes: Mapping[str, Any]) -> str:
    tokens_in = attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
    if tokens_in is None and tokens_out is None:
        return ""
    return f"{tokens_in if tokens_in is not None else '-'}→{tokens_out if tokens_out is not None else '-'}"


def render_waterfall(console: Console, spans: Sequence[ReadableSpan], details: bool = False) -> None:
    """Print ``spans`` (one trace) as a tree with timing bars, token and cost columns and scores."""
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or s.start_time or 0 for s in spans)
    total = max(end - start, 1)
    first = spans[0].get_span_context()
    trace_hex = f"{first.trace_id:032x}" if first else "?"
    table = Table(title=f"trace {trace_hex} · {total / 1e6:.1f} ms", expand=False)
    for column in ("span", "kind", "duration", "timeline", "tokens", "cost $", "scores"):
        table.add_column(column, no_wrap=column != "scores")
    for depth, span in _tree_order(spans):
        attributes = dict(span.attributes or {})
        kind = str(attributes.get(semconv.EVALTRACE_SPAN_KIND, span.kind.name.lower()))
        colour = _KIND_COLOURS.get(kind, "white")
        name = Text("  " * depth + ("└ " if depth else "") + span.name)
        if span.status.status_code is StatusCode.ERROR:
            name.append(" ✗", style="bold red")
        cost = attributes.get(semconv.EVALTRACE_COST_USD)
        duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        table.add_row(
            name,
            Text(kind, style=colour),
            f"{duration:.1f} ms",
            _bar(span, start, total, colour),
            _tokens(attributes),
            f"{cost:.6f}" if isinstance(cost, float) else "",
            _scores_text(attributes),
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
        for event in span.events:
            if event.name == semconv.GEN_AI_EVALUATION_RESULT_EVENT:
                ev = dict(event.attributes or {})
                lines.append(
                    f"  evaluation {ev.get(semconv.GEN_AI_EVALUATION_NAME)}: "
                    f"score={ev.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE)} "
                    f"label={ev.get(semconv.GEN_AI_EVALUATION_SCORE_LABEL)} "
                    f"{_short(ev.get(semconv.GEN_AI_EVALUATION_EXPLANATION, ''), 200)}"
                )
        if lines:
            console.print(Text(span.name, style="bold"))
            for line in lines:
                console.print(Text(line))
