"""A Google Gen AI stream's output parts are the general path's over every part it was sent, however folded.

``GenerateContentAccumulator`` keeps each candidate's parts as the chunks come (through ``add`` for the first chunks
and any uncommon one, ``add_batch`` for the rest) and turns them into GenAI parts at the end (``stream_parts``, whose
fast path reads runs of plain text and thought). Whatever the order of the parts (plain text, thoughts, empty
pieces, unicode, function calls, streamed argument pieces, blobs, dicts, subclasses, constructed parts), how they are
split over chunks and batches, each candidate's output parts must equal ``parts_of(merge_streamed_calls(...))`` of
every part it was sent, in order, written as the same JSON. These are the differential checks a change of the fold
(s14-foldgoog3 measured one that read the parts while folding) must keep passing unchanged.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_provider_batch_fold import GOOGLE, _google_chunks

from cassettes import FIXTURES, load_cassette
from evaltrace.instrumentation.google_genai.parts import parts_of
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator, merge_streamed_calls

types = pytest.importorskip("google.genai.types")  # an optional extra: not in CI's oldest-versions environment


class _MyPart(types.Part):  # type: ignore[misc,name-defined]
    pass


def _piece(n: int) -> Any:
    return types.Part(
        function_call=types.FunctionCall(
            name="f", partial_args=[types.PartialArg(json_path="$.city", string_value=f"P{n}")], will_continue=True
        )
    )


# One factory per part shape, each taking a number (to vary the text).
PLAIN: dict[str, Any] = {
    "text": lambda n: types.Part(text=f"t{n} "),
    "thought": lambda n: types.Part(text=f"th{n} ", thought=True),
    "thought False": lambda n: types.Part(text=f"f{n}", thought=False),
    "empty text": lambda n: types.Part(text=""),
    "empty thought": lambda n: types.Part(text="", thought=True),
    "unicode": lambda n: types.Part(text=f'\u00e9t\u00e9 \u2026 \U0001f600 "{n}"\n\\'),
}
OTHER: dict[str, Any] = {
    "function call": lambda n: types.Part(function_call=types.FunctionCall(name="get", args={"n": n})),
    "streamed piece": _piece,
    "last streamed piece": lambda n: types.Part(
        function_call=types.FunctionCall(partial_args=[types.PartialArg(json_path="$.city", string_value="is")])
    ),
    "blob": lambda n: types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
    "dict": lambda n: {"text": f"d{n}"},
    "subclass": lambda n: _MyPart(text=f"s{n}"),
    "constructed": lambda n: types.Part.model_construct(text=f"c{n}"),
    "text beside a call": lambda n: types.Part(text=f"x{n}", function_call=types.FunctionCall(name="g")),
    "signature only": lambda n: types.Part(thought_signature=b"sig"),
}


def _chunk(parts: list[Any], index: int = 0) -> Any:
    content = (
        types.Content.model_construct(parts=parts, role="model")
        if any(isinstance(p, dict) for p in parts)
        else types.Content(parts=parts, role="model")
    )
    candidate = types.Candidate(content=content, index=index)
    return types.GenerateContentResponse(candidates=[candidate], response_id="r", model_version="m")


def _fold(chunks: list[Any], sizes: list[int]) -> GenerateContentAccumulator:
    """As the stream proxy folds: ``add`` until a chunk has output, then ``add_batch`` in batches of ``sizes``."""
    acc = GenerateContentAccumulator()
    index = 0
    for index, chunk in enumerate(chunks, 1):  # noqa: B007
        if acc.add(chunk):
            break
    rest, turn = chunks[index:], 0
    while rest:
        size = sizes[turn % len(sizes)]
        acc.add_batch(rest[:size])
        rest, turn = rest[size:], turn + 1
    return acc


def _assert_general(acc: GenerateContentAccumulator, parts: list[Any]) -> list[Any]:
    """The candidate's output parts are the general path's over ``parts``, and its JSON text the same."""
    expected = parts_of(merge_streamed_calls(list(parts)))
    messages = acc.outcome().output_messages
    assert messages is not None
    got = messages[0]["parts"]
    assert got == expected
    assert json.dumps(got, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)  # key order too
    return got


def test_random_streams_of_plain_and_other_parts_end_in_the_general_paths_parts() -> None:
    rng = random.Random(2814)
    plain, other = sorted(PLAIN), sorted(OTHER)
    for trial in range(400):
        odds = rng.choice([0.0, 0.02, 0.1, 0.4])
        chunks_parts = []
        for n in range(rng.randint(1, 40)):
            count = rng.choice([1, 1, 1, 1, 2, 3])
            names = [rng.choice(other) if rng.random() < odds else rng.choice(plain) for _ in range(count)]
            chunks_parts.append([(PLAIN | OTHER)[name](n * 3 + i) for i, name in enumerate(names)])
        chunks = [_chunk(parts) for parts in chunks_parts]
        sizes = [rng.randint(1, 9) for _ in range(3)]
        _assert_general(_fold(chunks, sizes), [p for parts in chunks_parts for p in parts]), (trial, sizes)


@pytest.mark.parametrize("shape", sorted(OTHER))
def test_another_part_after_runs_of_both_kinds_keeps_the_runs_and_their_order(shape: str) -> None:
    texts = [types.Part(text="a"), types.Part(text="b", thought=True), types.Part(text="", thought=True)]
    tail = [types.Part(text="c", thought=True), types.Part(text="d"), types.Part(text="e")]
    parts = [*texts, OTHER[shape](1), *tail]
    for sizes in ([1], [2], [64]):
        got = _assert_general(_fold([_chunk([p]) for p in parts], sizes), parts)
        assert got  # never empty: text came before and after
    # the other part inside a chunk of several parts, plain ones before and after it
    _assert_general(_fold([_chunk(parts[:2]), _chunk(parts[2:5]), _chunk(parts[5:])], [64]), parts)


def test_an_empty_or_text_free_stream_and_odd_chunks_match_the_general_path() -> None:
    assert _assert_general(_fold([_chunk([types.Part(text="")])], [64]), [types.Part(text="")]) == []
    sig = OTHER["signature only"](0)
    assert _assert_general(_fold([_chunk([sig]), _chunk([types.Part(text="a")])], [64]), [sig, types.Part(text="a")])
    # a chunk whose candidate has no content, and one with an empty parts list, between plain ones
    acc = GenerateContentAccumulator()
    acc.add(_chunk([types.Part(text="x")]))
    empty = types.GenerateContentResponse(candidates=[types.Candidate(index=0, finish_reason="STOP")])
    acc.add_batch([empty, _chunk([]), _chunk([types.Part(text="y")])])
    assert _assert_general(acc, [types.Part(text="x"), types.Part(text="y")]) == [{"type": "text", "content": "xy"}]


def test_outcome_twice_gives_equal_parts_that_are_not_shared() -> None:
    acc = _fold([_chunk([types.Part(text="a", thought=True)]), _chunk([types.Part(text="b")])], [64])
    first, second = acc.outcome().output_messages, acc.outcome().output_messages
    assert first == second
    assert first is not None and second is not None
    assert first[0]["parts"][0] is not second[0]["parts"][0]


@pytest.mark.parametrize(("path", "index"), GOOGLE, ids=[f"{p.relative_to(FIXTURES)}-{i}" for p, i in GOOGLE])
def test_every_recorded_stream_ends_in_the_general_paths_parts(path: Path, index: int) -> None:
    chunks = _google_chunks(load_cassette(path)[index])
    by_candidate: dict[int, list[Any]] = {}
    for chunk in chunks:
        for candidate in chunk.candidates or ():
            parts = candidate.content.parts if candidate.content is not None else None
            by_candidate.setdefault(candidate.index or 0, []).extend(parts or ())
    for sizes in ([1], [16], [64]):
        acc = _fold(chunks, sizes)
        messages = acc.outcome().output_messages
        assert messages is not None
        for message, key in zip(messages, sorted(by_candidate), strict=True):
            expected = parts_of(merge_streamed_calls(by_candidate[key]))
            assert message["parts"] == expected
            assert json.dumps(message["parts"]) == json.dumps(expected)
