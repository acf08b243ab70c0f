"""The OpenAI chat batch fold records what ``add`` records, for the recorded streams and for every other chunk shape.

``ChatAccumulator.add_batch`` reads the common chunk itself: openai's own chunk, choice and delta types (exactly),
one choice, read through their ``__dict__``, a delta with no extras whose only output is its text (and a finish
reason, usage). Every other chunk (no choice or several, a subclass, a field missing from a ``__dict__``, a
delta with reasoning extras, a refusal, tool calls or a ``function_call``) goes through the general path, which
reads it as ``add`` does. Each stream here is parsed by the real ``openai`` client from the replay server and
folded both ways: one ``add`` per chunk, and as the stream proxy folds it (``add`` up to the first chunk with
output, then batches). Outcome, end reason, summary and failure must be equal.

No recording holds the other shapes (logprobs, a refusal, audio, reasoning extras, a usage chunk with a choice,
several choices in one chunk, ``choices: null``, a null delta, ``function_call``, extra fields): they are the
recorded ``test_chat_completion_streaming`` chunks with those JSON fields changed, still parsed by the real SDK.
Subclasses and fields missing from an instance's ``__dict__`` (which the SDK's parser never makes) are made in
Python.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from typing import Any

import openai
import pytest
from openai.types.chat.chat_completion_chunk import ChatCompletionChunk, Choice, ChoiceDelta

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal.openai.accumulate import ChatAccumulator

OPENAI_DIR = FIXTURES / "openai-cassettes"
TEXT_STREAM = OPENAI_DIR / "otel-contrib" / "test_chat_completion_streaming.yaml"


class _Counting(ChatAccumulator):
    """Counts the chunks and choices the batch fold hands to the general path (``_add_chunk``, ``_add_choice``)."""

    __slots__ = ("general",)

    def __init__(self) -> None:
        super().__init__()
        self.general = 0

    def _add_chunk(self, chunk: Any) -> None:
        self.general += 1
        super()._add_chunk(chunk)

    def _add_choice(self, choice: Any) -> None:
        self.general += 1
        super()._add_choice(choice)


def _chunks(item: Recorded) -> list[Any]:
    """The chunks the real client yields for the replayed stream (up to an error it raises inside it)."""
    kwargs = dict(item.request_json())
    kwargs["stream"] = True
    chunks: list[Any] = []
    with ReplayServer([item]) as server, openai.OpenAI(api_key="test", base_url=server.url, max_retries=0) as client:
        try:
            for chunk in client.chat.completions.create(**kwargs):
                chunks.append(chunk)
        except Exception:  # the recorded failure itself: what arrived before it is folded
            pass
    return chunks


def _record(acc: ChatAccumulator) -> tuple[Any, ...]:
    """Everything the span's attributes are built from (an exception counts as its type and message)."""
    out: list[Any] = []
    for read in (acc.outcome, acc.end_reason, acc.summary, acc.failure):
        try:
            out.append(read())
        except Exception as error:  # a shape both paths fold into something the outcome cannot join
            out.append((type(error), str(error)))
    return tuple(out)


def _one_by_one(chunks: list[Any]) -> tuple[Any, ...]:
    acc = ChatAccumulator()
    for chunk in chunks:
        try:
            acc.add(chunk)
        except Exception:  # as the proxy's ``on_chunk``: the chunk is lost, the stream goes on
            pass
    return _record(acc)


def _batched(chunks: list[Any], sizes: list[int]) -> tuple[tuple[Any, ...], int]:
    """The record as the proxy folds (``add`` to the first output, then batches of ``sizes``), and general paths."""
    acc = _Counting()
    start = len(chunks)
    for index, chunk in enumerate(chunks):
        if acc.add(chunk):
            start = index + 1
            break
    acc.general = 0
    begin, turn = start, 0
    while begin < len(chunks):
        size = sizes[turn % len(sizes)]
        acc.add_batch(chunks[begin : begin + size])
        begin, turn = begin + size, turn + 1
    return _record(acc), acc.general


def _recorded_streams() -> list[tuple[str, Recorded]]:
    found = []
    for path in sorted(OPENAI_DIR.rglob("*.yaml")):
        for index, item in enumerate(load_cassette(path)):
            if item.status == 200 and b"chat.completion.chunk" in item.body:
                found.append((f"{path.relative_to(OPENAI_DIR)}-{index}", item))
    return found


RECORDED = _recorded_streams()


def test_there_are_recorded_text_tool_call_and_multiple_choice_streams() -> None:
    bodies = [item.body for _, item in RECORDED]
    assert len(bodies) >= 10
    assert any(b'"tool_calls"' in body for body in bodies) and any(b'"index":1' in body for body in bodies)


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
@pytest.mark.parametrize("size", [1, 3, 16])
def test_every_recorded_stream_records_the_same_through_the_batch_fold(name: str, item: Recorded, size: int) -> None:
    chunks = _chunks(item)
    assert len(chunks) >= 2
    record, _ = _batched(chunks, [size])
    assert record == _one_by_one(chunks), name


