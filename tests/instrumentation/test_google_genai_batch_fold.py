"""The Google Gen AI batch fold takes only the common chunk, and records what ``add`` records for every other one.

``GenerateContentAccumulator.add_batch`` reads the common chunk (the SDK's own response, one candidate of the
SDK's own type filed under index 0, no prompt feedback) from the instances' ``__dict__``; it keeps candidate 0's
buffer and whether the response id and model are known across the batch. Every other chunk goes through ``add``.
The recorded streams (``test_provider_batch_fold.py``) hold common chunks only, so these streams are built from the
SDK's own types, with each shape the API can send beside them (no recording holds them inside a stream): a
subclass of each SDK type, two candidates, a lone candidate of index 1, prompt feedback, no candidate, no content,
a function call and inline data, other candidate fields, an id and model arriving late, usage absent.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_provider_batch_fold import GOOGLE, _google_chunks

from cassettes import FIXTURES, load_cassette
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator

types = pytest.importorskip("google.genai.types")  # an optional extra: not in CI's oldest-versions environment


class _Response(types.GenerateContentResponse):  # type: ignore[misc,name-defined]
    pass


class _Candidate(types.Candidate):  # type: ignore[misc,name-defined]
    pass


class _Content(types.Content):  # type: ignore[misc,name-defined]
    pass


def _usage(tokens: int) -> Any:
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=3, candidates_token_count=tokens, thoughts_token_count=2, total_token_count=tokens + 5
    )


def _content(text: str, thought: bool | None = None, content: type = types.Content) -> Any:
    return content(parts=[types.Part(text=text, thought=thought)], role="model")


def _chunk(
    *candidates: Any,
    response: type = types.GenerateContentResponse,
    rid: str | None = "resp-1",
    model: str | None = "gemini-x",
    usage: Any = "default",
    **extra: Any,
) -> Any:
    return response(
        candidates=list(candidates) if candidates else None,
        response_id=rid,
        model_version=model,
        usage_metadata=_usage(len(candidates) + 7) if usage == "default" else usage,
        **extra,
    )


def _common(text: str, thought: bool | None = None, index: int | None = 0, finish: str | None = None) -> Any:
    return _chunk(types.Candidate(content=_content(text, thought), index=index, finish_reason=finish))


# One factory per shape, each taking a number (to vary the text and the values).
SHAPES: dict[str, Any] = {
    "common": lambda n: _common(f"t{n} "),
    "common, no index": lambda n: _common(f"n{n} ", index=None),
    "common thought": lambda n: _common(f"th{n} ", thought=True),
    "common, empty text": lambda n: _common(""),
    "common, finish": lambda n: _common(f"f{n}", finish="STOP" if n % 2 else "MAX_TOKENS"),
    "no usage": lambda n: _chunk(types.Candidate(content=_content(f"u{n}"), index=0), usage=None),
    "no id or model": lambda n: _chunk(types.Candidate(content=_content(f"i{n}"), index=0), rid=None, model=None),
    "late id": lambda n: _chunk(types.Candidate(content=_content(f"l{n}"), index=0), rid=f"late-{n}", model=None),
    "no content": lambda n: _chunk(types.Candidate(index=0, finish_reason="STOP")),
    "no parts": lambda n: _chunk(types.Candidate(content=types.Content(role="model"), index=0)),
    "function call": lambda n: _chunk(
        types.Candidate(
            content=types.Content(
                parts=[types.Part(function_call=types.FunctionCall(name="f", args={"n": n}))], role="model"
            ),
            index=0,
        )
    ),
    "inline data": lambda n: _chunk(
        types.Candidate(
            content=types.Content(
                parts=[types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))], role="model"
            ),
            index=0,
        )
    ),
    "other candidate fields": lambda n: _chunk(
        types.Candidate(
            content=_content(f"o{n}"),
            index=0,
            finish_message="done",
            avg_logprobs=-0.5,
            safety_ratings=[types.SafetyRating(category="HARM_CATEGORY_HARASSMENT", probability="NEGLIGIBLE")],
        )
    ),
    "two candidates": lambda n: _chunk(
        types.Candidate(content=_content(f"a{n}"), index=0),
        types.Candidate(content=_content(f"b{n}"), index=1, finish_reason="STOP" if n % 3 == 0 else None),
    ),
    "lone candidate 1": lambda n: _chunk(types.Candidate(content=_content(f"c{n}"), index=1)),
    "prompt feedback": lambda n: _chunk(
        prompt_feedback=types.GenerateContentResponsePromptFeedback(block_reason="SAFETY")
    ),
    "no candidate": lambda n: _chunk(),
    "response subclass": lambda n: _chunk(
        types.Candidate(content=_content(f"r{n}"), index=0), response=_Response, rid="sub", model="sub-model"
    ),
    "candidate subclass": lambda n: _chunk(_Candidate(content=_content(f"s{n}"), index=0, finish_reason="STOP")),
    "content subclass": lambda n: _chunk(types.Candidate(content=_content(f"k{n}", content=_Content), index=0)),
}
UNCOMMON = {
    "two candidates",
    "lone candidate 1",
    "prompt feedback",
    "no candidate",
    "response subclass",
    "candidate subclass",
}


def _record(acc: Any) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure(), sorted(acc.candidates)


def _one_by_one(chunks: list[Any]) -> GenerateContentAccumulator:
    acc = GenerateContentAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    return acc


def _batched(chunks: list[Any], sizes: list[int], make: Any = GenerateContentAccumulator) -> Any:
    """As the stream proxy folds: ``add`` until a chunk has output, then ``add_batch`` in batches of ``sizes``."""
    acc = make()
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


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_among_common_chunks_records_what_add_records(shape: str) -> None:
    make = SHAPES[shape]
    chunks = [_common("first ")] + [make(n) if n % 3 == 1 else _common(f"w{n} ") for n in range(12)]
    chunks.append(_common("end", finish="STOP"))
    for sizes in ([1], [2], [3], [64]):
        assert _record(_batched(chunks, sizes)) == _record(_one_by_one(chunks)), sizes
    # The shape first in a batch, as the whole batch, and first of the stream (before the batches).
    for stream in ([_common("a"), make(0), _common("b")], [_common("a"), make(0), make(1)], [make(0), _common("c")]):
        assert _record(_batched(stream, [64])) == _record(_one_by_one(stream))


def test_random_streams_of_every_shape_record_what_add_records() -> None:
    rng = random.Random(28)
    names = sorted(SHAPES)
    for _ in range(300):
        chunks = [SHAPES[rng.choice(names)](n) for n in range(rng.randint(1, 30))]
        sizes = [rng.randint(1, 8) for _ in range(3)]
        assert _record(_batched(chunks, sizes)) == _record(_one_by_one(chunks)), ([type(c) for c in chunks], sizes)


class _Counting(GenerateContentAccumulator):
    """Counts the chunks that went through ``add`` (the general path)."""

    def __init__(self) -> None:
        super().__init__()
        self.general: list[Any] = []

    def add(self, chunk: Any) -> bool:
        self.general.append(chunk)
        return super().add(chunk)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_only_the_common_chunk_takes_the_fast_path(shape: str) -> None:
    odd = SHAPES[shape](5)
    chunks = [_common("x"), _common("y"), odd, _common("z")]
    acc = _Counting()
    acc.add(chunks[0])
    acc.general.clear()
    acc.add_batch(chunks[1:])
    assert [id(chunk) for chunk in acc.general] == ([id(odd)] if shape in UNCOMMON else [])


@pytest.mark.parametrize(("path", "index"), GOOGLE, ids=[f"{p.relative_to(FIXTURES)}-{i}" for p, i in GOOGLE])
def test_every_chunk_of_the_recorded_streams_takes_the_fast_path(path: Path, index: int) -> None:
    chunks = _google_chunks(load_cassette(path)[index])
    acc = _batched(chunks, [64], _Counting)
    first = next((i for i, chunk in enumerate(chunks, 1) if GenerateContentAccumulator().add(chunk)), len(chunks))
    # ``add`` until the first chunk with output (as the proxy), and for no chunk of the batches
    assert [id(chunk) for chunk in acc.general] == [id(chunk) for chunk in chunks[:first]]
    assert _record(acc) == _record(_one_by_one(chunks))
