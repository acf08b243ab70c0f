"""Render a :class:`~evaltrace.report.model.ReportData` as one self-contained HTML page.

Everything is rendered on the server side with ``html.escape`` (the page reads fine without JavaScript, and
nothing from the trace is ever interpreted as markup); the inline script only adds expand/collapse-all and
jumping from a score to its span. Span details use native ``<details>`` elements.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from evaltrace._version import __version__
from evaltrace.report.assets import CSS, JS
from evaltrace.report.model import ReportData, ScoreRow, SpanRow, outcome_counts
from evaltrace.schema import Trace, TraceMessage

__all__ = ["render_html"]

_KINDS = {"llm", "tool", "agent", "workflow", "task", "evaluation"}
_MAX_VALUE_CHARS = 20_000


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _ms(value: float) -> str:
    if 0 < value < 0.1:
        return f"{value * 1000:.0f} µs"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def _pretty(value: Any) -> str:
    """Pretty-print JSON strings and structures; cap very long values (the page must stay usable)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                value = json.loads(stripped)
            except ValueError:
                pass
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[:_MAX_VALUE_CHARS] + f"\n... ({len(text) - _MAX_VALUE_CHARS} more characters)"
    return text


def _kind_class(kind: str) -> str:
    return f"k-{kind}" if kind in _KINDS else "k-other"


# How each outcome is shown: (badge CSS class, text). An error and a skip are never shown as pass or fail.
_OUTCOME_BADGES = {
    "pass": ("pass", "pass"),
    "fail": ("fail", "fail"),
    "error": ("error", "error"),
    "not_evaluated": ("neutral", "not evaluated"),
    "pending": ("neutral", "pending"),
}
# Header summary order and wording: (outcome, CSS class, text after the count).
_SUMMARY = (
    ("pass", "pass", "pass"),
    ("fail", "fail", "fail"),
    ("error", "error", "error"),
    ("not_evaluated", "neutral", "not evaluated"),
    ("pending", "neutral", "pending"),
    ("other", "neutral", "other"),
)


def _verdict(row: ScoreRow) -> str:
    css, text = _OUTCOME_BADGES.get(row.outcome or "", ("neutral", row.label or "n/a"))
    if row.outcome == "error" and row.error_type:
        text = f"error: {row.error_type}"
    return f'<span class="badge {css}">{_e(text)}</span>'


def _chip(row: ScoreRow) -> str:
    css, text = _OUTCOME_BADGES.get(row.outcome or "", ("neutral", row.label or ""))
    if row.outcome in ("pass", "fail"):  # the colour says pass/fail; the score, when there is one, says how much
        text = f"{row.score:.2f}" if row.score is not None else ""
    shown = f"{row.name} {text}".rstrip()
    title = row.explanation or row.error_type or ""
    return f'<span class="badge {css}" title="{_e(title)}">{_e(shown)}</span>'


def evaluation_summary(rows: list[ScoreRow]) -> str:
    """Badges counting the results by outcome (``pass`` / ``fail`` / ``error`` / ``not evaluated``).

    With no result at all, one ``not evaluated`` badge: a trace nothing judged is never shown as passing.
    """
    if not rows:
        return '<span class="badge neutral" data-outcome="none">not evaluated</span>'
    counts = outcome_counts(rows)
    return " ".join(
        f'<span class="badge {css}" data-outcome="{outcome}">{counts[outcome]} {text}</span>'
        for outcome, css, text in _SUMMARY
        if counts.get(outcome)
    )


