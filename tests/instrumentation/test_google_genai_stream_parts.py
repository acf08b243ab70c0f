"""A Google Gen AI stream's parts become the same GenAI parts through ``stream_parts`` as through the general path.

At the end of a stream each candidate's kept SDK ``Part``s (one per chunk) are turned into GenAI parts.
``stream_parts`` reads a run of text and thought pieces from the instances' ``__dict__`` and joins each run once;
any other part sends the whole list through ``parts_of(merge_streamed_calls(...))``. For every recorded Google
stream (the real SDK parsing the replayed response) and for the part shapes no recording holds (function calls,
streamed argument pieces, blobs, empty pieces, dicts, subclasses, parts built without every field), both must give
equal parts, written out as the same JSON (key order included), so no recorded attribute changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_provider_batch_fold import GOOGLE, _google_chunks

from cassettes import FIXTURES, load_cassette
from evaltrace.instrumentation.google_genai.parts import parts_of
from evaltrace.instrumentation.google_genai.stream import (
    GenerateContentAccumulator,
    merge_streamed_calls,
    stream_parts,
)

types = pytest.importorskip("google.genai.types")  # an optional extra: not in CI's oldest-versions environment


def _assert_same(parts: list[Any]) -> list[Any]:
    expected = parts_of(merge_streamed_calls(list(parts)))
    got = stream_parts(list(parts))
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # the recorded attribute is this JSON: key order too
    return got


@pytest.mark.parametrize(("path", "index"), GOOGLE, ids=[f"{p.relative_to(FIXTURES)}-{i}" for p, i in GOOGLE])
def test_every_recorded_stream_ends_in_the_parts_of_the_general_path(path: Path, index: int) -> None:
    acc = GenerateContentAccumulator()
    for chunk in _google_chunks(load_cassette(path)[index]):
        acc.add(chunk)
    assert acc.candidates
    for candidate in acc.candidates.values():
        _assert_same(candidate.parts)


def _text(text: str | None, thought: bool | None = None) -> Any:
    return types.Part(text=text, thought=thought)


def test_runs_of_text_and_thought_are_joined_as_the_general_path_joins_them() -> None:
    parts = [
        _text("Let me "),
        _text("", thought=True),  # empty: shows nothing, does not end the run
        _text("think.", thought=True),
        _text(" More.", thought=True),
        _text(""),
        _text("Answer: "),
        _text("42", thought=False),
        _text("no", thought=None),
        _text("Again", thought=True),
        _text(""),  # an empty text piece inside a thought: still one reasoning part
        _text(" and again", thought=True),
    ]
    got = _assert_same(parts)
    assert [p["type"] for p in got] == ["text", "reasoning", "text", "reasoning"]
    assert got[2]["content"] == "Answer: 42no"
    assert got[3]["content"] == "Again and again"
    assert _assert_same([]) == []
    assert _assert_same([_text(""), _text("")]) == []


def test_any_other_part_sends_the_whole_list_through_the_general_path() -> None:
    call = types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Paris"}))
    piece = types.Part(
        function_call=types.FunctionCall(
            name="f", partial_args=[types.PartialArg(json_path="$.city", string_value="Par")], will_continue=True
        )
    )
    last = types.Part(
        function_call=types.FunctionCall(partial_args=[types.PartialArg(json_path="$.city", string_value="is")])
    )
    blob = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))

    class MyPart(types.Part):  # type: ignore[misc, name-defined]
        pass

    shapes: list[list[Any]] = [
        [_text("Checking "), call, _text("done")],
        [_text("a"), piece, _text("b"), last, _text("c")],  # streamed argument pieces around text
        [_text("see "), blob],
        [_text("a"), {"text": "b"}, _text("c")],
        [_text("a"), MyPart(text="b"), _text("c")],
        [_text("a"), types.Part.model_construct(text="b"), _text("c")],  # built without the other fields
        [types.Part(text="a", function_call=types.FunctionCall(name="g"))],  # text beside a call
    ]
    for parts in shapes:
        _assert_same(parts)
    merged = _assert_same(shapes[1])
    assert [p["type"] for p in merged] == ["text", "tool_call", "text"]  # the last piece joins the call
    assert merged[1]["arguments"] == {"city": "Paris"}
