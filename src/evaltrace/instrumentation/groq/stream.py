"""The Groq chat stream accumulator: ``ChatCompletionChunk``s in, one ``Outcome`` out (the OpenAI one, extended).

It reads what the OpenAI chat accumulator does not: ``delta.reasoning``, ``x_groq`` (the last chunk's usage and
its breakdown, an error the API sent inside the stream, a late service tier), the tools Groq ran and the answer's
annotations; ``add_batch`` is the stream proxy's fold of the common chunk, read from the SDK's own instances.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed, plain_fields, slot_reader
from evaltrace._internal.engine.outcome import Outcome
from evaltrace._internal.openai.accumulate import ChatAccumulator, _ChoiceBuffer
from evaltrace.instrumentation.groq.grounding import add_citations
from evaltrace.instrumentation.groq.response import _TOOL_RESULTS, _with_breakdown, _with_groq_parts

_TOOL_FIELDS = ("index", "type", "arguments", "output", *_TOOL_RESULTS)


def merged_tool(before: Any, tool: Any) -> Any:
    """A tool a stream sent twice, as one: each field as last sent, unless that copy's is empty (``arguments``)."""
    merged = SimpleNamespace()
    for name in _TOOL_FIELDS:
        value = getattr(tool, name, None)
        setattr(merged, name, value if value is not None and value != "" else getattr(before, name, None))
    return merged


class _Delta:
    """A groq ``ChoiceDelta`` in the shape the OpenAI chat accumulator reads (groq has no ``refusal`` field).

    Its ``reasoning`` field is handed over as the extra the shared reader looks for, so the OpenAI accumulator's
    per-chunk code stays as it is (no hook to pay for on OpenAI's streams).
    """

    __slots__ = ("__pydantic_extra__", "content", "function_call", "refusal", "tool_calls")

    def __init__(self, delta: Any) -> None:
        self.content = delta.content
        self.tool_calls = delta.tool_calls
        self.function_call = delta.function_call
        self.refusal = None
        reasoning = delta.reasoning
        extra = delta.__pydantic_extra__
        self.__pydantic_extra__ = {"reasoning": reasoning} if isinstance(reasoning, str) and reasoning else extra


_HEADER_FIELDS = ("id", "model", "system_fingerprint", "service_tier")
"""What ``ChatAccumulator._read_header`` reads of a chunk (groq's chunk declares no ``service_tier``)."""


_TEXT_ONLY = frozenset({"content", "role"})
"""The delta fields a text-only chunk sets: any other set (a tool call, reasoning, annotations...) takes ``add``."""


@functools.cache
def _sdk_types() -> tuple[Any, ...] | None:  # Any: a type check must not narrow the chunk to object
    """The groq SDK's chunk, choice, delta and ``x_groq`` classes and the readers of their fields (None: no SDK).

    Also whether ``getattr`` of the names ``add`` reads of a chunk's header and of an ``x_groq`` (``usage``,
    ``error``, ``usage_breakdown``) is the instance's ``__dict__`` entry, else its pydantic extra
    (``plain_fields``), and whether ``x_groq``'s are fields (in every instance's ``__dict__``).
    """
    try:
        from groq.types.chat.chat_completion_chunk import ChatCompletionChunk, Choice, ChoiceDelta, XGroq
    except ImportError:
        return None
    # The fold reads ``content`` from the delta's ``__dict__``; any other field it tells by its being set, so an
    # older SDK lacking a newer field (it comes as an extra, and takes ``add``) needs no check of its own.
    if "content" not in ChoiceDelta.model_fields:
        return None
    classes = (ChatCompletionChunk, Choice, ChoiceDelta, XGroq)
    fields_of = slot_reader(classes, "__dict__")
    extra_of = slot_reader(classes, "__pydantic_extra__")
    set_of = slot_reader(classes, "__pydantic_fields_set__")
    if fields_of is None or extra_of is None or set_of is None:
        return None
    plain_header = plain_fields(ChatCompletionChunk, _HEADER_FIELDS)
    read = ("usage", "error", "usage_breakdown")
    x_groq_fields = plain_fields(XGroq, read) and set(read) <= XGroq.model_fields.keys()
    return ChatCompletionChunk, Choice, ChoiceDelta, XGroq, fields_of, extra_of, plain_header, x_groq_fields, set_of


def _tier_of(obj: Any) -> Any:
    """``obj.service_tier``, a pydantic model's read from its fields or extras: no ``__getattr__`` miss.

    groq's types declare none: ``getattr`` of it went through pydantic's ``__getattr__`` to an ``AttributeError``
    built and dropped, four per stream, +13% of a recorded stream's fold (``groq_stream_fold``).
    """
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict) and "service_tier" in fields:
        return fields["service_tier"]
    if isinstance(getattr(type(obj), "__pydantic_fields__", None), dict):
        extra = obj.__pydantic_extra__
        return extra.get("service_tier") if isinstance(extra, dict) else None
    return getattr(obj, "service_tier", None)


