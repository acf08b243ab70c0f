"""Streamed Anthropic calls: ``create(stream=True)`` and the ``messages.stream()`` helper, every exit path."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, Reply, attrs_json, client  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from evaltrace.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402

REQUEST: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "Hello"}]}
ANSWER = "Hello! How can I help you today?"


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[AnthropicInstrumentor]:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")


async def _stream(api: Any, is_async: bool) -> Any:
    result = api.messages.create(**REQUEST, stream=True)
    return await result if is_async else result


async def _events(stream: Any, is_async: bool, limit: int | None = None) -> list[Any]:
    events: list[Any] = []
    if is_async:
        async for event in stream:
            events.append(event)
            if limit is not None and len(events) >= limit:
                break
    else:
        for event in stream:
            events.append(event)
            if limit is not None and len(events) >= limit:
                break
    return events


def _span(exporter: InMemorySpanExporter) -> Any:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]  # ended exactly once
    return spans[0]


def _output_text(span: Any) -> str:
    parts = attrs_json(span, "gen_ai.output.messages")[0]["parts"]
    return "".join(p["content"] for p in parts if p["type"] == "text")


async def test_stream_read_to_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    stream = await _stream(api, is_async)
    assert isinstance(stream, anthropic.AsyncStream if is_async else anthropic.Stream)  # the proxy keeps the type
    assert not exporter.get_finished_spans()  # open while the stream is
    events = await _events(stream, is_async)
    assert [e.type for e in events][-1] == "message_stop"

    span = _span(exporter)
    a = span.attributes
    assert a["gen_ai.request.stream"] is True
    assert a["evaltrace.stream.completed"] is True
    assert a["evaltrace.stream.end_reason"] == "exhausted"
    assert a["evaltrace.stream.chunks"] == len(events)
    assert 0 < a["gen_ai.response.time_to_first_chunk"] <= a["evaltrace.stream.time_to_last_chunk"]
    assert "langfuse.observation.completion_start_time" in a
    assert a["gen_ai.response.id"] == "msg_01StreamText00000001"
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (25, 15)
    assert _output_text(span) == ANSWER
    assert span.status.status_code is StatusCode.UNSET


async def test_streamed_tool_input_is_parsed(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_tool.sse")], is_async)
    await _events(await _stream(api, is_async), is_async)
    message = attrs_json(_span(exporter), "gen_ai.output.messages")[0]
    assert message["finish_reason"] == "tool_call"
    assert message["parts"][1] == {
        "type": "tool_call",
        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "name": "get_weather",
        "arguments": {"location": "San Francisco, CA"},
    }


async def test_streamed_thinking_stays_out_of_the_answer(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_thinking.sse")], is_async)
    await _events(await _stream(api, is_async), is_async)
    span = _span(exporter)
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [
        {"type": "reasoning", "content": "I need to find the GCD of 1071 and 462 using the Euclidean algorithm."},
        {"type": "reasoning", "content": "", "redacted": True},
        {"type": "text", "content": "The greatest common divisor of 1071 and 462 is 21."},
    ]
    assert span.attributes["gen_ai.usage.input_tokens"] == 32 + 1200
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 1200


async def test_streamed_thinking_token_count_is_the_reasoning_count(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    api, _ = client([Reply("stream_thinking_tokens.sse")], is_async)
    await _events(await _stream(api, is_async), is_async)
    a = _span(exporter).attributes
    assert a["gen_ai.usage.output_tokens"] == 190  # thinking included, as the API counts it
    assert a["gen_ai.usage.reasoning.output_tokens"] == 121
    assert a["evaltrace.cost_thinking_usd"] > 0


async def test_break_inside_with_closes_early(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    stream = await _stream(api, is_async)
    if is_async:
        async with stream:
            await _events(stream, is_async, limit=4)
    else:
        with stream:
            await _events(stream, is_async, limit=4)
    a = _span(exporter).attributes
    assert a["evaltrace.stream.completed"] is False
    assert a["evaltrace.stream.end_reason"] == "closed_early"
    assert a["evaltrace.stream.chunks"] == 4  # the SDK drops ``ping``: start, block start, two deltas
    assert _output_text(_span(exporter)) == "Hello! How can I help"


async def test_close_before_the_end(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    stream = await _stream(api, is_async)
    await _events(stream, is_async, limit=1)
    if is_async:
        await stream.close()
    else:
        stream.close()
    assert _span(exporter).attributes["evaltrace.stream.end_reason"] == "closed_early"


async def test_never_iterated_stream_ends_when_collected(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    stream = await _stream(api, is_async)
    del stream
    gc.collect()
    a = _span(exporter).attributes
    assert a["evaltrace.stream.end_reason"] == "garbage_collected"
    assert a["evaltrace.stream.completed"] is False
    assert a["evaltrace.stream.chunks"] == 0


async def test_stream_cut_short_is_truncated(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_truncated.sse")], is_async)
    await _events(await _stream(api, is_async), is_async)
    span = _span(exporter)
    assert span.attributes["evaltrace.stream.completed"] is False
    assert span.attributes["evaltrace.stream.end_reason"] == "truncated"
    assert span.status.status_code is StatusCode.UNSET  # nothing was raised; what arrived is kept
    assert attrs_json(span, "gen_ai.output.messages")[0]["finish_reason"] == "error"
    assert _output_text(span) == "Hello! How can I help"


async def test_error_event_fails_the_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_error.sse")], is_async)
    stream = await _stream(api, is_async)
    with pytest.raises(anthropic.APIStatusError):
        await _events(stream, is_async)
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "overloaded_error"
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert span.attributes["evaltrace.stream.completed"] is False
    assert _output_text(span) == "Hello"  # what arrived before the error is kept


async def test_stream_helper_text_stream_and_final_message(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    manager = api.messages.stream(**REQUEST)
    assert not exporter.get_finished_spans()  # nothing sent before enter
    if is_async:
        async with manager as stream:
            texts = [t async for t in stream.text_stream]
            final = await stream.get_final_message()
    else:
        with manager as stream:
            texts = list(stream.text_stream)
            final = stream.get_final_message()
    assert "".join(texts) == ANSWER == final.content[0].text
    span = _span(exporter)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert span.attributes["gen_ai.usage.output_tokens"] == final.usage.output_tokens
    assert _output_text(span) == ANSWER


async def test_stream_helper_left_early(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    if is_async:
        async with api.messages.stream(**REQUEST) as stream:
            async for _ in stream:
                break
    else:
        with api.messages.stream(**REQUEST) as stream:
            for _ in stream:
                break
    assert _span(exporter).attributes["evaltrace.stream.end_reason"] == "closed_early"


async def test_stream_helper_parent_is_the_context_at_enter(
    is_async: bool, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    api, _ = client([Reply("stream_text.sse")], is_async)
    with provider.get_tracer("app").start_as_current_span("agent") as parent:
        if is_async:
            async with api.messages.stream(**REQUEST) as stream:
                await stream.until_done()
        else:
            with api.messages.stream(**REQUEST) as stream:
                stream.until_done()
    llm = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat "))
    assert llm.parent is not None and llm.parent.span_id == parent.get_span_context().span_id


class _PreemptedClock:
    """``time`` for the call module: its ``perf_counter`` reads a second early, as when the calling thread is
    preempted for a second between the call's own stamp and the span's start (seen under load)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def perf_counter() -> float:
        return time.perf_counter() - 1.0


