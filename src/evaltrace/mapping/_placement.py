"""Where ``ToolPlacer.insert_results`` puts the results of executed calls: positions read, results spliced in.

Kept apart from ``_tools`` (which call a tool span ran, and what its result is): these only read the list's
positions and rebuild it with the results in place.
"""

from __future__ import annotations

from evaltrace.schema import TraceMessage


def positions(messages: list[TraceMessage]) -> tuple[dict[int, int], list[int]]:
    """Where each call first stands (by id() of the call), and from each position the first non-tool message's.

    One pass each: the conversation may hold hundreds of calls, and a search per pending result was quadratic.
    """
    first_at: dict[int, int] = {}
    for at, message in enumerate(messages):
        if message.tool_call is not None:
            first_at.setdefault(id(message.tool_call), at)
    past_tools = list(range(len(messages) + 1))  # at the end: len(messages)
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].role == "tool":
            past_tools[at] = past_tools[at + 1]
    return first_at, past_tools


def spliced(messages: list[TraceMessage], inserts: dict[int, list[TraceMessage]]) -> list[TraceMessage]:
    """``messages`` with each list of ``inserts`` before the message at its position (``len(messages)``: after all)."""
    placed: list[TraceMessage] = []
    for at, message in enumerate(messages):
        placed.extend(inserts.get(at, ()))
        placed.append(message)
    placed.extend(inserts.get(len(messages), ()))
    return placed
