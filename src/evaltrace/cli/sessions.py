"""``evaltrace sessions list`` and ``evaltrace sessions show <session_id>``: conversations in the local store.

A session is every stored trace sharing ``session.id``. ``list`` prints one row per session (user, turns, first
and last time, tokens, cost, the latest verdict of each session-scope evaluator); ``show`` prints its turns in
order (what the user said, the final answer, the tools called, tokens, cost, latency) and its session scores.
Recorded text goes through :mod:`evaltrace.cli._untrusted` before it reaches the terminal.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.cli._untrusted import clean, plain
from evaltrace.cli.format import format_count, format_duration_ms, format_duration_ns, format_money
from evaltrace.cli.plain_table import Styled
from evaltrace.cli.table_layout import Column
from evaltrace.cli.traces_query import print_json, store_errors
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["register"]

_PREVIEW = 400  # characters of a turn's input or answer shown (the report shows them whole)
_LIST_COLUMNS = (
    Column("session", fold=True, min_width=12),
    Column("user", drop=2),
    Column("turns", justify="right"),
    Column("first (UTC)", drop=3),
    Column("last (UTC)"),
    Column("tokens", justify="right", drop=4),
    Column("cost", justify="right", drop=5),
    Column("session scores", fold=True, min_width=14),
)
_SCORE_COLUMNS = (
    Column("evaluator", fold=True, min_width=12),
    Column("verdict"),
    Column("value", justify="right"),
    Column("revision", justify="right"),
    Column("reason", fold=True, min_width=20),
)
_OUTCOME_STYLES = {"pass": "green", "fail": "red"}


def register(subparsers: Any) -> None:
    """Add the ``sessions`` noun and its verbs."""
    sessions = subparsers.add_parser("sessions", help="inspect sessions (traces sharing session.id) and their scores")
    verbs = sessions.add_subparsers(dest="verb", metavar="VERB", required=True)

    list_parser = verbs.add_parser("list", help="list stored sessions, most recently active first")
    list_parser.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    list_parser.add_argument("--limit", type=_positive, default=20, help="sessions shown (default 20)")
    list_parser.add_argument("--json", action="store_true", help="print a JSON array (stable keys) for scripts")
    list_parser.set_defaults(func=list_sessions)

    show = verbs.add_parser("show", help="print a session's turns in order and its session scores")
    show.add_argument("session_id", help="the session id (the session.id attribute)")
    show.add_argument("--store", type=Path, default=DEFAULT_DIRECTORY, help="store directory (.evaltrace)")
    show.add_argument("--json", action="store_true", help="print one JSON object (stable keys) for scripts")
    show.set_defaults(func=show_session)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def _time(nanoseconds: int) -> str:
    return dt.datetime.fromtimestamp(nanoseconds / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if not tokens_in and not tokens_out:
        return ""
    return f"{format_count(tokens_in) or '-'}→{format_count(tokens_out) or '-'}"


def _verdicts(scores: Sequence[Any]) -> Styled:
    text = Styled("")
    for score in scores:
        shown = score.outcome or (f"{score.value:g}" if score.value is not None else score.label or "?")
        if text.text:
            text.append(", ")
        text.append(clean(f"{score.evaluator} ", single_line=True))
        text.append(shown, style=_OUTCOME_STYLES.get(score.outcome or "", ""))
    return text


@store_errors
def list_sessions(args: argparse.Namespace) -> int:
    """Print a table of stored sessions."""
    # Drawn without rich where that prints exactly what rich would (issue 28): `sessions list` starts without it.
    from evaltrace.cli.list_output import print_list, print_message
    from evaltrace.exporters.store_reader import LocalTraceStore

    summaries = LocalTraceStore(args.store).list_sessions(limit=args.limit)
    if args.json:
        print_json(summaries)
        return 0
    if not summaries:
        print_message(f"No sessions in {args.store} yet: traces get one from evaltrace.context(session_id=...).")
        return 0
    print_list(_LIST_COLUMNS, _list_rows(summaries), f"Sessions in {args.store}")
    return 0


def _list_rows(summaries: Sequence[Any]) -> list[list[Styled]]:
    """One row of ``sessions list`` per session summary."""
    return [
        [
            Styled(clean(s.session_id, single_line=True)),
            Styled(clean(s.user_id or "", single_line=True)),
            Styled(str(s.turns)),
            Styled(_time(s.first_time)),
            Styled(_time(s.last_time)),
            Styled(_tokens(s.input_tokens, s.output_tokens)),
            Styled(format_money(s.cost_usd or None)),
            _verdicts(s.scores),
        ]
        for s in summaries
    ]


def _preview(value: str | None) -> str:
    if value is None:
        return "-"
    return value if len(value) <= _PREVIEW else value[:_PREVIEW] + f"… ({len(value)} characters)"


def _turn_lines(console: Console, turn: Any) -> None:
    from rich.text import Text

    head = Text(f"Turn {turn.index + 1}", style="bold")
    facts = [
        turn.started_at.strftime("%Y-%m-%d %H:%M:%S"),
        format_duration_ms(turn.latency_ms),
        _tokens(turn.token_input, turn.token_output),
        format_money(turn.cost_usd),
    ]
    head.append("  " + "  ".join(fact for fact in facts if fact), style="dim")
    if turn.trace_id:
        head.append(f"  trace {turn.trace_id}", style="dim")
    if turn.error is not None:
        head.append("  ERROR", style="red")
    console.print(head)
    console.print(Text("  user:   ", style="cyan") + plain(_preview(turn.user_input)))
    console.print(Text("  answer: ", style="green") + plain(_preview(turn.final_answer)))
    calls = [call.name for call in turn.tool_calls]
    if calls:
        console.print(Text("  tools:  ", style="magenta") + plain(", ".join(calls), single_line=True))


@store_errors
def show_session(args: argparse.Namespace) -> int:
    """Print one session: its turns in order, then its session scores."""
    from rich.console import Console
    from rich.text import Text

    from evaltrace.cli.tables import Cell, fit_table, print_fitted
    from evaltrace.exporters.store_reader import LocalTraceStore

    console = Console()
    found = LocalTraceStore(args.store).session(args.session_id)
    if found is None:
        console.print(plain(f"No session {args.session_id!r} in {args.store}", "red"))
        return 1
    summary, traces = found
    conversation = _conversation(args.session_id, summary.user_id, traces)
    if args.json:
        print_json([_Shown(_json(summary, conversation))])
        return 0
    title = Text("Session ", style="bold") + plain(summary.session_id, "bold", single_line=True)
    if summary.user_id:
        title += Text("  user ", style="dim") + plain(summary.user_id, single_line=True)
    title.append(
        f"  {summary.turns} turn(s)  {format_duration_ns(summary.last_time - summary.first_time)}"
        f"  {_tokens(summary.input_tokens, summary.output_tokens)}  {format_money(summary.cost_usd or None)}",
        style="dim",
    )
    console.print(title)
    for turn in conversation.turns:
        _turn_lines(console, turn)
    if not summary.scores:
        console.print(Text("No session scores yet (session-scope evaluators judge a session once it is idle).", "dim"))
        return 0
    rows: list[list[Cell]] = [
        [
            plain(s.evaluator, single_line=True),
            Text(s.outcome or "-", style=_OUTCOME_STYLES.get(s.outcome or "", "")),
            f"{s.value:g}" if s.value is not None else plain(s.label or "", single_line=True),
            str(s.revision),
            plain(s.comment or "", single_line=True),
        ]
        for s in summary.scores
    ]
    print_fitted(console, fit_table(console.width, _SCORE_COLUMNS, rows, Text("Session scores")))
    return 0


def _conversation(session_id: str, user_id: str | None, traces: Sequence[Sequence[Any]]) -> Any:
    """The session's traces mapped to a Conversation (a trace that cannot be mapped is left out)."""
    from evaltrace.mapping import trace_from_spans
    from evaltrace.schema.conversation import Conversation

    mapped = []
    for spans in traces:
        try:
            mapped.append(trace_from_spans(list(spans)))
        except Exception:  # one unreadable turn must not hide the others
            continue
    return Conversation.from_traces(session_id, mapped, user_id=user_id)


class _Shown:
    """A session as ``show --json`` prints it (``print_json`` takes objects with ``to_json``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def to_json(self) -> dict[str, Any]:
        """The stable object printed."""
        return self._data


def _json(summary: Any, conversation: Any) -> dict[str, Any]:
    return {
        **summary.to_json(),
        "turns": [
            {
                "index": turn.index,
                "trace_id": turn.trace_id,
                "started_at": turn.started_at.isoformat(),
                "latency_ms": turn.latency_ms,
                "user_input": turn.user_input,
                "final_answer": turn.final_answer,
                "tool_calls": [call.name for call in turn.tool_calls],
                "input_tokens": turn.token_input,
                "output_tokens": turn.token_output,
                "cost_usd": turn.cost_usd,
                "error": turn.error is not None,
            }
            for turn in conversation.turns
        ],
    }
