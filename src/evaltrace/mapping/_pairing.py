"""Which call each tool message answers: by position in the conversation, never by call id alone.

Some servers number call ids per response (``call_0`` again in the next turn: Mistral, Ollama, Groq, LiteLLM
proxies), and Gemini or Ollama calls often have no id at all. An id (or, without one, a tool name) then names
several calls of one conversation, and a result matched by it alone could be an earlier turn's. A tool message
answers a call made before it that no earlier tool message answered, the first such call with its id (its tool
name without an id: parallel calls of one tool are answered in order). A tool message naming neither a call id
nor a tool (Ollama's ``tool`` messages, some Gemini function-response shapes) answers the first call still waiting
for its result, whatever its tool. A user message closes the calls still unanswered before it (the next turn's
results are for the next turn's calls); a result that finds no open call answers the latest call made before it
with its id or name, unless that call has its answer already. An anonymous one then answers nothing: naming
neither, it cannot say which earlier turn's call it would be (an app's own tool, whose span gives the call).

One pass over the messages, each call queued once: O(messages). ``PairingPass`` carries the pass on as the
conversation grows (a tool span is matched against it as it stands then), so matching every span stays linear.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from evaltrace.schema import ToolCall, TraceMessage


class Pairing(NamedTuple):
    """Which call each tool message answers, and the calls left without an answer."""

    answers: dict[int, ToolCall]
    """``id()`` of each tool message that answers a call -> that call."""
    asked: dict[int, TraceMessage]
    """``id()`` of each tool message that answers a call -> the message holding that call."""
    unanswered: list[ToolCall]
    """The calls no tool message answers, in message order (those a user message closed included)."""
    open: list[ToolCall]
    """The unanswered calls no user message closed since: the ones still waiting for their result."""


def _key(call_id: str | None, name: str | None) -> str:
    return "i" + call_id if call_id else "n" + (name or "")


class _Waiting:
    """The calls still waiting for their result, by key and in message order: a user message empties it.

    A call answered through one queue stays in the other until it reaches that queue's front, where it is
    skipped (each call is queued and dropped once: no queue is searched).
    """

    def __init__(self, answered: set[int]) -> None:
        self._answered = answered  # id() of the call messages answered: shared with ``answered_calls``
        self._by_key: dict[str, deque[TraceMessage]] = {}
        self._all: deque[TraceMessage] = deque()

    def add(self, key: str, message: TraceMessage) -> None:
        self._by_key.setdefault(key, deque()).append(message)
        self._all.append(message)

    def take(self, key: str | None) -> TraceMessage | None:
        """The first call waiting under ``key`` (None: under any key), taken off: it is answered now."""
        queue = self._all if key is None else self._by_key.get(key)
        while queue:
            found = queue.popleft()
            if id(found) not in self._answered:
                return found
        return None

    def close(self) -> None:
        self._by_key.clear()
        self._all.clear()

    def ids(self) -> set[int]:
        return {id(m) for m in self._all if id(m) not in self._answered}


def _take(
    waiting: _Waiting, latest: dict[str, TraceMessage], answered: set[int], key: str | None
) -> TraceMessage | None:
    """The first open call under ``key`` (taken: it is answered now), else the latest one if still unanswered.

    ``key`` None: a result naming neither call nor tool, which takes the first open call of any tool, and none
    when no call is open (a user message closed them: nothing ties it to an earlier turn's call).

    A second answer to an answered call (the text a model was sent for a call whose tool span gave an error
    result already) answers nothing: one call, one result.
    """
    found = waiting.take(key)
    if found is not None or key is None:
        return found
    found = latest.get(key)
    return found if found is not None and id(found) not in answered else None


class PairingPass:
    """``answered_calls``' pass, fed a message at a time: the pairing of a list that only grows at its end.

    A tool span is matched against the conversation as it stands then; the conversation grows between spans, so
    the pass is carried on over the new messages instead of run again over the whole list (O(messages) per span
    made a long agent run quadratic). The state after feeding a list is the state one pass over it ends with.
    """

    def __init__(self) -> None:
        self.asked: dict[int, TraceMessage] = {}
        self._answered: set[int] = set()  # id() of the call messages a tool message answers
        self._waiting = _Waiting(self._answered)
        self._latest: dict[str, TraceMessage] = {}  # the latest call by key
        self._asking: list[TraceMessage] = []  # every message holding a call, in order (keeps them alive)
        self._turn = 0  # user messages fed: a call made in an earlier turn waits no more
        self._made_in: dict[int, int] = {}  # id() of each call message -> ``_turn`` when made
        self._holding: dict[int, list[TraceMessage]] = {}  # id() of a ToolCall -> the call messages holding it
        self.fed = 0  # messages fed
        self.last: TraceMessage | None = None  # the last message fed

    def feed(self, messages: list[TraceMessage]) -> None:
        """Carry the pass on over ``messages``, the ones after those fed already."""
        waiting, latest, answered, asked = self._waiting, self._latest, self._answered, self.asked
        for message in messages:
            role = message.role
            call = message.tool_call
            if role == "tool":
                call_id = message.tool_call_id or (call.id if call is not None else None)
                name = message.name or (call.name if call is not None else None)
                # Neither id nor tool name: nothing tells which call, so the first one waiting (calls run in order).
                key = _key(call_id, name) if call_id or name else None
                found = _take(waiting, latest, answered, key)
                if found is None and call_id and name:  # the result has an id its call lacked: its tool name
                    found = _take(waiting, latest, answered, _key(None, name))
                if found is not None:
                    asked[id(message)] = found
                    answered.add(id(found))
            elif call is not None:
                key = _key(call.id, call.name)
                waiting.add(key, message)
                latest[key] = message
                self._asking.append(message)
                self._made_in[id(message)] = self._turn
                self._holding.setdefault(id(call), []).append(message)
            elif role == "user":
                waiting.close()
                self._turn += 1
        if messages:
            self.fed += len(messages)
            self.last = messages[-1]

    def is_waiting(self, call: ToolCall) -> bool:
        """Whether a message holding ``call`` is still waiting for its result: ``Pairing.open`` holds ``call``."""
        # Open: unanswered and made since the last user message (``_Waiting`` holds exactly those).
        return any(
            id(m) not in self._answered and self._made_in[id(m)] == self._turn for m in self._holding.get(id(call), ())
        )

    def is_unanswered(self, call: ToolCall) -> bool:
        """Whether a message holding ``call`` has no answer: ``Pairing.unanswered`` holds ``call``."""
        return any(id(m) not in self._answered for m in self._holding.get(id(call), ()))

    def pairing(self) -> Pairing:
        """The pairing of the messages fed so far."""
        answered = self._answered
        still_open = self._waiting.ids()
        asking = self._asking
        return Pairing(
            {answer: found.tool_call for answer, found in self.asked.items() if found.tool_call is not None},
            self.asked,
            [m.tool_call for m in asking if m.tool_call is not None and id(m) not in answered],
            [m.tool_call for m in asking if m.tool_call is not None and id(m) in still_open],
        )


def answered_calls(messages: list[TraceMessage]) -> Pairing:
    """Pair each tool message of ``messages`` with the call it answers.

    Calls are told apart by the message holding them, not the ToolCall object: a Trace built by hand may hold one
    object in two messages (an earlier turn's call and this turn's).

    Returns:
        Each answering tool message's call (and its message), the calls no tool message answers, and those of them
        still open.
    """
    state = PairingPass()
    state.feed(messages)
    return state.pairing()


def own_call_messages(messages: list[TraceMessage], calls: list[ToolCall]) -> list[TraceMessage | None]:
    """The message of ``messages`` holding each of ``calls`` (a trace's tool call view, in order); None if none does.

    Matched from the end: a trace's own calls follow the history its input repeats, where an earlier turn's call
    may equal one of them (servers that number call ids per response name both ``call_0``).
    """
    found: list[TraceMessage | None] = [None] * len(calls)
    at = len(calls) - 1
    for message in reversed(messages):
        if at < 0:
            break
        call = message.tool_call
        if message.role != "tool" and call is not None and (call is calls[at] or call == calls[at]):
            found[at] = message
            at -= 1
    return found
