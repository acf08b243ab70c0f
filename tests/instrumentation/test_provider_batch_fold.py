"""The batch fold of the Groq, Mistral and Google Gen AI stream accumulators records what ``add`` records.

The stream proxy folds the chunks after the first one with output through ``add_batch``, which reads the common
chunk from the SDK instances' ``__dict__`` and sends every other chunk through ``add``. For every streamed
recording of these providers in tests/fixtures, the real SDK parses the replayed stream (``ReplayServer``) and the
chunks are folded both ways: the outcome, the end reason, the summary and the failure must be equal. A test fails
when the fast path takes a chunk it reads differently from ``add``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator
from evaltrace.instrumentation.groq.stream import GroqStreamAccumulator
from evaltrace.instrumentation.mistral.stream import MistralStreamAccumulator


def _streamed(provider: str, marker: bytes, uri_part: str = "") -> list[tuple[Path, int]]:
    """(cassette, index) of every recorded interaction of ``provider`` whose response body contains ``marker`` (and
    whose URI contains ``uri_part``).

    Each cassette is parsed once here: this runs at collection, in every xdist worker.
    """
    found = []
    for path in sorted((FIXTURES / f"{provider}-cassettes").rglob("*.yaml")):
        for index, item in enumerate(load_cassette(path)):
            if item.status == 200 and marker in item.body and uri_part in item.uri:
                found.append((path, index))
    return found


def _drain(stream: Any) -> list[Any]:
    """The chunks the SDK yields, up to an error it raises for an error event inside the stream."""
    chunks: list[Any] = []
    try:
        for chunk in stream:
            chunks.append(chunk)
    except Exception:  # the recorded failure itself: what arrived before it is folded
        pass
    return chunks


def _groq_chunks(item: Recorded) -> list[Any]:
    groq = pytest.importorskip("groq")  # an optional extra: not in CI's oldest-versions environment

    with ReplayServer([item]) as server:
        kwargs = dict(item.request_json())
        kwargs.pop("stream", None)
        with groq.Groq(api_key="test", base_url=server.url, max_retries=0) as client:  # its connections closed here
            return _drain(client.chat.completions.create(**kwargs, stream=True))


def _mistral_chunks(item: Recorded) -> list[Any]:
    pytest.importorskip("mistralai")
    from mistralai.client import Mistral

    with ReplayServer([item]) as server:
        kwargs = dict(item.request_json())
        kwargs.pop("stream", None)
        with Mistral(api_key="test", server_url=server.url) as client:  # its connections closed here
            return _drain(client.chat.stream(**kwargs))


def _google_chunks(item: Recorded) -> list[Any]:
    pytest.importorskip("google.genai")
    from google import genai
    from google.genai import types

    vertex = "aiplatform" in item.uri
    with ReplayServer([item]) as server:
        options = types.HttpOptions(base_url=server.url)
        if vertex:
            from google.oauth2.credentials import Credentials

            client = genai.Client(
                vertexai=True,
                project="test-project",
                location="test-location",
                credentials=Credentials(token="test-token"),  # type: ignore[no-untyped-call]
                http_options=options,
            )
        else:
            client = genai.Client(api_key="test-key", http_options=options)
        model = item.uri.rsplit("/", 1)[1].split(":", 1)[0]
        with client:  # its connections closed here, not by the garbage collector (a ResourceWarning at exit)
            return _drain(client.models.generate_content_stream(model=model, contents="x"))


GROQ = _streamed("groq", b"chat.completion.chunk")
MISTRAL = _streamed("mistral", b"chat.completion.chunk", "api.mistral.ai")
GOOGLE = _streamed("google-genai", b"data: ", ":streamGenerateContent")

CASES: list[tuple[str, Path, int, Callable[[Recorded], list[Any]], Callable[[], Any]]] = [
    *(("groq", p, i, _groq_chunks, GroqStreamAccumulator) for p, i in GROQ),
    *(("mistral", p, i, _mistral_chunks, MistralStreamAccumulator) for p, i in MISTRAL),
    *(("google", p, i, _google_chunks, GenerateContentAccumulator) for p, i in GOOGLE),
]


def _record(acc: Any) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def test_every_provider_has_streamed_recordings() -> None:
    assert len(GROQ) >= 3 and len(MISTRAL) >= 3 and len(GOOGLE) >= 3, (len(GROQ), len(MISTRAL), len(GOOGLE))


@pytest.mark.parametrize(
    ("provider", "path", "index", "chunks_of", "make"),
    CASES,
    ids=[f"{c[0]}-{c[1].relative_to(FIXTURES)}-{c[2]}" for c in CASES],
)
@pytest.mark.parametrize("split", [1, 2])
def test_the_batch_fold_records_what_add_records(
    provider: str, path: Path, index: int, chunks_of: Callable[[Recorded], list[Any]], make: Any, split: int
) -> None:
    chunks = chunks_of(load_cassette(path)[index])
    assert chunks
    one_by_one = make()
    for chunk in chunks:
        one_by_one.add(chunk)
    batched = make()
    for chunk in chunks[:split]:  # the proxy adds until the first chunk with output, then folds in batches
        batched.add(chunk)
    rest = chunks[split:]
    batched.add_batch(rest[: len(rest) // 2])
    batched.add_batch(rest[len(rest) // 2 :])
    assert _record(batched) == _record(one_by_one)
