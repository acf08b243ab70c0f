"""The stream accumulator of ``generate_content_stream``: ``GenerateContentResponse`` chunks in, one ``Outcome`` out.

``add`` is O(1) per part: parts are kept as they came, by candidate index, and turned into GenAI parts once,
when the stream ends (consecutive text pieces joined there). Every chunk of a Gemini stream repeats the response
id, the model version and the usage so far; the last usage is the call's.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import Message
from evaltrace.instrumentation.google_genai.parts import enum_name, parts_of
from evaltrace.instrumentation.google_genai.response import output_message, usage_of


class _Candidate:
    __slots__ = ("finish_reason", "parts")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.finish_reason: str | None = None


class GenerateContentAccumulator:
    """Accumulates the chunks of one ``generate_content_stream`` call (sync or async)."""

    __slots__ = ("blocked", "candidates", "model", "response_id", "usage")

    def __init__(self) -> None:
        self.candidates: dict[int, _Candidate] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: Any = None
        self.blocked = False

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; True when it carries parts (output, for time to first chunk)."""
        if self.response_id is None:
            self.response_id = getattr(chunk, "response_id", None)
        if self.model is None:
            self.model = getattr(chunk, "model_version", None)
        usage = getattr(chunk, "usage_metadata", None)
        if usage is not None:
            self.usage = usage
        output = False
        for candidate in getattr(chunk, "candidates", None) or ():
            index = candidate.index or 0
            buffer = self.candidates.get(index)
            if buffer is None:
                buffer = self.candidates[index] = _Candidate()
            content = candidate.content
            parts = content.parts if content is not None else None
            if parts:
                buffer.parts.extend(parts)
                output = True
            if candidate.finish_reason is not None:
                buffer.finish_reason = enum_name(candidate.finish_reason)
        feedback = getattr(chunk, "prompt_feedback", None)
        if feedback is not None and feedback.block_reason is not None:
            self.blocked = True  # the prompt was blocked: the API ends the stream without a candidate
        return output

    def end_reason(self) -> str:
        """``exhausted`` when every candidate got its finish reason (or the prompt was blocked), else ``truncated``."""
        candidates = self.candidates.values()
        if self.blocked or (candidates and all(c.finish_reason is not None for c in candidates)):
            return sc.STREAM_END_EXHAUSTED
        return sc.STREAM_END_TRUNCATED

    def outcome(self, content: bool = True) -> Outcome:
        """What the chunks so far amount to (output messages only with ``content``)."""
        ordered = [self.candidates[i] for i in sorted(self.candidates)]
        messages: list[Message] | None = None
        if content:
            messages = [output_message(parts_of(c.parts), c.finish_reason) for c in ordered]
        return Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[c.finish_reason for c in ordered if c.finish_reason],
            output_messages=messages,
            usage=usage_of(self.usage),
        )

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = usage_of(self.usage)
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def failure(self) -> tuple[str, str] | None:
        """Gemini streams report no failure of their own (errors arrive as ``APIError`` exceptions)."""
        return None
