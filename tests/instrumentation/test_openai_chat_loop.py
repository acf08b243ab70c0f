"""The chat stream's ``for`` loop folds a plain text chunk in as it arrives, and records what ``next()`` records.

``chat_stream.chat_chunks`` (the ``for`` loop over an OpenAI chat stream) counts a plain text chunk and appends its
text at once, holding none of its objects; every other chunk is held and folded in batches as before. ``next()``
(``SyncStreamProxy.__next__``) still holds every chunk after the first with output. Each stream here goes through
the real ``openai`` client (edited JSON from the replay server) and the real instrumentation, read once with
``for`` and once with ``next()``: the two spans must carry the same attributes, timings aside. The streams: every
recorded chat stream, the recorded text stream with one chunk changed to every shape the SDK's types allow
(``test_openai_batch_fold.SHAPES``, but a list as content), and random mixes of those shapes.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import threading
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from openai_replay import client, sse_interaction
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_openai_batch_fold import RECORDED, SHAPES, _served, _shape_stream, _text_stream

from cassettes import Recorded, ReplayServer

pytestmark = pytest.mark.usefixtures("instrumented")

_TIMINGS = ("time", "duration", "ttf", "per_second")  # attribute names that carry clock readings
_APART = ("server.port",)  # each read has a replay server of its own


def _span(item: Recorded, exporter: InMemorySpanExporter, with_next: bool) -> dict[str, Any]:
    """The span's attributes, timings left out, for ``item`` read to its end with ``for`` or with ``next()``."""
    exporter.clear()
    kwargs = dict(item.request_json())
    kwargs["stream"] = True
    with ReplayServer([item]) as server, openai.OpenAI(api_key="test", base_url=server.url, max_retries=0) as client:
        stream = client.chat.completions.create(**kwargs)
        try:
            if with_next:
                while True:
                    next(stream)
            else:
                for _ in stream:
                    pass
        except StopIteration:
            pass
        except Exception:  # the recorded failure itself: the span records what arrived before it
            pass
    (span,) = exporter.get_finished_spans()
    return {k: v for k, v in span.attributes.items() if k not in _APART and not any(word in k for word in _TIMINGS)}


def _same_both_ways(item: Recorded, exporter: InMemorySpanExporter) -> dict[str, Any]:
    looped = _span(item, exporter, with_next=False)
    assert looped == _span(item, exporter, with_next=True)
    assert "evaltrace.stream.chunks" in looped
    return looped


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
def test_every_recorded_stream_records_the_same_with_for_and_with_next(
    name: str, item: Recorded, exporter: InMemorySpanExporter
) -> None:
    _same_both_ways(item, exporter)


# A list as ``content``: both ways fold it, and building the output then fails (an internal error, raised in tests).
_FOLDABLE = {name: change for name, change in SHAPES.items() if name != "non-text content"}


@pytest.mark.parametrize("shape", list(_FOLDABLE))
def test_every_chunk_shape_records_the_same_with_for_and_with_next(shape: str, exporter: InMemorySpanExporter) -> None:
    item, _ = _text_stream()
    _same_both_ways(_served(item, _shape_stream(_FOLDABLE[shape])), exporter)