async def test_time_to_first_chunk_never_exceeds_the_span_duration(
    is_async: bool, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaltrace._internal.anthropic import call as call_module

    monkeypatch.setattr(call_module, "time", _PreemptedClock())
    for _ in range(3):
        api, _ = client([Reply("stream_text.sse")], is_async)
        await _events(await _stream(api, is_async), is_async)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        a = span.attributes or {}
        duration = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
        ttfc = a["gen_ai.response.time_to_first_chunk"]
        assert 0 <= ttfc <= duration and ttfc <= a["evaltrace.stream.time_to_last_chunk"]


_RECORDED = ["stream_text.sse", "stream_tool.sse", "stream_thinking.sse", "stream_thinking_tokens.sse"]
_TIMING = (  # the attributes made of clock readings
    "gen_ai.response.time_to_first_chunk",
    "evaltrace.stream.time_to_last_chunk",
    "evaltrace.stream.output_tokens_per_second",
    "langfuse.observation.completion_start_time",
)


class _Observer:
    """anthropic's ``StreamObserver`` protocol (``begin``, ``item``, ``end``), recording the items it is told of."""

    def __init__(self, events: list[Any], fail_at: int | None = None) -> None:
        self.events = events  # what the loop's body has got so far
        self.seen: list[Any] = []
        self.fail_at = fail_at

    def begin(self) -> None:
        pass

    def item(self, item: object) -> None:
        assert len(self.seen) == len(self.events)  # told before the loop's body gets the item
        if len(self.seen) == self.fail_at:
            raise _ObserverFailed
        self.seen.append(item)

    def end(self, how: str, error: BaseException | None = None) -> None:
        pass


class _ObserverFailed(Exception):
    pass


def _read_observed(api: Any, through_sdk_iter: bool) -> tuple[list[Any], list[Any], int]:
    """Read one stream with a ``for`` loop, an observer on its response; (events, observed, SDK __iter__ frames)."""
    import sys

    stream = api.messages.create(**REQUEST, stream=True)
    events: list[Any] = []
    observer = _Observer(events)
    stream.__wrapped__.response.stream.stream_observer = observer
    if through_sdk_iter:  # a subclass whose __iter__ is not the recognised shape: read through iter() as before

        class _Counted(anthropic.Stream):  # type: ignore[misc]
            def __iter__(self) -> Iterator[Any]:
                yield from super().__iter__()

        stream.__wrapped__.__class__ = _Counted
    iter_code = anthropic.Stream.__iter__.__code__
    resumed: list[int] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is iter_code:
            resumed.append(1)

    sys.setprofile(profile)
    try:
        for event in stream:
            events.append(event)
    finally:
        sys.setprofile(None)
    return events, observer.seen, len(resumed)


@pytest.mark.parametrize("recorded", _RECORDED)
def test_a_for_loop_reads_the_sdk_streams_parser_and_still_notifies_its_observer(
    recorded: str, exporter: InMemorySpanExporter
) -> None:
    """anthropic's ``Stream.__iter__`` re-yields ``_iterator`` and tells the response's ``stream_observer`` of each
    item. The proxy's loop does both itself (``EventStreamProxy``): no ``Stream.__iter__`` frame is resumed per
    event, the observer still sees every event, in order, before the application does, and the span records
    exactly what the SDK's own ``__iter__`` path records (a subclass with another ``__iter__`` takes that path)."""
    api, _ = client([Reply(recorded), Reply(recorded)])
    events, seen, resumed = _read_observed(api, through_sdk_iter=False)
    assert resumed == 0
    assert seen == events and events[-1].type == "message_stop"
    direct = _span(exporter)
    exporter.clear()

    events_sdk, seen_sdk, resumed_sdk = _read_observed(api, through_sdk_iter=True)
    assert resumed_sdk == len(events_sdk) + 1  # the SDK's generator, resumed per event and once at its end
    assert seen_sdk == events_sdk and [e.to_dict() for e in events_sdk] == [e.to_dict() for e in events]
    through_iter = _span(exporter)
    for span in (direct, through_iter):
        assert span.attributes["evaltrace.stream.chunks"] == len(events)
        assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert {k: v for k, v in direct.attributes.items() if k not in _TIMING} == {
        k: v for k, v in through_iter.attributes.items() if k not in _TIMING
    }


def test_an_observer_that_raises_ends_the_stream_span_once_with_its_exception_unchanged(
    exporter: InMemorySpanExporter,
) -> None:
    """An exception from the observer is the stream's, as when the SDK's own ``__iter__`` raised it: it reaches
    the loop unchanged (the same object), and the span ends once, as an error, with the events the loop got."""
    api, _ = client([Reply("stream_text.sse")])
    stream = api.messages.create(**REQUEST, stream=True)
    events: list[Any] = []
    observer = _Observer(events, fail_at=3)
    stream.__wrapped__.response.stream.stream_observer = observer
    raised: list[BaseException] = []
    original = _Observer.item

    def item(self: _Observer, event: object) -> None:
        try:
            original(self, event)
        except _ObserverFailed as error:
            raised.append(error)
            raise

    observer.item = item.__get__(observer)  # type: ignore[method-assign]
    with pytest.raises(_ObserverFailed) as caught:
        for event in stream:
            events.append(event)
    assert raised == [caught.value]
    assert len(events) == 3
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["evaltrace.stream.end_reason"] == "error"
    assert span.attributes["evaltrace.stream.chunks"] == 3
    assert span.attributes["error.type"] == "_ObserverFailed"
    stream.close()  # a later close ends nothing more
    assert len(exporter.get_finished_spans()) == 1


def test_a_stream_class_with_its_own_observer_property_has_that_observer_told_of_every_event(
    exporter: InMemorySpanExporter,
) -> None:
    """The loop reads the observer with the SDK property's own two ``getattr`` only when the class's ``_observer``
    is that property; a subclass with another one keeps the SDK's ``__iter__`` shape and is read through its own
    property, per event, still with no ``Stream.__iter__`` frame."""
    import sys

    api, _ = client([Reply("stream_text.sse")])
    stream = api.messages.create(**REQUEST, stream=True)
    events: list[Any] = []
    observer = _Observer(events)

    class _OwnObserver(anthropic.Stream):  # type: ignore[misc]
        @property
        def _observer(self) -> Any:
            return observer

    stream.__wrapped__.__class__ = _OwnObserver
    iter_code = anthropic.Stream.__iter__.__code__
    resumed: list[int] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is iter_code:
            resumed.append(1)

    sys.setprofile(profile)
    try:
        for event in stream:
            events.append(event)
    finally:
        sys.setprofile(None)
    assert resumed == []
    assert observer.seen == events and events[-1].type == "message_stop"
    span = _span(exporter)
    assert span.attributes["evaltrace.stream.chunks"] == len(events)
    assert _output_text(span) == ANSWER


def test_the_observer_is_read_per_event_and_a_response_with_no_body_has_none_as_the_sdks_getter_says(
    exporter: InMemorySpanExporter,
) -> None:
    """The loop reads the response's body (``response.stream``) as an attribute, where the SDK's getter calls
    ``getattr(self.response, "stream", None)``: a response with no body means no observer (the getter's own
    answer, checked here), not an error, and an observer set on the body mid-stream is told of every later event,
    before the loop's body gets it. The span still records every event, once, as exhausted."""
    api, _ = client([Reply("stream_text.sse")])
    stream = api.messages.create(**REQUEST, stream=True)
    sdk_stream = stream.__wrapped__
    real = sdk_stream.response
    events: list[Any] = []
    told: list[tuple[int, Any]] = []
    ended: list[str] = []

    class _Told:
        def item(self, item: object) -> None:
            told.append((len(events), item))

        def end(self, how: str, error: BaseException | None = None) -> None:  # the SDK's parser tells it
            ended.append(how)

    class _NoBody:  # a response without the ``stream`` attribute
        pass

    getter = anthropic.Stream._observer.fget
    for event in stream:
        events.append(event)
        if len(events) == 2:
            sdk_stream.response = _NoBody()  # the parser already holds the real body
            assert getter(sdk_stream) is None
        elif len(events) == 4:
            sdk_stream.response = real
            real.stream.stream_observer = _Told()
    assert len(events) > 5 and events[-1].type == "message_stop"
    assert told == [(i, events[i]) for i in range(4, len(events))]  # each told before the loop's body got it
    assert ended == ["read"]
    span = _span(exporter)
    assert span.attributes["evaltrace.stream.chunks"] == len(events)
    assert span.attributes["evaltrace.stream.end_reason"] == "exhausted"
    assert _output_text(span) == ANSWER
    assert len(exporter.get_finished_spans()) == 1
