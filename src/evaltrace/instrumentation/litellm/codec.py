"""Pure: a ``litellm.completion`` / ``acompletion`` call -> request attributes, and its response -> ``Outcome``.

Embeddings, text completions and Responses are read in their own modules; ``LiteLLMCodec``
(:mod:`~evaltrace.instrumentation.litellm.hooks`, the engine's hooks) dispatches on the function called.

LiteLLM speaks OpenAI's Chat Completions shape whatever the provider behind it: the request keywords, the
``ModelResponse`` and the streamed ``ModelResponseStream`` chunks are OpenAI-shaped, so the OpenAI codec's
functions read them (``request_attributes``, ``chat_outcome``, ``ChatAccumulator``). What LiteLLM adds is read here
(the provider and server in :mod:`~evaltrace.instrumentation.litellm.providers`):

* the provider behind the model: ``litellm.get_llm_provider`` (``"groq/llama3-8b-8192"`` -> ``groq``), named as
  OTel's ``gen_ai.provider.name`` (``mistral`` -> ``mistral_ai``, ``gemini`` -> ``gcp.gemini``...);
* the server: ``api_base`` when given (or the provider's default base that LiteLLM resolves);
* ``reasoning_content`` (thinking of Anthropic, DeepSeek, Gemini... normalised by LiteLLM) as a declared field of
  ``Message`` / ``Delta``, where the OpenAI codec reads it from a pydantic extra only;
* ``usage.cache_creation_input_tokens`` (Anthropic's cache writes) beside OpenAI's usage fields.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed, plain_fields
from evaltrace._internal.engine.errortype import error_type_of
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai import build
from evaltrace._internal.openai.accumulate import ChatAccumulator, _ChoiceBuffer
from evaltrace._internal.openai.parts import field, reasoning_part
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import chat_outcome, chat_summary
from evaltrace.instrumentation.litellm.extras import (
    add_redacted,
    drop_unknown_finishes,
    finish_dropped,
    kept_model_and_usage,
    redacted_count,
)
from evaltrace.instrumentation.litellm.providers import PROVIDER_NAMES as PROVIDER_NAMES
from evaltrace.instrumentation.litellm.providers import Server as Server

Attributes = dict[str, Any]


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters and content, read as the OpenAI codec reads a Chat Completions request.

    Plus ``top_k``, which OpenAI's API lacks and LiteLLM sends on to the providers that take it (Anthropic,
    Gemini, Vertex AI...): an int, as on the conventions' main branch and in the Anthropic instrumentation.
    """
    attrs = build.request_attributes(EndpointKind.CHAT, params, capture, max_len)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_GENERATION
    top_k = params.get("top_k")
    if type(top_k) is int:  # not a bool
        attrs[sc.GEN_AI_REQUEST_TOP_K] = top_k
    elif type(top_k) is float:
        attrs[sc.GEN_AI_REQUEST_TOP_K] = int(top_k) if top_k.is_integer() else top_k
    return attrs


def error_type(error: BaseException) -> str:
    """``error.type`` of a LiteLLM exception: the provider's error code, else the exception's class.

    LiteLLM sets ``code`` on some of its exceptions to the HTTP status as a string (``RateLimitError``: ``"429"``),
    which is no provider's code and already in ``http.response.status_code``: such a code gives the class name, as
    the exceptions LiteLLM leaves without a code (``NotFoundError``) do.
    """
    code = getattr(error, "code", None)
    if isinstance(code, str) and code.isdigit():
        # Not a provider's code; a provider's error type in the body (``{"error": {"type": ...}}``) still is.
        body = getattr(error, "body", None)
        nested = body.get("error") if isinstance(body, dict) else None
        kind = nested.get("type") if isinstance(nested, dict) else None
        return kind if isinstance(kind, str) and kind else type(error).__qualname__
    return error_type_of(error)


def outcome(response: Any, content: bool = True) -> Outcome:
    """``ModelResponse`` -> Outcome: OpenAI's, plus LiteLLM's ``reasoning_content`` and cache-write tokens."""
    result = chat_outcome(response, content)
    if result.output_messages:
        for choice, message in zip(field(response, "choices") or (), result.output_messages, strict=False):
            answer = field(choice, "message")
            _add_reasoning(message, field(answer, "reasoning_content"))
            # A declared field, in the instance's ``__dict__`` only when set: read there, no pydantic miss.
            add_redacted(message, redacted_count(getattr(answer, "__dict__", _EMPTY).get("thinking_blocks")))
    _add_cache_writes(result, field(response, "usage"))
    return result


