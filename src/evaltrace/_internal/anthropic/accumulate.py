"""Stream accumulator: raw Messages stream events in, one ``Outcome`` out. ``add`` is O(1) per event.

Events: ``message_start`` (id, model, input usage), ``content_block_start`` / ``_delta`` / ``_stop`` per block
index, ``message_delta`` (stop reason, cumulative usage), ``message_stop`` (the terminal signal), ``ping`` and
``error``. Text, thinking and tool-input JSON fragments are kept as lists and joined once, at the end.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.citations import cited_text_part
from evaltrace._internal.anthropic.request import REDACTED_REASONING, content_part
from evaltrace._internal.anthropic.response import output_message, thinking_tokens, usage_of
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.jsonutil import loads_or_raw
from evaltrace._internal.openai.parts import Part, reasoning_part, text_part
from evaltrace._internal.openai.parts import field as get

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_CONTENT_DELTA = "content_block_delta"
_FRAGMENT_FIELDS = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}
"""A content delta's ``type`` -> the field of it that ``add`` keeps (other kinds keep nothing)."""


class _Block:
    __slots__ = ("fragments", "start")

    def __init__(self, start: Any) -> None:
        self.start = start  # the content_block_start's block: type, and id/name of a tool use
        self.fragments: list[Any] = []  # str; a compaction delta's summary may be None

    def part(self, cited: list[Any] | None = None) -> Part:
        """The block's part; ``cited``: a text block's ``citations_delta`` citations, in order."""
        btype = get(self.start, "type")
        if btype == "compaction":  # each delta holds the whole summary so far (None: encrypted only): the last wins,
            if not self.fragments:  # as anthropic's own stream fold sets it
                return content_part(self.start)
            last = self.fragments[-1]
            return {"type": "compaction", "content": last} if isinstance(last, str) else {"type": "compaction"}
        joined = "".join(self.fragments)
        if btype == "text":
            text = (get(self.start, "text") or "") + joined
            given = get(self.start, "citations")  # none or [] as the API starts a block; whole, a replayed one's
            if cited is None and not given:  # most text blocks cite nothing: no citation work for them
                return text_part(text)
            return cited_text_part(text, [*(given or ()), *(cited or ())])
        if btype == "thinking":
            return reasoning_part((get(self.start, "thinking") or "") + joined)
        if btype == "redacted_thinking":
            return dict(REDACTED_REASONING)
        if btype == "tool_use":
            part = content_part(self.start)
            if joined:  # the start block's input is an empty placeholder; the deltas are the real JSON
                part["arguments"] = loads_or_raw(joined)
            return part
        if btype == "server_tool_use" or btype == "mcp_tool_use":
            part = content_part(self.start)
            if joined:  # as for tool_use; the input goes inside server_tool_call, as content_part puts it
                part["server_tool_call"]["arguments"] = loads_or_raw(joined)
            return part
        return content_part(self.start)


