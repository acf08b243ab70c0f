"""The conversation of a trace: messages of LLM and tool spans in start order, without history inputs repeat."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace.mapping import conventions
from evaltrace.mapping._messages import MessageReader
from evaltrace.mapping._pairing import answered_calls
from evaltrace.mapping._spans import attrs, is_llm, is_tool
from evaltrace.mapping._tools import ToolPlacer, after_last_user
from evaltrace.schema import ToolCall, ToolResult, TraceMessage, derive_tool_views


def build_messages(spans: Iterable[ReadableSpan], notes: list[str]) -> list[TraceMessage]:
    """Return the conversation of ``spans`` (in start order), noting unreadable attributes in ``notes``."""
    return build_conversation(spans, notes).finish()


def build_conversation(spans: Iterable[ReadableSpan], notes: list[str]) -> Conversation:
    """Return the Conversation of ``spans`` (in start order), not finished yet (its ``steps`` are read after)."""
    conversation = Conversation(notes)
    for span in spans:
        if is_llm(span):
            conversation.add_llm_span(span)
        elif is_tool(span):
            conversation.add_tool_span(span)
    return conversation


def step_answer(outputs: list[TraceMessage]) -> str | None:
    """The answer of one model call: the text of its first output message that has text.

    None when the call answered with tool calls only (or reasoning only, or nothing was recorded): such a
    step has no answer, and the history its input repeats is never taken for one.
    """
    for message in outputs:
        if message.role == "assistant" and isinstance(message.content, str):
            return message.content
    return None


def message_key(message: TraceMessage) -> str:
    """Identity of a message when deciding whether a call's input repeats it."""
    call = message.tool_call
    ident: list[Any] = [message.role, message.content, message.tool_call_id]
    if call is not None:
        ident.append([call.id, call.name, call.arguments])
    return json.dumps(ident, sort_keys=True, default=str)


def repeated_prefix(keys: list[str], wanted: list[str]) -> int:
    """Return how many leading messages of a call's input (keys ``wanted``) the conversation (``keys``) holds.

    The larger of: the longest input prefix found in order in the conversation (gaps allowed, for context
    windows that drop old messages) whose match reaches the conversation's last message (the input caught
    up with everything so far), and the longest input prefix equal to the conversation's beginning (a retry
    or a fan-out from the same history).
    """
    caught_up = position = 0
    for count, key in enumerate(wanted, start=1):
        if key not in keys[position:]:
            break
        position = keys.index(key, position) + 1
        caught_up = count if position == len(keys) else caught_up
    shared = 0
    while shared < min(len(keys), len(wanted)) and keys[shared] == wanted[shared]:
        shared += 1
    return max(caught_up, shared)


def _fresh_system(candidate: list[TraceMessage], keys: list[str]) -> tuple[list[TraceMessage], list[TraceMessage]]:
    """Split a call's leading system messages the conversation does not hold from the rest of its input.

    A multi-agent run (a handoff) calls the model with the next agent's instructions before the same history:
    the new instructions are new messages, and the history after them is still a repeat. Left in the input,
    they would hide that repeat and the whole history would be appended a second time.
    """
    lead = 0
    while lead < len(candidate) and candidate[lead].role == "system":
        lead += 1
    if not lead:
        return [], candidate
    known = set(keys)
    fresh = [m for m in candidate[:lead] if message_key(m) not in known]
    if not fresh:
        return [], candidate
    return fresh, [m for m in candidate[:lead] if message_key(m) in known] + candidate[lead:]


_OWN_MESSAGES = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS)


