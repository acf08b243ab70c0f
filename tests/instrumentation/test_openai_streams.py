"""Streaming: reasoning shapes the recordings lack, and every exit path of the stream proxy.

SSE bodies are built from the openai package's own types (``model_dump_json``), never hand-written JSON.
"""

from __future__ import annotations

import contextlib
import gc
import json
import threading
import weakref
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai_langfuse_usage import langfuse_usage
from openai_replay import Interaction, attribute, client, drain, import_or_skip, load, skip_unless_api, sse_interaction
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests_paths import CASSETTE_DIR

pytestmark = pytest.mark.usefixtures("instrumented")

CHAT = "/v1/chat/completions"


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None) -> ChatCompletionChunk:
    choices = [] if delta is None else [Choice(index=0, delta=ChoiceDelta(**delta), finish_reason=finish)]
    return ChatCompletionChunk(
        id="chatcmpl-synthetic",
        object="chat.completion.chunk",
        created=1,
        model="deepseek-reasoner",
        choices=choices,
        usage=usage,
    )


def _usage(prompt: int, completion: int, cached: int, reasoning: int) -> dict[str, Any]:
    # As on the wire: typed by clients that know the *_tokens_details fields, pydantic extras for older ones.
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


async def _stream_chat(items: list[Interaction], is_async: bool, base_url: str = "https://api.deepseek.com/v1") -> Any:
    api, _ = client(items, is_async, base_url=base_url)
    result = api.chat.completions.create(
        model="deepseek-reasoner", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return await result if is_async else result


def _output(exporter: InMemorySpanExporter) -> tuple[Any, list[dict[str, Any]]]:
    (span,) = exporter.get_finished_spans()
    return span, json.loads(span.attributes["gen_ai.output.messages"])


@pytest.mark.parametrize(
    ("field", "other"),
    [("reasoning_content", None), ("reasoning", None), ("reasoning_content", "reasoning")],
)
async def test_reasoning_deltas_become_a_reasoning_part(
    field: str, other: str | None, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    thinking = [{field: "Think", **({other: "IGNORED"} if other else {})}, {field: "ing."}]
    chunks = [
        _chunk({"role": "assistant", **thinking[0]}),
        _chunk(thinking[1]),
        _chunk({"content": "Hello"}),
        _chunk({}, finish="stop"),
        _chunk(None, usage=_usage(10, 20, 4, 12)),
    ]
    await drain(await _stream_chat([sse_interaction(CHAT, chunks)], is_async), is_async)
    span, messages = _output(exporter)
    assert messages == [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "Thinking."}, {"type": "text", "content": "Hello"}],
            "finish_reason": "stop",
        }
    ]
    attrs = span.attributes
    assert attrs["gen_ai.provider.name"] == "deepseek"
    assert attrs["server.address"] == "api.deepseek.com"
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 12
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 4
    assert langfuse_usage(attrs) == {
        "input": 6,
        "input_cached_tokens": 4,
        "output": 8,
        "output_reasoning_tokens": 12,
    }
    assert attrs["evaltrace.stream.output_tokens_per_second"] > 0
    if pytest.importorskip("genai_prices"):  # deepseek-reasoner is priced by genai-prices, for the deepseek host
        assert attrs["evaltrace.cost_thinking_usd"] > 0
        assert attrs["evaltrace.cost_usd"] > attrs["evaltrace.cost_thinking_usd"]


async def test_think_tags_are_moved_out_of_the_answer(is_async: bool, exporter: InMemorySpanExporter) -> None:
    deltas = ["<think>plan the", " reply</think>", "The answer", " is 4."]
    chunks = [_chunk({"content": d}) for d in deltas] + [_chunk({}, finish="stop")]
    await drain(await _stream_chat([sse_interaction(CHAT, chunks)], is_async), is_async)
    _, (message,) = _output(exporter)
    assert message["parts"] == [
        {"type": "reasoning", "content": "plan the reply"},
        {"type": "text", "content": "The answer is 4."},
    ]


