"""A Gemini response's usage reads the same from the SDK model's ``__dict__`` as through the general reader.

``usage_of`` reads the SDK's own ``GenerateContentResponseUsageMetadata`` (every response and stream chunk) from
its ``__dict__`` in one frame; anything else (dicts, ``UsageMetadata``, subclasses, a model built without every
field) goes through ``read``. A model's ``model_dump()`` is a dict of its fields by their SDK names, which the
general reader reads as the model's own fields, so ``usage_of(model) == usage_of(model.model_dump())`` for each.

Shapes: every chunk of every recorded Google stream (the real SDK parsing the replayed response), and the recorded
stream served again with its ``usageMetadata`` edited to each shape the API documents and no recording holds
(no candidates count, thoughts, a server tool's prompt, cached content, counts by modality, zeros, absent fields).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from test_provider_batch_fold import GOOGLE, _google_chunks

from cassettes import FIXTURES, load_cassette
from evaltrace._internal.engine.outcome import Usage
from evaltrace.instrumentation.google_genai import response as google_response
from evaltrace.instrumentation.google_genai.response import usage_of
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator

types = pytest.importorskip("google.genai.types")  # an optional extra: not in CI's oldest-versions environment


def _assert_same(metadata: Any) -> Usage | None:
    expected = usage_of(metadata.model_dump())  # the general reader, over the same fields
    got = usage_of(metadata)
    assert got == expected
    return got


@pytest.mark.parametrize(("path", "index"), GOOGLE, ids=[f"{p.relative_to(FIXTURES)}-{i}" for p, i in GOOGLE])
def test_every_recorded_chunk_s_usage_reads_as_the_general_reader_reads_it(path: Path, index: int) -> None:
    chunks = _google_chunks(load_cassette(path)[index])
    usages = [chunk.usage_metadata for chunk in chunks if chunk.usage_metadata is not None]
    assert usages
    for usage in usages:
        assert type(usage) is types.GenerateContentResponseUsageMetadata  # the fast path's own type
        _assert_same(usage)


EDITED: dict[str, dict[str, Any]] = {
    "no candidates count": {"promptTokenCount": 7, "totalTokenCount": 7},
    "thoughts": {"promptTokenCount": 7, "candidatesTokenCount": 5, "thoughtsTokenCount": 30, "totalTokenCount": 42},
    "thoughts only": {"promptTokenCount": 7, "thoughtsTokenCount": 30},
    "a server tool's prompt": {
        "promptTokenCount": 7,
        "candidatesTokenCount": 5,
        "toolUsePromptTokenCount": 11,
        "toolUsePromptTokensDetails": [{"modality": "TEXT", "tokenCount": 11}],
        "totalTokenCount": 23,
    },
    "a server tool's prompt, no prompt count": {"toolUsePromptTokenCount": 11},
    "cached content": {
        "promptTokenCount": 700,
        "candidatesTokenCount": 5,
        "cachedContentTokenCount": 512,
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 512}],
        "totalTokenCount": 705,
    },
    "counts by modality": {
        "promptTokenCount": 300,
        "candidatesTokenCount": 20,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 42}, {"modality": "IMAGE", "tokenCount": 258}],
        "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 20}],
        "totalTokenCount": 320,
        "trafficType": "ON_DEMAND",
    },
    "zeros": {"promptTokenCount": 0, "candidatesTokenCount": 0, "thoughtsTokenCount": 0, "totalTokenCount": 0},
    "empty": {},
}


def _edited(item: Any, usage: dict[str, Any]) -> Any:
    """``item`` (a recorded stream) with each event's ``usageMetadata`` replaced by ``usage``."""
    lines = []
    for line in item.body.split(b"\n"):
        if line.startswith(b"data: "):
            event = json.loads(line[6:])
            if "usageMetadata" in event:
                event["usageMetadata"] = usage
            line = b"data: " + json.dumps(event).encode()
        lines.append(line)
    return dataclasses.replace(item, body=b"\n".join(lines))


@pytest.mark.parametrize("shape", list(EDITED))
def test_each_usage_shape_served_through_the_sdk_reads_as_the_general_reader_reads_it(shape: str) -> None:
    path, index = GOOGLE[0]
    chunks = _google_chunks(_edited(load_cassette(path)[index], EDITED[shape]))
    usages = [chunk.usage_metadata for chunk in chunks if chunk.usage_metadata is not None]
    assert usages
    for usage in usages:
        got = _assert_same(usage)
        assert got is not None
    acc = GenerateContentAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    assert acc.outcome().usage == usage_of(usages[-1].model_dump())
    assert acc.summary()[1:] == (got.input_tokens, got.output_tokens)


def test_the_fast_path_reads_the_values_the_api_sent() -> None:
    """Not only the same as the general reader: the inclusive counts of the module's docstring."""
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=7, candidates_token_count=5, thoughts_token_count=30, tool_use_prompt_token_count=11,
        cached_content_token_count=4,
    )  # fmt: skip
    assert usage_of(usage) == Usage(input_tokens=18, output_tokens=35, cached_tokens=4, reasoning_tokens=30)


def test_other_types_and_models_without_every_field_take_the_general_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    class Sub(types.GenerateContentResponseUsageMetadata):  # type: ignore[misc,name-defined]
        pass

    built = types.GenerateContentResponseUsageMetadata.model_construct(prompt_token_count=3)
    del built.__dict__["thoughts_token_count"]  # a model without one of its fields (getattr reads it as None)
    shapes = [
        Sub(prompt_token_count=3, candidates_token_count=2),
        types.UsageMetadata(prompt_token_count=3, response_token_count=4),  # the newer model: response tokens
        built,
        {"promptTokenCount": 3, "candidatesTokenCount": 2},
    ]
    expected = [
        Usage(input_tokens=3, output_tokens=2),
        Usage(input_tokens=3, output_tokens=4),
        Usage(input_tokens=3),
        Usage(input_tokens=3, output_tokens=2),
    ]
    assert [usage_of(s) for s in shapes] == expected
    # and the fast path is taken for the SDK's own type (a reader that refused it would still pass the above)
    read: list[Any] = []
    general = google_response.read
    monkeypatch.setattr(google_response, "read", lambda *a: read.append(a) or general(*a))
    assert usage_of(types.GenerateContentResponseUsageMetadata(prompt_token_count=3)) == Usage(input_tokens=3)
    assert read == []
    assert usage_of(built) == Usage(input_tokens=3)
    assert read  # built without every field: the general reader
