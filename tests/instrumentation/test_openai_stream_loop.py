"""The ``for`` loop's generator over an OpenAI stream holds the batch list in a local, and still folds every chunk.

``engine.stream._chunks`` reads ``state.pending`` again only after a fold and while it is None; ``StreamState.flush``
empties the list in place. These tests mix ``next()`` into a ``for`` loop over the same stream (both read one
iterator and one held list) at the points where that matters: ``next()`` turning the fast path on (the first
chunk with output), ``next()`` folding a full batch, and a span ended from elsewhere while the loop holds chunks.
Every stream is the recorded ``test_chat_completion_streaming`` one, its content chunk repeated with numbered texts
(edited JSON, parsed by the real ``openai`` client from the replay server); the opening chunk of the "filtered"
streams is Azure OpenAI's ``prompt_filter_results`` chunk (no choices, empty id and model), which no recording here
holds: it is the shape ``ChatAccumulator.add`` documents.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette

pytestmark = pytest.mark.usefixtures("instrumented")

TEXT_STREAM = FIXTURES / "openai-cassettes" / "otel-contrib" / "test_chat_completion_streaming.yaml"
TEXTS = 40  # content chunks: more than two batches of 16


def _stream(filtered: bool) -> tuple[Recorded, list[str]]:
    """The recorded stream with ``TEXTS`` numbered content chunks (after an Azure filter chunk when ``filtered``)."""
    [item] = load_cassette(TEXT_STREAM)
    lines = [line for line in item.body.split(b"\n\n") if line.startswith(b"data: {")]
    recorded = [json.loads(line[len(b"data: ") :]) for line in lines]
    opening, content, closing = recorded[0], recorded[1], recorded[-2:]  # role chunk, a text chunk, finish + usage
    texts = [f"w{i} " for i in range(TEXTS)]
    body = []
    for text in texts:
        chunk = copy.deepcopy(content)
        chunk["choices"][0]["delta"]["content"] = text
        body.append(chunk)
    chunks = [opening, *body, *closing]
    if filtered:
        chunks.insert(
            0, {"id": "", "object": "", "created": 0, "model": "", "choices": [], "prompt_filter_results": []}
        )
    served = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    return dataclasses.replace(item, body=served), texts


def _read(item: Recorded, loop: Any) -> tuple[int, Any]:
    """Stream ``item`` through the instrumented client; ``loop(stream)`` reads it and returns how many it read."""
    kwargs = dict(item.request_json())
    kwargs["stream"] = True
    with ReplayServer([item]) as server, openai.OpenAI(api_key="test", base_url=server.url, max_retries=0) as client:
        stream = client.chat.completions.create(**kwargs)
        return loop(stream), stream


def _recorded(exporter: InMemorySpanExporter) -> tuple[Any, str]:
    (span,) = exporter.get_finished_spans()
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    return span, "".join(part["content"] for part in message["parts"] if part["type"] == "text")


@pytest.mark.parametrize("filtered", [False, True], ids=["recorded", "filter-chunk-first"])
@pytest.mark.parametrize(
    "nexts",
    [
        (0,),  # with the filter chunk first: ``next()`` reads the first chunk with output and turns the fast path on
        (0, 0),  # then ``next()`` holds a chunk: the loop's next one is held after it, not folded ahead of it
        (0, 1),
        (1, 2, 3),
        (13, 14, 15, 16, 17),  # ``next()`` folds a full batch: the loop's list is the one emptied
        tuple(range(0, 30, 3)),
    ],
)
def test_next_calls_inside_a_for_loop_fold_every_chunk_in_order(
    nexts: tuple[int, ...], filtered: bool, exporter: InMemorySpanExporter
) -> None:
    item, texts = _stream(filtered)

    def loop(stream: Any) -> int:
        read = 0
        for turn, _ in enumerate(stream):
            read += 1
            for _ in range(nexts.count(turn)):  # a turn listed twice calls ``next()`` twice
                next(stream)
                read += 1
        return read

    read, _ = _read(item, loop)
    span, text = _recorded(exporter)
    assert read == len(texts) + 3 + filtered  # the role chunk, the texts, the finish and usage chunks
    assert span.attributes["evaltrace.stream.chunks"] == read
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert text == "".join(texts)


@pytest.mark.parametrize("at", [5, 16, 20])
def test_a_span_ended_while_the_loop_holds_chunks_records_only_the_chunks_read_before(
    at: int, exporter: InMemorySpanExporter
) -> None:
    """What another thread's ``close()`` does to the span (its ``end``), done between two chunks of the loop.

    The loop holds the batch list in a local: the chunks it reads after the end are neither folded nor counted
    (as the proxy always did), the loop reads the stream to its end without error, and the span ended once.
    """
    item, texts = _stream(False)

    def loop(stream: Any) -> int:
        read = 0
        for _ in stream:
            read += 1
            if read == at:
                stream._self_state.end("closed_early")
        return read

    read, stream = _read(item, loop)
    span, text = _recorded(exporter)
    assert read == len(texts) + 3
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
    assert span.attributes["evaltrace.stream.chunks"] == at
    assert text == "".join(texts[: at - 1])  # the role chunk, then at - 1 texts
    assert stream._self_state.pending is None
