"""``converse_stream``'s events (and Amazon Nova's native stream chunks, the same shape) folded into one Outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.jsonutil import loads_or_raw
from evaltrace._internal.openai.parts import Part, reasoning_part, text_part
from evaltrace.instrumentation.bedrock.blocks import (
    REDACTED_REASONING,
    content_part,
    inline_media_part,
    media_part,
    tool_result_part,
)
from evaltrace.instrumentation.bedrock.converse import converse_usage, invoked_model, output_message

_NO_INDEX = object()
"""``add_batch``'s marker for "no block kept": no event's block index is this object."""


class _Block:
    """One content block of a stream: its start (tool use id and name) and its delta fragments."""

    __slots__ = ("fragments", "kind", "redacted", "start")

    def __init__(self, kind: str, start: Any = None) -> None:
        self.kind = kind  # text, tool, tool_result, reasoning, image
        self.start = start
        self.fragments: list[Any] = []  # str, or a list of content blocks for a tool result
        self.redacted = False

    def part(self) -> Part:
        if self.kind == "image":  # fragments are the image's bytes, in pieces: only their size is recorded
            fmt = (self.start or {}).get("format")
            for fragment in self.fragments:  # or its S3 location, recorded as a whole answer's: its URI
                if isinstance(fragment, Mapping):
                    return media_part({"format": fmt, "source": {"s3Location": fragment}}, "image")
            size = sum(len(f) for f in self.fragments if isinstance(f, bytes | bytearray | str))
            return inline_media_part("image", fmt, size)
        if self.kind == "tool_result":  # fragments are lists of content blocks, not text
            content = [block for fragment in self.fragments for block in fragment]
            return tool_result_part({**(self.start or {}), "content": content})
        joined = "".join(self.fragments)
        if self.kind == "tool":
            use = self.start or {}
            return content_part({"toolUse": {**use, "input": loads_or_raw(joined) if joined else {}}}) or {}
        if self.kind == "reasoning":
            if self.redacted and not joined:
                return dict(REDACTED_REASONING)
            return reasoning_part(joined)
        return text_part(joined)


class ConverseStreamAccumulator:
    """Folds ``converse_stream`` events (and Nova's native stream chunks, the same shape) into one Outcome.

    ``add`` is O(1): fragments are appended per block index and joined once, at the end.
    """

    __slots__ = ("blocks", "response_id", "response_model", "stop_reason", "stopped", "usage")

    def __init__(self, response_id: str | None = None) -> None:
        self.blocks: dict[int, _Block] = {}
        self.response_id = response_id
        self.stop_reason: str | None = None
        self.usage: Usage | None = None
        self.response_model: str | None = None  # a prompt router's choice, in the metadata event
        self.stopped = False

    def add(self, event: Any) -> bool:
        """Fold one event in; True for a content delta (output, for time to first chunk)."""
        if not isinstance(event, Mapping):
            return False
        delta_event = event.get("contentBlockDelta")
        if delta_event is not None:
            return self._delta(delta_event)
        start = event.get("contentBlockStart")
        if start is not None:
            index = start.get("contentBlockIndex", 0)
            begun = start.get("start") or {}
            if begun.get("toolUse") is not None:
                self.blocks[index] = _Block("tool", begun["toolUse"])
            elif begun.get("toolResult") is not None:
                self.blocks[index] = _Block("tool_result", begun["toolResult"])
            elif begun.get("image") is not None:  # an image the model answers with (its format; bytes follow)
                self.blocks[index] = _Block("image", begun["image"])
            return False
        stop = event.get("messageStop")
        if stop is not None:
            self.stopped = True
            reason = stop.get("stopReason")
            if isinstance(reason, str):
                self.stop_reason = reason
            return False
        metadata = event.get("metadata")
        if metadata is not None:
            usage = converse_usage(metadata.get("usage"))
            if usage is not None:
                self.usage = usage
            trace = metadata.get("trace")
            if trace is not None:  # only a guardrail's or a prompt router's call has one
                self.response_model = invoked_model(trace) or self.response_model
        return False

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, in one frame (the stream proxy's batch fold).

        The common event of a Converse stream is a text delta of an open block, as botocore parses it into plain
        dicts: ``{"contentBlockDelta": {"delta": {"text": str}, "contentBlockIndex": int}}``. For such an event
        ``add`` appends the text to the fragments of the block at that index, whatever its kind, and that is all
        this does, without ``add``'s calls and ``Mapping`` check. Every other event (another kind, a text that is
        not a ``str``, a block not open yet, another type than ``dict``) goes through ``add``.

        Per common event (s17-conv; why each holds is in benchmarks/README.md): the previous delta's block is kept
        for a run of deltas to one ``int`` index (dropped after every event that goes through ``add``, which alone
        opens or replaces a block); the body is tested for None only (``add`` reads it with ``get`` alone); the
        delta keeps its ``dict`` test; ``type``, ``dict`` and ``str`` are locals.
        """
        blocks = self.blocks
        add = self.add
        kept: Any = _NO_INDEX  # the index whose block's fragments ``fragments`` is: an ``int``, or the marker
        fragments: list[Any] = []
        type_of, plain, string = type, dict, str
        for event in events:
            try:
                if type_of(event) is plain:
                    body = event.get("contentBlockDelta")
                    if body is not None:
                        delta = body.get("delta")
                        if type_of(delta) is plain:
                            text = delta.get("text")
                            if type_of(text) is string:
                                index = body.get("contentBlockIndex", 0)
                                if index is not kept:
                                    block = blocks.get(index)
                                    if block is None:  # not open yet: ``add`` opens it
                                        kept = _NO_INDEX
                                        add(event)
                                        continue
                                    fragments = block.fragments
                                    kept = index if type_of(index) is int else _NO_INDEX
                                fragments.append(text)  # ``str(text)`` is ``text`` itself
                                continue
                kept = _NO_INDEX
                add(event)
            except Exception:
                kept = _NO_INDEX
                chunk_failed()

    def _delta(self, event: Any) -> bool:
        index = event.get("contentBlockIndex", 0)
        delta = event.get("delta") or {}
        if "text" in delta:  # inline, not ``_block``: Nova opens a block per text delta, so this runs per event
            block = self.blocks.get(index)
            if block is None:
                block = self.blocks[index] = _Block("text")
            block.fragments.append(str(delta["text"]))
        elif "toolUse" in delta:
            self._block(index, "tool", {}).fragments.append(str((delta["toolUse"] or {}).get("input") or ""))
        elif "toolResult" in delta:
            results = delta["toolResult"]
            self._block(index, "tool_result", {}).fragments.append(results if isinstance(results, list) else [results])
        elif "image" in delta:
            block = self._block(index, "image", {})
            source = (delta["image"] or {}).get("source") or {}
            if source.get("bytes") is not None:
                block.fragments.append(source["bytes"])
            elif isinstance(source.get("s3Location"), Mapping):  # the image stored in S3 (ImageSource's other member)
                block.fragments.append(source["s3Location"])
        elif "reasoningContent" in delta:
            block = self._block(index, "reasoning")
            reasoning = delta["reasoningContent"] or {}
            if "text" in reasoning:
                block.fragments.append(str(reasoning["text"]))
            elif "redactedContent" in reasoning:
                block.redacted = True
            # a signature delta: nothing the span records
        return True

    def _block(self, index: Any, kind: str, start: Any = None) -> _Block:
        """The block open at ``index``, whatever its kind; a new one of ``kind`` when none is (no start event)."""
        block = self.blocks.get(index)
        if block is None:
            block = self.blocks[index] = _Block(kind, start)
        return block

    def end_reason(self) -> str:
        """``exhausted`` only once ``messageStop`` arrived; a stream cut before it is ``truncated``."""
        return sc.STREAM_END_EXHAUSTED if self.stopped else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """Errors in a Bedrock stream are raised by botocore (``EventStreamError``), never folded in."""
        return None

    def summary(self) -> Summary:
        """Token counts, and the model a prompt router chose (Converse streams name no other)."""
        usage, model = self.usage, self.response_model
        return Summary(model) if usage is None else Summary(model, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the events so far amount to (blocks in index order)."""
        parts: list[Part] = []
        for index in sorted(self.blocks):
            part = self.blocks[index].part()
            if part.get("type") == "text":
                if not part["content"]:
                    continue  # an empty delta (gpt-oss opens its answer with one): no content
                if parts and parts[-1].get("type") == "text":
                    # Nova streams each delta as a block of its own: one answer, as its unstreamed reply has it
                    parts[-1] = text_part(parts[-1]["content"] + part["content"])
                    continue
            parts.append(part)
        reason = self.stop_reason
        return Outcome(
            response_id=self.response_id,
            response_model=self.response_model,
            finish_reasons=[reason] if reason else [],
            output_messages=[output_message(parts, reason)],
            usage=self.usage,
        )
