"""Groq's batch fold as rewritten by s14-foldgm3 records exactly what the fold it replaced recorded (old against new).

s14-foldgm3 (commit 5775fa2) rewrote ``GroqStreamAccumulator.add_batch``: nested checks, the choice's buffer reused
while the index is the same object, the delta's other fields tested ``is None`` where the old fold tested them for
truth. The old ``add_batch`` is kept below verbatim (from commit 7ca7d4a, the parent of 5775fa2; nothing else in the
module changed since), as a subclass of today's accumulator, and both fold the same chunks as the stream proxy folds
them (``add`` up to the first output, then batches): every recorded Groq stream in ``tests/fixtures`` whole, parsed by
the real groq client, and a few hundred streams edited at random from a fixed seed (content None or empty, tool call
deltas split across chunks, several choices, usage only on the last chunk, ``x_groq`` ids, usage and errors, finish
reasons, reasoning and built-in tool fields, extras), parsed by ``construct_type`` as the groq client parses each
event. The whole state of the accumulator (every buffer, part, tool call, finish reason, usage) and what the span is
built from must be equal.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from fold_differential import (
    drawn_edit,
    first_delta,
    fold,
    random_differential,
    recorded_streams,
    sse_events,
)

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.openai.accumulate import _ChoiceBuffer
from evaltrace.instrumentation.groq.stream import GroqStreamAccumulator, _sdk_types

groq = pytest.importorskip("groq")  # an optional extra: not in CI's oldest-versions environment

from groq._models import construct_type  # noqa: E402  (the client's own parse of each streamed event)
from groq.types.chat import ChatCompletionChunk  # noqa: E402

GROQ_DIR = FIXTURES / "groq-cassettes"
SEED = 20261129
RANDOM_STREAMS = 300


class _OldGroq(GroqStreamAccumulator):
    """Today's accumulator with the batch fold s14-foldgm3 replaced (verbatim from commit 7ca7d4a, but for s24).

    s24 added fields to both of today's paths (``x_groq.usage_breakdown``, a late service tier, ``annotations``):
    the old fold is given the same two edits (the ``x_groq`` read through ``_add_x_groq``, an annotated delta
    routed to ``add``), so the comparison still tests the s14 rewrite and not s24's additions, which the old fold
    never had to know.
    """

    __slots__ = ()

    def add_batch(self, chunks: list[Any], strict: bool = False) -> None:  # noqa: C901  (one frame for the batch)
        """``add`` for each chunk in order, the common chunk read in this one frame (the stream proxy's batch fold).

        The common chunk of a Groq stream is one choice whose delta has text only, and no ``x_groq`` or one with
        its id, or (the last chunk) its usage or an error. Once its types are checked to be the groq SDK's own, its
        fields are read from the instances' ``__dict__``, itself read through its descriptor (``slot_reader``):
        pydantic's ``__getattr__`` hook keeps CPython 3.11 from specialising attribute reads and costs three
        type-cache lookups per read, and the ``_Delta`` view ``add`` builds costs an object per chunk. Every other
        chunk (a reasoning, refusal, tool or extra field, several choices, usage on the chunk, another SDK's types)
        goes through ``add``, so both paths record the same. ``strict``: an error is raised, not routed.
        """
        types = _sdk_types()
        if types is None or self.header_pending:
            # The header is read from the first chunks, before the proxy batches (it folds each chunk as it arrives
            # until one carries output, which has the id and model): a batch that finds it pending takes ``add``.
            add_each(self.add, chunks)
            return
        chunk_type, choice_type, delta_type, x_groq_type, fields_of, extra_of, _, x_groq_fields, _ = types
        buffers = self.choices
        for chunk in chunks:
            try:
                if type(chunk) is not chunk_type:
                    self.add(chunk)
                    continue
                fields = fields_of(chunk)
                choices = fields["choices"]
                x_groq = fields["x_groq"]
                # ``choices`` may be None (a closing chunk sent with "choices": null): ``add`` reads its usage.
                if choices is None or len(choices) != 1 or fields["usage"] is not None:
                    self.add(chunk)
                    continue
                choice = choices[0]
                if type(choice) is not choice_type:
                    self.add(chunk)
                    continue
                entry = fields_of(choice)
                delta = entry["delta"]
                if type(delta) is not delta_type:
                    self.add(chunk)
                    continue
                said = fields_of(delta)
                if (
                    said["tool_calls"]
                    or said["function_call"] is not None
                    or said["reasoning"]
                    or said["executed_tools"]
                    or said["annotations"]  # s24, as the ``x_groq`` read below
                    or extra_of(delta)
                ):
                    self.add(chunk)
                    continue
                if x_groq is not None and (type(x_groq) is not x_groq_type or not x_groq_fields):
                    self.add(chunk)
                    continue
                index = entry["index"]
                try:
                    buffer = buffers[index]  # a subscript, not a ``get`` call: the KeyError comes once per choice
                except KeyError:
                    buffer = buffers[index] = _ChoiceBuffer()
                content = said["content"]
                if content:
                    buffer.text.append(content)
                reason = entry["finish_reason"]
                if reason is not None:
                    buffer.finish_reason = reason
                if x_groq is not None:  # s24: the ``x_groq`` read as ``add`` reads it (see the class docstring)
                    self._add_x_groq(chunk, x_groq)
            except Exception:
                if strict:
                    raise
                chunk_failed()


RECORDED = recorded_streams(sorted(GROQ_DIR.rglob("*.yaml")), load_cassette)


def _client_chunks(item: Recorded) -> list[Any]:
    """The chunks the real groq client yields for the recorded stream (up to an error it raises inside it)."""
    chunks: list[Any] = []
    with ReplayServer([item]) as server:
        kwargs = dict(item.request_json())
        kwargs.pop("stream", None)
        with groq.Groq(api_key="test", base_url=server.url, max_retries=0) as client:
            try:
                for chunk in client.chat.completions.create(**kwargs, stream=True):
                    chunks.append(chunk)
            except Exception:  # the recorded failure itself: what arrived before it is folded
                pass
    return chunks


def _parsed(events: list[dict[str, Any]]) -> list[Any]:
    """Each event as the groq client parses it (``construct_type`` into ``ChatCompletionChunk``)."""
    return [construct_type(type_=ChatCompletionChunk, value=event) for event in events]


def _same(chunks: list[Any], size: int) -> None:
    new = fold(GroqStreamAccumulator, chunks, size)
    old = fold(_OldGroq, chunks, size)
    assert new == old


def test_every_recorded_groq_stream_is_here() -> None:
    assert len(RECORDED) >= 8  # thinking, web search, tool-use failures: the recorded Groq streams
    assert any(b'"reasoning"' in item.body for _, item in RECORDED)
    assert any(b'"tool_calls"' in item.body for _, item in RECORDED)


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
def test_a_recorded_stream_folds_the_same_through_the_old_and_the_new_batch_fold(name: str, item: Recorded) -> None:
    chunks = _client_chunks(item)
    assert len(chunks) >= 2, name
    # The parse the random streams below use is the client's own, chunk for chunk.
    assert [c.model_dump() for c in _parsed(sse_events(item.body)[: len(chunks)])] == [c.model_dump() for c in chunks]
    for size in (1, 3, 16, 64):
        _same(chunks, size)


# --- random edits of the recorded streams --------------------------------------------------------------------------

USAGES = (
    {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24},
    {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5, "queue_time": 0.1, "completion_time": 0.2},
)
TEXTS = (None, "", "a", " word", "é\n", "<think>", '{"k": 1}')
REASONS = (None, None, None, "stop", "length", "tool_calls", "function_call", "")


def _tool_fragments(rng: random.Random, event: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool call (or two) sent across several chunks: id and name first, then argument pieces."""
    out = []
    calls = rng.choice((1, 1, 2))
    for call in range(calls):
        first = copy.deepcopy(event)
        first_delta(first).clear()
        first_delta(first)["tool_calls"] = [
            {"index": call, "id": f"call_{call}", "type": "function", "function": {"name": "f", "arguments": ""}}
        ]
        out.append(first)
        for piece in ('{"a"', ": 1", "}")[: rng.randint(1, 3)]:
            more = copy.deepcopy(event)
            first_delta(more).clear()
            first_delta(more)["tool_calls"] = [{"index": call, "function": {"arguments": piece}}]
            if rng.random() < 0.3:
                first_delta(more)["content"] = rng.choice(TEXTS)
            out.append(more)
    return out


def _groq_edit(rng: random.Random, event: dict[str, Any], what: int) -> list[dict[str, Any]]:
    """Groq's own edit number ``what`` (of 11) of a chunk event."""
    delta = first_delta(event)
    if what == 0:
        return _tool_fragments(rng, event)
    if what == 1:
        delta["reasoning"] = rng.choice(("", None, "thinking ", "r"))
    elif what == 2:
        delta["executed_tools"] = rng.choice(([], None, [{"index": 0, "type": "search", "arguments": "{}"}]))
    elif what == 3:
        delta["function_call"] = rng.choice((None, {"name": "f", "arguments": "{}"}))
    elif what == 4:
        delta["refusal"] = rng.choice((None, "", "no"))
    elif what == 5:
        delta[rng.choice(("future", "reasoning_content", "annotations"))] = rng.choice(([], "x", 1))
    elif what == 6:
        event["choices"] = rng.choice(([], None))
    elif what == 7:
        event["usage"] = rng.choice(USAGES)
    elif what == 8:
        event["x_groq"] = rng.choice(
            ({"id": "req_1"}, {"id": "req_1", "usage": rng.choice(USAGES)}, {"id": "req_1", "error": "failed"},
             {"error": ""}, None, {"id": "req_1", "future": 1})
        )  # fmt: skip
    elif what == 9:
        event.pop("x_groq", None)
    else:
        event["choices"][0][rng.choice(("logprobs", "future"))] = rng.choice((None, {"content": []}))
    return [event]


_edit = drawn_edit(11, _groq_edit, TEXTS, REASONS)


def _usage_last(rng: random.Random, events: list[dict[str, Any]]) -> None:
    """Usage only on the last chunk, in its ``x_groq``."""
    for event in events:
        event.pop("x_groq", None)
        event.pop("usage", None)
    events[-1]["x_groq"] = {"id": "req_1", "usage": rng.choice(USAGES)}


def test_random_edited_streams_fold_the_same_through_the_old_and_the_new_batch_fold() -> None:
    bases = [sse_events(item.body) for _, item in RECORDED]
    random_differential(GroqStreamAccumulator, _OldGroq, SEED, RANDOM_STREAMS, bases, _edit, _usage_last, _parsed, 0.15)