def _edited(edit: str) -> list[dict[str, Any]]:
    """The recorded text stream edited as ``edit`` says (shapes a single-chunk change cannot make)."""
    _, template = _text_stream()
    chunks = copy.deepcopy(template)
    if edit == "usage on a text chunk":  # and no usage chunk after it, whose usage would hide a loss
        chunks = chunks[:-1]
        chunks[3]["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    else:  # "id only on a text chunk" / "model only ...": the header read from a plain text chunk, not the first
        for i, chunk in enumerate(chunks):
            if i != 3:  # every other chunk empty: the finish and usage chunks (held) would read it otherwise
                chunk["id" if edit == "id only on a text chunk" else "model"] = ""
    return chunks


@pytest.mark.parametrize("edit", ["usage on a text chunk", "id only on a text chunk", "model only on a text chunk"])
def test_edited_streams_record_the_same_with_for_and_with_next(edit: str, exporter: InMemorySpanExporter) -> None:
    """A text chunk that also carries usage, and a header (id, model) that only a plain text chunk carries.

    The loop folds a plain text chunk at once only without usage (else the usage would be lost: the fold's own
    path keeps it) and only once the accumulator has its header (else that chunk's id or model would not be read).
    Both ways must record the usage, the id and the model.
    """
    item, template = _text_stream()
    looped = _same_both_ways(_served(item, _edited(edit)), exporter)
    if edit == "usage on a text chunk":
        assert (looped["gen_ai.usage.input_tokens"], looped["gen_ai.usage.output_tokens"]) == (3, 2)
    else:
        assert looped["gen_ai.response.id"] == template[0]["id"]
        assert looped["gen_ai.response.model"] == template[0]["model"]


def test_random_mixes_of_shapes_record_the_same_with_for_and_with_next(exporter: InMemorySpanExporter) -> None:
    """Shapes mixed among 40 text chunks: the loop's buffer at hand and its held list across chunks of any kind."""
    item, template = _text_stream()
    opening, content, closing = template[0], template[1], template[-2:]
    changes = list(_FOLDABLE.values())
    rng = random.Random(2028)
    for _ in range(6):
        body = []
        for i in range(40):
            chunk = copy.deepcopy(content)
            chunk["choices"][0]["delta"]["content"] = f"w{i} "
            if rng.random() < 0.2:
                for key, value in rng.choice(changes).items():
                    if value is ...:
                        chunk.pop(key, None)
                    else:
                        chunk[key] = copy.deepcopy(value)
            body.append(chunk)
        _same_both_ways(_served(item, [opening, *body, *closing]), exporter)


def test_a_plain_text_chunk_is_folded_in_as_it_arrives_and_not_held(exporter: InMemorySpanExporter) -> None:
    """Nothing is held while the chunks are plain text; a chunk with more than text is held until its batch fold.

    Before, the loop held every chunk after the first with output (up to 16), keeping its pydantic objects alive
    while the SDK built the next ones. The count and the text are already the state's and the accumulator's.
    """
    item, template = _text_stream()
    opening, content, closing = template[0], template[1], template[-2:]
    body = []
    for i in range(40):
        chunk = copy.deepcopy(content)
        chunk["choices"][0]["delta"]["content"] = f"w{i} "
        if i == 30:
            chunk["choices"][0]["delta"]["refusal"] = "no"  # not plain text: held
        body.append(chunk)
    kwargs = dict(item.request_json())
    kwargs["stream"] = True
    served = _served(item, [opening, *body, *closing])
    with ReplayServer([served]) as server, openai.OpenAI(api_key="test", base_url=server.url, max_retries=0) as client:
        stream = client.chat.completions.create(**kwargs)
        state = stream._self_state
        held: list[int] = []
        counted: list[int] = []
        for _ in stream:
            held.append(len(state.pending or ()))
            counted.append(state.chunks)
    assert held[:31] == [0] * 31  # the role chunk (folded as it arrives), then 30 plain text chunks
    assert counted[:31] == list(range(1, 32))
    assert held[31:41] == list(range(1, 11))  # the refusal chunk, and every chunk after it until a batch fold
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == len(held) == 43
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"


def _words(span: Any) -> int:
    messages = json.loads(span.attributes.get("gen_ai.output.messages", "[]"))
    return sum(len(p["content"].split()) for m in messages for p in m["parts"] if p["type"] == "text")


def test_a_close_from_another_thread_between_the_checks_and_the_fold_leaves_the_chunk_out(
    exporter: InMemorySpanExporter,
) -> None:
    """Another thread's ``close()`` lands inside the loop's plain path, after ``state.pending`` was first read.

    The loop looks a choice's buffer up (``dict.get``, a call after which the interpreter may switch threads) after
    its first read of ``state.pending``. Here that lookup closes the stream from another thread, as a switch there
    could. Before, the chunk was then counted and appended after the span ended: the span recorded a count one
    short of the words in its output. Now ``pending`` is read again after the last call, so the chunk is left out:
    the span's count, its words and the accumulator's words agree.
    """
    chunks = [
        ChatCompletionChunk(
            id="chatcmpl-race",
            object="chat.completion.chunk",
            created=1,
            model="gpt-4o",
            choices=[Choice(index=i % 2, delta=ChoiceDelta(content=f"w{i} "), finish_reason=None)],
        )
        for i in range(200)
    ]  # two choices in turn: the buffer is looked up on every chunk
    api, _ = client([sse_interaction("/v1/chat/completions", chunks)], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    lookups = 0

    class _Closing(dict[int, Any]):
        def get(self, key: int, default: Any = None) -> Any:
            nonlocal lookups
            lookups += 1
            if lookups == 20:
                closer = threading.Thread(target=stream.close)
                closer.start()
                closer.join()
            return dict.get(self, key, default)

    acc = stream._self_state.acc
    acc.choices = _Closing(acc.choices)
    with contextlib.suppress(Exception):  # the SDK's own error for a response closed under it
        for _ in stream:
            pass
    assert lookups >= 20
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
    counted = span.attributes["evaltrace.stream.chunks"]
    folded = sum(len("".join(buffer.text).split()) for buffer in acc.choices.values())
    assert (counted, _words(span)) == (folded, folded)


def test_only_the_chat_accumulator_itself_loops_its_own_way_unless_a_subclass_opts_in() -> None:
    """The loop reads chunks as ``ChatAccumulator`` does: a subclass (LiteLLM's, Groq's) gets the engine's loop.

    Before, only a subclass overriding ``add`` or ``_add_delta`` was left out; one reading chunks another way
    (``_add_choice``, say) still got the chat loop. Now the loop is opt-in, and off on a free-threaded build.
    """
    from evaltrace._internal.openai import chat_stream
    from evaltrace._internal.openai.accumulate import ChatAccumulator
    from evaltrace.instrumentation.groq.stream import GroqStreamAccumulator

    class _Plain(ChatAccumulator):
        __slots__ = ()

    class _OptedIn(ChatAccumulator):
        __slots__ = ()
        stream_loop = staticmethod(chat_stream.chat_chunks)

    assert ChatAccumulator.stream_loop is (chat_stream.chat_chunks if chat_stream.GIL else None)
    assert _Plain.stream_loop is None
    assert GroqStreamAccumulator.stream_loop is None
    assert _OptedIn.stream_loop is chat_stream.chat_chunks
