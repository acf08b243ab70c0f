"""Overhead of the Anthropic instrumentation: ``python benchmarks/bench_anthropic.py``.

The real ``anthropic`` client answered in-process by a mock transport (the replies of
``tests/fixtures/anthropic``), in three modes measured in the same run:

  none       the uninstrumented client, its own built-in tracing off (``open_telemetry=False``)
  sdk-own    the client's own built-in OpenTelemetry spans (anthropic >= 2 traces itself unless told not to;
             ``instrument_anthropic()`` turns that off on the clients it traces, so one call makes one span)
  floor      a minimal hand-written span patch of ``Messages.create`` (span made current, model, id, usage;
             streams end the span when exhausted): the least any tracing can cost
  evaltrace  ``instrument_anthropic()`` with content capture on (messages, output, cost, usage details)

Per call: a non-streamed ``messages.create``. Per chunk: the slope between a 20-event and a 200-event stream
(text deltas), divided by the 180 extra events. Rounds are interleaved (every mode once per round, rotating the
order), the cyclic GC is off inside timed windows, times are process CPU time, and medians of the rounds are
reported with their ratios to ``none`` and to ``floor``. ``BENCH_ROUNDS`` sets the number of rounds (default 15).
Spans go to a TracerProvider without processors: export costs the same in every mode and is not measured.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from anthropic.resources.messages import Messages
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from evaltrace.instrumentation.anthropic import instrument_anthropic, uninstrument_anthropic

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
CALLS = 60
STREAMS = 6
_clock = time.process_time
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "anthropic"
MESSAGES = [{"role": "user", "content": "What's the weather in Paris today? Answer in one sentence."}]
TEXT = (FIXTURES / "text.json").read_bytes()


def _stream_body(deltas: int) -> list[bytes]:
    head, *_ = (FIXTURES / "stream_text.sse").read_text(encoding="utf-8").split("\n\n")
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word "}}
    events = [
        head,
        'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        '"content_block": {"type": "text", "text": ""}}',
        *[f"event: content_block_delta\ndata: {json.dumps(delta)}" for _ in range(deltas)],
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}',
        'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn", '
        '"stop_sequence": null}, "usage": {"output_tokens": ' + str(deltas) + "}}",
        'event: message_stop\ndata: {"type": "message_stop"}',
    ]
    return [(e + "\n\n").encode() for e in events]


class _Events(httpx2.SyncByteStream):
    def __init__(self, events: list[bytes]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[bytes]:
        yield from self.events


def _client(*, own_spans: bool) -> anthropic.Anthropic:
    streams = {20: _stream_body(20), 200: _stream_body(200)}

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body.get("stream"):
            events = streams[int(body["metadata"]["user_id"])]
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Events(events))
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=TEXT)

    http = httpx2.Client(transport=httpx2.MockTransport(handle), base_url="https://api.anthropic.com")
    if own_spans:
        return anthropic.Anthropic(api_key="bench", http_client=http, max_retries=0)
    return anthropic.Anthropic(api_key="bench", http_client=http, max_retries=0, open_telemetry=False)


def _floor_patch(provider: TracerProvider) -> Callable[[], None]:
    """Patch Messages.create with the least tracing can do; returns the undo."""
    tracer = provider.get_tracer("floor")
    original = Messages.create

    def create(self: Messages, *args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(f"chat {kwargs.get('model')}", end_on_exit=False) as span:
            result = original(self, *args, **kwargs)
            if kwargs.get("stream"):

                def events() -> Iterator[Any]:
                    try:
                        yield from result
                    finally:
                        span.end()

                return events()
            span.set_attribute("gen_ai.response.id", result.id)
            span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
            span.end()
            return result

    Messages.create = create  # type: ignore[method-assign]

    def undo() -> None:
        Messages.create = original  # type: ignore[method-assign]

    return undo


def _calls(client: anthropic.Anthropic) -> float:
    start = _clock()
    for _ in range(CALLS):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES)  # type: ignore[arg-type]
    return (_clock() - start) / CALLS


def _streams(client: anthropic.Anthropic, deltas: int) -> float:
    start = _clock()
    for _ in range(STREAMS):
        stream = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            metadata={"user_id": str(deltas)},
        )
        for _event in stream:
            pass
    return (_clock() - start) / STREAMS


def _measure(client: anthropic.Anthropic) -> tuple[float, float]:
    gc.collect()
    gc.disable()
    try:
        per_call = _calls(client)
        per_chunk = (_streams(client, 200) - _streams(client, 20)) / 180
    finally:
        gc.enable()
    return per_call, per_chunk


def main() -> None:
    """Run the rounds and print medians and ratios."""
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    quiet, own = _client(own_spans=False), _client(own_spans=True)
    Mode = tuple[anthropic.Anthropic, Callable[[], None], Callable[[], None]]
    modes: dict[str, Mode] = {}
    undo_floor: list[Callable[[], None]] = []
    modes["none"] = (quiet, lambda: None, lambda: None)
    modes["sdk-own"] = (own, lambda: None, lambda: None)
    modes["floor"] = (quiet, lambda: undo_floor.append(_floor_patch(provider)), lambda: undo_floor.pop()())
    modes["evaltrace"] = (quiet, lambda: instrument_anthropic(tracer_provider=provider), uninstrument_anthropic)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in modes}
    names = list(modes)
    _measure(quiet)  # warm-up: imports, pydantic caches
    _measure(own)
    for round_index in range(ROUNDS):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            client, setup, teardown = modes[name]
            setup()
            try:
                results[name].append(_measure(client))
            finally:
                teardown()
    call = {n: statistics.median(r[0] for r in results[n]) for n in names}
    chunk = {n: statistics.median(r[1] for r in results[n]) for n in names}
    print(f"anthropic {anthropic.__version__}; {ROUNDS} rounds, medians of process CPU time")
    print(f"{'mode':<10} {'per call':>10} {'x none':>7} {'x floor':>8} {'per chunk':>10} {'added/chunk':>12}")
    for name in names:
        print(
            f"{name:<10} {call[name] * 1e6:>8.1f}µs {call[name] / call['none']:>7.2f} "
            f"{call[name] / call['floor']:>8.2f} {chunk[name] * 1e6:>8.2f}µs "
            f"{(chunk[name] - chunk['none']) * 1e6:>10.2f}µs"
        )
    added = call["evaltrace"] - call["none"]
    floor_added = call["floor"] - call["none"]
    print(f"evaltrace adds {added * 1e6:.1f} µs per call (floor patch: {floor_added * 1e6:.1f} µs)")


if __name__ == "__main__":
    main()