def summary(response: Any) -> Summary:
    """Model and token counts of a ``ModelResponse``."""
    return chat_summary(response)


def _add_reasoning(message: dict[str, Any], reasoning: Any) -> None:
    parts = message["parts"]
    if isinstance(reasoning, str) and reasoning and not any(p.get("type") == "reasoning" for p in parts):
        parts.insert(0, reasoning_part(reasoning))


def _add_cache_writes(result: Outcome, usage: Any) -> None:
    writes = _cache_writes(usage) if usage is not None else None
    if result.usage is not None and result.usage.cache_write_tokens is None and isinstance(writes, int) and writes:
        result.usage.cache_write_tokens = writes


_CACHE_WRITES = "cache_creation_input_tokens"


_PLAIN_USAGE: dict[type, bool] = {}


def _plain_usage(cls: type) -> bool:
    """Whether ``_cache_writes`` may read a ``cls`` instance's ``__dict__`` and extras (``plain_fields``), per class."""
    found = _PLAIN_USAGE.get(cls)
    if found is None:
        if len(_PLAIN_USAGE) >= 32:  # bounded: a handful of usage classes per process
            _PLAIN_USAGE.clear()
        found = _PLAIN_USAGE[cls] = plain_fields(cls, (_CACHE_WRITES,))
    return found


def _cache_writes(usage: Any) -> Any:
    """``getattr(usage, "cache_creation_input_tokens", None)``, read as ``plain_fields`` says where it can be.

    LiteLLM's ``Usage`` keeps Anthropic's cache writes in its pydantic extras and has none for other providers, so
    ``getattr`` ran pydantic's ``__getattr__`` and caught its ``AttributeError`` (~11k instructions) once per call.
    """
    if _plain_usage(type(usage)):
        fields = usage.__dict__
        return (
            fields[_CACHE_WRITES]
            if _CACHE_WRITES in fields
            else (usage.__pydantic_extra__ or _EMPTY).get(_CACHE_WRITES)
        )
    return getattr(usage, _CACHE_WRITES, None)


class _Lenient:
    """A view of a LiteLLM object whose unset fields read as None (LiteLLM deletes ``Delta.refusal`` when None)."""

    __slots__ = ("_of",)

    def __init__(self, of: Any) -> None:
        self._of = of

    def __getattr__(self, name: str) -> Any:
        return getattr(self._of, name, None)


class _Chunk:
    __slots__ = ("_of", "choices")

    def __init__(self, chunk: Any, choices: list[_Choice]) -> None:
        self._of = chunk
        self.choices = choices

    def __getattr__(self, name: str) -> Any:
        return getattr(self._of, name, None)


class _Choice:
    __slots__ = ("delta", "finish_reason", "index")

    def __init__(self, choice: Any) -> None:
        self.index = getattr(choice, "index", 0)
        self.finish_reason = getattr(choice, "finish_reason", None)
        delta = getattr(choice, "delta", None)
        self.delta = _Lenient(delta) if delta is not None else None


# What ``add`` reads of a chunk, its choice and its delta after the header (``getattr(obj, name, None)`` each).
_READ = {"chunk": ("choices", "usage"), "choice": ("index", "finish_reason", "delta"),
         "delta": ("content", "refusal", "tool_calls", "function_call", "reasoning_content", "reasoning")}  # fmt: skip
# The delta's names as a set: ``keys().isdisjoint`` then walks the (one-entry) ``__dict__`` and probes the set,
# where a tuple made it probe the ``__dict__`` once per name (~1.2k per chunk).
_DELTA_READS = frozenset(_READ["delta"])


@functools.cache
def _sdk_types() -> tuple[Any, Any, Any] | None:  # Any: a type check must not narrow the chunk to object
    """LiteLLM's ``ModelResponseStream``, ``StreamingChoices`` and ``Delta``, once (None: unusable, read by ``add``)."""
    try:
        from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices
    except ImportError:
        return None
    types = (ModelResponseStream, StreamingChoices, Delta)
    if not all(plain_fields(cls, _READ[k]) for cls, k in zip(types, ("chunk", "choice", "delta"), strict=True)):
        return None
    return types