def _header(data: ReportData) -> str:
    started = dt.datetime.fromtimestamp(data.started_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    # Span errors (the application's) and evaluation outcomes (ours) are separate badges; neither says "ok". A
    # late ``evaluation`` span in ERROR is an evaluation that errored: counted among the outcomes, not here.
    errors = sum(1 for s in data.spans if s.error and s.kind != "evaluation")
    spans = f'<span class="badge fail" data-outcome="span-error">{errors} span error(s)</span> ' if errors else ""
    status = f'{spans}<span class="evals">{evaluation_summary(data.scores)}</span>'
    items = [
        ("trace", f"<code>{_e(data.trace_id)}</code>"),
        ("service", _e(data.service or "-")),
        ("started", _e(started)),
        ("duration", _ms(data.duration_ms)),
        ("spans", str(len(data.spans))),
    ]
    metrics = data.trace.metrics if data.trace is not None else None
    if metrics is not None:
        if metrics.token_input is not None or metrics.token_output is not None:
            tokens = f"{metrics.token_input or 0} in / {metrics.token_output or 0} out"
            if metrics.token_thinking:
                tokens += f" / {metrics.token_thinking} thinking"
            items.append(("tokens", tokens))
        if metrics.cost_usd is not None:
            items.append(("cost", f"${metrics.cost_usd:.6f}"))
    meta = "".join(f"<span>{label} <b>{value}</b></span>" for label, value in items)
    return f"<header><h1>{_e(data.root_name)} {status}</h1><div class='meta'>{meta}</div></header>"


def _scores(rows: list[ScoreRow]) -> str:
    if not rows:
        return (
            '<section id="scores"><h2>Scores &middot; not evaluated</h2>'
            '<p class="empty">No evaluation results on this trace.</p></section>'
        )
    body = "".join(
        f'<tr data-outcome="{_e(r.outcome or "other")}"><td><b>{_e(r.name)}</b></td>'
        f'<td><a href="#span-{_e(r.span_id)}" data-span-link="{_e(r.span_id)}">{_e(r.span_name)}</a></td>'
        f"<td>{'' if r.score is None else f'{r.score:.3f}'}</td><td>{_verdict(r)}</td>"
        f"<td>{_e(r.explanation or '')}</td></tr>"
        for r in rows
    )
    counts = outcome_counts(rows)
    title = " &middot; ".join(f"{counts[o]} {text}" for o, _, text in _SUMMARY if counts.get(o))
    head = "<tr><th>Evaluator</th><th>Span</th><th>Score</th><th>Result</th><th>Explanation</th></tr>"
    return f'<section id="scores"><h2>Scores &middot; {title}</h2><table>{head}{body}</table></section>'


def _attributes_table(attributes: Mapping[str, Any]) -> str:
    if not attributes:
        return '<p class="empty">No attributes.</p>'
    rows = "".join(
        f"<tr><td>{_e(key)}</td><td><pre>{_e(_pretty(value))}</pre></td></tr>"
        for key, value in sorted(attributes.items())
    )
    return f"<table>{rows}</table>"


def _span_row(row: SpanRow, total_ms: float) -> str:
    total = total_ms or 1.0
    left = min(100.0, row.offset_ms / total * 100)
    width = max(0.3, min(100.0 - left, row.duration_ms / total * 100))
    color = f"var(--{row.kind})" if row.kind in _KINDS else "var(--other)"
    bar = f'<div class="bar{" err" if row.error else ""}" style="left:{left:.3f}%;width:{width:.3f}%;background:{color}"></div>'
    name = (
        f'<div class="name" style="padding-left:{row.depth * 16}px" title="{_e(row.name)}">'
        f'<span class="kind {_kind_class(row.kind)}">{_e(row.kind)}</span>{_e(row.name)}</div>'
    )
    chips = "".join(_chip(s) for s in row.scores)
    events = "".join(
        f"<tr><td>{_e(name)} <span class='dur'>@ {_ms(at)}</span></td><td><pre>{_e(_pretty(attrs))}</pre></td></tr>"
        for name, at, attrs in row.events
    )
    error = f'<p class="err-text">Error: {_e(row.error)}</p>' if row.error else ""
    detail = (
        f'<div class="detail">{error}<p>span <code>{_e(row.span_id)}</code>'
        f"{f' &middot; parent <code>{_e(row.parent_id)}</code>' if row.parent_id else ''}</p>"
        f"<h3>Attributes</h3>{_attributes_table(row.attributes)}"
        f"{f'<h3>Events</h3><table>{events}</table>' if events else ''}</div>"
    )
    return (
        f'<details class="span" id="span-{_e(row.span_id)}"><summary>{name}<div class="track">{bar}</div>'
        f'<div class="dur">{_ms(row.duration_ms)}</div><div class="chips">{chips}</div></summary>{detail}</details>'
    )


def _waterfall(data: ReportData) -> str:
    ticks = "".join(f"<span>{_ms(data.duration_ms * q / 4)}</span>" for q in range(5))
    rows = "".join(_span_row(row, data.duration_ms) for row in data.spans)
    buttons = (
        '<span class="buttons"><button data-toggle="open">Expand all</button> '
        '<button data-toggle="close">Collapse all</button></span>'
    )
    axis = f'<div class="axis"><span>Span</span><div class="ticks">{ticks}</div><span>Duration</span><span>Scores</span></div>'
    return f'<section id="waterfall"><h2>Waterfall {buttons}</h2>{axis}{rows}</section>'


def _content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return f'<div class="content">{_e(content)}</div>'
    return f"<pre>{_e(_pretty(content))}</pre>"


def _thinking(text: str | None, title: str = "Thinking") -> str:
    if not text:
        return ""
    return f'<details class="thinking" open><summary>{title}</summary><pre>{_e(text)}</pre></details>'


def _message(message: TraceMessage) -> str:
    role = message.role
    label = f"{role} &middot; {_e(message.name)}" if message.name else role
    call = message.tool_call
    tool = ""
    if call is not None:
        call_id = f" <code>{_e(call.id)}</code>" if call.id else ""
        tool = (
            f'<div class="toolcall"><b>tool call</b> {_e(call.name)}{call_id}'
            f"<pre>{_e(_pretty(call.arguments))}</pre></div>"
        )
    return (
        f'<div class="msg {_e(role)}"><div class="role">{label}</div>{_thinking(message.thinking)}'
        f"{_content(message.content)}{tool}</div>"
    )


def _calls_with_results(trace: Trace) -> list[tuple[Any, Any]]:
    """Pair each tool call with its result: by call id, else the next unclaimed result of the same tool."""
    by_id = {r.tool_call_id: r for r in trace.tool_results if r.tool_call_id}
    unclaimed = [r for r in trace.tool_results if not r.tool_call_id]
    pairs: list[tuple[Any, Any]] = []
    for call in trace.tool_calls:
        result = by_id.get(call.id) if call.id else None
        if result is None:
            result = next((r for r in unclaimed if r.name == call.name), None)
            if result is not None:
                unclaimed.remove(result)
        pairs.append((call, result.content if result is not None else ""))
    return pairs


def _conversation(trace: Trace | None, error: str | None) -> str:
    if trace is None:
        reason = f" ({_e(error)})" if error else ""
        return f'<section id="conversation"><h2>Messages</h2><p class="empty">Not available{reason}.</p></section>'
    messages = "".join(_message(m) for m in trace.messages) or '<p class="empty">No messages.</p>'
    calls = "".join(
        f"<tr><td><b>{_e(c.name)}</b></td><td><pre>{_e(_pretty(c.arguments))}</pre></td>"
        f"<td><pre>{_e(_pretty(result))}</pre></td></tr>"
        for c, result in _calls_with_results(trace)
    )
    tools = (
        f"<table><tr><th>Tool</th><th>Arguments</th><th>Result</th></tr>{calls}</table>"
        if calls
        else '<p class="empty">No tool calls.</p>'
    )
    answer = trace.output.final_answer
    error_text = f'<p class="err-text">{_e(trace.error.type)}: {_e(trace.error.message)}</p>' if trace.error else ""
    return (
        f'<section id="answer"><h2>Final answer</h2>{error_text}'
        f"{_content(answer) if answer else '<p class=empty>No final answer.</p>'}"
        f"{_thinking(trace.output.thinking, 'Thinking (whole trace)')}</section>"
        f'<section id="tools"><h2>Tool calls</h2>{tools}</section>'
        f'<section id="conversation"><h2>Messages</h2>{messages}</section>'
    )


def render_html(data: ReportData, extra_sections: Iterable[str] = ()) -> str:
    """Return the complete HTML document for ``data``."""
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    body = "".join(
        [_scores(data.scores), _waterfall(data), _conversation(data.trace, data.trace_error), *extra_sections]
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(data.root_name)} &middot; evaltrace report</title><style>{CSS}</style></head><body>"
        f"{_header(data)}<main>{body}</main>"
        f"<footer>Generated by evaltrace {_e(__version__)} at {generated} from the local trace store.</footer>"
        f"<script>{JS}</script></body></html>\n"
    )
