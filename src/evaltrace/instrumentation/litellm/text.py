"""Pure: a ``litellm.text_completion`` / ``atext_completion`` call -> request attributes, its response -> Outcome.

LiteLLM's text completion is OpenAI's legacy Completions shape: a ``prompt`` (a string, a list of strings, or token
ids) in, ``TextCompletionResponse`` out (``choices[i].text``, ``finish_reason``, OpenAI's ``usage``), and when
streamed a ``TextCompletionStreamWrapper`` of ``TextCompletionResponse`` chunks. LiteLLM sends it to OpenAI's
``/v1/completions`` for a non-chat OpenAI model (``gpt-3.5-turbo-instruct``) and as a chat completion to every
other model; the span is the same ``text_completion`` either way, as Ollama's ``generate`` and Mistral's FIM spans.
"""

from __future__ import annotations

from types import AsyncGeneratorType, GeneratorType
from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome
from evaltrace._internal.openai import build
from evaltrace._internal.openai.accumulate import ChatAccumulator, _ChoiceBuffer
from evaltrace._internal.openai.parts import Message, Part, assistant_parts, field, output_message, text_part
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import chat_usage
from evaltrace.instrumentation.litellm.extras import (
    drop_unknown_finishes,
    finish_dropped,
    kept_model_and_usage,
)

Attributes = dict[str, Any]


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """The parameters a text completion shares with chat (read as chat's); the prompt(s) as user messages.

    A list of prompts is one user message per prompt, as LiteLLM itself turns them into messages for a chat model.
    ``suffix``, ``echo``, ``best_of`` and ``logprobs`` have no GenAI attribute and are not recorded.
    """
    attrs = build.request_attributes(EndpointKind.CHAT, _without_prompt(params), False, max_len)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_GENERATION
    if capture:
        attrs.update(list_values.request_content_attributes(prompt_messages(params.get("prompt")), None, None, max_len))
    return attrs


def _without_prompt(params: dict[str, Any]) -> dict[str, Any]:
    # ``build.request_attributes`` reads ``messages`` only with content: the prompt is not read there at all.
    return {k: v for k, v in params.items() if k != "prompt"}


def prompt_messages(prompt: Any) -> list[Message]:
    """``prompt`` -> GenAI input messages: a string, each string of a list, token ids as their count."""
    if isinstance(prompt, str):
        return [{"role": "user", "parts": [text_part(prompt)]}]
    if not isinstance(prompt, list | tuple) or not prompt:
        return []
    if isinstance(prompt[0], int):  # one prompt of token ids
        return [{"role": "user", "parts": [_tokens(prompt)]}]
    return [{"role": "user", "parts": [text_part(p) if isinstance(p, str) else _tokens(p)]} for p in prompt]


def _tokens(ids: Any) -> Part:
    """A prompt given as token ids: their count (ids mean nothing without the model's tokenizer)."""
    return {"type": "tokens", "count": len(ids) if hasattr(ids, "__len__") else None}


def outcome(response: Any, content: bool = True) -> Outcome:
    """``TextCompletionResponse`` -> Outcome: one output message per choice, finish reasons verbatim."""
    messages: list[Message] | None = [] if content else None
    reasons: list[str] = []
    for choice in field(response, "choices") or ():
        reason = field(choice, "finish_reason")
        reasons.append(reason if isinstance(reason, str) else "")
        if messages is not None:
            messages.append(output_message(_parts(field(choice, "reasoning_content"), field(choice, "text")), reason))
    return Outcome(
        response_id=field(response, "id"),
        response_model=field(response, "model"),
        finish_reasons=reasons,
        output_messages=messages,
        usage=chat_usage(field(response, "usage")),
        system_fingerprint=field(response, "system_fingerprint"),
    )


def _parts(reasoning: Any, text: Any) -> list[Part]:
    return assistant_parts(reasoning if isinstance(reasoning, str) else None, text if isinstance(text, str) else None)


class _Header:
    """A chunk's header fields read as ``ChatAccumulator._read_header`` reads them (None when unset)."""

    __slots__ = ("id", "model", "service_tier", "system_fingerprint")

    def __init__(self, chunk: Any) -> None:
        self.id = field(chunk, "id")
        self.model = field(chunk, "model")
        self.service_tier = None
        self.system_fingerprint = field(chunk, "system_fingerprint")


