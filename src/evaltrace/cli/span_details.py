"""``traces show --details``: each span's conversation as the HTML report shows it, in the terminal.

A model call is read into chat bubbles by the report's own model (:func:`evaltrace.report.chat.span_chat`), so a
foreign convention reads the same here as on the page: the role of each message (and the tool's name and call
id), the model's reasoning, every tool call with its arguments, the tool results, then the answer below a
``response`` rule. A span that is no model call shows its input and output (:func:`evaltrace.report.chat.span_io`),
and every span its evaluations. Continuation lines keep their indentation (a ``Padding``, not leading blanks).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.text import Text

from evaltrace._internal import semconv
from evaltrace._internal.span_scores import ScoreRow, span_scores
from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.waterfall import describe
from evaltrace.report.chat import ChatMessage, span_chat, span_io
from evaltrace.report.text import pretty

__all__ = ["MESSAGE_CHARS", "message_lines", "print_span_details"]

MESSAGE_CHARS = 4_000
"""Longest message, argument or result shown; a judge call's span is shown up to :data:`JUDGE_CHARS`."""
JUDGE_CHARS = 20_000  # a judge call is read for its whole prompt (and the text it judged)
_REASON_CHARS = 200
_COMPACT_CHARS = 60

_ROLE_STYLES = {"system": "bold blue", "user": "bold green", "assistant": "bold magenta", "tool": "bold yellow"}


def _text(value: Any, limit: int) -> str:
    """``value`` as the report shows it (pretty JSON, a string as is), cut at ``limit`` with a count of the rest."""
    if isinstance(value, str):
        text = value
    else:
        compact = json.dumps(value, ensure_ascii=False, default=str)
        text = compact if len(compact) <= _COMPACT_CHARS else pretty(value)  # {"city": "Paris"} on one line
    if len(text) > limit:
        text = text[:limit] + f"\n… ({len(text) - limit} more characters)"
    return text


def _indented(renderable: RenderableType, depth: int) -> Padding:
    return Padding(renderable, (0, 0, 0, 2 * depth))


def message_lines(message: ChatMessage, limit: int = MESSAGE_CHARS) -> list[RenderableType]:
    """One chat bubble for the terminal: its role line, then reasoning, text and tool calls indented under it."""
    head = Text.assemble((clean(message.role, single_line=True), _ROLE_STYLES.get(message.role, "bold")))
    if message.name:
        head.append(" · " + clean(message.name, single_line=True))
    if message.tool_call_id:
        head.append(" " + clean(message.tool_call_id, single_line=True), style="dim")
    shown: list[RenderableType] = [_indented(head, 1)]
    if message.thinking:
        shown.append(
            _indented(Text.assemble(("thinking: ", "dim italic"), (clean(_text(message.thinking, limit)), "dim")), 2)
        )
    if message.content not in (None, ""):
        shown.append(_indented(plain(_text(message.content, limit)), 2))
    for call in message.tool_calls:
        label = Text.assemble(("↪ calls ", "yellow"), (clean(call.name, single_line=True), "bold"))
        if call.id:
            label.append(" " + clean(call.id, single_line=True), style="dim")
        shown += [_indented(label, 2), _indented(plain(_text(call.arguments, limit)), 3)]
    if len(shown) == 1:
        shown.append(_indented(Text("(empty)", style="dim"), 2))
    return shown


def _evaluation(row: ScoreRow) -> Text:
    shown = row.explanation and row.outcome not in ("not_evaluated", "pending")  # describe() has those
    reason = row.explanation or ""
    cut = reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 1] + "…"
    return plain(f"evaluation {describe(row)}" + (f" {cut}" if shown else ""))


def _span_lines(span: ReadableSpan) -> list[RenderableType]:
    attributes = dict(span.attributes or {})
    limit = JUDGE_CHARS if attributes.get(semconv.EVALTRACE_JUDGE) is True else MESSAGE_CHARS
    shown: list[RenderableType] = []
    if span.status.status_code is StatusCode.ERROR:
        shown.append(_indented(plain(f"error: {span.status.description or 'unknown'}", "red"), 1))
    chat = span_chat(span)
    if chat is not None:
        shown += [_indented(plain(f"note: {note}", "yellow"), 1) for note in chat.notes]
        for message in chat.inputs:
            shown += message_lines(message, limit)
        shown.append(_indented(Text("── response ──", style="dim"), 1))
        for message in chat.outputs:
            shown += message_lines(message, limit)
    else:
        for heading, value in span_io(attributes):
            shown += [_indented(Text(heading.lower(), style="bold"), 1), _indented(plain(_text(value, limit)), 2)]
    shown += [_indented(_evaluation(row), 1) for row in (span_scores(span) if span.context is not None else [])]
    return shown


def print_span_details(console: Console, ordered: Sequence[ReadableSpan]) -> None:
    """Print, for each span of ``ordered`` that has any, its conversation or input and output, and its evaluations."""
    for span in ordered:
        lines = _span_lines(span)
        if lines:
            console.print(plain(span.name, "bold underline", single_line=True))
            for line in lines:
                console.print(line)
