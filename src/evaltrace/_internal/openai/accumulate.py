"""Stream accumulators: chunks in, one ``Outcome`` out. ``add`` is O(1) per chunk (appends, dict lookups).

Text, reasoning and tool-call argument fragments are kept as lists and joined once at the end.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai import chat_stream
from evaltrace._internal.openai.builtin import ResultsBudget, add_citations, builtin_tool_parts
from evaltrace._internal.openai.parts import Part, assistant_parts, output_message, reasoning_extra, tool_call_part
from evaltrace._internal.openai.parts import field as get
from evaltrace._internal.openai.response import (
    chat_usage,
    responses_failure,
    responses_finish_reason,
    responses_outcome,
    responses_summary,
)


class Accumulator(Protocol):
    """What the stream proxy needs from an accumulator."""

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; return True when it carries output (for time to first chunk)."""
        ...

    def end_reason(self) -> str:
        """How a stream read to its end ended: ``exhausted`` only when it carried its terminal signal.

        The SDK hides the transport's end (a chat stream's ``data: [DONE]``): a server that closed the stream
        early looks like a finished one, so only what the chunks themselves say tells the two apart.
        """
        ...

    def outcome(self) -> Outcome:
        """Return what the chunks so far amount to."""
        ...

    def summary(self) -> Summary:
        """Return the response model and token counts ``outcome()`` would report, cheaply (no content)."""
        ...

    def failure(self) -> tuple[str, str] | None:
        """(``error.type``, message) when the stream itself reported that the call failed, else None."""
        ...


class _ToolCallBuffer:
    __slots__ = ("arguments", "call_id", "name")

    def __init__(self, call_id: Any, name: Any) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments: list[str] = []


class _ChoiceBuffer:
    __slots__ = ("finish_reason", "legacy_call", "reasoning", "refusal", "text", "tool_calls")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, _ToolCallBuffer] = {}
        self.legacy_call: _ToolCallBuffer | None = None  # the deprecated ``delta.function_call``
        self.finish_reason: str | None = None

    def message(self) -> dict[str, Any]:
        parts = assistant_parts("".join(self.reasoning) or None, "".join(self.text) or None, "".join(self.refusal))
        for call in self.tool_calls.values():
            parts.append(tool_call_part(call.call_id, call.name, "".join(call.arguments)))
        legacy = self.legacy_call
        # Servers that send both announce the same call twice: ``function_call`` counts only on its own.
        if legacy is not None and not self.tool_calls:
            parts.append(tool_call_part(None, legacy.name, "".join(legacy.arguments)))
        return output_message(parts, self.finish_reason)


_NO_INDEX = chat_stream.NO_INDEX
"""No choice index is this: ``add_batch``'s last index before its first choice."""


