"""Render a :class:`~evaltrace.report.model.ReportData` as one self-contained HTML page.

Everything is rendered on the server side with ``html.escape`` (the page reads fine without JavaScript, and
nothing from the trace is ever interpreted as markup); the inline script only adds expand/collapse-all and
jumping from a score to its span. Span details use native ``<details>`` elements.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from evaltrace._internal import semconv
from evaltrace._version import __version__
from evaltrace.mapping._pairing import answered_calls, own_call_messages
from evaltrace.report.assets import CSS, JS
from evaltrace.report.chat import chat_messages, span_io
from evaltrace.report.chat_html import render_bubbles, render_span_chat, render_thinking
from evaltrace.report.model import ReportData, ScoreRow, SpanRow, SpanUsage, outcome_counts
from evaltrace.report.text import esc, money, pretty, token_count
from evaltrace.schema import ToolResult, Trace, TraceMessage

__all__ = ["render_html"]

_KINDS = {"llm", "tool", "agent", "workflow", "task", "evaluation"}
_e = esc  # short names: used on every line below, and by the run report
_pretty = pretty


def _ms(value: float) -> str:
    if 0 < value < 0.1:
        return f"{value * 1000:.0f} µs"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


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


def _verdict_badge(data: ReportData) -> str:
    """The trace's evaluation badge; with no result at all it also stands for the (empty) outcome counts."""
    css, text = _OUTCOME_BADGES[data.verdict]
    none = ' data-outcome="none"' if not data.scores else ""
    return (
        f'<span class="verdict-label">evaluation</span> <span class="badge verdict {css}" '
        f'data-verdict="{_e(data.verdict)}"{none}>{_e(text)}</span>'
    )


def usage_text(usage: SpanUsage) -> str:
    """``52 in (10 cached) / 31 out (12 reasoning)``: the recorded token counts, empty when there are none."""
    if usage.input_tokens is None and usage.output_tokens is None:
        return ""
    text = f"{token_count(usage.input_tokens or 0)} in"
    if usage.cache_read_tokens:
        text += f" ({token_count(usage.cache_read_tokens)} cached)"
    text += f" / {token_count(usage.output_tokens or 0)} out"
    if usage.reasoning_tokens:
        text += f" ({token_count(usage.reasoning_tokens)} reasoning)"
    return text