async def test_tool_call_deltas_tolerate_none_arguments(is_async: bool, exporter: InMemorySpanExporter) -> None:
    def call(index: int, args: str | None, **first: Any) -> ChatCompletionChunk:
        fn = ChoiceDeltaToolCallFunction(arguments=args, name=first.get("name"))
        return _chunk({"tool_calls": [ChoiceDeltaToolCall(index=index, id=first.get("id"), function=fn)]})

    chunks = [
        call(0, None, id="call_a", name="get_weather"),
        call(1, None, id="call_b", name="broken"),
        call(0, '{"city": '),
        call(1, '{"city": '),
        call(0, '"Paris"}'),
        _chunk({}, finish="tool_calls"),
    ]
    await drain(await _stream_chat([sse_interaction(CHAT, chunks)], is_async), is_async)
    span, (message,) = _output(exporter)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert message == {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"type": "tool_call", "id": "call_b", "name": "broken", "arguments": '{"city": '},
        ],
        "finish_reason": "tool_call",
    }
    assert "gen_ai.usage.input_tokens" not in span.attributes  # no include_usage chunk


def _responses_stream_with_reasoning() -> Interaction:
    """The recorded Responses stream, with reasoning-summary deltas and a reasoning item added (SDK types)."""
    ResponseReasoningItem, ResponseReasoningSummaryTextDeltaEvent = import_or_skip(
        "openai.types.responses", "ResponseReasoningItem", "ResponseReasoningSummaryTextDeltaEvent"
    )
    (Summary,) = import_or_skip("openai.types.responses.response_reasoning_item", "Summary")

    item = load(CASSETTE_DIR / "test_responses_create_streaming[content_mode0].yaml")[0]
    events = item.sse_events()
    summary = ResponseReasoningSummaryTextDeltaEvent(
        type="response.reasoning_summary_text.delta",
        item_id="rs_1",
        output_index=0,
        summary_index=0,
        delta="Short plan.",
        sequence_number=1,
        obfuscation=None,
    )
    reasoning = ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="Short plan.")]
    )
    final = events[-1]
    final["response"]["output"].insert(0, reasoning.model_dump(mode="json", exclude_unset=True))
    return sse_interaction("/v1/responses", [events[0], summary, *events[1:]], item.request)