class MessagesAccumulator:
    """Accumulates ``RawMessageStreamEvent``s by content block index."""

    __slots__ = ("blocks", "cited", "error", "model", "response_id", "stop_reason", "stopped", "usage")

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.stopped = False  # message_stop arrived
        self.error: tuple[str, str] | None = None
        # The text blocks' ``citations_delta`` citations by block index (kept out of ``_Block``: most blocks cite
        # nothing, and the per-delta path stays as it was).
        self.cited: dict[int, list[Any]] | None = None

    def _cite(self, index: int, citation: Any) -> None:
        if self.cited is None:
            self.cited = {}
        self.cited.setdefault(index, []).append(citation)

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
                elif dtype == "citations_delta":  # one citation of a text block each, in order
                    self._cite(event.index, delta.citation)
                elif dtype == "compaction_delta" and get(block.start, "type") == "compaction":
                    # A compacted history's summary (beta), each delta the whole of it so far: see part(). Non-beta
                    # event types parse it without the field.
                    block.fragments.append(getattr(delta, "content", None))
                # signature_delta: nothing the span records
            return True
        if etype == "content_block_start":
            self.blocks[event.index] = _Block(event.content_block)
        else:
            self._message_event(event, etype)
        return False

    def _message_event(self, event: Any, etype: str) -> None:
        """The once-per-stream events (start, delta, stop, error), out of ``add``'s per-delta path."""
        if etype == "message_start":
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

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, in one frame (the stream proxy's batch fold).

        A stream is mostly runs of content deltas of one block and one kind (text, thinking, tool input JSON).
        Once ``add`` has folded one such delta of a class that keeps its fields in ``__dict__`` (``_declares``),
        the next ones of the same class, block and kind are read there: an exact class check, two ``__dict__``
        reads instead of five attribute reads through pydantic's ``__getattr__`` hook (which CPython does not
        specialise), three comparisons and an append. Anything else goes to ``add``, which reads the same values
        (a pydantic model's declared fields are its ``__dict__``), and ends the run.
        """
        run_class: type | None = None  # the current run: event class, block index, delta type, its text field
        index: Any = None
        kind: Any = None
        name = ""
        append: Any = None
        add = self.add
        for event in events:
            if type(event) is run_class:
                try:
                    fields = event.__dict__
                    delta = fields["delta"].__dict__
                    if delta["type"] == kind and fields["index"] == index and fields["type"] == _CONTENT_DELTA:
                        append(delta[name])
                        continue
                except Exception:  # not the shape of the run after all: ``add`` reads it
                    pass
            run_class = None
            try:
                if add(event):
                    run_class, index, kind, name, append = self._run_of(event)
            except Exception:
                chunk_failed()

    def _run_of(self, event: Any) -> tuple[type | None, Any, Any, str, Any]:
        """What ``add_batch`` needs to read the deltas after ``event`` (a content delta just folded) itself.

        ``(None, ...)`` when they must go through ``add``: a class whose fields may not be in ``__dict__``, a
        delta of a block that never started, or of a kind ``add`` keeps nothing of.
        """
        cls = type(event)
        if not _declares(cls, ("type", "index", "delta")):
            return None, None, None, "", None
        fields = event.__dict__
        index = fields["index"]
        block = self.blocks.get(index)
        kind = fields["delta"].__dict__.get("type")
        name = _FRAGMENT_FIELDS.get(kind) if isinstance(kind, str) else None
        if block is None or name is None or fields["type"] != _CONTENT_DELTA:
            return None, None, None, "", None
        return cls, index, kind, name, block.fragments.append

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
        cited = self.cited or {}
        parts = [self.blocks[i].part(cited.get(i)) for i in sorted(self.blocks)]
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[self.stop_reason] if self.stop_reason else [],
            output_messages=[output_message(parts, self.stop_reason)],
            usage=self._usage(),
        )


_DECLARED: dict[tuple[type, tuple[str, ...]], bool] = {}


def _declares(cls: type, names: tuple[str, ...]) -> bool:
    """Whether ``cls`` is a pydantic (v2) model declaring the fields ``names``: those are its ``__dict__``.

    ``RawContentBlockDeltaEvent`` and ``BetaRawContentBlockDeltaEvent`` are; pydantic v1 models, dicts and other
    objects are not, and are read through ``add``. Cached per class (one dict lookup per run of deltas).
    """
    known = _DECLARED.get((cls, names))
    if known is None:
        declared = getattr(cls, "__pydantic_fields__", None)
        known = _DECLARED[(cls, names)] = isinstance(declared, dict) and all(n in declared for n in names)
    return known


def _error_event(event: Any) -> tuple[str, str]:
    """(``error.type``, message) of an ``error`` event: ``{"type": "error", "error": {"type", "message"}}``."""
    nested = get(event, "error")
    code = get(nested, "type")
    message = get(nested, "message")
    error_type = code if isinstance(code, str) and code else sc.ERROR_TYPE_OTHER
    return error_type, f"{error_type}: {message}" if isinstance(message, str) and message else error_type
