"""Stream accumulator: Cohere v2 ``chat_stream`` events in, one ``Outcome`` out. ``add`` is O(1) per event.

Events (``V2ChatStreamResponse``, discriminated by ``type``): ``message-start`` (id), ``content-start`` /
``content-delta`` / ``content-end`` per content index (``text`` or ``thinking``), ``tool-plan-delta``,
``tool-call-start`` (id, name, first argument text) / ``tool-call-delta`` (argument fragments) / ``tool-call-end``
per tool index, ``citation-start`` / ``citation-end``, ``debug``, and ``message-end`` (finish reason, usage and,
when generation failed, ``error``): the terminal signal. Fragments are kept in lists and joined once, at the end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed, plain_fields
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import Part, field, reasoning_part, text_part, tool_call_part
from evaltrace.instrumentation.cohere.codec import finish_reason, usage_attributes, usage_of

# finish reasons that say the generation failed although the SDK raised nothing
FAILED = frozenset({"ERROR", "TIMEOUT"})


class _Content:
    __slots__ = ("fragments", "kind")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.fragments: list[str] = []

    def part(self) -> Part:
        joined = "".join(self.fragments)
        return reasoning_part(joined) if self.kind == "thinking" else text_part(joined)


class _ToolCall:
    __slots__ = ("call_id", "fragments", "name")

    def __init__(self, call: Any) -> None:
        self.call_id = field(call, "id")
        function = field(call, "function")
        self.name = field(function, "name")
        first = field(function, "arguments")
        self.fragments: list[str] = [first] if isinstance(first, str) else []

    def part(self) -> Part:
        return tool_call_part(self.call_id, self.name, "".join(self.fragments))


@functools.cache
def _sdk_types() -> tuple[Any, Any, Any, Any] | None:  # Any: a type check must not narrow the event to object
    """The cohere SDK's content-delta event, its delta, message and content classes, once (None: read by ``add``)."""
    try:
        from cohere.types.chat_content_delta_event_delta import ChatContentDeltaEventDelta
        from cohere.types.chat_content_delta_event_delta_message import ChatContentDeltaEventDeltaMessage
        from cohere.types.chat_content_delta_event_delta_message_content import (
            ChatContentDeltaEventDeltaMessageContent,
        )
        from cohere.v2.types.v2chat_stream_response import ContentDeltaV2ChatStreamResponse
    except ImportError:
        return None
    types = (ContentDeltaV2ChatStreamResponse, ChatContentDeltaEventDelta, ChatContentDeltaEventDeltaMessage,
             ChatContentDeltaEventDeltaMessageContent)  # fmt: skip
    reads = (("type", "index", "delta"), ("message",), ("content",), ("thinking", "text"))
    return types if all(plain_fields(cls, names) for cls, names in zip(types, reads, strict=True)) else None


