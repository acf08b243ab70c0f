"""The stream accumulator of ``generate_content_stream``: ``GenerateContentResponse`` chunks in, one ``Outcome`` out.

``add`` is O(1) per part: parts are kept as they came, by candidate index, and turned into GenAI parts once,
when the stream ends (consecutive text pieces joined there). Every chunk of a Gemini stream repeats the response
id, the model version and the usage so far; the last usage is the call's. A candidate's grounding (``grounding``)
is kept from the chunks that carry it and added to its parts at the end, as a whole response's.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import Message, Part
from evaltrace.instrumentation.google_genai.grounding import add_citations, citations_of, grounding_parts, merged
from evaltrace.instrumentation.google_genai.parts import enum_name, parts_of
from evaltrace.instrumentation.google_genai.response import block_reason, blocked, output_message, usage_of

# One step of an RFC 9535 JSON path as Vertex AI streams argument paths: ``.name``, ``[0]``, ``['name']``.
_PATH_STEP = re.compile(r"""\.([^.\[]+)|\[(\d+)\]|\[['"]([^'"]*)['"]\]""")


def _set_path(args: dict[str, Any], path: str, value: Any, append: bool) -> None:
    """Set ``value`` at ``path`` (``$.a.b[0]``) in ``args``, creating containers; ``append`` extends a string."""
    steps: list[str | int] = [int(i) if i else (name or quoted) for name, i, quoted in _PATH_STEP.findall(path)]
    if not steps:
        return
    node: Any = args
    for step, following in zip(steps, steps[1:], strict=False):
        child = _child(node, step)
        if child is None:
            child = [] if isinstance(following, int) else {}
            if not _put(node, step, child):
                return  # a path that contradicts what came before: keep what we have
        node = child
    previous = _child(node, steps[-1])
    _put(node, steps[-1], previous + value if append and isinstance(previous, str) else value)


def _child(node: Any, step: str | int) -> Any:
    if isinstance(node, dict) and isinstance(step, str):
        return node.get(step)
    if isinstance(node, list) and isinstance(step, int) and step < len(node):
        return node[step]
    return None


def _put(node: Any, step: str | int, value: Any) -> bool:
    if isinstance(node, dict) and isinstance(step, str):
        node[step] = value
        return True
    if isinstance(node, list) and isinstance(step, int):
        node.extend([None] * (step + 1 - len(node)))
        node[step] = value
        return True
    return False


def _partial_value(arg: Any) -> tuple[Any, bool]:
    """A ``PartialArg``'s value, and whether it continues a string streamed in pieces."""
    if arg.string_value is not None:
        return arg.string_value, True
    if arg.number_value is not None:
        number = arg.number_value
        return int(number) if float(number).is_integer() else number, False
    if arg.bool_value is not None:
        return arg.bool_value, False
    return None, False


def merge_streamed_calls(parts: list[Any]) -> list[Any]:
    """Join a function call streamed in pieces (Vertex AI's streamed arguments) into one call with its args.

    Each piece is a ``function_call`` carrying ``partial_args`` (a JSON path and a value; a string comes in several
    pieces) and ``will_continue`` until its last piece. Other parts pass through unchanged.
    """
    if not any(_is_piece(p) for p in parts):
        return parts
    out: list[Any] = []
    pending: dict[str, Any] | None = None
    for part in parts:
        call = getattr(part, "function_call", None)
        if call is None or not (_is_piece(part) or pending is not None):
            out.append(part)
            continue
        if pending is None:
            pending = {"id": call.id, "name": call.name, "args": dict(call.args or {})}
            out.append({"function_call": pending})
        pending["id"] = pending["id"] or call.id
        pending["name"] = pending["name"] or call.name
        for arg in call.partial_args or ():
            value, append = _partial_value(arg)
            _set_path(pending["args"], arg.json_path or "", value, append)
        if not call.will_continue:
            pending = None
    return out


def _is_piece(part: Any) -> bool:
    call = getattr(part, "function_call", None)
    return call is not None and (bool(call.partial_args) or call.will_continue is True)


class _Candidate:
    __slots__ = ("citations", "finish_reason", "grounding", "parts", "url_context")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.finish_reason: str | None = None
        # What the answer was grounded on: the chunks' grounding metadata merged, the last URL context metadata, and
        # every citation the chunks carried, each once.
        self.grounding: Any = None
        self.url_context: Any = None
        self.citations: dict[tuple[Any, ...], Any] = {}  # by what each records (see ``add_citations``)

    def add_grounding(self, candidate: Any) -> None:
        """Keep a chunk's grounding, citations and URL context (only called when it has some).

        The API may resend the grounding so far, or send its fields in different chunks (the queries early, the
        sources later): each field's latest value is kept.
        """
        grounding = getattr(candidate, "grounding_metadata", None)
        if grounding is not None:
            self.grounding = merged(self.grounding, grounding)
        url_context = getattr(candidate, "url_context_metadata", None)
        if url_context is not None:
            self.url_context = url_context
        add_citations(self.citations, citations_of(candidate))


@functools.cache
def _sdk_types() -> tuple[type, type, type, type] | None:
    """google-genai's response, candidate, content and part classes, imported once (None: not importable)."""
    try:
        from google.genai.types import Candidate, Content, GenerateContentResponse, Part
    except ImportError:
        return None
    return GenerateContentResponse, Candidate, Content, Part


def stream_parts(parts: list[Any]) -> list[Part]:
    """``parts_of(merge_streamed_calls(parts))``, a stream's run of text and thought pieces read in this one frame.

    A stream keeps one SDK ``Part`` per chunk, and nearly all of them are a piece of text or of a thought. When
    every part is the SDK's own ``Part`` with text and no function call, the parts are read from the instances'
    ``__dict__`` (pydantic's ``__getattr__`` hook keeps CPython 3.11 from specialising attribute reads) and each
    run of one kind is joined once, instead of one ``part_of`` call (two ``field`` reads) per piece and one string
    copy per join. Such parts pass ``merge_streamed_calls`` unchanged and ``part_of`` reads nothing else of them
    (text comes first), so the parts are the same. Any other part sends the whole list through the general path.
    """
    types = _sdk_types()
    part_type = types[3] if types is not None else None
    out: list[Part] = []
    pieces: list[str] = []  # the run being joined, of kind ``kind``
    kind = ""
    try:
        for part in parts:
            if type(part) is not part_type:
                return parts_of(merge_streamed_calls(parts))
            fields = part.__dict__
            text = fields["text"]
            if type(text) is not str or fields["function_call"] is not None:
                return parts_of(merge_streamed_calls(parts))
            if not text:
                continue  # an empty piece shows nothing and does not end a run (as ``parts_of``)
            piece_kind = "reasoning" if fields["thought"] is True else "text"
            if piece_kind != kind:
                if pieces:
                    out.append({"type": kind, "content": "".join(pieces)})
                pieces = []
                kind = piece_kind
            pieces.append(text)
    except KeyError:  # a part built without some field (``model_construct``): the general path reads it
        return parts_of(merge_streamed_calls(parts))
    if pieces:
        out.append({"type": kind, "content": "".join(pieces)})
    return out


class GenerateContentAccumulator:
    """Accumulates the chunks of one ``generate_content_stream`` call (sync or async)."""

    __slots__ = ("blocked", "candidates", "model", "response_id", "usage")

    def __init__(self) -> None:
        self.candidates: dict[int, _Candidate] = {}
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: Any = None
        self.blocked: str | None = None  # prompt_feedback.block_reason, when the prompt was blocked

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
            if (
                # ``getattr``: a chunk of another shape (a double, an older SDK) may not have these fields
                getattr(candidate, "grounding_metadata", None) is not None
                or getattr(candidate, "citation_metadata", None) is not None
                or getattr(candidate, "url_context_metadata", None) is not None
            ):
                buffer.add_grounding(candidate)
        if getattr(chunk, "prompt_feedback", None) is not None:
            reason = block_reason(chunk)
            if reason is not None:
                self.blocked = reason  # the prompt was blocked: the API ends the stream without a candidate
        return output

    def add_batch(self, chunks: list[Any]) -> None:  # noqa: C901  (one frame for the whole batch, on purpose)
        """``add`` for each chunk in order, the common chunk read in this one frame (the stream proxy's batch fold).

        The common chunk is one candidate (index 0) with no prompt feedback. Once its types are checked to be
        the SDK's own, its fields are read from the instances' ``__dict__`` (pydantic's ``__getattr__`` hook keeps
        CPython 3.11 from specialising attribute reads); any other chunk goes through ``add``, so both paths
        record the same. Candidate 0's buffer, and whether the response id and model are known (``add`` sets them
        only while they are None), are found once per batch rather than per chunk.
        """
        types = _sdk_types()
        if types is None:
            add_each(self.add, chunks)
            return
        response_type, candidate_type, content_type, _ = types
        buffers = self.candidates
        buffer = buffers.get(0)  # candidate 0's, once made: the only candidate of a common chunk
        known = self.response_id is not None and self.model is not None  # then no chunk sets either again
        for chunk in chunks:
            try:
                if type(chunk) is not response_type:
                    self.add(chunk)
                    continue
                fields = chunk.__dict__
                candidates = fields["candidates"]
                if (
                    fields["prompt_feedback"] is not None
                    or type(candidates) is not list
                    or len(candidates) != 1
                    or type(candidates[0]) is not candidate_type
                ):
                    self.add(chunk)
                    continue
                if not known:
                    if self.response_id is None:
                        self.response_id = fields["response_id"]
                    if self.model is None:
                        self.model = fields["model_version"]
                    known = self.response_id is not None and self.model is not None
                usage = fields["usage_metadata"]
                if usage is not None:
                    self.usage = usage
                candidate = candidates[0].__dict__
                # Not candidate 0 (``add`` files it under ``index or 0``), or grounded: ``add`` reads it. Every chunk is
                # checked: the API may send grounding early, split, or repeated, not only with the finish reason. Truth
                # tests, not ``is not None`` (the SDK's models are always true): the check is ~600 instructions a chunk.
                if (
                    candidate["index"]
                    or candidate["grounding_metadata"]
                    or candidate["citation_metadata"]
                    or candidate["url_context_metadata"]
                ):
                    self.add(chunk)  # sets the id, model and usage above again, to the same values
                    continue
                if buffer is None:  # none when the batch began (``add`` may have made it since)
                    buffer = buffers.setdefault(0, _Candidate())
                content = candidate["content"]
                if content is not None:
                    parts = content.__dict__["parts"] if type(content) is content_type else content.parts
                    if parts:
                        buffer.parts.extend(parts)
                reason = candidate["finish_reason"]
                if reason is not None:
                    buffer.finish_reason = enum_name(reason)
            except Exception:
                chunk_failed()

    def end_reason(self) -> str:
        """``exhausted`` when every candidate got its finish reason (or the prompt was blocked), else ``truncated``."""
        candidates = self.candidates.values()
        if self.blocked is not None or (candidates and all(c.finish_reason is not None for c in candidates)):
            return sc.STREAM_END_EXHAUSTED
        return sc.STREAM_END_TRUNCATED

    def outcome(self, content: bool = True) -> Outcome:
        """What the chunks so far amount to (output messages only with ``content``)."""
        ordered = [self.candidates[i] for i in sorted(self.candidates)]
        messages: list[Message] | None = None
        if content:
            messages = [
                output_message(
                    grounding_parts(stream_parts(c.parts), c.grounding, c.citations.values(), c.url_context),
                    c.finish_reason,
                )
                for c in ordered
            ]
        outcome = Outcome(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[c.finish_reason for c in ordered if c.finish_reason],
            output_messages=messages,
            usage=usage_of(self.usage),
        )
        if self.blocked is not None and not outcome.finish_reasons:
            return blocked(outcome, self.blocked)
        return outcome

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = usage_of(self.usage)
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def failure(self) -> tuple[str, str] | None:
        """Gemini streams report no failure of their own (errors arrive as ``APIError`` exceptions)."""
        return None