def test_the_common_chunk_never_takes_the_general_path() -> None:
    """Text deltas with one choice, the finish chunk: all read in the batch fold; the usage chunk (no choice) is not."""
    [item] = load_cassette(TEXT_STREAM)
    chunks = _chunks(item)
    body = chunks[1:-1] * 5  # text deltas, then the finish chunk
    record, general = _batched([chunks[0], *body, chunks[-1]], [16])
    assert general == 1  # the usage chunk: ``choices`` is empty
    assert record == _one_by_one([chunks[0], *body, chunks[-1]])


def test_usage_on_a_text_chunk_is_recorded_through_the_batch_fold() -> None:
    """Usage given only on a text delta chunk (no usage chunk after it) is the stream's usage, batched or not.

    That chunk is read on the batch fold's straight line, which stops early for a plain text delta: the usage must
    be kept all the same (the recorded stream's own usage chunk, last, would hide a loss, so it is removed here).
    """
    item, template = _text_stream()
    changed = copy.deepcopy(template[:-1])
    changed[3]["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    chunks = _chunks(_served(item, changed))
    assert chunks[3].choices[0].delta.content and chunks[3].usage is not None
    for size in (1, 3, 16):
        record, general = _batched(chunks, [size])
        assert general == 0  # every chunk, the one with usage included, read on the straight line
        outcome, _, summary, _ = record
        assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (3, 2)
        assert (summary.input_tokens, summary.output_tokens) == (3, 2)
        assert record == _one_by_one(chunks)


# --- every other shape: the recorded text stream with one chunk changed (JSON, parsed by the real SDK) ---


def _text_stream() -> tuple[Recorded, list[dict[str, Any]]]:
    [item] = load_cassette(TEXT_STREAM)
    lines = [line for line in item.body.split(b"\n\n") if line.startswith(b"data: {")]
    return item, [json.loads(line[len(b"data: ") :]) for line in lines]


def _served(item: Recorded, chunks: list[dict[str, Any]]) -> Recorded:
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    return dataclasses.replace(item, body=body)


def _delta(**fields: Any) -> dict[str, Any]:
    """A content chunk's change: its delta replaced by ``fields``."""
    return {"choices": [{"index": 0, "delta": fields, "logprobs": None, "finish_reason": None}]}


_LOGPROBS = {"content": [{"token": " a", "logprob": -0.1, "bytes": [32, 97], "top_logprobs": []}], "refusal": None}
_TOOL_START = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}

# name -> the chunk's top-level fields to change (a value of ``...`` removes the key)
SHAPES: dict[str, dict[str, Any]] = {
    "logprobs": {"choices": [{"index": 0, "delta": {"content": " a"}, "logprobs": _LOGPROBS, "finish_reason": None}]},
    "refusal": _delta(content=None, refusal="I can't help with that."),
    "empty refusal": _delta(content=" a", refusal=""),
    "refusal and text": _delta(content=" a", refusal="no"),
    "audio": _delta(audio={"id": "audio_1", "transcript": " a", "data": "AAAA", "expires_at": 1}),
    "audio with text": _delta(content=" a", audio={"id": "audio_1", "transcript": " a"}),
    "reasoning_content": _delta(content=None, reasoning_content="Let me think."),
    "reasoning": _delta(content=None, reasoning="Let me think."),
    "both reasoning extras": _delta(content=" a", reasoning_content="first", reasoning="second"),
    "non-text reasoning extra": _delta(content=" a", reasoning=123),
    "null reasoning extra": _delta(content=" a", reasoning_content=None),
    "other delta extra": _delta(content=" a", annotations=[]),
    "tool call start": _delta(content=None, tool_calls=[_TOOL_START]),
    "tool call fragment": _delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]),
    "tool call without function": _delta(tool_calls=[{"index": 0, "id": "call_1", "type": "function"}]),
    "empty tool calls": _delta(content=" a", tool_calls=[]),
    "function_call": _delta(content=None, function_call={"name": "get_weather", "arguments": "{}"}),
    "function_call fragment": _delta(function_call={"arguments": '{"x": 1}'}),
    "role only": _delta(role="assistant"),
    "empty content": _delta(content=""),
    "null delta": {"choices": [{"index": 0, "delta": None, "logprobs": None, "finish_reason": None}]},
    "no delta": {"choices": [{"index": 0, "logprobs": None, "finish_reason": None}]},
    "second choice": {"choices": [{"index": 1, "delta": {"content": " b"}, "logprobs": None, "finish_reason": None}]},
    "two choices": {
        "choices": [
            {"index": 0, "delta": {"content": " a"}, "logprobs": None, "finish_reason": None},
            {"index": 1, "delta": {"content": " b"}, "logprobs": None, "finish_reason": "length"},
        ]
    },
    "no choices": {"choices": []},
    "null choices": {"choices": None},
    "missing choices": {"choices": ...},
    "finish with text": {
        "choices": [{"index": 0, "delta": {"content": " a"}, "logprobs": None, "finish_reason": "stop"}]
    },
    "unknown finish": {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "something_new"}]},
    "usage with a choice": {"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
    "choice extra": {
        "choices": [{"index": 0, "delta": {"content": " a"}, "finish_reason": None, "content_filter": {}}]
    },
    "chunk extra": {"obfuscation": "abc", "service_tier": "default"},
    "non-text content": _delta(content=["a"]),
}


