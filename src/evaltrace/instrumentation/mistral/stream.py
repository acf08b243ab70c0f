"""The Mistral stream accumulator: ``CompletionEvent``s in, one ``Outcome`` out; ``add`` is O(1) per event.

``chat.stream`` yields ``CompletionEvent(data=CompletionChunk)``. A delta's content is a string or a list of chunks
(magistral models stream their reasoning as ``thinking`` chunks); tool calls usually arrive whole in one delta,
each with its own id, and only continuation fragments (no id) are joined to the call at their index. The last
chunk carries ``usage``. Fragments are kept as lists and joined once at the end.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import Part, output_message, reasoning_part, text_part, tool_call_part
from evaltrace.instrumentation.mistral.request import chunk_part, get, known, thinking_references, thinking_text
from evaltrace.instrumentation.mistral.response import usage_of


class _Call:
    __slots__ = ("arguments", "call_id", "name", "whole")

    def __init__(self, call_id: Any, name: Any) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments: list[str] = []
        self.whole: Any = None  # arguments sent as an object, not as JSON text

    def part(self) -> Part:
        arguments = self.whole if self.whole is not None else "".join(self.arguments)
        return tool_call_part(self.call_id, self.name, arguments)


class _Choice:
    __slots__ = ("by_id", "by_index", "calls", "cited", "finish_reason", "other", "reasoning", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.cited: list[Part] = []  # what thinking chunks cited (references), written after the reasoning
        # Chunks that are neither text nor thinking (rare in a reply), each after the text that came before it.
        self.other: list[Part] = []
        self.calls: list[_Call] = []
        self.by_id: dict[str, _Call] = {}
        self.by_index: dict[Any, _Call] = {}
        self.finish_reason: str | None = None

    def add_content(self, content: Any) -> None:
        if isinstance(content, str):
            if content:
                self.text.append(content)
            return
        for chunk in content:
            ctype = get(chunk, "type")
            if ctype == "UNKNOWN":  # a known type the SDK could not validate: read as that type
                chunk = known(chunk)
                ctype = get(chunk, "type")
            if ctype == "text":
                self.text.append(get(chunk, "text") or "")
            elif ctype == "thinking":
                self.reasoning.append(thinking_text(chunk))
                self.cited.extend(thinking_references(chunk))
            else:
                self.add_other(chunk_part(chunk))

    def add_other(self, part: Part) -> None:
        """A part that is neither text nor thinking, after the text that came before it (its own part).

        Text and references then keep the order a whole response gives them; only this rare path pays, text
        pieces are still only appended.
        """
        text = "".join(self.text)
        if text:
            self.other.append(text_part(text))
            self.text = []
        self.other.append(part)

    def add_call(self, call: Any) -> None:
        fn = get(call, "function")
        call_id = get(call, "id")
        call_id = None if call_id == "null" else call_id
        index = get(call, "index")
        slot = self.by_id.get(call_id) if call_id is not None else self.by_index.get(index)
        if slot is None:
            slot = _Call(call_id, get(fn, "name"))
            self.calls.append(slot)
            self.by_index[index] = slot
            if call_id is not None:
                self.by_id[call_id] = slot
        arguments = get(fn, "arguments")
        if isinstance(arguments, str):
            if arguments:
                slot.arguments.append(arguments)
        elif arguments is not None:
            slot.whole = arguments

    def message(self) -> dict[str, Any]:
        parts: list[Part] = []
        reasoning = "".join(self.reasoning)
        if reasoning:
            parts.append(reasoning_part(reasoning))
        parts.extend(self.cited)
        parts.extend(self.other)
        text = "".join(self.text)
        if text:
            parts.append(text_part(text))
        parts.extend(call.part() for call in self.calls)
        return output_message(parts, self.finish_reason)


_ROOTS = ("mistralai.client", "mistralai")  # mistralai 2.x, then 1.x
_NAMES = (
    "CompletionEvent",
    "CompletionChunk",
    "CompletionResponseStreamChoice",
    "DeltaMessage",
    "ThinkChunk",
    "TextChunk",
    "UsageInfo",
)


@functools.cache
def _sdk_types() -> tuple[Any, ...] | None:  # Any: a type check must not narrow the event to object
    """The SDK's event, chunk, choice, delta, thinking, text chunk, usage and ``Unset`` classes, once (None: absent)."""
    for root in _ROOTS:
        try:
            models = importlib.import_module(f"{root}.models")
            unset = type(importlib.import_module(f"{root}.types").UNSET)
            return (*(getattr(models, n) for n in _NAMES), unset)
        except (ImportError, AttributeError):
            continue
    return None


_NO_INDEX = object()  # no choice index read yet in a batch