@pytest.mark.openai_api("responses")
@pytest.mark.usefixtures("cassettes")
async def test_responses_stream_reasoning_summary(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item = _responses_stream_with_reasoning()
    api, _ = client([item], is_async)
    stream = api.responses.create(**item.request)
    await drain(await stream if is_async else stream, is_async)
    _, (message,) = _output(exporter)
    assert message["parts"][0] == {"type": "reasoning", "content": "Short plan."}
    assert message["parts"][1]["type"] == "text"
    assert message["finish_reason"] == "stop"


@pytest.mark.openai_api("responses")
@pytest.mark.usefixtures("cassettes")
async def test_responses_stream_closed_early_keeps_partial_output(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    item = _responses_stream_with_reasoning()
    api, _ = client([item], is_async)
    stream = api.responses.create(**item.request)
    stream = await stream if is_async else stream
    seen = 0
    if is_async:
        async with stream:
            async for event in stream:
                seen += 1
                if event.type == "response.output_text.delta":
                    break
    else:
        with stream:
            for event in stream:
                seen += 1
                if event.type == "response.output_text.delta":
                    break
    span, (message,) = _output(exporter)
    assert span.attributes["evaltrace.stream.completed"] is False
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
    assert span.attributes["evaltrace.stream.chunks"] == seen
    assert message["parts"][0] == {"type": "reasoning", "content": "Short plan."}
    assert message["finish_reason"] == "error"
    assert "gen_ai.response.finish_reasons" not in span.attributes


def _simple_stream(n: int = 4) -> Interaction:
    chunks = [_chunk({"content": f"w{i} "}) for i in range(n)] + [_chunk({}, finish="stop")]
    return sse_interaction(CHAT, chunks)


async def _exit(stream: Any, how: str, is_async: bool) -> None:
    """Leave ``stream`` the way a user might."""
    if how == "break_in_with":
        if is_async:
            async with stream as entered:
                async for _ in entered:
                    break
        else:
            with stream as entered:
                for _ in entered:
                    break
    elif how == "close_after_two":
        for _ in range(2):
            await anext(stream) if is_async else next(stream)
        await stream.close() if is_async else stream.close()
    elif how == "exhausted_then_close":
        await drain(stream, is_async)
        await stream.close() if is_async else stream.close()


@pytest.mark.parametrize(
    ("how", "reason", "chunks"),
    [
        ("break_in_with", "closed_early", 1),
        ("close_after_two", "closed_early", 2),
        ("exhausted_then_close", "exhausted", 5),
    ],
)
async def test_stream_exit_paths_end_the_span_once(
    how: str, reason: str, chunks: int, is_async: bool, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    stream = await _stream_chat([_simple_stream()], is_async)
    await _exit(stream, how, is_async)
    await stream.close() if is_async else stream.close()  # a second exit must not end the span again
    del stream
    gc.collect()
    # The SDK logs (and ignores) a second end(); there must be none.
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.end_reason"] == reason
    assert span.attributes["evaltrace.stream.completed"] is (reason == "exhausted")
    assert span.attributes["evaltrace.stream.chunks"] == chunks
    assert span.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("iterated", [0, 1])
async def test_abandoned_stream_ends_on_garbage_collection(
    iterated: int, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    stream = await _stream_chat([_simple_stream()], is_async)
    for _ in range(iterated):
        await anext(stream) if is_async else next(stream)
    assert exporter.get_finished_spans() == ()
    del stream
    gc.collect()
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.end_reason"] == "garbage_collected"
    assert span.attributes["evaltrace.stream.completed"] is False
    assert span.attributes["evaltrace.stream.chunks"] == iterated
    assert ("gen_ai.response.time_to_first_chunk" in span.attributes) is bool(iterated)


class NetworkDropped(Exception):
    pass


@pytest.mark.parametrize(("how", "read"), [("exhausted", 151), ("abandoned", 100), ("error", 130)])
async def test_a_stream_longer_than_a_batch_keeps_every_chunk_on_every_exit(
    how: str, read: int, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The proxy holds chunks and folds them in by batches of 64: none is lost or counted twice, whatever the exit."""
    item = _simple_stream(150)
    boom = NetworkDropped("connection reset")
    if how == "error":
        item.fail_after, item.error = read, boom
    stream = await _stream_chat([item], is_async)
    if how == "abandoned":
        for _ in range(read):
            await anext(stream) if is_async else next(stream)
        del stream
        gc.collect()
    elif how == "error":
        with pytest.raises(NetworkDropped):
            await drain(stream, is_async)
    else:
        assert len(await drain(stream, is_async)) == read
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == read
    reason = {"exhausted": "exhausted", "abandoned": "garbage_collected", "error": "error"}[how]
    assert span.attributes["evaltrace.stream.end_reason"] == reason
    text = "".join(f"w{i} " for i in range(min(read, 150)))
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]


async def test_an_unnamed_stream_is_not_collected_while_a_loop_reads_it(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``for chunk in client.create(stream=True)`` keeps no name for the proxy: the loop's iterator holds it."""
    api, _ = client([_simple_stream(80)], is_async)
    kwargs: dict[str, Any] = {"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "hi"}]}
    read = 0
    if is_async:
        async for _ in await api.chat.completions.create(stream=True, **kwargs):
            gc.collect()
            read += 1
    else:
        for _ in api.chat.completions.create(stream=True, **kwargs):
            gc.collect()
            read += 1
    (span,) = exporter.get_finished_spans()
    assert read == 81
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert span.attributes["evaltrace.stream.chunks"] == 81


async def test_exception_mid_stream_is_recorded_and_reraised_unchanged(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    item = _simple_stream()
    boom = NetworkDropped("connection reset")
    item.fail_after, item.error = 2, boom
    stream = await _stream_chat([item], is_async)
    with pytest.raises(NetworkDropped) as caught:
        await drain(stream, is_async)
    assert caught.value is boom
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "NetworkDropped"
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert span.attributes["evaltrace.stream.completed"] is False
    assert span.attributes["evaltrace.stream.chunks"] == 2
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "w0 w1 "}]


async def test_proxy_keeps_the_stream_type(is_async: bool, exporter: InMemorySpanExporter) -> None:
    stream = await _stream_chat([_simple_stream()], is_async)
    assert isinstance(stream, openai.AsyncStream if is_async else openai.Stream)
    assert type(stream).__name__ in ("SyncStreamProxy", "AsyncStreamProxy")
    await drain(stream, is_async)


# stream() lived under client.beta until it moved to client.chat.completions; users call whichever their openai has.
@pytest.mark.parametrize("resource", ["chat.completions", "beta.chat.completions"])
async def test_chat_stream_helper_is_traced_once(resource: str, is_async: bool, exporter: InMemorySpanExporter) -> None:
    skip_unless_api(f"{resource}.stream")
    api, _ = client([_simple_stream()], is_async, base_url="https://api.groq.com/openai/v1")
    manager = attribute(api, f"{resource}.stream")(model="llama", messages=[{"role": "user", "content": "hi"}])
    if is_async:
        async with manager as stream:
            async for _ in stream:
                break
    else:
        with manager as stream:
            for _ in stream:
                break
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.provider.name"] == "groq"
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"


@pytest.mark.openai_api("responses.stream")
@pytest.mark.usefixtures("cassettes")
async def test_responses_stream_helper_is_traced_once(is_async: bool, exporter: InMemorySpanExporter) -> None:
    item = load(CASSETTE_DIR / "test_responses_create_streaming_iteration[content_mode0].yaml")[0]
    api, _ = client([item], is_async)
    request = {k: v for k, v in item.request.items() if k != "stream"}
    manager = api.responses.stream(**request)
    if is_async:
        async with manager as stream:
            final = await stream.get_final_response()
    else:
        with manager as stream:
            final = stream.get_final_response()
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.id"] == final.id
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"


def test_a_close_from_another_thread_waits_for_the_batch_being_folded(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    """``close()`` on another thread while the reading thread folds chunks into the accumulator (a batch, or one).

    Before, the span ended half-way through the batch: the count had the whole batch, the recorded output only the
    chunks folded so far (and the rest were folded into an ended span's accumulator). Now the close waits for the
    batch, so every counted chunk is in the output. The fold is caught in the middle through the reasoning reader it
    calls for a delta that is not plain text (chunk 30, with a refusal).
    """
    from evaltrace._internal.openai import accumulate

    chunks = [_chunk({"content": f"w{i} ", **({"refusal": "no"} if i == 30 else {})}) for i in range(150)]
    stream: Any = None  # the closure below closes it; set once it exists
    closed_during_fold: list[bool] = []
    closer: list[threading.Thread] = []
    real_extra = accumulate.reasoning_extra

    def extra_then_close(delta: Any) -> Any:
        if not closer and delta.refusal:  # chunk 30, in the middle of its batch: close from another thread
            done = threading.Event()
            thread = threading.Thread(target=lambda: (stream.close(), done.set()))
            closer.append(thread)
            thread.start()
            closed_during_fold.append(done.wait(0.5))
        return real_extra(delta)

    monkeypatch.setattr(accumulate, "reasoning_extra", extra_then_close)
    api, _ = client([sse_interaction(CHAT, [*chunks, _chunk({}, finish="stop")])], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    read = 0
    with contextlib.suppress(Exception):  # the SDK's own error for a response closed under it, if it comes first
        for _ in stream:
            read += 1
    closer[0].join(10)
    assert closed_during_fold == [False]
    (span,) = exporter.get_finished_spans()
    counted = span.attributes["evaltrace.stream.chunks"]
    assert 31 <= counted <= read  # chunk 30 is in; so are those read before the close took its turn
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    text = [p["content"] for p in message["parts"] if p["type"] == "text"]
    # The sync loop folds a plain text chunk without the lock (chat_stream.chat_chunks), so the reading thread may
    # read to the end before the close takes its turn: then the finish chunk (no text) is counted too.
    assert text == ["".join(f"w{i} " for i in range(min(counted, len(chunks))))]
    finished = counted == len(chunks) + 1  # the finish chunk folded in: the server's "stop" is recorded
    # A stream that lost its finish chunk records the missing reason as "error" (openai.parts.output_message).
    assert message["finish_reason"] == ("stop" if finished else "error")
    # A close before the finish chunk was folded ends the span early. Once it is in, the reading thread may still
    # be reading the stream's end ([DONE]) when the close takes its turn: exhausted, or closed early just before.
    end_reason = span.attributes["evaltrace.stream.end_reason"]
    assert end_reason in ("exhausted", "closed_early") if finished else end_reason == "closed_early"


async def test_a_response_kept_after_its_stream_was_dropped_does_not_keep_the_stream_alive(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The proxy binds the wrapped stream's ``__next__`` / ``__anext__`` in its state; ``stream.response`` closes
    the span through that state. Before, the response held the state strongly, so a caller keeping only the
    response (to read its headers) kept the SDK stream, its generator and its buffers alive.
    """
    stream = await _stream_chat([_simple_stream()], is_async)
    response = stream.response
    wrapped = weakref.ref(stream.__wrapped__)
    del stream
    gc.collect()
    assert wrapped() is None
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.end_reason"] == "garbage_collected"
    await response.aclose() if is_async else response.close()  # the span has ended: nothing more happens
    assert len(exporter.get_finished_spans()) == 1


def test_a_for_loop_reads_the_sdk_streams_own_generator_with_no_stream_iter_frame(
    exporter: InMemorySpanExporter,
) -> None:
    """openai's ``Stream.__iter__`` only re-yields its ``_iterator``: the proxy's loop reads that generator itself.

    Before, every chunk resumed ``Stream.__iter__``'s generator frame on top of ours (a frame the uninstrumented
    ``for`` pays instead of ours). The profiler sees each resume of a generator as a call of its code.
    """
    import sys

    api, _ = client([_simple_stream(100)], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    iter_code = openai.Stream.__iter__.__code__
    resumed: list[int] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is iter_code:
            resumed.append(1)

    sys.setprofile(profile)
    try:
        chunks = list(stream)
    finally:
        sys.setprofile(None)
    assert resumed == []
    assert [c.choices[0].delta.content for c in chunks[:100]] == [f"w{i} " for i in range(100)]
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == 101
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    text = "".join(f"w{i} " for i in range(100))
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]


def test_a_stream_class_whose_iter_does_more_than_re_yield_is_read_through_it(exporter: InMemorySpanExporter) -> None:
    """A subclass (or SDK version) whose ``__iter__`` does anything more per item keeps doing it under the proxy."""
    from evaltrace._internal.engine.stream import _inner_iterator

    class Observed(openai.Stream[Any]):
        seen: list[Any]

        def __iter__(self) -> Any:
            for item in self._iterator:
                self.seen.append(item)
                yield item

    plain = object.__new__(openai.Stream)
    plain._iterator = iter([1, 2])
    assert list(_inner_iterator(plain) or ()) == [1, 2]  # recognised: the generator itself is read
    observed = object.__new__(Observed)
    observed._iterator = iter([1, 2])
    assert _inner_iterator(observed) is None
    no_inner = object.__new__(openai.Stream)
    assert _inner_iterator(no_inner) is None  # no ``_iterator``: read through iter(), which raises as it would

    api, _ = client([_simple_stream(3)], False)
    raw = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    raw.__wrapped__.__class__ = Observed  # what the SDK would return for a stream class of its own
    raw.__wrapped__.seen = []
    chunks = list(raw)
    assert raw.__wrapped__.seen == chunks
    assert len(chunks) == 4
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == 4


async def test_a_chat_stream_holds_at_most_16_chunks_and_records_them_all(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """Chat chunks are folded every 16 (the accumulator's ``batch_size``), not every 64: a held chunk keeps a dozen
    objects alive, which cost the allocator more per chunk than the extra fold calls. The sync ``for`` loop holds no
    plain text chunk at all (``chat_stream.chat_chunks`` folds it in as it arrives); the async one holds up to 16.
    Every chunk is still counted and in the output."""
    stream = await _stream_chat([_simple_stream(100)], is_async)
    state = stream._self_state
    held: list[int] = []
    if is_async:
        async for _ in stream:
            held.append(len(state.pending or ()))
    else:
        for _ in stream:
            held.append(len(state.pending or ()))
    # async: the 16th chunk read triggers the fold before the loop sees it; sync: only the finish chunk is held
    assert max(held) == (15 if is_async else 1)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.chunks"] == 101
    text = "".join(f"w{i} " for i in range(100))
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]


def test_a_close_from_another_thread_during_the_first_chunks_fold_counts_only_chunks_in_the_output(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    """The first chunk with output is folded in as it arrives (under the stream's lock), before any batch is held.

    A ``close()`` from another thread at that moment waits for that fold; the chunks the reading thread holds by the
    time the close takes the lock are folded in and counted, the later ones neither. However many that is (it
    depends on thread timing), every counted chunk is in the recorded output. This is where
    ``test_a_close_from_another_thread_waits_for_the_batch_being_folded`` closed before its trigger waited for
    chunk 30: the first chunk's fold reads reasoning too, so its close came at chunk 0, and its count (17 to 65
    seen) followed which thread got the lock first, not the batch size.
    """
    from evaltrace._internal.openai import accumulate

    chunks = [_chunk({"content": f"w{i} "}) for i in range(150)]
    stream: Any = None  # the closure below closes it; set once it exists
    fired_on: list[Any] = []
    closed_during_fold: list[bool] = []
    closer: list[threading.Thread] = []
    real_extra = accumulate.reasoning_extra

    def extra_then_close(delta: Any) -> Any:
        if not closer:  # the first delta that reaches the reasoning reader: chunk 0, folded in as it arrives
            fired_on.append(delta.content)
            done = threading.Event()
            thread = threading.Thread(target=lambda: (stream.close(), done.set()))
            closer.append(thread)
            thread.start()
            closed_during_fold.append(done.wait(0.5))
        return real_extra(delta)

    monkeypatch.setattr(accumulate, "reasoning_extra", extra_then_close)
    api, _ = client([sse_interaction(CHAT, [*chunks, _chunk({}, finish="stop")])], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    read = 0
    with contextlib.suppress(Exception):  # the SDK's own error for a response closed under it, if it comes first
        for _ in stream:
            read += 1
    closer[0].join(10)
    assert fired_on == ["w0 "]
    assert closed_during_fold == [False]
    (span,) = exporter.get_finished_spans()
    counted = span.attributes["evaltrace.stream.chunks"]
    assert 1 <= counted <= read
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    text = [p["content"] for p in message["parts"] if p["type"] == "text"]
    assert text == ["".join(f"w{i} " for i in range(counted))]


def test_a_wrapped_or_replaced_stream_iter_is_called_under_the_proxy(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    """The re-yield shape is recognised on a plain function only, judged by the function the class has now.

    A wrapper around ``Stream.__iter__`` (wrapt's hands out the wrapped function's ``__code__``, so a check of the
    code alone would take it for the SDK's) is called as it is, and an ``__iter__`` replaced after a stream was
    read (another library patching it later) is the one the next stream goes through.
    """
    import wrapt

    api, _ = client([_simple_stream(3) for _ in range(3)], False)

    def create() -> Any:
        return api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)

    assert len(list(create())) == 4  # the SDK's own __iter__: recognised, and remembered
    instances: list[Any] = []

    def observing(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        instances.append(instance)
        return wrapped(*args, **kwargs)

    monkeypatch.setattr(openai.Stream, "__iter__", wrapt.FunctionWrapper(openai.Stream.__iter__, observing))
    stream = create()
    assert len(list(stream)) == 4
    assert instances == [stream.__wrapped__]

    seen: list[Any] = []

    def recording(self: Any) -> Any:
        for item in self._iterator:
            seen.append(item)
            yield item

    monkeypatch.setattr(openai.Stream, "__iter__", recording)
    assert list(create()) == seen
    assert len(seen) == 4
    spans = exporter.get_finished_spans()
    assert [s.attributes["evaltrace.stream.chunks"] for s in spans] == [4, 4, 4]
    assert [s.attributes["evaltrace.stream.end_reason"] for s in spans] == ["exhausted"] * 3


def test_an_exception_thrown_in_at_the_loops_yield_ends_nothing_until_the_stream_is_closed(
    exporter: InMemorySpanExporter,
) -> None:
    """An exception thrown into the proxy's loop at its ``yield`` is the consumer's, not the stream's.

    The loop tells the two apart by where the exception arose (the source, or its own body and ``yield``), with
    no flag set per chunk: here the consumer's exception comes out unchanged, the span stays open, and the
    ``close()`` that follows ends it once, as closed early, with every chunk read so far (past a batch fold).
    """
    api, _ = client([_simple_stream(40)], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    loop = iter(stream)
    read = [next(loop) for _ in range(20)]
    mine = KeyError("the consumer's")
    with pytest.raises(KeyError) as raised:
        loop.throw(mine)
    assert raised.value is mine
    assert exporter.get_finished_spans() == ()
    stream.close()
    (span,) = exporter.get_finished_spans()
    assert span.attributes["evaltrace.stream.end_reason"] == "closed_early"
    assert span.attributes["evaltrace.stream.chunks"] == len(read) == 20
    assert span.status.status_code is StatusCode.UNSET
    text = "".join(f"w{i} " for i in range(20))
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]


def test_a_stream_naming_its_response_only_after_its_first_batches_records_every_chunk(
    exporter: InMemorySpanExporter,
) -> None:
    """Chunks with output but an empty ``id`` (the response named late) are folded in full, header included.

    The batch fold reads no header per chunk: a batch that arrives while the response is still unnamed is folded
    through ``add``, chunk by chunk, so the id given 40 chunks in is recorded, and every chunk's text.
    """

    def chunk(i: int, response_id: str, finish: str | None = None) -> ChatCompletionChunk:
        delta = ChoiceDelta(content=f"w{i} ") if finish is None else ChoiceDelta()
        return ChatCompletionChunk(
            id=response_id,
            object="chat.completion.chunk",
            created=1,
            model="gpt-4o",
            choices=[Choice(index=0, delta=delta, finish_reason=finish)],
        )

    chunks = [chunk(i, "") for i in range(40)] + [chunk(40, "chatcmpl-late", "stop")]
    api, _ = client([sse_interaction(CHAT, chunks)], False)
    stream = api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert len(list(stream)) == 41
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-late"
    assert span.attributes["gen_ai.response.model"] == "gpt-4o"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert span.attributes["evaltrace.stream.chunks"] == 41
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    text = "".join(f"w{i} " for i in range(40))
    assert json.loads(span.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": text}]
