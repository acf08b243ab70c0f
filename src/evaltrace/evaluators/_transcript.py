"""A conversation as the text a judge reads: numbered turns, each a user message and the assistant's reply.

Turns are numbered from 1 (``Turn.index + 1``), the numbering the session judges' prompts and verdicts use. A
turn without a user message or without an answer is shown as such, never dropped, so the judge sees the
conversation as it happened (an unanswered request is exactly what conversation completeness looks for).
"""

from __future__ import annotations

from collections.abc import Sequence

from evaltrace.evaluators._base import MissingInputError, as_text
from evaltrace.schema import Conversation, Turn

NO_USER_MESSAGE = "(no user message recorded)"


def turn_number(turn: Turn) -> int:
    """The turn's number as judges and reports show it: its index + 1."""
    return turn.index + 1


def reply_text(turn: Turn) -> str:
    """The assistant's reply in a turn, or a note saying why there is none."""
    if turn.final_answer is not None:
        return turn.final_answer
    if turn.error is not None:
        return f"(no reply: the turn ended with an error: {turn.error.message})"
    return "(no reply)"


def render_turns(turns: Sequence[Turn]) -> str:
    """Render turns as ``[Turn n]`` blocks of ``User:`` and ``Assistant:`` lines, in order."""
    blocks = [
        f"[Turn {turn_number(turn)}]\nUser: {turn.user_input or NO_USER_MESSAGE}\nAssistant: {reply_text(turn)}"
        for turn in turns
    ]
    return "\n\n".join(blocks)


def require_turns(conversation: Conversation) -> list[Turn]:
    """Return the turns; an empty conversation is skipped (nothing to judge), never failed."""
    if not conversation.turns:
        raise MissingInputError("the conversation has no turns")
    return conversation.turns


def answered_turns(conversation: Conversation, *, first: int = 0) -> list[Turn]:
    """Return the turns from index ``first`` on that have an assistant answer.

    Raises:
        MissingInputError: The conversation has no turns, or none of those turns has an answer.
    """
    turns = [turn for turn in require_turns(conversation)[first:] if turn.final_answer is not None]
    if not turns:
        where = "" if first == 0 else f" from turn {first + 1} on"
        raise MissingInputError(f"no turn{where} has an assistant answer")
    return turns


def system_instructions(conversation: Conversation) -> str | None:
    """The system instructions the assistant was given: the first system message of the first turn that has one."""
    for trace in conversation.traces:
        for message in trace.messages:
            if message.role == "system" and message.content:
                return message.text() or as_text(message.content)
    return None