class MistralStreamAccumulator:
    """Accumulates a Mistral chat stream by choice index."""

    __slots__ = ("choices", "model", "response_id", "usage")

    def __init__(self) -> None:
        self.choices: dict[int, _Choice] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: Any = None

    def add(self, event: Any) -> bool:
        """Fold one event in; True when it carried a choice (output, for time to first chunk)."""
        if self.response_id is None:
            first = self._add_first(event)
            if first is not None:
                return first
        chunk = getattr(event, "data", event)
        if self.response_id is None:
            self.response_id = get(chunk, "id") or None
            self.model = get(chunk, "model") or None
        choices = get(chunk, "choices") or ()
        for choice in choices:
            index = get(choice, "index") or 0
            buffer = self.choices.get(index)
            if buffer is None:
                buffer = self.choices[index] = _Choice()
            delta = get(choice, "delta")
            if delta is not None:
                content = get(delta, "content")
                if content is not None:
                    buffer.add_content(content)
                for call in get(delta, "tool_calls") or ():
                    buffer.add_call(call)
            reason = get(choice, "finish_reason")
            if reason is not None:
                buffer.finish_reason = str(reason)
        usage = get(chunk, "usage")
        if usage is not None:
            self.usage = usage
        return bool(choices)

    def _add_first(self, event: Any) -> bool | None:
        """The event that names the response, read by the batch fold (None: not read, ``add`` reads it).

        ``add`` reads each field through ``get`` (an ABC check and a hooked read each); the SDK's own chunk has its
        id and model read from its ``__dict__`` (what ``get`` returns for a field: ``UNSET`` and empty read as
        None) and, once the id is known, is folded as a batch of one, whose off-path events come back to ``add``.
        An error is raised to the caller, as ``add``'s.
        """
        types = _sdk_types()
        if types is None:
            return None
        chunk = getattr(event, "data", event)  # as ``add`` reads it
        if type(chunk) is not types[1]:
            return None
        fields = chunk.__dict__
        self.response_id = fields.get("id") or None
        self.model = fields.get("model") or None
        if self.response_id is None:  # ``add`` reads the rest (the id and model again, alike)
            return None
        self.add_batch([event], strict=True)
        return True if fields.get("choices") else False  # ``add``'s ``bool(get(chunk, "choices") or ())``

    def add_batch(self, events: list[Any], strict: bool = False) -> None:  # noqa: C901  (one frame per batch)
        """``add`` for each event in order, the common events read in this one frame (the stream proxy's batch fold).

        An event is read here when it is the SDK's own event, chunk, choice and delta (exactly), with one choice,
        no tool call, usage absent or the SDK's ``UsageInfo``, and a finish reason absent or a ``str``: then its
        fields are read from the instances' ``__dict__`` (pydantic's ``__getattr__`` hook keeps CPython 3.11 from
        specialising attribute reads, and ``get`` is two calls per field). Its content, text or a list of pieces,
        is read piece by piece as ``add_content`` reads it: the SDK's ``thinking`` and ``text`` chunks here, any
        other piece through ``add_content``. Every other event (tool calls, several choices, other types, the
        events before the first id) goes through ``add``, so both paths record the same. The checks that can send
        an event to ``add`` all come before its first write: an event is folded by one path, never by both.
        ``strict``: an error is raised, not routed.
        """
        types = _sdk_types()
        if types is None or self.response_id is None:  # ``add`` reads the id and model of the first event
            add_each(self.add, events)
            return
        chunk_type, choice_type, delta_type, think_type, text_type, usage_type, unset_type = types[1:]
        buffers = self.choices
        index: Any = _NO_INDEX  # the choice index of ``buffer``: read again only when an event names another
        buffer = _Choice()
        kind = type  # a local: the exact type tests below
        for event in events:
            try:
                chunk = getattr(event, "data", event)  # as ``add`` reads it
                # The checks, nested so that the common event takes each test once and falls through to the fold;
                # any failed test leaves the nest for ``add`` below, before anything of the event was written.
                if kind(chunk) is chunk_type:
                    fields = chunk.__dict__
                    usage = fields["usage"]
                    try:
                        [choice] = fields["choices"]  # None, none or several: ``add``
                    except (TypeError, ValueError):
                        choice = None
                    if kind(choice) is choice_type and (usage is None or kind(usage) is usage_type):
                        entry = choice.__dict__
                        delta = entry["delta"]
                        reason = entry["finish_reason"]
                        if kind(delta) is delta_type and (reason is None or kind(reason) is str):
                            said = delta.__dict__
                            calls = said["tool_calls"]
                            content = said["content"]
                            shape = kind(content)
                            if (kind(calls) is unset_type or calls is None) and (
                                shape is list or shape is str or content is None or shape is unset_type
                            ):
                                if entry["index"] is not index:
                                    index = entry["index"]
                                    key = index or 0
                                    buffer = buffers.get(key) or buffers.setdefault(key, _Choice())
                                if shape is list:
                                    for piece in content:
                                        shape = kind(piece)
                                        if shape is think_type:
                                            own = piece.__dict__
                                            if own["type"] == "thinking":
                                                for part in own["thinking"] or ():  # ``thinking_text``, text by text
                                                    text = part.text if kind(part) is text_type else get(part, "text")
                                                    if isinstance(text, str):
                                                        buffer.reasoning.append(text)
                                                    elif get(part, "type") is not None:  # a reference: cited
                                                        buffer.cited.append(chunk_part(part))
                                                continue
                                        elif shape is text_type:
                                            own = piece.__dict__
                                            if own["type"] == "text":
                                                buffer.text.append(own["text"] or "")
                                                continue
                                        buffer.add_content((piece,))  # any other piece: read as ``add`` reads it
                                elif shape is str and content:
                                    buffer.text.append(content)
                                if reason is not None:
                                    buffer.finish_reason = reason
                                if usage is not None:
                                    self.usage = usage
                                continue
                self.add(event)
            except Exception:
                if strict:
                    raise
                chunk_failed()

    def end_reason(self) -> str:
        """``exhausted`` when every choice got its finish reason, else ``truncated``."""
        choices = self.choices.values()
        if choices and all(c.finish_reason is not None for c in choices):
            return sc.STREAM_END_EXHAUSTED
        return sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """Mistral streams report no failure of their own (errors arrive as exceptions)."""
        return None

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = self.usage
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, get(usage, "prompt_tokens"), get(usage, "completion_tokens"))

    def outcome(self) -> Outcome:
        """What the events so far amount to (finish reasons in choice order)."""
        ordered = [self.choices[i] for i in sorted(self.choices)]
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[c.finish_reason for c in ordered if c.finish_reason is not None],
            output_messages=[c.message() for c in ordered],
            usage=usage_of(self.usage),
        )