class ChatAccumulator:
    """Accumulates ``ChatCompletionChunk``s by choice index and (choice, tool) index."""

    __slots__ = ("choices", "fingerprint", "header_pending", "model", "response_id", "service_tier", "usage")
    # The stream proxy folds every 16 chunks, not 64: a held ChatCompletionChunk keeps a dozen objects alive (the
    # chunk, its choices list, choice and delta, their dicts and field sets), and holding 64 of them cost ~700-1,000
    # more instructions per chunk in the allocator than the three extra fold calls (benchmarks/README.md).
    batch_size: ClassVar[int] = 16
    _inline: ClassVar[bool] = True  # add_batch reads chunks as ``add`` does (False in a subclass reading its own way)
    # The sync proxy's ``for`` loop (``SyncStreamProxy.__iter__``): a plain text chunk folded as it arrives, not held.
    # Only with the GIL (its thread rule needs it, ``chat_stream``), and only for this class: a subclass gets None
    # (the engine's loop) unless it sets ``stream_loop`` itself.
    stream_loop: ClassVar[Any] = staticmethod(chat_stream.chat_chunks) if chat_stream.GIL else None

    def __init__(self) -> None:
        self.choices: dict[int, _ChoiceBuffer] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.service_tier: str | None = None
        self.fingerprint: str | None = None
        self.usage: Any = None
        self.header_pending = True  # until a chunk has given a non-empty id and model

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; True when it carries at least one choice (output, for time to first chunk).

        Azure OpenAI opens a stream with a chunk of ``prompt_filter_results`` only: no choices, and an empty
        ``id`` and ``model``. It neither names the response nor starts the time-to-first-chunk clock.
        """
        if self.header_pending:
            self._read_header(chunk)
        choices = chunk.choices or ()
        for choice in choices:
            buffer = self.choices.get(choice.index)
            if buffer is None:
                buffer = self.choices[choice.index] = _ChoiceBuffer()
            self._add_delta(buffer, choice.delta)
            if choice.finish_reason is not None:
                buffer.finish_reason = choice.finish_reason
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        return True if choices else False  # a truth test, no call: this runs per chunk

    def add_batch(self, chunks: list[Any]) -> None:  # noqa: C901  # one frame per batch, by design
        """``add`` for each chunk in order, written out in one frame (the stream proxy's batch fold).

        openai's own chunk, choice and delta types (exactly those: a subclass may read its fields its own way) are
        read through their instance ``__dict__``: a dict lookup where an attribute read goes through pydantic's
        ``__getattr__`` hook, which CPython does not specialise. The common chunk (one choice, with a text delta
        and no extras) is read in a straight line: its one choice is unpacked, not looped over, the buffer of the
        chunk before's choice is reused when the index is the same object, and a text delta whose refusal, tool calls
        and ``function_call`` are all None (three ``is None`` tests) ends the chunk's work there unless the chunk also
        ends its choice or carries usage. A chunk with no choice or several, a field missing from a ``__dict__``, a
        delta with extras (reasoning) or with anything but text takes the general path, which reads it as ``add``
        does. A subclass that reads chunks its own way (overriding ``add`` or ``_add_delta``) gets ``add`` per chunk.
        """
        if not self._inline or self.header_pending:
            # No header check per chunk below: the header is read from the first chunks, before the proxy batches
            # (it folds each chunk as it arrives until one carries output, which has the id and model). A batch
            # that still finds it pending (a stream of choices with an empty id or model) takes ``add`` per chunk.
            add_each(self.add, chunks)
            return
        chunk_type, choice_type, delta_type = chat_stream.FAST_TYPES or chat_stream.fast_types()
        kind = type  # a local: three exact type tests per chunk
        buffers = self.choices
        last: Any = _NO_INDEX  # the index of the choice whose ``buffer`` is at hand
        buffer: Any = None
        text: Any = None  # ``buffer.text``, kept with ``buffer``
        for chunk in chunks:
            try:
                if kind(chunk) is not chunk_type:
                    self._add_chunk(chunk)
                    continue
                fields = chunk.__dict__
                try:
                    # One choice: unpacked, no iterator. None, no choice or several raise here (one exception per
                    # such chunk: the usage chunk, or a server sending several choices at once): ``_add_chunk``.
                    (choice,) = fields["choices"]
                    usage = fields["usage"]
                except (KeyError, TypeError, ValueError):
                    self._add_chunk(chunk)
                    continue
                if kind(choice) is not choice_type:
                    self._add_choice(choice)
                else:
                    fields = choice.__dict__
                    try:
                        index = fields["index"]
                        delta = fields["delta"]
                        finish = fields["finish_reason"]
                    except KeyError:
                        self._add_choice(choice)
                    else:
                        if index is not last:  # else the chunk before's choice: its buffer is at hand
                            try:
                                buffer = buffers[index]  # a subscript, not a ``get``: its KeyError once per choice
                            except KeyError:
                                buffer = buffers[index] = _ChoiceBuffer()
                            text = buffer.text
                            last = index
                        # No None check first: a None delta is not a ``delta_type`` and ``_add_delta`` skips it.
                        if kind(delta) is delta_type and not delta.__pydantic_extra__:
                            fields = delta.__dict__
                            try:
                                content = fields["content"]
                                refusal = fields["refusal"]
                                calls = fields["tool_calls"]
                                legacy = fields["function_call"]
                            except KeyError:
                                ChatAccumulator._add_delta(buffer, delta)
                            else:
                                if content:
                                    text.append(content)
                                if refusal is None and calls is None and legacy is None:
                                    # The common text delta: nothing more to read in it, and the chunk is done
                                    # unless it also ends the choice or carries usage (read below, as for any).
                                    if finish is None and usage is None:
                                        continue
                                else:
                                    ChatAccumulator._add_rest(buffer, delta)
                        else:
                            ChatAccumulator._add_delta(buffer, delta)
                        if finish is not None:
                            buffer.finish_reason = finish
                if usage is not None:
                    self.usage = usage
            except Exception:
                chunk_failed()

    def _add_chunk(self, chunk: Any) -> None:
        """``add`` after the header: the general path of ``add_batch`` for a chunk of another shape."""
        for choice in chunk.choices or ():
            self._add_choice(choice)
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage

    def _add_choice(self, choice: Any) -> None:
        buffer = self.choices.get(choice.index)
        if buffer is None:
            buffer = self.choices[choice.index] = _ChoiceBuffer()
        ChatAccumulator._add_delta(buffer, choice.delta)
        if choice.finish_reason is not None:
            buffer.finish_reason = choice.finish_reason

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._inline = "add" not in vars(cls) and "_add_delta" not in vars(cls)
        if "stream_loop" not in vars(cls):
            cls.stream_loop = None  # opt-in: the chat loop reads chunks as this class does, a subclass may not

    def _read_header(self, chunk: Any) -> None:
        """Take each of id, model, tier and fingerprint from the first chunk that has it (not empty)."""
        self.response_id = self.response_id or chunk.id or None
        self.model = self.model or chunk.model or None
        self.service_tier = self.service_tier or getattr(chunk, "service_tier", None)
        self.fingerprint = self.fingerprint or getattr(chunk, "system_fingerprint", None)
        self.header_pending = not (self.response_id and self.model)

    @staticmethod
    def _add_delta(buffer: _ChoiceBuffer, delta: Any) -> None:
        if delta is None:
            return
        if delta.content:
            buffer.text.append(delta.content)
        ChatAccumulator._add_rest(buffer, delta)

    @staticmethod
    def _add_rest(buffer: _ChoiceBuffer, delta: Any) -> None:
        """Everything of a delta but its text: reasoning, refusal, tool call fragments, ``function_call``."""
        thinking = reasoning_extra(delta)
        if thinking:
            buffer.reasoning.append(thinking)
        if delta.refusal:
            buffer.refusal.append(delta.refusal)
        for call in delta.tool_calls or ():
            slot = buffer.tool_calls.get(call.index)
            fn = call.function
            if slot is None:
                slot = buffer.tool_calls[call.index] = _ToolCallBuffer(call.id, fn.name if fn else None)
            if fn is not None and fn.arguments:
                slot.arguments.append(fn.arguments)
        legacy = getattr(delta, "function_call", None)
        if legacy is not None:
            if buffer.legacy_call is None:
                buffer.legacy_call = _ToolCallBuffer(None, legacy.name)
            if legacy.arguments:
                buffer.legacy_call.arguments.append(legacy.arguments)

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = chat_usage(self.usage)
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def failure(self) -> tuple[str, str] | None:
        """Chat streams report no failure of their own (errors arrive as exceptions)."""
        return None

    def end_reason(self) -> str:
        """``exhausted`` when every choice got its finish_reason, else ``truncated`` (no choice at all included)."""
        choices = self.choices.values()
        if choices and all(c.finish_reason is not None for c in choices):
            return sc.STREAM_END_EXHAUSTED
        return sc.STREAM_END_TRUNCATED

    def outcome(self) -> Outcome:
        """Return the accumulated Outcome (finish reasons in choice order)."""
        ordered = [self.choices[i] for i in sorted(self.choices)]
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[c.finish_reason or "" for c in ordered if c.finish_reason is not None],
            output_messages=[c.message() for c in ordered],
            usage=chat_usage(self.usage),
            service_tier=self.service_tier,
            system_fingerprint=self.fingerprint,
        )


_TEXT_DELTA = "response.output_text.delta"
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_ARGS_DELTA = "response.function_call_arguments.delta"
# The items the deltas build already; any other finished item is a built-in tool's (see ``builtin_tool_parts``).
_OWN_ITEMS = frozenset({"message", "reasoning", "function_call"})
_KEPT_EVENTS = frozenset({
    "response.output_item.added", "response.output_item.done", "response.output_text.annotation.added",
    "response.created", "error",
})  # fmt: skip
# Terminal event -> end reason (a ``response.failed`` stream is also a failure: see ``failure``).
_FINAL = {
    "response.completed": sc.STREAM_END_EXHAUSTED,
    "response.incomplete": sc.STREAM_END_INCOMPLETE,
    "response.failed": sc.STREAM_END_ERROR,
}


class ResponsesAccumulator:
    """Accumulates Responses stream events; the terminal event's full ``response`` wins when it arrives."""

    __slots__ = (
        "annotations",
        "builtin",
        "calls",
        "error",
        "final",
        "reasoning",
        "refusal",
        "snapshot",
        "terminal",
        "text",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _ToolCallBuffer] = {}
        self.final: Any = None
        self.terminal = sc.STREAM_END_TRUNCATED  # the end reason, until a terminal event arrives
        self.snapshot: Any = None
        self.error: tuple[str, str] | None = None  # (error.type, message) of an ``error`` event
        # For a stream cut before its terminal event: the answer's annotations and the built-in tools' finished
        # items (a web or file search, with what it found), as ``response.output_item.done`` gives them whole.
        self.annotations: list[Any] = []
        self.builtin: list[Any] = []

    def add(self, chunk: Any) -> bool:
        """Fold one event in; True for ``*.delta`` events (output)."""
        etype = chunk.type
        if etype == _TEXT_DELTA:
            self.text.append(chunk.delta)
        elif etype in _REASONING_DELTAS:
            self.reasoning.append(chunk.delta)
        elif etype == _ARGS_DELTA:
            slot = self.calls.get(chunk.output_index)
            if slot is None:
                slot = self.calls[chunk.output_index] = _ToolCallBuffer(None, None)
            slot.arguments.append(chunk.delta)
        elif etype == "response.refusal.delta":
            self.refusal.append(chunk.delta)
        elif etype in _FINAL:
            self.final = chunk.response
            self.terminal = _FINAL[etype]
        elif etype in _KEPT_EVENTS:  # one set lookup for every event nothing here keeps (the tools' progress...)
            self._kept_event(chunk, etype)
        return bool(etype.endswith(".delta"))

    def _kept_event(self, chunk: Any, etype: str) -> None:
        """The events besides deltas and terminal ones that give something: items, annotations, the header."""
        if etype == "response.output_item.added":
            self._item_added(chunk.item, chunk.output_index)
        elif etype == "response.output_item.done":
            item = chunk.item
            if getattr(item, "type", None) not in _OWN_ITEMS:
                self.builtin.append(item)
        elif etype == "response.output_text.annotation.added":
            self.annotations.append(chunk.annotation)
        elif etype == "response.created":
            self.snapshot = chunk.response
        else:
            self.error = _error_event(chunk)

    def _item_added(self, item: Any, output_index: int) -> None:
        if getattr(item, "type", None) == "function_call":
            slot = self.calls.get(output_index)
            if slot is None:
                slot = self.calls[output_index] = _ToolCallBuffer(None, None)
            slot.call_id, slot.name = item.call_id, item.name

    def failure(self) -> tuple[str, str] | None:
        """An ``error`` event, else a ``response.failed`` terminal response (see ``responses_failure``)."""
        if self.error is not None:
            return self.error
        return responses_failure(self.final) if self.final is not None else None

    def end_reason(self) -> str:
        """By the terminal event: completed -> exhausted, incomplete, failed -> error; none -> truncated.

        An ``error`` event makes it ``error`` whatever followed it.
        """
        return sc.STREAM_END_ERROR if self.error is not None else self.terminal

    def summary(self) -> Summary:
        """Model and token counts only (token counts come with the terminal response)."""
        if self.final is not None:
            return responses_summary(self.final)
        return Summary(getattr(self.snapshot, "model", None))

    def outcome(self) -> Outcome:
        """The terminal response when present, else what the deltas so far amount to."""
        if self.final is not None:
            return responses_outcome(self.final)
        parts: list[Part] = assistant_parts("".join(self.reasoning) or None, "".join(self.text), "".join(self.refusal))
        add_citations(parts, 0, self.annotations)
        if self.builtin:  # after the reasoning, before the answer: the order of a whole response's output items
            budget = ResultsBudget()
            tools = [part for item in self.builtin for part in builtin_tool_parts(str(get(item, "type")), item, budget)]
            at = 1 if parts and parts[0].get("type") == "reasoning" else 0
            parts[at:at] = tools
        for call in self.calls.values():
            parts.append(tool_call_part(call.call_id, call.name, "".join(call.arguments)))
        snapshot = self.snapshot
        outcome = Outcome(
            response_id=getattr(snapshot, "id", None),
            response_model=getattr(snapshot, "model", None),
            output_messages=[output_message(parts, None)],
        )
        if snapshot is not None and getattr(snapshot, "status", None) not in (None, "in_progress", "queued"):
            outcome.finish_reasons = [responses_finish_reason(snapshot, bool(self.calls))]
        return outcome


def _error_event(event: Any) -> tuple[str, str]:
    """(``error.type``, message) of a Responses ``error`` event: its code, else ``_OTHER``.

    The documented event has ``code`` / ``message`` at the top; a nested ``error`` object is read too (servers
    that mirror the HTTP error body; the SDK raises on some of those, which ends the stream with an exception).
    """
    nested = get(event, "error")
    code = get(event, "code") or get(nested, "code")
    message = get(event, "message") or get(nested, "message")
    error_type = code if isinstance(code, str) and code else sc.ERROR_TYPE_OTHER
    return error_type, f"{error_type}: {message}" if isinstance(message, str) and message else error_type