class ChatStreamAccumulator:
    """Accumulates v2 chat stream events by content and tool-call index."""

    __slots__ = ("contents", "ended", "error", "plan", "reason", "response_id", "tools", "usage")

    def __init__(self) -> None:
        self.contents: dict[int, _Content] = {}
        self.tools: dict[int, _ToolCall] = {}
        self.plan: list[str] = []
        self.response_id: str | None = None
        self.reason: str | None = None
        self.usage: Any = None
        self.ended = False  # message-end arrived
        self.error: str | None = None

    def add(self, event: Any) -> bool:
        """Fold one event in; True when it carried output (for time to first chunk)."""
        etype = getattr(event, "type", None)
        if etype == "content-delta":  # the commonest event first
            index = getattr(event, "index", None) or 0
            delta = _message(event, "content")
            content = self.contents.get(index)
            if content is None and delta is not None:  # no content-start seen: the delta says what it is
                content = self.contents[index] = _Content("thinking" if field(delta, "thinking") else "text")
            if content is not None:
                text = field(delta, "thinking") if content.kind == "thinking" else field(delta, "text")
                if isinstance(text, str):
                    content.fragments.append(text)
            return True
        handler = _HANDLERS.get(etype) if isinstance(etype, str) else None
        return handler(self, event) if handler is not None else False

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, the common event read in this one frame (the stream proxy's batch fold).

        The common event is a ``content-delta`` whose content already started. Once its types are checked to be the
        cohere SDK's own (exactly, fields no class defines: ``plain_fields``), the event's three fields are read
        from its ``__dict__`` by subscript, and the delta, message and content's one field each as an attribute:
        one read through pydantic's ``__getattr__`` hook per object, the very value ``field`` returns, instead of
        seven calls through ``field`` (``dict.get`` and a ``__dict__`` read per object cost more than a read).
        A field missing from ``__dict__`` or an attribute that raises sends the event to ``add``, as does every
        other event: both record the same.
        """
        types = _sdk_types()
        if types is None:
            add_each(self.add, events)
            return
        event_type, delta_type, message_type, content_type = types
        contents = self.contents
        for event in events:
            try:
                if type(event) is event_type:
                    try:
                        fields = event.__dict__
                        delta = fields["delta"]
                        if type(delta) is delta_type and fields["type"] == "content-delta":
                            message = delta.message
                            if type(message) is message_type:
                                said = message.content
                                content = contents.get(fields["index"] or 0)
                                if type(said) is content_type and content is not None:
                                    text = said.thinking if content.kind == "thinking" else said.text
                                    if isinstance(text, str):
                                        content.fragments.append(text)
                                    continue
                    except (KeyError, AttributeError):  # a field only ``add`` reads as it is (an extra, or None)
                        pass
                self.add(event)
            except Exception:
                chunk_failed()

    def _tool_call_delta(self, event: Any) -> bool:
        call = self.tools.get(getattr(event, "index", None) or 0)
        fragment = field(field(_message(event, "tool_calls"), "function"), "arguments")
        if call is not None and isinstance(fragment, str):
            call.fragments.append(fragment)
        return True

    def _tool_plan_delta(self, event: Any) -> bool:
        plan = _message(event, "tool_plan")
        if isinstance(plan, str):
            self.plan.append(plan)
        return True

    def _content_start(self, event: Any) -> bool:
        start = _message(event, "content")
        kind = field(start, "type") or ("thinking" if field(start, "thinking") else "text")
        content = _Content(str(kind))
        first = field(start, "thinking") if content.kind == "thinking" else field(start, "text")
        if isinstance(first, str) and first:
            content.fragments.append(first)
        self.contents[getattr(event, "index", None) or 0] = content
        return bool(first)

    def _tool_call_start(self, event: Any) -> bool:
        self.tools[getattr(event, "index", None) or 0] = _ToolCall(_message(event, "tool_calls"))
        return True

    def _message_start(self, event: Any) -> bool:
        self.response_id = field(event, "id")
        return False

    def _message_end(self, event: Any) -> bool:
        self.ended = True
        delta = field(event, "delta")
        self.reason = field(delta, "finish_reason")
        self.usage = field(delta, "usage")
        error = field(delta, "error")
        if isinstance(error, str) and error:
            self.error = error
        if self.response_id is None:
            self.response_id = field(event, "id")
        return False

    def end_reason(self) -> str:
        """``exhausted`` only when ``message-end`` arrived; a failed generation makes it ``error``."""
        if self.failure() is not None:
            return sc.STREAM_END_ERROR
        return sc.STREAM_END_EXHAUSTED if self.ended else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """(``error.type``, message) when ``message-end`` reported an error or an ERROR / TIMEOUT finish."""
        reason = self.reason if isinstance(self.reason, str) else None
        if self.error is None and reason not in FAILED:
            return None
        error_type = reason if reason in FAILED else sc.ERROR_TYPE_OTHER
        return error_type, f"{error_type}: {self.error}" if self.error else error_type

    def summary(self) -> Summary:
        """Token counts only (a v2 stream names no model)."""
        usage = usage_of(self.usage)
        if usage is None:
            return Summary(None)
        return Summary(None, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the events so far amount to: the tool plan, content in index order, then the tool calls."""
        parts = [reasoning_part("".join(self.plan))] if self.plan else []
        parts.extend(self.contents[i].part() for i in sorted(self.contents))
        parts.extend(self.tools[i].part() for i in sorted(self.tools))
        reason = self.reason
        return Outcome(
            response_id=self.response_id,
            finish_reasons=[str(reason)] if reason else [],
            output_messages=[{"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason)}],
            usage=usage_of(self.usage),
            attributes=usage_attributes(self.usage) or None,
        )


def _message(event: Any, name: str) -> Any:
    """``event.delta.message.<name>``, None where any level is missing."""
    return field(field(field(event, "delta"), "message"), name)


_HANDLERS: dict[str, Callable[[ChatStreamAccumulator, Any], bool]] = {
    "tool-call-delta": ChatStreamAccumulator._tool_call_delta,
    "tool-plan-delta": ChatStreamAccumulator._tool_plan_delta,
    "content-start": ChatStreamAccumulator._content_start,
    "tool-call-start": ChatStreamAccumulator._tool_call_start,
    "message-start": ChatStreamAccumulator._message_start,
    "message-end": ChatStreamAccumulator._message_end,
}
