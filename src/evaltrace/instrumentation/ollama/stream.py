"""Stream accumulator: Ollama ``chat`` / ``generate`` chunks (``stream=True``) in, one ``Outcome`` out.

Each NDJSON line is a whole ``ChatResponse`` / ``GenerateResponse`` carrying a fragment of ``content``
(``response``) and ``thinking``; tool calls arrive whole, in one chunk. The last chunk has ``done: true`` (the
terminal signal) with ``done_reason`` and the token counts. ``add`` is O(1) per chunk; fragments are joined once.
``add_batch`` (the stream proxy's batch fold) reads the common chunk, a fragment of the SDK's own types with no tool
call that is not the last, in its one frame, and hands every other chunk to ``add``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import field
from evaltrace.instrumentation.ollama.codec import answer_parts, message_finish_reason, usage_of

_TYPES: list[tuple[type, type, type] | None] = []


def _sdk_types() -> tuple[type, type, type] | None:
    """(``ChatResponse``, ``Message``, ``GenerateResponse``) of the ollama SDK, looked up once; None without it."""
    if not _TYPES:
        try:
            from ollama._types import ChatResponse, GenerateResponse, Message
        except ImportError:  # another SDK's chunks (or none installed): every chunk goes through ``add``
            _TYPES.append(None)
        else:
            _TYPES.append((ChatResponse, Message, GenerateResponse))
    return _TYPES[0]


class OllamaStreamAccumulator:
    """Accumulates the chunks of one streamed ``chat`` (``chat=True``) or ``generate`` call."""

    __slots__ = ("calls", "chat", "final", "model", "text", "thinking")

    # Chunks the stream proxy holds before a fold (its default is 64): a held chunk keeps its two pydantic objects
    # alive, and freeing them 16 at a time cost less per chunk (benchmarks/README.md, s16-ollconv).
    batch_size: ClassVar[int] = 16

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

    def add_batch(self, chunks: list[Any]) -> None:  # noqa: C901  (one frame for the batch)
        """``add`` for each chunk in order, the common chunk read in this one frame (the stream proxy's batch fold).

        The common chunk is the SDK's own ``ChatResponse`` (``GenerateResponse``) with its ``Message``, no tool
        calls (``None``) and ``done`` False, once the model is known: ``add`` appends its text and thinking when
        they are truthy, in that order, and writes nothing else, and so does this, without ``add``'s call and its
        ``getattr`` calls. The fields of those exact pydantic types are instance fields, so a read has no side
        effect and raises nothing but ``AttributeError`` (a field deleted), which hands the chunk to ``add`` as
        every other chunk (a tool call, the ``done`` chunk, another type) is, before anything of it is written.
        """
        types = _sdk_types()
        add = self.add
        if types is None:  # the SDK's types not found: every chunk through add, as the proxy's default fold
            add_each(add, chunks)
            return
        chat_type, message_type, generate_type = types
        kind = type
        text_append = self.text.append
        thinking_append = self.thinking.append
        known = self.model is not None  # ``add`` reads the model until it is set
        if self.chat:
            for chunk in chunks:
                try:
                    if known and kind(chunk) is chat_type:
                        try:
                            message = chunk.message
                            done = chunk.done if kind(message) is message_type else None
                            if done is False and message.tool_calls is None:
                                text = message.content
                                thinking = message.thinking
                            else:
                                done = None
                        except AttributeError:
                            done = None
                        if done is False:
                            if text:
                                text_append(text)
                            if thinking:
                                thinking_append(thinking)
                            continue
                    add(chunk)
                    known = self.model is not None
                except Exception:
                    chunk_failed()
            return
        for chunk in chunks:
            try:
                if known and kind(chunk) is generate_type:
                    try:
                        done = chunk.done
                        text = chunk.response
                        thinking = chunk.thinking
                    except AttributeError:
                        done = None
                    if done is False:
                        if text:
                            text_append(text)
                        if thinking:
                            thinking_append(thinking)
                        continue
                add(chunk)
                known = self.model is not None
            except Exception:
                chunk_failed()

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
                {
                    "role": "assistant",
                    "parts": parts,
                    "finish_reason": message_finish_reason(reason, bool(self.calls), self.final is not None),
                }
            ],
            usage=usage_of(self.final) if self.final is not None else None,
        )
