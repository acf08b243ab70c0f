"""Ollama's batch fold (s16-ollconv) records exactly what the fold it replaced recorded (old against new).

Until s16-ollconv ``OllamaStreamAccumulator`` had no ``add_batch``: the stream proxy folded each held chunk with
``add_each(acc.add, chunks)`` (``engine/stream.py``: ``partial(add_each, acc.add)``). That old fold is kept below as
a subclass of today's accumulator, and both fold the same chunks as the stream proxy folds them (``add`` up to the
first output, then batches of 1, 2, 3, 16 or 64): every recorded Ollama chat stream in ``tests/fixtures`` whole, as the
real ollama client yields it, and a few hundred streams edited at random from a fixed seed, chat and generate
(content and thinking None, empty or text, tool calls, ``done`` mid-stream, no model on the first chunks, and chunks
changed after the SDK parsed them: another type, a field of another type, a field deleted, a plain dict), parsed as
the client parses each NDJSON line (``cls(**part)``). The whole state of the accumulator and what the span is built
from (``outcome()``, ``end_reason()``, ``summary()``, ``failure()``) must be equal.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from fold_differential import differential, fold

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal.engine.codec import add_each
from evaltrace.instrumentation.ollama.stream import OllamaStreamAccumulator

ollama = pytest.importorskip("ollama")  # an optional extra

from ollama import ChatResponse, GenerateResponse  # noqa: E402

OLLAMA_DIR = FIXTURES / "ollama-cassettes"
SEED = 20261130
RANDOM_STREAMS = 300


class _NewChat(OllamaStreamAccumulator):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(chat=True)


class _OldChat(_NewChat):
    """The fold before s16-ollconv: ``add`` on each chunk, as the engine's ``add_each`` did."""

    __slots__ = ()

    def add_batch(self, chunks: list[Any]) -> None:
        add_each(self.add, chunks)


class _NewGenerate(OllamaStreamAccumulator):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(chat=False)


class _OldGenerate(_NewGenerate):
    __slots__ = ()

    def add_batch(self, chunks: list[Any]) -> None:
        add_each(self.add, chunks)


def _recorded() -> list[tuple[str, Recorded]]:
    found = []
    for path in sorted(OLLAMA_DIR.rglob("*.yaml")):
        for index, item in enumerate(load_cassette(path)):
            if item.status == 200 and item.body.count(b"\n") > 1 and b'"done":false' in item.body.replace(b" ", b""):
                found.append((f"{path.name}-{index}", item))
    return found


RECORDED = _recorded()


def _lines(item: Recorded) -> list[dict[str, Any]]:
    return [json.loads(line) for line in item.body.split(b"\n") if line.strip()]


def _client_chunks(item: Recorded) -> list[Any]:
    """The chunks the real ollama client yields for the recorded stream."""
    body = json.loads(item.request_body) if item.request_body else {}
    with ReplayServer([item]) as server:
        client = ollama.Client(host=server.url)
        try:
            return list(client.chat(model=body.get("model", "m"), messages=body.get("messages") or [], stream=True))
        finally:
            client.close()


def test_every_recorded_ollama_stream_is_here() -> None:
    assert len(RECORDED) >= 2  # test_chat_stream, test_async_chat_stream


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
def test_a_recorded_stream_folds_the_same_through_the_old_and_the_new_batch_fold(name: str, item: Recorded) -> None:
    chunks = _client_chunks(item)
    assert len(chunks) >= 3, name
    # The parse the random streams below use is the client's own, chunk for chunk.
    assert [ChatResponse(**line).model_dump() for line in _lines(item)] == [c.model_dump() for c in chunks]
    for size in (1, 2, 3, 16, 64):
        new = fold(_NewChat, chunks, size)
        assert new == fold(_OldChat, chunks, size), (name, size)
        assert new[0] is None
    record = fold(_NewChat, chunks, 16)
    assert record[2] != fold(_NewChat, [], 16)[2]  # the fold read the answer


# --- random edits of the recorded streams --------------------------------------------------------------------------

