"""A session as one unit: the traces sharing ``session.id``, in order, as the turns of a conversation.

Session-scope evaluators receive a :class:`Conversation`. Each :class:`Turn` wraps the Trace behind it and reads
its user input, final answer, tool calls, thinking, tokens, cost and timing from that Trace, so a turn can never
disagree with the trace it came from (the same rule that makes ``Trace.tool_calls`` a view of its messages).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field, computed_field

from evaltrace._internal.trusted_models import trusted
from evaltrace.schema._base import SchemaModel
from evaltrace.schema.trace import ToolCall, ToolResult, Trace, TraceError, TraceMessage

# The keys a decorated entry point's argument usually goes by; the same order question_text() tries.
_INPUT_KEYS = ("question", "query", "input", "message", "prompt", "user_input", "text")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def turn_user_input(trace: Trace) -> str | None:
    """Return what the user said in this turn.

    The entry point's own argument comes first (a decorated ``answer(question)``); else the *last* user message,
    because a multi-turn call repeats the earlier turns' messages as history before the new one; else the only
    input value. None when the trace holds no user input at all.
    """
    return _user_said(trace.input, trace.messages)


def _user_said(given: Mapping[str, Any], messages: Sequence[TraceMessage]) -> str | None:
    """:func:`turn_user_input` over a trace's input and messages (the span mapping has no Trace yet)."""
    for key in _INPUT_KEYS:
        if given.get(key) is not None:
            return _text(given[key])
    for message in reversed(messages):
        if message.role == "user" and message.content is not None:
            return message.text()  # a media message's text parts only, never a dump of its parts
    values = list(given.values())
    return _text(values[0]) if len(values) == 1 else None


def conversation_ends(
    given: Mapping[str, Any], messages: Sequence[TraceMessage], answer: str | None
) -> list[TraceMessage] | None:
    """The messages with a user turn and a final assistant message where the spans recorded none.

    One rule for offline runs and live traces, so both read a decorator-only agent (``@evaltrace.agent`` and
    tools, no LLM span) as a conversation: the user's turn (:func:`turn_user_input` of ``given``) is put first
    when no message is the user's, and ``answer`` is appended when the messages do not end with an assistant's
    text, unless the last assistant text already is that answer (a model call's answer followed by calls that
    recorded no output: repeated after their input it would answer the wrong turn). Only text turns are added:
    the tool views derived from the messages do not change.

    Args:
        given: The trace's input.
        messages: The trace's messages.
        answer: The trace's final answer.

    Returns:
        The completed messages (a new list), or None when nothing is missing.
    """
    user: TraceMessage | None = None
    if not any(m.role == "user" for m in messages) and (said := _user_said(given, messages)) is not None:
        user = trusted(TraceMessage, None, role="user", content=said)  # text we made: nothing to validate
    last = messages[-1] if messages else None
    answered = last is not None and last.role == "assistant" and last.content is not None
    closes = answer is not None and not answered and _last_assistant_text(messages) != answer
    if user is None and not closes:
        return None
    completed = [user, *messages] if user is not None else list(messages)
    if closes:
        completed.append(trusted(TraceMessage, None, role="assistant", content=answer))
    return completed


def _last_assistant_text(messages: Sequence[TraceMessage]) -> str | None:
    for message in reversed(messages):
        if message.role == "assistant" and isinstance(message.content, str):
            return message.content
    return None


