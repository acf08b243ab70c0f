"""Stream accumulator: Ollama ``chat`` / ``generate`` chunks (``stream=True``) in, one ``Outcome`` out.

Each NDJSON line is a whole ``ChatResponse`` / ``GenerateResponse`` carrying a fragment of ``content``
(``response``) and ``thinking``; tool calls arrive whole, in one chunk. The last chunk has ``done: true`` (the
terminal signal) with ``done_reason`` and the token counts. ``add`` is O(1) per chunk; fragments are joined once.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import field
from evaltrace.instrumentation.ollama.codec import answer_parts, message_finish_reason, usage_of


class OllamaStreamAccumulator:
    """Accumulates the chunks of one streamed ``chat`` (``chat=True``) or ``generate`` call."""

    __slots__ = ("calls", "chat", "final", "model", "text", "thinking")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[Any] = []
        self.model: str | None = None
        self.final: Any = None  # the ``done`` chunk

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; True when it carried output (text, thinking or a tool call)."""
        if self.chat:
            source = getattr(chunk, "message", None)
            text = getattr(source, "content", None)
            calls = getattr(source, "tool_calls", None)
        else:
            source = chunk
            text = getattr(chunk, "response", None)
            calls = None
        thinking = getattr(source, "thinking", None)
        output = False
        if text:
            self.text.append(text)
            output = True
        if thinking:
            self.thinking.append(thinking)
            output = True
        if calls:
            self.calls.extend(calls)
            output = True
        if self.model is None:
            self.model = getattr(chunk, "model", None)
        if getattr(chunk, "done", False):
            self.final = chunk
        return output

    def end_reason(self) -> str:
        """``exhausted`` only when the ``done`` chunk arrived."""
        return sc.STREAM_END_EXHAUSTED if self.final is not None else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """Never: the SDK raises ``ResponseError`` itself on an ``error`` line."""
        return None

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = usage_of(self.final) if self.final is not None else None
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the chunks so far amount to."""
        reason = field(self.final, "done_reason") if self.final is not None else None
        parts = answer_parts("".join(self.thinking) or None, "".join(self.text) or None, self.calls)
        return Outcome(
            response_model=self.model,
            finish_reasons=[str(reason)] if reason else [],
            output_messages=[
                {"role": "assistant", "parts": parts, "finish_reason": message_finish_reason(reason, bool(self.calls))}
            ],
            usage=usage_of(self.final) if self.final is not None else None,
        )