def _shape_stream(change: dict[str, Any], where: int = 3) -> list[dict[str, Any]]:
    """The recorded text stream with its chunk ``where`` changed by ``change``."""
    _, template = _text_stream()
    chunks = copy.deepcopy(template)
    for key, value in change.items():
        if value is ...:
            chunks[where].pop(key, None)
        else:
            chunks[where][key] = copy.deepcopy(value)
    return chunks


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("size", [1, 3, 16])
def test_every_chunk_shape_the_sdk_types_allow_records_the_same_through_the_batch_fold(shape: str, size: int) -> None:
    item, _ = _text_stream()
    chunks = _chunks(_served(item, _shape_stream(SHAPES[shape])))
    assert len(chunks) >= 8
    record, _ = _batched(chunks, [size])
    assert record == _one_by_one(chunks), shape


def test_random_streams_of_every_shape_record_the_same_in_batches_of_any_size() -> None:
    """Shapes mixed in one stream, in random orders and batch sizes (the fast path's state across chunks)."""
    item, template = _text_stream()
    changes = list(SHAPES.values())
    rng = random.Random(28)
    streams = []
    for _ in range(12):
        body = []
        for _ in range(rng.randint(5, 30)):
            chunk = copy.deepcopy(template[rng.randint(1, 5)])
            if rng.random() < 0.5:
                for key, value in rng.choice(changes).items():
                    if value is ...:
                        chunk.pop(key, None)
                    else:
                        chunk[key] = copy.deepcopy(value)
            body.append(chunk)
        streams.append(_served(item, [template[0], *body, *template[-2:]]))
    for served in streams:
        chunks = _chunks(served)
        sizes = [rng.randint(1, 17) for _ in range(5)]
        record, _ = _batched(chunks, sizes)
        assert record == _one_by_one(chunks), sizes


# --- what the parser never makes: subclasses and fields missing from an instance's __dict__ ---


class _Chunk(ChatCompletionChunk):
    pass


class _Choice(Choice):
    pass


class _Delta(ChoiceDelta):
    pass


def _sdk_chunks() -> list[Any]:
    item, _ = _text_stream()
    return _chunks(item)


def _rebuilt(chunk: Any, *, chunk_type: Any = None, choice_type: Any = None, delta_type: Any = None) -> Any:
    """``chunk`` rebuilt from its JSON with any of its three types replaced by a subclass."""
    value = json.loads(chunk.model_dump_json())
    built = (chunk_type or ChatCompletionChunk).construct(**value)
    for position, choice in enumerate(value["choices"]):
        delta = (delta_type or ChoiceDelta).construct(**choice.pop("delta"))
        built.choices[position] = (choice_type or Choice).construct(**choice, delta=delta)
    return built


@pytest.mark.parametrize("which", ["chunk_type", "choice_type", "delta_type"])
def test_a_subclass_of_any_of_the_three_types_is_read_as_add_reads_it(which: str) -> None:
    subclass = {"chunk_type": _Chunk, "choice_type": _Choice, "delta_type": _Delta}[which]
    chunks = _sdk_chunks()
    changed = [chunks[0], *(_rebuilt(chunk, **{which: subclass}) for chunk in chunks[1:-1]), chunks[-1]]
    record, general = _batched(changed, [16])
    assert record == _one_by_one(changed)
    if which != "delta_type":  # a chunk or choice of another type goes to the general path (a delta: _add_delta)
        assert general >= len(changed) - 2


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("chunk", "choices"),
        ("chunk", "usage"),
        ("choice", "index"),
        ("choice", "delta"),
        ("choice", "finish_reason"),
        ("delta", "content"),
        ("delta", "refusal"),
        ("delta", "tool_calls"),
        ("delta", "function_call"),
    ],
)
def test_fields_missing_from_an_instances_dict_are_read_as_add_reads_them(
    owner: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails loses its chunk on both paths, as in production (the test switch would re-raise it)."""
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _sdk_chunks()
    changed = [chunks[0]]
    for chunk in chunks[1:]:
        chunk = _rebuilt(chunk)
        if chunk.choices or owner == "chunk":
            target = {"chunk": chunk, "choice": None, "delta": None}
            if chunk.choices:
                target["choice"], target["delta"] = chunk.choices[0], chunk.choices[0].delta
            if target[owner] is not None:
                target[owner].__dict__.pop(name, None)
        changed.append(chunk)
    record, _ = _batched(changed, [3])
    assert record == _one_by_one(changed)