TEXTS = (None, "", "a", " word", "é\n", "<think>", "</think>", '{"k": 1}')
TOOL_CALLS = (None, [], [{"function": {"name": "f", "arguments": {"x": 1}}}])
REASONS = (None, "stop", "length", "load", "")


def _bases(generate: bool) -> list[list[dict[str, Any]]]:
    bases = []
    for _, item in RECORDED:
        lines = _lines(item)
        if generate:  # the same stream as ``/api/generate`` sends it: the message's fields on the chunk
            lines = [
                {**{k: v for k, v in line.items() if k != "message"}, "response": line["message"].get("content", "")}
                for line in lines
            ]
        bases.append(lines)
    return bases


def _edit_line(rng: random.Random, line: dict[str, Any], generate: bool) -> None:
    target = line if generate else line.setdefault("message", {"role": "assistant", "content": ""})
    text_key = "response" if generate else "content"
    what = rng.randrange(8)
    if what == 0:
        target[text_key] = rng.choice(TEXTS)
    elif what == 1:
        target["thinking"] = rng.choice(TEXTS)
    elif what == 2 and not generate:
        target["tool_calls"] = rng.choice(TOOL_CALLS)
    elif what == 3:
        line["done"] = rng.choice((True, False, None))
        line["done_reason"] = rng.choice(REASONS)
    elif what == 4:
        line["model"] = rng.choice((None, "", "other:latest"))
    elif what == 5:
        line.pop("model", None)
    elif what == 6:
        line.update(prompt_eval_count=rng.choice((None, 3)), eval_count=rng.choice((None, 4)))
    else:
        target[text_key] = rng.choice(TEXTS[2:])


def _edit_chunk(rng: random.Random, chunk: Any, generate: bool) -> Any:
    """A chunk changed after the SDK parsed it (pydantic does not validate assignment), or another object."""
    target = chunk if generate else chunk.message
    what = rng.randrange(7)
    if what == 0:
        return chunk.model_dump()  # a plain dict: ``add`` reads nothing of it
    if what == 1:
        setattr(target, "response" if generate else "content", rng.choice((7, ["x"], b"y")))
    elif what == 2:
        chunk.done = rng.choice((0, 1, "no"))
    elif what == 3 and not generate:
        chunk.message = rng.choice((None, {"content": "d"}))
    elif what == 4:
        delattr(target, rng.choice(("thinking", "response" if generate else "content")))
    elif what == 5:
        delattr(chunk, rng.choice(("done", "model")))
    else:
        target.thinking = rng.choice((3, "t"))
    return chunk


def _random_stream(rng: random.Random, bases: list[list[dict[str, Any]]], generate: bool) -> list[Any]:
    base = rng.choice(bases)
    length = rng.randint(1, 70)
    body = base[1:-1] or base
    lines = copy.deepcopy([base[0], *(body[i % len(body)] for i in range(length))])
    if rng.random() < 0.6:
        lines.append(copy.deepcopy(base[-1]))
    for line in lines:
        if rng.random() < 0.2:
            _edit_line(rng, line, generate)
    cls = GenerateResponse if generate else ChatResponse
    chunks = [cls(**line) for line in lines]
    return [_edit_chunk(rng, chunk, generate) if rng.random() < 0.05 else chunk for chunk in chunks]


# A chunk given a field of another type warns when ``snapshot`` dumps it (the ``done`` chunk is kept whole): the
# warning is the record's, not the folds'.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("generate", [False, True], ids=["chat", "generate"])
def test_random_edited_streams_fold_the_same_through_the_old_and_the_new_batch_fold(generate: bool) -> None:
    rng = random.Random(SEED + generate)
    bases = _bases(generate)

    def streams() -> Any:
        for number in range(RANDOM_STREAMS):
            yield _random_stream(rng, bases, generate), rng.choice((1, 2, 3, 16, 64)), (generate, number)

    new, old = (_NewGenerate, _OldGenerate) if generate else (_NewChat, _OldChat)
    clean, total, general = differential(new, old, streams())
    assert clean > RANDOM_STREAMS // 2
    assert total - general >= total * 0.6, (total, general)  # most chunks take the batch fold's own path
