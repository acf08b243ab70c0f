"""Static HTML report of one session (``evaltrace report --session <id>``): its turns as a chat, its scores.

The page shows the session's user, turns, time span, tokens and cost; the latest verdict of each session-scope
evaluator; then every turn in order as a pair of bubbles (what the user said; the final answer with its
reasoning and tool calls), each with its own tokens, cost, latency and the trace id that ``evaltrace report
<trace_id>`` opens. Self-contained (inline CSS), escaped throughout: every text shown was recorded.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace._version import __version__
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY
from evaltrace.report.assets import CSS
from evaltrace.report.chat import ChatMessage
from evaltrace.report.chat_html import render_bubbles
from evaltrace.report.text import esc, money, token_count

__all__ = ["default_session_output", "render_session_html", "write_session_report"]

_SESSION_CSS = """
.turn { margin: 1.2em 0; } .turn h3 { font-size: 1em; margin: 0 0 .3em; }
.turn .facts { color: #666; font-weight: normal; font-size: .9em; }
"""


def default_session_output(session_id: str) -> Path:
    """``evaltrace-session-<id>.html`` in the current directory, the id reduced to safe file-name characters."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:64].strip(".") or "session"
    return Path(f"evaltrace-session-{safe}.html")


def _time(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "-"


def _tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return ""
    return f"{token_count(tokens_in or 0)} in / {token_count(tokens_out or 0)} out"


def _turn(turn: Any) -> str:
    facts = [_time(turn.started_at), f"{turn.latency_ms} ms", _tokens(turn.token_input, turn.token_output)]
    if turn.cost_usd is not None:
        facts.append(money(turn.cost_usd))
    if turn.trace_id:
        facts.append(f"trace <code>{esc(turn.trace_id)}</code>")
    if turn.error is not None:
        facts.append('<span class="badge fail">error</span>')
    bubbles = [
        ChatMessage(role="user", content=turn.user_input),
        ChatMessage(role="assistant", content=turn.final_answer, thinking=turn.thinking, tool_calls=turn.tool_calls),
    ]
    return (
        f'<div class="turn" data-turn="{turn.index + 1}"><h3>Turn {turn.index + 1} '
        f'<span class="facts">{" &middot; ".join(f for f in facts if f)}</span></h3>'
        f'<div class="chat">{render_bubbles(bubbles)}</div></div>'
    )


def _scores(scores: Sequence[Any]) -> str:
    if not scores:
        return (
            '<section id="scores"><h2>Session scores</h2><p class="empty">No session scores yet: session-scope '
            "evaluators judge a session once it is idle or ended.</p></section>"
        )
    rows = "".join(
        f'<tr data-outcome="{esc(s.outcome or "other")}"><td><b>{esc(s.evaluator)}</b></td>'
        f"<td>{'' if s.value is None else f'{s.value:.3f}'}</td><td>{esc(s.outcome or s.label or '')}</td>"
        f"<td>{s.revision}</td><td>{esc(s.comment or '')}</td></tr>"
        for s in scores
    )
    head = "<tr><th>Evaluator</th><th>Score</th><th>Result</th><th>Revision</th><th>Explanation</th></tr>"
    return f'<section id="scores"><h2>Session scores</h2><table>{head}{rows}</table></section>'


def render_session_html(conversation: Any, scores: Sequence[Any]) -> str:
    """Return the complete HTML document of a session (a Conversation and its ``SessionScoreRow`` list)."""
    items = [
        ("session", f'<code data-field="session">{esc(conversation.session_id)}</code>'),
        ("user", f'<code data-field="user">{esc(conversation.user_id or "-")}</code>'),
        ("turns", str(len(conversation.turns))),
        ("first", esc(_time(conversation.started_at))),
        ("last", esc(_time(conversation.finished_at))),
    ]
    tokens = _tokens(conversation.token_input, conversation.token_output)
    if tokens:
        items.append(("tokens", tokens))
    if conversation.cost_usd is not None:
        items.append(("cost", esc(money(conversation.cost_usd))))
    meta = "".join(f"<span>{label} <b>{value}</b></span>" for label, value in items)
    turns = "".join(_turn(turn) for turn in conversation.turns) or '<p class="empty">No turns stored.</p>'
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>session {esc(conversation.session_id)} &middot; evaltrace report</title>"
        f"<style>{CSS}{_SESSION_CSS}</style></head><body>"
        f"<header><h1>Session {esc(conversation.session_id)}</h1><div class='meta'>{meta}</div></header>"
        f'<main>{_scores(scores)}<section id="turns"><h2>Conversation</h2>{turns}</section></main>'
        f"<footer>Generated by evaltrace {esc(__version__)} at {generated} from the local trace store.</footer>"
        "</body></html>\n"
    )


def write_session_report(session_id: str, output: str | Path, store: str | Path = DEFAULT_DIRECTORY) -> Path:
    """Write the report of ``session_id`` from the local store to ``output`` (``0600``: it shows the chat).

    Raises:
        LookupError: The store holds no trace of this session.
    """
    from evaltrace.exporters.store_reader import LocalTraceStore
    from evaltrace.mapping import trace_from_spans
    from evaltrace.schema.conversation import Conversation

    found = LocalTraceStore(store).session(session_id)
    if found is None:
        raise LookupError(f"no session {session_id!r} in the local store {Path(store)}")
    summary, traces = found
    mapped = []
    for spans in traces:
        try:
            mapped.append(trace_from_spans(spans))
        except Exception:  # one unreadable turn must not hide the conversation
            continue
    conversation = Conversation.from_traces(session_id, mapped, user_id=summary.user_id)
    path = Path(output)
    make_private_dirs(path.parent)
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:
        handle.write(render_session_html(conversation, summary.scores))
    return path