def _header(data: ReportData) -> str:
    started = dt.datetime.fromtimestamp(data.started_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    # Span errors (the application's) and evaluation outcomes (ours) are separate badges; neither says "ok". A
    # late ``evaluation`` span in ERROR is an evaluation that errored: counted among the outcomes, not here.
    errors = sum(1 for s in data.spans if s.error and s.kind != "evaluation")
    spans = f'<span class="badge fail" data-outcome="span-error">{errors} span error(s)</span> ' if errors else ""
    counts = f' <span class="evals">{evaluation_summary(data.scores)}</span>' if data.scores else ""
    items = [
        ("trace", f"<code>{_e(data.trace_id)}</code>"),
        ("service", _e(data.service or "-")),
        ("started", _e(started)),
        ("duration", _ms(data.duration_ms)),
        ("spans", str(len(data.spans))),
    ]
    if data.session_id:
        items.append(("session", f'<code data-field="session">{_e(data.session_id)}</code>'))
    if data.user_id:
        items.append(("user", f'<code data-field="user">{_e(data.user_id)}</code>'))
    tokens = usage_text(data.usage)
    if tokens:
        items.append(("tokens", f'<span data-field="tokens">{tokens}</span>'))
    if data.usage.cost_usd is not None:
        items.append(("cost", f'<span data-field="cost">{_e(money(data.usage.cost_usd))}</span>'))
    meta = "".join(f"<span>{label} <b>{value}</b></span>" for label, value in items)
    tags = "".join(f'<span class="tag">{_e(tag)}</span>' for tag in data.tags)
    tag_line = f"<div class='meta tags' data-field='tags'>tags {tags}</div>" if tags else ""
    return (
        f"<header><h1>{_e(data.root_name)} <span class='status'>{_verdict_badge(data)}{counts} {spans}</span></h1>"
        f"<div class='meta'>{meta}</div>{tag_line}</header>"
    )


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


def _io(attributes: Mapping[str, Any]) -> str:
    return "".join(
        f'<h3>{heading}</h3><pre class="io">{_e(_pretty(value))}</pre>' for heading, value in span_io(attributes)
    )


def _facts(row: SpanRow) -> str:
    """Ids, model, tokens and cost of a span, on one line."""
    facts = [f"span <code>{_e(row.span_id)}</code>"]
    if row.parent_id:
        facts.append(f"parent <code>{_e(row.parent_id)}</code>")
    model = row.attributes.get(semconv.GEN_AI_RESPONSE_MODEL) or row.attributes.get(semconv.GEN_AI_REQUEST_MODEL)
    if model:
        facts.append(f"model <b>{_e(model)}</b>")
    tokens = usage_text(row.usage)
    if tokens:
        facts.append(f"tokens <b>{tokens}</b>")
    if row.usage.cost_usd is not None:
        facts.append(f"cost <b>{_e(money(row.usage.cost_usd))}</b>")
    return f'<p class="facts">{" &middot; ".join(facts)}</p>'


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
    usage = row.usage
    tokens = (
        f"{token_count(usage.input_tokens or 0)} &rarr; {token_count(usage.output_tokens or 0)}"
        if usage.input_tokens is not None or usage.output_tokens is not None
        else ""
    )
    cost = _e(money(usage.cost_usd)) if usage.cost_usd is not None else ""
    events = "".join(
        f"<tr><td>{_e(name)} <span class='dur'>@ {_ms(at)}</span></td><td><pre>{_e(_pretty(attrs))}</pre></td></tr>"
        for name, at, attrs in row.events
    )
    events_view = (
        f'<details class="raw"><summary>Events ({len(row.events)})</summary><table>{events}</table></details>'
        if events
        else ""
    )
    error = f'<p class="err-text">Error: {_e(row.error)}</p>' if row.error else ""
    body = f"<h3>Messages</h3>{render_span_chat(row.chat)}" if row.chat is not None else _io(row.attributes)
    detail = (
        f'<div class="detail">{error}{_facts(row)}{body}'
        f'<details class="raw"><summary>Raw attributes ({len(row.attributes)})</summary>'
        f"{_attributes_table(row.attributes)}</details>"
        f"{events_view}</div>"
    )
    return (
        f'<details class="span" id="span-{_e(row.span_id)}" data-kind="{_e(row.kind)}"><summary>{name}'
        f'<div class="track">{bar}</div><div class="dur">{_ms(row.duration_ms)}</div>'
        f'<div class="num tokens" title="input &rarr; output tokens">{tokens}</div><div class="num cost">{cost}</div>'
        f'<div class="chips">{chips}</div></summary>{detail}</details>'
    )


def _waterfall(data: ReportData) -> str:
    ticks = "".join(f"<span>{_ms(data.duration_ms * q / 4)}</span>" for q in range(5))
    rows = "".join(_span_row(row, data.duration_ms) for row in data.spans)
    buttons = (
        '<span class="buttons"><button data-toggle="open">Expand all</button> '
        '<button data-toggle="close">Collapse all</button></span>'
    )
    axis = (
        f'<div class="axis"><span>Span</span><div class="ticks">{ticks}</div><span class="num">Duration</span>'
        '<span class="num tokens">Tokens in &rarr; out</span><span class="num cost">Cost</span><span>Scores</span></div>'
    )
    # Token and cost columns only when some span recorded them: empty columns take no room.
    usage = "" if any(not row.usage.empty for row in data.spans) else " no-usage"
    return f'<section id="waterfall" class="waterfall{usage}"><h2>Waterfall {buttons}</h2>{axis}{rows}</section>'


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
    """Pair each tool call with its result, in order, by the tool message answering it where ``messages`` has one.

    The mapping's pairing (``_pairing``), by position, not by id alone: servers that number call ids per response
    give several calls of one trace the same id (an agent loop's ``call_0`` at every step), each with its own
    result; a result naming neither call nor tool (Ollama) answers the first call waiting; a call no tool message
    answers shows none (not a later call's under its id). A call's result is the view of the message answering it
    (the views follow those messages in order: a failed call's view is an error, whatever text the model was
    sent). Without that (views an adapter or a stored trace set without messages, or not one per answer), a
    result is taken by the id of the message answering the call (else the call's), else by tool name among
    results without an id (Gemini, Ollama adapters), else, for a result naming nothing, the first such.
    """
    unclaimed = list(trace.tool_results)
    pairs: list[tuple[Any, Any]] = []
    for call, (paired, answer, view) in zip(trace.tool_calls, _answers(trace), strict=True):
        result = view
        if result is None and (not paired or answer is not None):  # a call its messages hold unanswered: none
            call_id = (answer.tool_call_id if answer is not None else None) or call.id
            if call_id:
                result = next((r for r in unclaimed if r.tool_call_id == call_id), None)
            if result is None:
                result = next((r for r in unclaimed if not r.tool_call_id and r.name == call.name), None)
            if result is None and answer is not None and not answer.tool_call_id and not answer.name:
                result = next((r for r in unclaimed if not r.tool_call_id and not r.name), None)
        if result is not None and result in unclaimed:
            unclaimed.remove(result)
        pairs.append((call, result.content if result is not None else ""))
    return pairs


def _answers(trace: Trace) -> list[tuple[bool, TraceMessage | None, ToolResult | None]]:
    """For each tool call view: whether ``messages`` pair it, its answer there, and that answer's result view.

    The result views are the trace's own answers' in message order, so they line up with the answers of the
    calls the views hold when there are as many; else no view is given here (the caller falls back to ids).
    """
    if not any(m.role == "tool" for m in trace.messages):  # no results in the messages: the views alone tell
        return [(False, None, None)] * len(trace.tool_calls)
    messages = [m.model_copy() for m in trace.messages]  # each message once: pairing tells them apart by identity
    asked = answered_calls(messages).asked
    answer_of: dict[int, TraceMessage] = {}  # id() of a call's message -> the tool message answering it
    for message in messages:
        call_message = asked.get(id(message))
        if call_message is not None:
            answer_of.setdefault(id(call_message), message)
    held = own_call_messages(messages, trace.tool_calls)
    answers = [answer_of.get(id(m)) if m is not None else None for m in held]
    mine = {id(a) for a in answers if a is not None}
    in_order = [m for m in messages if id(m) in mine]  # the calls' answers, in message order
    view_of: dict[int, ToolResult] = {}
    if len(in_order) == len(trace.tool_results):
        view_of = {id(m): r for m, r in zip(in_order, trace.tool_results, strict=True)}
    return [
        (m is not None, a, view_of.get(id(a)) if a is not None else None) for m, a in zip(held, answers, strict=True)
    ]


def _conversation(trace: Trace | None, error: str | None) -> str:
    if trace is None:
        reason = f" ({_e(error)})" if error else ""
        return f'<section id="conversation"><h2>Messages</h2><p class="empty">Not available{reason}.</p></section>'
    messages = render_bubbles(chat_messages(trace.messages)) or '<p class="empty">No messages.</p>'
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
        f"{render_thinking(trace.output.thinking, 'Reasoning (whole trace)')}</section>"
        f'<section id="tools"><h2>Tool calls</h2>{tools}</section>'
        f'<section id="conversation"><h2>Messages</h2><div class="chat">{messages}</div></section>'
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
