"""Which call each tool message answers: by position in the conversation, never by call id alone.

Some servers number call ids per response (``call_0`` again in the next turn: Mistral, Ollama, Groq, LiteLLM
proxies), and Gemini or Ollama calls often have no id at all. An id (or, without one, a tool name) then names
several calls of one conversation, and a result matched by it alone could be an earlier turn's. A tool message
answers a call made before it that no earlier tool message answered, the first such call with its id (its tool
name without an id: parallel calls of one tool are answered in order). A user message closes the calls still
unanswered before it (the next turn's results are for the next turn's calls); a result that finds no open call
answers the latest call made before it with its id or name, unless that call has its answer already.
"""

from __future__ import annotations

from typing import NamedTuple

from evaltrace.schema import ToolCall, TraceMessage


class Pairing(NamedTuple):
    """Which call each tool message answers, and the calls left without an answer."""

    answers: dict[int, ToolCall]
    """``id()`` of each tool message that answers a call -> that call."""
    unanswered: list[ToolCall]
    """The calls no tool message answers, in message order (those a user message closed included)."""
    open: list[ToolCall]
    """The unanswered calls no user message closed since: the ones still waiting for their result."""


def _key(call_id: str | None, name: str | None) -> str:
    return "i" + call_id if call_id else "n" + (name or "")


def _take(
    open_calls: dict[str, list[ToolCall]], latest: dict[str, ToolCall], answered: set[int], key: str
) -> ToolCall | None:
    """The first open call under ``key`` (taken: it is answered now), else the latest one if still unanswered.

    A second answer to an answered call (the text a model was sent for a call whose tool span gave an error
    result already) answers nothing: one call, one result.
    """
    waiting = open_calls.get(key)
    if waiting:
        return waiting.pop(0)
    found = latest.get(key)
    return found if found is not None and id(found) not in answered else None


def answered_calls(messages: list[TraceMessage]) -> Pairing:
    """Pair each tool message of ``messages`` with the call it answers.

    Returns:
        Each answering tool message's call, the calls no tool message answers, and those of them still open.
    """
    answers: dict[int, ToolCall] = {}
    open_calls: dict[str, list[ToolCall]] = {}
    latest: dict[str, ToolCall] = {}
    unanswered: list[ToolCall] = []  # every call no message answered, stale ones included
    answered: set[int] = set()
    for message in messages:
        role = message.role
        call = message.tool_call
        if role == "tool":
            call_id = message.tool_call_id or (call.id if call is not None else None)
            name = message.name or (call.name if call is not None else None)
            found = _take(open_calls, latest, answered, _key(call_id, name))
            if found is None and call_id and name:  # the result has an id its call lacked: its tool name
                found = _take(open_calls, latest, answered, _key(None, name))
            if found is not None:
                answers[id(message)] = found
                answered.add(id(found))
        elif call is not None:
            key = _key(call.id, call.name)
            open_calls.setdefault(key, []).append(call)
            latest[key] = call
            unanswered.append(call)
        elif role == "user" and open_calls:
            open_calls = {}
    still_open = {id(c) for waiting in open_calls.values() for c in waiting}
    return Pairing(
        answers,
        [c for c in unanswered if id(c) not in answered],
        [c for c in unanswered if id(c) in still_open],
    )