class TextAccumulator(ChatAccumulator):
    """``TextCompletionResponse`` chunks by choice index: ``text`` (and LiteLLM's ``reasoning_content``) appended.

    ``stream``: the ``CustomStreamWrapper`` the ``TextCompletionStreamWrapper`` reads (``inner_stream``), which
    keeps the provider's model (``extras.provider_model``) and the usage the caller was not given
    (``extras.reported_usage``); None when it is not reachable. ``pending``: the generator of LiteLLM's
    ``/v1/completions`` handler, not started yet, whose ``CustomStreamWrapper`` is a local of its frame once it runs
    (``handler_stream``): read with the first chunk (see ``add``); None when there is none.
    """

    __slots__ = ("pending", "source", "stream")

    def __init__(self, stream: Any = None, pending: Any = None) -> None:
        ChatAccumulator.__init__(self)
        self.stream = stream
        self.source = stream  # kept after ``stream`` is read, for ``end_reason``
        self.pending = pending

    def end_reason(self) -> str:
        """The chat stream's end reason, LiteLLM's own finish standing for the choices whose finish it dropped.

        As for chat (``LiteLLMChatAccumulator.end_reason``): the text stream is LiteLLM's chat stream converted
        chunk by chunk, with choice 0's finish chunk only when ``n`` > 1. When that chat stream is not reachable
        (``inner_stream`` gave None) nothing says LiteLLM ended it: an ``n`` > 1 stream stays ``truncated``.
        """
        reason = ChatAccumulator.end_reason(self)
        if reason == sc.STREAM_END_TRUNCATED and finish_dropped(self.source, self._finishes()):
            return sc.STREAM_END_EXHAUSTED
        return reason

    def _finishes(self) -> list[Any]:
        return [self.choices[i].finish_reason for i in sorted(self.choices)]

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; True when it has a choice.

        The first chunk (the header pending: no other chunk pays for it) also finds the ``CustomStreamWrapper`` of a
        ``/v1/completions`` stream, in its handler's frame: the handler yielded this chunk and is suspended there,
        its wrapper made; once the stream ends its frame is gone.
        """
        if self.header_pending:
            if self.pending is not None:
                self._find_stream()
            self._read_header(_Header(chunk))
        choices = field(chunk, "choices") or ()
        for choice in choices:
            index = field(choice, "index") or 0
            buffer = self.choices.get(index)
            if buffer is None:
                buffer = self.choices[index] = _ChoiceBuffer()
            text = field(choice, "text")
            if isinstance(text, str) and text:
                buffer.text.append(text)
            reasoning = field(choice, "reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                buffer.reasoning.append(reasoning)
            finish = field(choice, "finish_reason")
            if finish is not None:
                buffer.finish_reason = finish
        usage = field(chunk, "usage")
        if usage is not None:
            self.usage = usage
        return bool(choices)

    def _find_stream(self) -> None:
        generator, self.pending = self.pending, None
        if self.stream is None and self.source is None:
            self.stream = self.source = handler_stream(generator)

    def _read_stream(self) -> None:
        """The provider's model and the usage LiteLLM kept from the caller, as the chat stream's (once)."""
        stream, self.stream = self.stream, None
        if stream is not None:
            self.model, self.usage = kept_model_and_usage(stream, self.model, self.usage)

    def summary(self) -> Any:
        """Model and token counts: the provider's model, the usage LiteLLM kept from the caller."""
        self._read_stream()
        return ChatAccumulator.summary(self)

    def outcome(self) -> Outcome:
        """The text of each choice, with the provider's model and the usage LiteLLM kept from the caller."""
        self._read_stream()
        result = ChatAccumulator.outcome(self)
        # Only a choice without a finish has one to leave out: counted, no list built per stream otherwise.
        if len(result.finish_reasons) < len(self.choices):
            finishes = self._finishes()
            if finish_dropped(self.source, finishes):
                drop_unknown_finishes(result.output_messages, finishes)
        return result


def inner_stream(stream: Any) -> Any:
    """The ``CustomStreamWrapper`` a ``TextCompletionStreamWrapper`` reads, else None (see ``inner_streams``)."""
    return inner_streams(stream)[0]


def inner_streams(stream: Any) -> tuple[Any, Any]:
    """(the ``CustomStreamWrapper`` a ``TextCompletionStreamWrapper`` reads, the handler generator that makes it).

    A text completion of a chat model: sync (``text_completion``) the wrapper is the text stream's
    ``completion_stream``. Async (``atext_completion``) that is LiteLLM's ``_async_streaming(response, ...)``
    generator, not started yet when the call returns, which iterates the ``CustomStreamWrapper`` it was given: its
    argument, read from the generator's frame (the frame is gone once the generator ends, so it is read now, once
    per stream). A ``/v1/completions`` model (``gpt-3.5-turbo-instruct``): the stream read (sync), or the argument
    (async), is the OpenAI handler's own generator, which makes its ``CustomStreamWrapper`` only when it starts:
    that generator is the second item, for ``handler_stream`` to read with the first chunk. Anything else (a
    coroutine LiteLLM would await first, a LiteLLM that reads its stream otherwise) gives (None, None): the stream
    is then read from its chunks alone.
    """
    inner = getattr(stream, "completion_stream", None)
    if type(inner).__name__ == "CustomStreamWrapper":
        return inner, None
    if type(inner) is GeneratorType:
        return None, inner
    frame = getattr(inner, "ag_frame", None)
    if frame is None:
        return None, None
    try:
        argument = frame.f_locals.get("response")
    except Exception:  # a frame's locals are CPython's to give: no inner stream beats a failed call
        return None, None
    if type(argument).__name__ == "CustomStreamWrapper":
        return argument, None
    return None, argument if type(argument) is AsyncGeneratorType else None


def handler_stream(generator: Any) -> Any:
    """The ``CustomStreamWrapper`` among the locals of a running (suspended) handler generator, else None.

    LiteLLM's OpenAI text completion handler (``OpenAITextCompletion.streaming`` / ``async_streaming``) makes the
    wrapper of the provider's stream in its body and yields that wrapper's chunks: it is a local of the generator's
    frame from the first chunk until the generator ends. Called once per stream, with its first chunk.
    """
    frame = getattr(generator, "gi_frame", None) or getattr(generator, "ag_frame", None)
    if frame is None:
        return None
    try:
        values = list(frame.f_locals.values())
    except Exception:  # as in ``inner_streams``: no inner stream beats a failed call
        return None
    return next((value for value in values if type(value).__name__ == "CustomStreamWrapper"), None)