_NONE: dict[str, Any] = {}
"""No extras (an instance's ``__pydantic_extra__`` may be None): read, never written."""

_NO_INDEX = object()
"""No choice index is this: ``add_batch``'s last index before its first choice."""


class GroqStreamAccumulator(ChatAccumulator):
    """The OpenAI chat accumulator, reading Groq's ``delta.reasoning``, ``x_groq`` usage and errors, and tools."""

    __slots__ = ("annotations", "breakdown", "error", "executed")

    @staticmethod
    def _add_delta(buffer: Any, delta: Any) -> None:
        ChatAccumulator._add_delta(buffer, _Delta(delta) if delta is not None else None)

    def __init__(self) -> None:
        super().__init__()
        self.executed: dict[tuple[int, Any], Any] = {}  # (choice, tool index) -> the tool, its copies merged
        self.error: str | None = None
        self.annotations: dict[int, list[Any]] = {}  # choice -> its annotations, each once, in order
        self.breakdown: Any = None  # ``x_groq.usage_breakdown`` of the last chunk

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in (see ``ChatAccumulator.add``); True when it carries a choice."""
        if self.header_pending:
            first = self._add_first(chunk)
            if first is not None:
                return first
        carried = super().add(chunk)
        x_groq = getattr(chunk, "x_groq", None)
        if x_groq is not None:
            self._add_x_groq(chunk, x_groq)
        for choice in chunk.choices or ():
            delta = choice.delta
            tools = getattr(delta, "executed_tools", None) if delta is not None else None
            for tool in tools or ():
                key = (choice.index, getattr(tool, "index", None))
                before = self.executed.get(key)
                self.executed[key] = tool if before is None else merged_tool(before, tool)
            annotations = getattr(delta, "annotations", None) if delta is not None else None
            if annotations:
                kept = self.annotations.setdefault(choice.index, [])
                kept.extend(a for a in annotations if a not in kept)  # a chunk may repeat an earlier one's
        return carried

    def _add_x_groq(self, chunk: Any, x_groq: Any) -> None:
        """An ``x_groq`` (the first and the last chunk's): the usage, its breakdown, an error, a late service tier.

        groq's chunk declares no ``service_tier``: one the API sends (on the chunk, or in ``x_groq``) is an extra,
        read with the header from the first chunk, else here from the last, which is read whatever it holds.
        """
        usage = getattr(x_groq, "usage", None)
        if usage is not None and self.usage is None:
            self.usage = usage
        error = getattr(x_groq, "error", None)
        if isinstance(error, str) and error:
            self.error = error
        breakdown = getattr(x_groq, "usage_breakdown", None)
        if breakdown is not None:
            self.breakdown = breakdown
        if not self.service_tier:
            tier = _tier_of(chunk) or _tier_of(x_groq)
            if isinstance(tier, str) and tier:
                self.service_tier = tier

    def _add_first(self, chunk: Any) -> bool | None:
        """The chunk that names the response, read by the batch fold (None: not read, ``add`` reads it).

        ``add`` of the first chunk made ~30 hooked reads and built a ``_Delta``; the groq SDK's own chunk has its
        header read from its ``__dict__`` (``_read_header``) and, once the id and model are known, is folded as a
        batch of one, whose off-path chunks come back to ``add``. An error is raised to the caller, as ``add``'s.
        """
        types = _sdk_types()
        if types is None or type(chunk) is not types[0] or not types[6]:
            return None
        self._read_header(chunk)
        if self.header_pending:  # no id or model yet: ``add`` reads the rest of it (the header again, alike)
            return None
        self.add_batch([chunk], strict=True)
        return True if types[4](chunk)["choices"] else False  # ``ChatAccumulator.add``'s ``chunk.choices or ()``

    def add_batch(self, chunks: list[Any], strict: bool = False) -> None:  # noqa: C901  (one frame for the batch)
        """``add`` for each chunk in order, the common chunk read in this one frame (the stream proxy's batch fold).

        The common chunk of a Groq stream is one choice whose delta has text only (no annotations), and no
        ``x_groq`` or one with its id, or (the last chunk) its usage, breakdown, tier or an error. Once its types are checked to be the groq SDK's own, its
        fields are read from the instances' ``__dict__``, itself read through its descriptor (``slot_reader``):
        pydantic's ``__getattr__`` hook keeps CPython 3.11 from specialising attribute reads and makes each read
        three type-cache lookups, which miss on groq's types (an MRO walk each: ``obj.__dict__`` read so cost the
        fold +16%, ``benchmarks/README.md`` s14-foldgm3). The checks are nested so that the common chunk takes each
        test once and falls through to its fold, and the buffer of the chunk before's choice is reused while the
        index is the same object. Every other chunk (a reasoning, refusal, tool or extra field, any delta field set but
        ``content`` and ``role``, several choices, usage on the chunk, another SDK's types) goes through ``add``,
        before anything of it is written, so both paths record the same.
        ``strict``: an error is raised, not routed.
        """
        types = _sdk_types()
        if types is None or self.header_pending:
            # The header is read from the first chunks, before the proxy batches (it folds each chunk as it arrives
            # until one carries output, which has the id and model): a batch that finds it pending takes ``add``.
            add_each(self.add, chunks)
            return
        chunk_type, choice_type, delta_type, x_groq_type, fields_of, extra_of, _, x_groq_fields, set_of = types
        text_only = _TEXT_ONLY
        kind = type
        buffers = self.choices
        last: Any = _NO_INDEX  # the index of the choice whose ``buffer`` and ``text`` are at hand
        buffer: Any = None
        text: Any = None
        for chunk in chunks:
            try:
                if kind(chunk) is chunk_type:
                    fields = fields_of(chunk)
                    try:
                        # One choice, unpacked: None, no choice or several raise here (``add`` reads the chunk).
                        (choice,) = fields["choices"]
                    except (TypeError, ValueError):
                        choice = None
                    if kind(choice) is choice_type and fields["usage"] is None:
                        entry = fields_of(choice)
                        delta = entry["delta"]
                        # The fields the delta was given (the SDK builds it so): one set test for its five others
                        # (tool_calls, function_call, reasoning, executed_tools, annotations) being None.
                        if kind(delta) is delta_type and set_of(delta) <= text_only and not extra_of(delta):
                            x_groq = fields["x_groq"]
                            if x_groq is None or (kind(x_groq) is x_groq_type and x_groq_fields):
                                index = entry["index"]
                                if index is not last:
                                    try:
                                        buffer = buffers[index]  # a subscript: its KeyError once per choice
                                    except KeyError:
                                        buffer = buffers[index] = _ChoiceBuffer()
                                    text = buffer.text
                                    last = index
                                content = fields_of(delta)["content"]
                                if content:
                                    text.append(content)
                                reason = entry["finish_reason"]
                                if reason is not None:
                                    buffer.finish_reason = reason
                                if x_groq is not None:  # the first and last chunks, read as ``_add_x_groq`` reads
                                    about = fields_of(x_groq)
                                    usage = about["usage"]
                                    if usage is not None and self.usage is None:
                                        self.usage = usage
                                    error = about["error"]
                                    if isinstance(error, str) and error:
                                        self.error = error
                                    breakdown = about["usage_breakdown"]
                                    if breakdown is not None:
                                        self.breakdown = breakdown
                                    if not self.service_tier:  # ``_tier_of`` of the chunk, then of its ``x_groq``
                                        tier = (
                                            fields.get("service_tier")
                                            or (extra_of(chunk) or _NONE).get("service_tier")
                                            or (extra_of(x_groq) or _NONE).get("service_tier")
                                        )
                                        if isinstance(tier, str) and tier:
                                            self.service_tier = tier
                                continue
                last = _NO_INDEX  # ``add`` may make the buffer of any index
                self.add(chunk)
            except Exception:
                if strict:
                    raise
                chunk_failed()

    def _read_header(self, chunk: Any) -> None:
        """``ChatAccumulator._read_header``, the groq SDK's own chunk read from its ``__dict__`` and extras.

        groq's chunk declares no ``service_tier``: ``getattr(chunk, "service_tier", None)`` goes through pydantic's
        ``__getattr__`` to an ``AttributeError`` built and dropped, once per stream. Where each name read is the
        instance's entry, else its extra (``plain_fields``), both are read directly: the same values.
        """
        types = _sdk_types()
        if types is None or type(chunk) is not types[0] or not types[6]:
            super()._read_header(chunk)
            return
        fields = types[4](chunk)
        extra = types[5](chunk) or {}
        if not self.response_id:
            self.response_id = (fields["id"] if "id" in fields else chunk.id) or None
        if not self.model:
            self.model = (fields["model"] if "model" in fields else chunk.model) or None
        if not self.service_tier:
            self.service_tier = fields["service_tier"] if "service_tier" in fields else extra.get("service_tier")
        if not self.fingerprint:
            name = "system_fingerprint"
            self.fingerprint = fields[name] if name in fields else extra.get(name)
        self.header_pending = not (self.response_id and self.model)

    def failure(self) -> tuple[str, str] | None:
        """``x_groq.error`` of a chunk: the call failed inside the stream (``error.type`` ``_OTHER``)."""
        if self.error is None:
            return None
        return sc.ERROR_TYPE_OTHER, self.error

    def outcome(self) -> Outcome:
        """The OpenAI chat outcome of the chunks, with the tools Groq ran."""
        outcome = super().outcome()
        if self.breakdown is not None:
            _with_breakdown(outcome, self.breakdown)
        if self.annotations and outcome.output_messages:
            ordered = sorted(self.choices)
            for choice_index, annotations in self.annotations.items():
                if choice_index in self.choices:
                    add_citations(outcome.output_messages[ordered.index(choice_index)]["parts"], annotations)
        if self.executed and outcome.output_messages:
            ordered = sorted(self.choices)
            for (choice_index, _), tool in self.executed.items():
                if choice_index in self.choices:
                    message = outcome.output_messages[ordered.index(choice_index)]
                    _with_groq_parts(message, None, [tool])
        return outcome
