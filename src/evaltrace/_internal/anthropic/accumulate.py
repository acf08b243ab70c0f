"""Stream accumulator: raw Messages stream events in, one ``Outcome`` out. ``add`` is O(1) per event.

Events: ``message_start`` (id, model, input usage), ``content_block_start`` / ``_delta`` / ``_stop`` per block
index, ``message_delta`` (stop reason, cumulative usage), ``message_stop`` (the terminal signal), ``ping`` and
``error``. Text, thinking and tool-input JSON fragments are kept as lists and joined once, at the end.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.request import REDACTED_REASONING, content_part
from evaltrace._internal.anthropic.response import output_message, thinking_tokens, usage_of
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.jsonutil import loads_or_raw
from evaltrace._internal.openai.parts import Part, reasoning_part, text_part
from evaltrace._internal.openai.parts import field as get

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class _Block:
    __slots__ = ("fragments", "start")

    def __init__(self, start: Any) -> None:
        self.start = start  # the content_block_start's block: type, and id/name of a tool use
        self.fragments: list[str] = []

    def part(self) -> Part:
        btype = get(self.start, "type")
        joined = "".join(self.fragments)
        if btype == "text":
            return text_part((get(self.start, "text") or "") + joined)
        if btype == "thinking":
            return reasoning_part((get(self.start, "thinking") or "") + joined)
        if btype == "redacted_thinking":
            return dict(REDACTED_REASONING)
        if btype == "tool_use" or btype == "server_tool_use":
            part = content_part(self.start)
            if joined:  # the start block's input is an empty placeholder; the deltas are the real JSON
                part["arguments"] = loads_or_raw(joined)
            return part
        return content_part(self.start)


class MessagesAccumulator:
    """Accumulates ``RawMessageStreamEvent``s by content block index."""

    __slots__ = ("blocks", "error", "model", "response_id", "stop_reason", "stopped", "usage")

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.stopped = False  # message_stop arrived
        self.error: tuple[str, str] | None = None

    def add(self, event: Any) -> bool:
        """Fold one event in; True for a content delta (output, for time to first chunk)."""
        etype = event.type
        if etype == "content_block_delta":
            block = self.blocks.get(event.index)
            if block is not None:
                delta = event.delta
                dtype = delta.type
                if dtype == "text_delta":
                    block.fragments.append(delta.text)
                elif dtype == "input_json_delta":
                    block.fragments.append(delta.partial_json)
                elif dtype == "thinking_delta":
                    block.fragments.append(delta.thinking)
                # signature_delta / citations_delta: nothing the span records
            return True
        if etype == "content_block_start":
            self.blocks[event.index] = _Block(event.content_block)
        elif etype == "message_start":
            message = event.message
            self.response_id = get(message, "id")
            self.model = get(message, "model")
            self._take_usage(get(message, "usage"))
        elif etype == "message_delta":
            reason = get(event.delta, "stop_reason")
            if reason:
                self.stop_reason = reason
            self._take_usage(get(event, "usage"))
        elif etype == "message_stop":
            self.stopped = True
        elif etype == "error":
            self.error = _error_event(event)
        return False

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, in one frame (the stream proxy's batch fold): content deltas inline."""
        blocks = self.blocks
        add = self.add
        for event in events:
            try:
                if event.type != "content_block_delta":
                    add(event)
                    continue
                block = blocks.get(event.index)
                if block is not None:
                    delta = event.delta
                    dtype = delta.type
                    if dtype == "text_delta":
                        block.fragments.append(delta.text)
                    elif dtype == "input_json_delta":
                        block.fragments.append(delta.partial_json)
                    elif dtype == "thinking_delta":
                        block.fragments.append(delta.thinking)
            except Exception:
                chunk_failed()

    def _take_usage(self, usage: Any) -> None:
        """message_delta's counts are cumulative: each one given replaces the earlier one; a None does not."""
        if usage is None:
            return
        for name in _USAGE_FIELDS:
            value = get(usage, name)
            if value is not None:
                self.usage[name] = value
        thinking = thinking_tokens(usage)
        if thinking is not None:
            self.usage["thinking_tokens"] = thinking

    def _usage(self) -> Any:
        if not self.usage:
            return None
        u = self.usage
        return usage_of(
            u.get("input_tokens"),
            u.get("output_tokens"),
            u.get("cache_read_input_tokens"),
            u.get("cache_creation_input_tokens"),
            u.get("thinking_tokens"),
        )

    def end_reason(self) -> str:
        """``exhausted`` only when ``message_stop`` arrived; an ``error`` event makes it ``error``."""
        if self.error is not None:
            return sc.STREAM_END_ERROR
        return sc.STREAM_END_EXHAUSTED if self.stopped else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """An ``error`` event that reached us (the SDK usually raises it instead)."""
        return self.error

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = self._usage()
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the events so far amount to (blocks in index order)."""
        parts = [self.blocks[i].part() for i in sorted(self.blocks)]
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[self.stop_reason] if self.stop_reason else [],
            output_messages=[output_message(parts, self.stop_reason)],
            usage=self._usage(),
        )


def _error_event(event: Any) -> tuple[str, str]:
    """(``error.type``, message) of an ``error`` event: ``{"type": "error", "error": {"type", "message"}}``."""
    nested = get(event, "error")
    code = get(nested, "type")
    message = get(nested, "message")
    error_type = code if isinstance(code, str) and code else sc.ERROR_TYPE_OTHER
    return error_type, f"{error_type}: {message}" if isinstance(message, str) and message else error_type