class Conversation:
    """Accumulates messages from LLM and tool spans in start order."""

    def __init__(self, notes: list[str]) -> None:
        self.messages: list[TraceMessage] = []
        self._reader = MessageReader(notes)
        self._tools = ToolPlacer(notes)
        self._key_cache: dict[int, str] = {}  # id() of messages in self.messages, which keeps them alive
        # Each LLM span with its own output messages, in start order: a step's answer is read from these only.
        self.steps: list[tuple[ReadableSpan, list[TraceMessage]]] = []
        # id() of what this trace itself produced: model output messages and the calls its tool spans ran (all
        # kept alive by self.messages); anything else an input brought is context, maybe an earlier turn's.
        self._own: set[int] = set()
        # The index (``ToolPlacer.model_calls``) of the previous model call when it recorded no output messages:
        # the calls it made show first in the next model call's input, and only tool spans since ran them.
        self._silent: int | None = None
        self._output_calls: set[int] = set()  # id() of the calls model calls answered with (kept alive by messages)

    def _keys(self) -> list[str]:
        return [self._key_cache.setdefault(id(m), message_key(m)) for m in self.messages]

    def add_llm_span(self, span: ReadableSpan) -> None:
        """Append the part of the span's input the conversation does not hold yet, then its output."""
        self._tools.model_call()
        span_attrs = attrs(span)
        foreign = conventions.foreign_messages(span_attrs, span.events)
        if foreign is not None and not foreign.inputs and sc.INPUT_VALUE in span_attrs:
            # An instrumentation that recorded the response but not the Responses ``input`` list it was sent
            # (only the raw request in input.value): its items are the call's input messages.
            foreign.inputs = conventions.request_messages(span_attrs) or []
        elif (
            foreign is None
            and sc.GEN_AI_INPUT_MESSAGES not in span_attrs  # first: evaltrace's own spans stop here
            and sc.INPUT_VALUE in span_attrs
            and not any(k in span_attrs for k in _OWN_MESSAGES)
        ):
            requested = conventions.request_messages(span_attrs)
            foreign = conventions.Messages(inputs=requested) if requested else None
        if foreign is not None:  # another instrumentation's convention (OpenInference, OpenLLMetry, ...)
            candidate, outputs = self._reader.foreign(span, foreign)
        else:
            system = self._reader.system(span)
            inputs = self._reader.messages(span, sc.GEN_AI_INPUT_MESSAGES, "user")
            outputs = self._reader.messages(span, sc.GEN_AI_OUTPUT_MESSAGES, "assistant")
            if isinstance(attrs(span).get(sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID), str):
                # The provider keeps the history (Responses API): the input holds only new items.
                known = set(self._keys())
                self.messages.extend([m for m in system if message_key(m) not in known] + inputs + outputs)
                self._add_step(span, outputs)
                return
            candidate = system + inputs
        self._adopt(candidate)
        keys = self._keys()
        fresh, candidate = _fresh_system(candidate, keys)
        wanted = [message_key(m) for m in candidate]
        repeated = repeated_prefix(keys, wanted)
        if self._tools.appended and repeated:
            self._recorded(keys, set(wanted[:repeated]))
        self.messages.extend(fresh)
        self.messages.extend(candidate[repeated:])
        if self._silent is not None:
            self._count_silent_calls(candidate[repeated:], self._silent)
        self.messages.extend(outputs)
        self._add_step(span, outputs)

    def _count_silent_calls(self, new: list[TraceMessage], since: int) -> None:
        """Count the calls the previous model call made though it recorded no output: this input shows them first.

        ``new``: the part of this input the conversation did not hold. Its calls after its last user message are
        the silent call's (before one: an earlier turn's, when the silent call recorded no input either). The copies
        that tool spans run since then adopted (``_adopt``) are counted once already, as their span's call; a span
        since that matched an equal call of the history ran the copy instead (``ToolPlacer.rehome``).
        """
        made = after_last_user(new)
        for message in made:
            if message.role != "tool" and message.tool_call is not None:
                self._own.add(id(message))
        for call, copy in self._tools.rehome(made, since, self._output_calls):
            self._own.discard(id(call))  # the history's call, which the span's match had counted
            self._own.add(id(copy))

    def _adopt(self, inputs: list[TraceMessage]) -> None:
        """Let the input's copies of calls tool spans appended stand for them (a run resumed after an approval)."""
        for adoption in self._tools.adopt(self.messages, inputs, self._own, self._silent):
            for message in adoption.removed:
                self._key_cache.pop(id(message), None)  # no longer kept alive: its id() may be reused
            if id(adoption.call) in self._own:  # the adopted copy is the call this trace ran; other copies are history
                self._own.discard(id(adoption.call))
                self._own.add(id(adoption.copy))

    def _recorded(self, keys: list[str], repeated: set[str]) -> None:
        """Unmark the calls tool spans appended that a model call's input repeats: a model call recorded them.

        ``keys``: the conversation's message keys; ``repeated``: those of the input's messages it repeats.
        """
        appended = self._tools.appended
        for message, key in zip(self.messages, keys, strict=True):
            call = message.tool_call
            if call is not None and call.from_tool_span and id(call) in appended and key in repeated:
                call.from_tool_span = False

    def _add_step(self, span: ReadableSpan, outputs: list[TraceMessage]) -> None:
        self._silent = None if outputs else self._tools.model_calls
        self._output_calls.update(id(m.tool_call) for m in outputs if m.tool_call is not None)
        self.steps.append((span, outputs))
        self._own.update(id(m) for m in outputs)

    def add_tool_span(self, span: ReadableSpan) -> None:
        """Match the tool span to the call it executed, or append it as a call plus result."""
        self._own.add(id(self._tools.add(self.messages, span)))

    def tool_views(self) -> tuple[list[ToolCall], list[ToolResult]]:
        """The tool calls this trace made and the results they returned, in message order (after ``finish``).

        A call counts when this trace made it: a model call of the trace answered with it, or a tool span of the
        trace ran it. A result counts when a tool span of the trace returned it or it answers a counted call. A
        multi-turn application sends the earlier turns' calls and results again with each question: they stay in
        ``messages`` (what the model was sent) but are not this trace's, so a turn that called no tool does not
        pass ``ToolCalled`` on an earlier turn's call, and a conversation counts each call once.

        The result of a call whose tool span failed is an error result (``{"error": ...}``), though the message the
        model was sent for it (a retry prompt, the failure's text) stays in ``messages`` as it was sent.

        Each tool message answers the call it follows by position (``_pairing``), never every call under its id:
        servers that number ids per response (or give none) name an earlier turn's call as this turn's.

        A call whose model call recorded no output counts once: as the call of the tool span that ran it
        (``from_tool_span`` unless a later model input recorded it, whose copy then stands for it), else as the copy
        the next model call's input holds after what the conversation held (after that part's last user message:
        before it, an earlier turn's history); a tool span since that matched an equal unanswered call of the
        history ran that copy instead.
        """
        messages = self.messages
        if not messages:
            return [], []
        own = self._own | self._tools.produced
        answering = answered_calls(messages).answers
        counted: set[int] = set()  # id() of the calls counted
        kept: list[TraceMessage] = []
        for message in messages:
            call = message.tool_call
            if message.role == "tool":
                # The call it answers by position: an earlier turn's result under a reused id (or tool name,
                # without ids) answers the earlier turn's call, which is history, never this turn's.
                answered = answering.get(id(message))
                if id(message) in own or (answered is not None and id(answered) in counted):
                    kept.append(message)
            elif call is not None and (id(message) in own or id(call) in own):
                kept.append(message)
                counted.add(id(call))
        calls, results = derive_tool_views(kept)
        errors = self._tools.errors
        if errors:  # one result per tool message, in order: a failed call's is an error, whatever the model was sent
            answers = [m for m in kept if m.role == "tool"]
            results = [
                ToolResult(tool_call_id=r.tool_call_id, name=r.name, content=errors[id(m)]) if id(m) in errors else r
                for m, r in zip(answers, results, strict=True)
            ]
        return calls, results

    def finish(self) -> list[TraceMessage]:
        """Insert the results of executed calls that no tool message answers; return the messages."""
        self._tools.insert_results(self.messages)
        return self.messages
