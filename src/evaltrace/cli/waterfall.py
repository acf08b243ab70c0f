"""Render a trace's spans in the terminal: a header with totals, then a tree with durations, tokens, cost, scores.

The table fits the console's width (:mod:`evaltrace.cli.tables`): a timing bar when there is room, and the
optional columns dropped, with a note, when there is not; nothing is cut to "…". Each evaluation shows its
outcome in words, not only in colour: ``pass`` / ``fail`` (with the score), ``ERROR`` with its ``error.type``
when the evaluation itself failed, ``not evaluated`` with the skip reason. The header counts the trace's results
by outcome, and says ``not evaluated`` when nothing was judged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from evaltrace._internal import semconv
from evaltrace._internal.span_scores import ScoreRow, outcome_counts, span_scores
from evaltrace._internal.span_tree import tree_order
from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.format import format_count, format_duration_ns, format_money
from evaltrace.cli.tables import Cell, Column, fit_table, print_fitted
from evaltrace.cli.trace_totals import trace_totals
from evaltrace.cli.wrap import facts_line, shorten_middle

_KIND_COLOURS = {
    semconv.KIND_LLM: "magenta",
    semconv.KIND_EMBEDDING: "magenta",
    semconv.KIND_TOOL: "yellow",
    semconv.KIND_AGENT: "cyan",
    semconv.KIND_WORKFLOW: "blue",
    semconv.KIND_TASK: "white",
    semconv.KIND_EVALUATION: "green",
}


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
    """One evaluation per line, so a narrow column folds between results before it folds inside one."""
    text = Text()
    for index, row in enumerate(sorted(rows, key=lambda r: r.name)):
        style, _ = _OUTCOME_STYLES.get(row.outcome or "", ("white", ""))
        text.append(("\n" if index else "") + clean(describe(row), single_line=True), style=style)
    return text


def summary_line(rows: Sequence[ScoreRow]) -> str:
    """``evaluations: 2 pass · 1 fail · 1 error · 1 not evaluated``; ``evaluations: not evaluated`` for none."""
    counts = outcome_counts(rows)
    if not counts:
        return "evaluations: not evaluated"
    order = ("pass", "fail", "error", "not_evaluated", "pending", "other")
    return "evaluations: " + " · ".join(f"{counts[o]} {_SUMMARY_WORDS.get(o, o)}" for o in order if counts.get(o))


def _bar(span: ReadableSpan, start: int, total: int, width: int, colour: str) -> Text:
    begin = int(((span.start_time or start) - start) / total * width)
    length = max(1, int(((span.end_time or start) - (span.start_time or start)) / total * width))
    begin = min(begin, width - 1)
    length = min(length, width - begin)
    return Text(" " * begin + "█" * length + " " * (width - begin - length), style=colour)


def _tokens(attributes: Mapping[str, Any]) -> Text:
    shown = []
    for key in (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS):
        value = attributes.get(key)
        shown.append(format_count(value) if isinstance(value, int | float) and not isinstance(value, bool) else value)
    if shown == [None, None]:
        return Text()
    # Attributes a foreign exporter wrote may hold any string: escaped, on one line.
    return plain("→".join("-" if v is None else str(v) for v in shown), single_line=True)


def _cost(attributes: Mapping[str, Any]) -> str:
    cost = attributes.get(semconv.EVALTRACE_COST_USD, attributes.get(semconv.GEN_AI_USAGE_COST))
    return format_money(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else ""


def _header(spans: Sequence[ReadableSpan], ordered: list[tuple[int, ReadableSpan]], caption: str) -> list[Text]:
    """The lines above the table: id, root, service, start and duration; session and user; totals."""
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or s.start_time or 0 for s in spans)
    first = spans[0].get_span_context()
    root = ordered[0][1]
    totals = trace_totals(spans)
    service = root.resource.attributes.get("service.name") if root.resource is not None else None
    started = dt.datetime.fromtimestamp(start / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    facts = [clean(root.name, single_line=True)]
    facts += [clean(service, single_line=True)] if service else []
    facts += [started, format_duration_ns(end - start), f"{len(spans)} span{'s' if len(spans) != 1 else ''}"]
    if totals.error_spans:
        facts.append(f"{totals.error_spans} error{'s' if totals.error_spans != 1 else ''}")
    lines = [Text(f"trace {first.trace_id:032x}" if first else "trace ?", style="bold"), Text(" · ".join(facts))]
    who = [f"session {totals.session_id}"] if totals.session_id else []
    who += [f"user {totals.user_id}"] if totals.user_id else []
    if who:
        lines.append(plain(" · ".join(who), single_line=True))
    usage = []
    if totals.input_tokens is not None or totals.output_tokens is not None:
        usage.append(
            f"tokens {format_count(totals.input_tokens) or '-'} in · {format_count(totals.output_tokens) or '-'} out"
        )
    if totals.cost_usd is not None:
        usage.append(f"cost {format_money(totals.cost_usd)}")
    lines.append(Text(" · ".join([*usage, caption])))
    return lines


_COLUMNS = (
    Column("span", fold=True, min_width=24),
    Column("kind", drop=1),
    Column("duration", justify="right"),
    Column("tokens", justify="right", drop=3),
    Column("cost", justify="right", drop=2),
    Column("scores", fold=True, min_width=24),
)
_TIMELINE = Column("timeline", drop=0)
_TIMELINE_MIN, _TIMELINE_MAX = 10, 40


def _name(depth: int, span: ReadableSpan, width: int | None) -> Text:
    """The tree cell: indentation, then the name, shortened in the middle to fit ``width`` cells (None: whole).

    One line always: a folded name would wrap to the column's edge and lose its place in the tree.
    """
    indent = "  " * depth + ("└ " if depth else "")
    failed = span.status.status_code is StatusCode.ERROR
    mark = " ✗" if failed else ""
    name = clean(span.name, single_line=True)
    if width is not None:
        name = shorten_middle(name, max(4, width - cell_len(indent) - cell_len(mark)))
    text = Text(indent + name)
    if failed:
        text.append(mark, style="bold red")
    return text


def _rows(
    ordered: list[tuple[int, ReadableSpan]], scores: Mapping[int, list[ScoreRow]], name_width: int | None = None
) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for depth, span in ordered:
        attributes = dict(span.attributes or {})
        kind = str(attributes.get(semconv.EVALTRACE_SPAN_KIND, span.kind.name.lower()))
        name = _name(depth, span, name_width)
        ended = span.end_time is not None and span.start_time is not None
        rows.append([
            name,
            plain(kind, _KIND_COLOURS.get(kind, "white"), single_line=True),
            format_duration_ns((span.end_time or 0) - (span.start_time or 0)) if ended else "running",
            _tokens(attributes),
            _cost(attributes),
            _scores_text(scores[id(span)]),
        ])  # fmt: skip
    return rows


def _with_timeline(rows: list[list[Cell]], ordered: list[tuple[int, ReadableSpan]], width: int) -> list[list[Cell]]:
    """``rows`` with a timing bar ``width`` cells wide after the duration, coloured by span kind."""
    start = min(span.start_time or 0 for _, span in ordered)
    total = max(max(span.end_time or span.start_time or 0 for _, span in ordered) - start, 1)
    with_bars: list[list[Cell]] = []
    for row, (_, span) in zip(rows, ordered, strict=True):
        kind = str((span.attributes or {}).get(semconv.EVALTRACE_SPAN_KIND, span.kind.name.lower()))
        with_bars.append([*row[:3], _bar(span, start, total, width, _KIND_COLOURS.get(kind, "white")), *row[3:]])
    return with_bars


def render_waterfall(console: Console, spans: Sequence[ReadableSpan], details: bool = False) -> None:
    """Print ``spans`` (one trace): a header with totals, then a tree with durations, tokens, cost and scores.

    The table fits ``console.width``: a timing bar is added when there is room for one, and at narrow widths
    the kind, then the cost, then the tokens columns are dropped (a note says so); nothing is cut.
    """
    ordered = tree_order(spans)
    # Each result is on exactly one span (the enriched span, or its own late ``evaluation`` span): no double count.
    scores = {id(span): span_scores(span) if span.context is not None else [] for _, span in ordered}
    rows = _rows(ordered, scores)
    fitted = fit_table(console.width, _COLUMNS, rows)
    # The bar takes the room the other columns leave unfolded, but at least half the room above their minimum:
    # a timeline is worth more than names on one line.
    room = max(console.width - fitted.natural_width, (console.width - fitted.width) // 2) - 2  # 2: the gap
    bar_width = min(_TIMELINE_MAX, room)
    columns: tuple[Column, ...] = _COLUMNS
    if bar_width >= _TIMELINE_MIN:
        columns = (*_COLUMNS[:3], _TIMELINE, *_COLUMNS[3:])
        fitted = fit_table(console.width, columns, _with_timeline(rows, ordered, bar_width))
    name_width = fitted.fold_widths.get(_COLUMNS[0].header)
    if name_width is not None:
        # Too narrow for every name: shorten them to the width the span column got, and lay out again with
        # that column fixed, so no name folds back to the column's edge (a child would read as a root).
        rows = _rows(ordered, scores, name_width)
        columns = (replace(columns[0], fold=False), *columns[1:])
        with_bars = _with_timeline(rows, ordered, bar_width) if _TIMELINE in columns else rows
        fitted = fit_table(console.width, columns, with_bars)
    if _TIMELINE not in columns:
        fitted.hidden.append(_TIMELINE.header)
    for line in _header(spans, ordered, summary_line([row for found in scores.values() for row in found])):
        # Each " · " fact stays on one line ("1 error", never "1" / "error") when the header wraps.
        for wrapped in facts_line(line.plain.split(" · "), console.width):
            console.print(Text(wrapped, style=line.style), soft_wrap=True, highlight=False)
    print_fitted(console, fitted)
    if details:
        from evaltrace.cli.span_details import print_span_details  # here: reading chats imports the mapping

        print_span_details(console, [span for _, span in ordered])