class Turn(SchemaModel):
    """One turn of a conversation: one trace of the session, with its parts read from it."""

    index: int = Field(ge=0)
    """Position in the conversation, from 0, by the trace's start time."""
    trace: Trace

    @computed_field  # type: ignore[prop-decorator]
    @property
    def trace_id(self) -> str | None:
        """The OTel trace id behind this turn (``trace.extra["trace_id"]``), when the trace came from spans."""
        value = self.trace.extra.get("trace_id")
        return str(value) if value is not None else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def user_input(self) -> str | None:
        """What the user said in this turn (see :func:`turn_user_input`)."""
        return turn_user_input(self.trace)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def final_answer(self) -> str | None:
        """The answer this turn ended with; None when it ended without one (tool calls only, an error)."""
        return self.trace.output.final_answer

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls made in this turn."""
        return self.trace.tool_calls

    @property
    def tool_results(self) -> list[ToolResult]:
        """The tool results returned in this turn."""
        return self.trace.tool_results

    @property
    def thinking(self) -> str | None:
        """The model's reasoning in this turn, never part of the final answer."""
        return self.trace.output.thinking

    @property
    def token_input(self) -> int | None:
        """Input tokens billed in this turn."""
        return self.trace.metrics.token_input

    @property
    def token_output(self) -> int | None:
        """Output tokens billed in this turn."""
        return self.trace.metrics.token_output

    @property
    def cost_usd(self) -> float | None:
        """Cost of this turn's model calls, when known."""
        return self.trace.metrics.cost_usd

    @property
    def started_at(self) -> dt.datetime:
        """When the turn started."""
        return self.trace.started_at

    @property
    def finished_at(self) -> dt.datetime:
        """When the turn finished."""
        return self.trace.finished_at

    @property
    def latency_ms(self) -> int:
        """The turn's duration in whole milliseconds."""
        return self.trace.latency_ms

    @property
    def error(self) -> TraceError | None:
        """The turn's error, if the system raised."""
        return self.trace.error


def _total_int(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _total_float(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


class Conversation(SchemaModel):
    """Every trace sharing one ``session.id``, as turns ordered by start time.

    Build it with :meth:`from_traces`, which orders the traces; the totals are computed from the turns.
    """

    session_id: str
    turns: list[Turn] = Field(default_factory=list)
    user_id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    """Keys we use: ``revision`` (how many times this session was judged before), ``trace_ids``."""

    @classmethod
    def from_traces(
        cls, session_id: str, traces: Iterable[Trace], *, user_id: str | None = None, **extra: Any
    ) -> Conversation:
        """Build a conversation from a session's traces, in any order.

        Args:
            session_id: The shared ``session.id``.
            traces: The session's traces; ordered here by start time, then by trace id for equal starts.
            user_id: The session's user, when known.
            **extra: Stored in ``extra``.

        Returns:
            The conversation, one turn per trace.
        """
        ordered = sorted(traces, key=lambda t: (t.started_at, str(t.extra.get("trace_id", ""))))
        turns = [Turn(index=i, trace=t) for i, t in enumerate(ordered)]
        return cls(session_id=session_id, turns=turns, user_id=user_id, extra=dict(extra))

    @property
    def run_id(self) -> str:
        """The run its turns belong to (``"live"`` for live traffic), so results are stamped as a trace's are."""
        return self.turns[0].trace.run_id if self.turns else "live"

    @property
    def case_id(self) -> str:
        """The session id: what a session-scope result is about."""
        return self.session_id

    @property
    def variant_name(self) -> str:
        """The variant of its first turn (empty for an empty conversation)."""
        return self.turns[0].trace.variant_name if self.turns else ""

    @property
    def traces(self) -> list[Trace]:
        """The traces behind the turns, in order."""
        return [turn.trace for turn in self.turns]

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call of every turn, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def tool_results(self) -> list[ToolResult]:
        """Every tool result of every turn, in order."""
        return [result for turn in self.turns for result in turn.tool_results]

    @property
    def started_at(self) -> dt.datetime | None:
        """When the first turn started (None for an empty conversation)."""
        return self.turns[0].started_at if self.turns else None

    @property
    def finished_at(self) -> dt.datetime | None:
        """When the last turn to finish finished (None for an empty conversation)."""
        return max((turn.finished_at for turn in self.turns), default=None)

    @property
    def token_input(self) -> int | None:
        """Input tokens over all turns (None when no turn reported any)."""
        return _total_int(turn.token_input for turn in self.turns)

    @property
    def token_output(self) -> int | None:
        """Output tokens over all turns (None when no turn reported any)."""
        return _total_int(turn.token_output for turn in self.turns)

    @property
    def cost_usd(self) -> float | None:
        """Cost over all turns (None when no turn's cost is known)."""
        return _total_float(turn.cost_usd for turn in self.turns)


__all__ = ["Conversation", "Turn", "turn_user_input"]
