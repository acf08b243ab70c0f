"""The assistant calls of a growing conversation, indexed for matching tool spans, with the pairing kept current.

``ToolPlacer._match`` looks up, for each tool span, the calls with the span's call id (else its tool and arguments)
and whether each still waits for its result. Rebuilding the candidate list and the pairing for every span cost
O(spans x messages): a long agent run (hundreds of tool calls) was quadratic. The index is fed the messages appended
since the previous lookup (the conversation only grows at its end between tool spans), so each message is read once.
A change other than appending (the placer taking messages out, ``adopt``; inserting results, ``insert_results``)
drops the index, and the next lookup rebuilds it from the list as it stands.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from evaltrace.mapping._pairing import PairingPass
from evaltrace.schema import ToolCall, TraceMessage

_UNHASHABLE: Any = object()  # the key of arguments holding a value ``_frozen`` cannot make hashable


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in for ``value``: equal values give equal stand-ins (so they share a bucket).

    Raises:
        TypeError: ``value`` holds an unhashable value of a type other than dict, list, tuple or set.
    """
    # Tagged by kind where == tells kinds apart (a list never equals a tuple); numbers stay themselves, as
    # 1 == 1.0 == True hash alike. A bucket's calls are still compared with == before one is taken.
    if isinstance(value, dict):
        return ("d", frozenset((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("l", tuple(_frozen(item) for item in value))
    if isinstance(value, tuple):
        return ("t", tuple(_frozen(item) for item in value))
    if isinstance(value, set | frozenset):
        return ("s", frozenset(_frozen(item) for item in value))
    hash(value)  # raises TypeError when unhashable
    return cast(Hashable, value)


def _call_key(call: ToolCall) -> tuple[str, Hashable]:
    try:
        return call.name, _frozen(call.arguments)
    except TypeError:
        return call.name, _UNHASHABLE


class CallIndex:
    """The assistant calls of ``messages`` by call id and by (tool, arguments), in message order, and their pairing.

    A lookup returns every call of the conversation under the key, claimed or not: the placer filters them (its
    claims change both ways, ``adopt`` and ``rehome`` give calls up).
    """

    def __init__(self, messages: list[TraceMessage]) -> None:
        self.messages = messages
        self.pairing = PairingPass()
        self._by_id: dict[str, list[ToolCall]] = {}
        self._by_call: dict[tuple[str, Hashable], list[ToolCall]] = {}
        self._calls: list[ToolCall] = []  # every assistant call, for arguments that could not be keyed
        self._loose = False  # some call's arguments could not be keyed: lookups by arguments scan ``_calls``

    def current(self, messages: list[TraceMessage]) -> bool:
        """Whether ``messages`` is the indexed list, grown at its end only (else the index must be rebuilt)."""
        fed = self.pairing.fed
        return (
            messages is self.messages and len(messages) >= fed and (fed == 0 or messages[fed - 1] is self.pairing.last)
        )

    def catch_up(self) -> None:
        """Index the messages appended since the last lookup."""
        fed = self.pairing.fed
        new = self.messages[fed:]
        if not new:
            return
        for message in new:
            call = message.tool_call
            if message.role != "assistant" or call is None:
                continue
            self._calls.append(call)
            if call.id:
                self._by_id.setdefault(call.id, []).append(call)
            key = _call_key(call)
            if key[1] is _UNHASHABLE:
                self._loose = True
            else:
                self._by_call.setdefault(key, []).append(call)
        self.pairing.feed(new)

    def with_id(self, call_id: str) -> list[ToolCall]:
        """The assistant calls with the call id ``call_id``, in message order."""
        return self._by_id.get(call_id, [])

    def like(self, call: ToolCall) -> list[ToolCall]:
        """The assistant calls of the same tool with equal arguments, in message order."""
        key = _call_key(call)
        found = self._calls if self._loose or key[1] is _UNHASHABLE else self._by_call.get(key, [])
        return [c for c in found if c.name == call.name and c.arguments == call.arguments]