_EMPTY: dict[str, Any] = {}  # read only: an instance without extras
# LiteLLM's delta's ``__dict__`` unless it sets reasoning or thinking: its declared fields are deleted when None but
# this one (``==`` compares it in one step, where ``isdisjoint`` made a view and an iterator per chunk)
_PLAIN_DELTA: dict[str, Any] = {"provider_specific_fields": None}
_HEADER = ("id", "model", "service_tier", "system_fingerprint")  # what ``ChatAccumulator._read_header`` reads


class _Header(NamedTuple):
    """A chunk's header fields, for ``ChatAccumulator._read_header`` to read by attribute."""

    id: Any
    model: Any
    service_tier: Any
    system_fingerprint: Any


@functools.cache
def _header_type() -> Any:
    """LiteLLM's ``ModelResponseStream`` when its header fields read as ``plain_fields`` (else None: ``_add`` reads)."""
    types = _sdk_types()
    return types[0] if types is not None and plain_fields(types[0], _HEADER) else None


_NO_INDEX = object()  # no choice index read yet in a batch


class LiteLLMChatAccumulator(ChatAccumulator):
    """OpenAI's chat accumulator over LiteLLM's chunks, plus the ``reasoning_content`` of each ``Delta``.

    ``stream``: LiteLLM's ``CustomStreamWrapper`` folded, read once when the stream ends for the provider's model
    and the usage it did not yield (``_read_stream``); None when the chunks come from elsewhere.
    """

    __slots__ = ("redacted", "source", "stream")

    def __init__(self, stream: Any = None) -> None:
        ChatAccumulator.__init__(self)  # not ``super()``: one frame less per stream (benchmarks/budgets.toml)
        self.stream = stream
        self.source = stream  # kept after ``stream`` is read, for ``end_reason``
        self.redacted: dict[Any, int] | None = None  # redacted thinking blocks per choice index, once one arrives

    def end_reason(self) -> str:
        """OpenAI's end reason, except that LiteLLM's own finish stands for the choices whose finish it dropped.

        With ``n`` > 1 LiteLLM yields the first choice's finish chunk only (it keeps one finish reason per stream,
        ``received_finish_reason``) and drops the others': a stream whose chunks finished a choice and which LiteLLM
        saw finish ended as LiteLLM ends it (see ``extras.finish_dropped``). The dropped finish reasons are not
        invented (see docs/providers/litellm.md).
        """
        reason = ChatAccumulator.end_reason(self)
        if reason == sc.STREAM_END_TRUNCATED and finish_dropped(self.source, self._finishes()):
            return sc.STREAM_END_EXHAUSTED
        return reason

    def _finishes(self) -> list[Any]:
        """Each choice's finish reason (None: none arrived), in choice order."""
        return [self.choices[i].finish_reason for i in sorted(self.choices)]

    def _read_stream(self) -> None:
        """Read what LiteLLM kept on the stream, once: the provider's model, and its usage when none was folded.

        The provider's model (``extras.provider_model``) stands for the one LiteLLM wrote into every chunk, as the
        response of the same call unstreamed names it; the usage is the one LiteLLM kept from the caller (no usage
        chunk folded, see ``extras.reported_usage``).
        """
        stream, self.stream = self.stream, None
        if stream is not None:
            self.model, self.usage = kept_model_and_usage(stream, self.model, self.usage)

    def add(self, chunk: Any) -> bool:
        """Fold one ``ModelResponseStream`` in (see ``ChatAccumulator.add``); O(1) per choice.

        The stream's first chunk (the header pending) of LiteLLM's own chunk type has its header read from the
        instance's ``__dict__`` and extras, as ``_read_header`` reads it, and is then folded by ``add_batch``: the
        general path (``_add``) costs ~160k instructions a chunk in pydantic's ``__getattr__`` and the
        ``AttributeError`` s it raises, and the proxy folds every stream's first chunk with ``add``.
        """
        if self.header_pending and type(chunk) is _header_type():
            fields = chunk.__dict__
            extra = chunk.__pydantic_extra__ or _EMPTY
            choices = fields["choices"] if "choices" in fields else extra.get("choices")
            if type(choices) is list:
                # what ``getattr(chunk, name, None)`` gives (``plain_fields``), read by ``_read_header`` itself
                self._read_header(_Header(*(fields[n] if n in fields else extra.get(n) for n in _HEADER)))
                if not self.header_pending:  # else ``_add`` reads the header again, alike, and the chunk
                    # An error of ours folding it is raised, as ``_add`` raises it: the proxy routes it and does not
                    # take this chunk as the first output (no time to first chunk from a chunk that failed).
                    self.add_batch([chunk], propagate=True)
                    return bool(choices)  # ``_add``'s: whether the chunk had a choice
        return self._add(chunk)

    def _add(self, chunk: Any) -> bool:
        """The general path of ``add``: any chunk, read through views whose reads are ``getattr(obj, name, None)``."""
        choices = [_Choice(c) for c in getattr(chunk, "choices", None) or ()]
        output = super().add(_Chunk(chunk, choices))
        for choice in choices:
            reasoning = choice.delta.reasoning_content if choice.delta is not None else None
            if isinstance(reasoning, str) and reasoning:
                self.choices[choice.index].reasoning.append(reasoning)
            if choice.delta is not None:  # ``thinking_blocks`` is declared: in ``__dict__`` only when set
                count = redacted_count(getattr(choice.delta._of, "__dict__", _EMPTY).get("thinking_blocks"))
                if count:
                    redacted = self.redacted if self.redacted is not None else {}
                    redacted[choice.index] = redacted.get(choice.index, 0) + count
                    self.redacted = redacted
        return output

    def add_batch(self, chunks: list[Any], *, propagate: bool = False) -> None:  # noqa: C901  (one frame per batch)
        """``add`` for each chunk in order, the common chunk read in this one frame (the stream proxy's batch fold).

        ``add`` wraps every chunk, choice and delta in a view whose reads are ``getattr(obj, name, None)``; LiteLLM
        keeps most fields in the pydantic extras and deletes the unset ones, so each read goes through pydantic's
        ``__getattr__`` and several raise ``AttributeError``. The common chunk (LiteLLM's own types, exactly; one
        choice and no usage, or no choice; a delta with text and no reasoning, refusal or tool call) is read from the
        instances' ``__dict__``, then their extras: what ``getattr`` returns for fields no class defines
        (``plain_fields``). Every other chunk goes through ``add``, so both paths record the same.

        The common chunk's reads are subscripts and ``in`` tests where a ``get`` or an ``isinstance`` costs twice
        as much: LiteLLM sets the choice's ``index``, ``finish_reason`` and ``delta`` and the delta's ``content``,
        ``tool_calls`` and ``function_call`` in the extras of every instance (a missing one sends the chunk to
        ``add``), and its delta's ``__dict__`` is ``{"provider_specific_fields": None}`` unless it sets reasoning or
        thinking (compared in one step; any other ``__dict__`` is read name by name). ``propagate``: an error of
        ours is raised, not routed per chunk (``add`` folding one chunk, as ``_add`` would raise it).
        """
        types = _sdk_types()
        if types is None:
            add_each(self.add, chunks)
            return
        at = 0
        while self.header_pending and at < len(chunks):  # checked here, not per chunk: ``add`` reads the header
            try:
                self.add(chunks[at])
            except Exception:
                if propagate:
                    raise
                chunk_failed()
            at += 1
        if at:
            chunks = chunks[at:]
        chunk_type, choice_type, delta_type = types
        buffers = self.choices
        plain_delta = _PLAIN_DELTA
        last: Any = _NO_INDEX  # the choice index of ``buffer``
        buffer = _ChoiceBuffer()
        text = buffer.text
        for chunk in chunks:
            try:
                if type(chunk) is not chunk_type:
                    self.add(chunk)
                    continue
                fields = chunk.__dict__
                extra = chunk.__pydantic_extra__ or _EMPTY
                usage = fields["usage"] if "usage" in fields else extra.get("usage")
                try:
                    # One choice: unpacked. None, no choice or several raise here (the usage chunk, once a stream).
                    (choice,) = fields["choices"]
                except (KeyError, TypeError, ValueError):
                    choices = fields["choices"] if "choices" in fields else extra.get("choices")
                    if type(choices) is list and not choices:  # ``include_usage``'s closing chunk: ``add`` reads
                        if usage is not None:  # nothing of it but its usage
                            self.usage = usage
                    else:
                        self.add(chunk)
                    continue
                if usage is not None or type(choice) is not choice_type:
                    self.add(chunk)
                    continue
                fields = choice.__dict__
                extra = choice.__pydantic_extra__ or _EMPTY
                if fields:  # LiteLLM's choice declares no field: all are extras, but an instance's entry wins
                    delta = fields.get("delta", extra.get("delta"))
                    index = fields.get("index", extra.get("index", 0))
                    finish = fields.get("finish_reason", extra.get("finish_reason"))
                else:
                    try:
                        delta = extra["delta"]
                        index = extra["index"]
                        finish = extra["finish_reason"]
                    except KeyError:
                        self.add(chunk)
                        continue
                if type(delta) is not delta_type:
                    self.add(chunk)
                    continue
                fields = delta.__dict__
                extra = delta.__pydantic_extra__ or _EMPTY
                if fields == plain_delta:  # the common delta: every field read here is an extra
                    if "reasoning_content" in extra or "reasoning" in extra:  # ``reasoning_extra``'s: ``add`` reads
                        self.add(chunk)
                        continue
                    try:
                        content = extra["content"]
                        rest = extra["tool_calls"] or extra["function_call"] is not None
                    except KeyError:
                        self.add(chunk)
                        continue
                    if rest or extra.get("refusal"):
                        self.add(chunk)
                        continue
                elif fields.keys().isdisjoint(_DELTA_READS):  # other declared fields (thinking blocks...) set
                    reasoning = extra.get("reasoning_content")
                    if (
                        extra.get("refusal")
                        or extra.get("tool_calls")
                        or extra.get("function_call") is not None
                        or isinstance(reasoning, str)  # as ``add`` and ``reasoning_extra`` read it
                        or isinstance(extra.get("reasoning"), str)
                        or redacted_count(fields.get("thinking_blocks"))  # ``_add`` counts them
                    ):
                        self.add(chunk)
                        continue
                    content = extra.get("content")
                else:
                    reasoning = fields.get("reasoning_content", extra.get("reasoning_content"))
                    if (
                        fields.get("refusal", extra.get("refusal"))
                        or fields.get("tool_calls", extra.get("tool_calls"))
                        or fields.get("function_call", extra.get("function_call")) is not None
                        or (isinstance(reasoning, str) and reasoning)
                        or isinstance(extra.get("reasoning_content"), str)  # what ``reasoning_extra`` reads
                        or isinstance(extra.get("reasoning"), str)
                        or redacted_count(fields.get("thinking_blocks"))
                    ):
                        self.add(chunk)
                        continue
                    content = fields.get("content", extra.get("content"))
                if index is not last:  # a choice's buffer, once made, is never replaced: looked up on a change
                    buffer = buffers.get(index) or buffers.setdefault(index, _ChoiceBuffer())
                    text = buffer.text
                    last = index
                if content:
                    text.append(content)
                if finish is not None:
                    buffer.finish_reason = finish
            except Exception:
                if propagate:
                    raise
                chunk_failed()

    def summary(self) -> Summary:
        """OpenAI's summary, with the provider's model and the usage LiteLLM did not yield (``_read_stream``)."""
        if self.stream is not None:  # tested here: a call less when no stream is left to read
            self._read_stream()
        return ChatAccumulator.summary(self)

    def outcome(self) -> Outcome:
        """OpenAI's outcome, with what ``_read_stream`` reads and the cache writes LiteLLM reports for Anthropic."""
        if self.stream is not None:
            self._read_stream()
        result = ChatAccumulator.outcome(self)
        # Only a choice without a finish has one to leave out: counted, no list built per stream otherwise.
        if len(result.finish_reasons) < len(self.choices):
            finishes = self._finishes()
            if finish_dropped(self.source, finishes):
                drop_unknown_finishes(result.output_messages, finishes)
        if self.redacted is not None:
            for index, message in zip(sorted(self.choices), result.output_messages or (), strict=False):
                add_redacted(message, self.redacted.get(index, 0))
        _add_cache_writes(result, self.usage)
        return result
