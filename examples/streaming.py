"""Streaming a chat completion, and the streaming metrics evaltrace records for it; offline by default.

What it shows: with ``evaltrace.instrument_openai()`` a streamed ``chat.completions.create(stream=True)`` is
traced without changing how you consume it. The span ends when the stream is exhausted (or closed, or fails)
and carries the time to the first chunk, the chunk count, output tokens per second and whether the stream
completed; with ``stream_options={"include_usage": True}`` it also has the token usage from the last chunk.
The example prints the chunks as they arrive, then reads those attributes back from an in-memory exporter
(the same span also goes to the local store: ``evaltrace traces show last``).

Offline (default), the OpenAI client talks to a replay server on 127.0.0.1 (``_replay.py``) that streams a real
recorded response (``recordings/test_chat_completion_streaming.yaml``), one event every 50 ms. With a key it
streams from the real API instead.

Run:
    python examples/streaming.py                                 # replayed, no network, no key
    OPENAI_API_KEY=sk-... python examples/streaming.py --live    # the real API (or EVALTRACE_EXAMPLE_LIVE=1)
    evaltrace traces show last --details
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import openai
from _replay import RECORDINGS, ReplayServer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace

MODEL = "gpt-4"  # the recorded request's model
PROMPT = "Say this is a test"
METRICS = [  # (attribute, label, format)
    ("gen_ai.response.time_to_first_chunk", "time to first chunk", "{:.3f} s"),
    ("evaltrace.stream.time_to_last_chunk", "time to last chunk", "{:.3f} s"),
    ("evaltrace.stream.chunks", "chunks", "{}"),
    ("gen_ai.usage.output_tokens", "output tokens", "{}"),
    ("evaltrace.stream.output_tokens_per_second", "output tokens/s", "{:.1f}"),
    ("evaltrace.stream.completed", "completed", "{}"),
    ("evaltrace.stream.end_reason", "end reason", "{}"),
]


def live_requested() -> bool:
    """The real API is used only when asked for (``--live`` / ``EVALTRACE_EXAMPLE_LIVE=1``) and a key is set."""
    asked = "--live" in sys.argv[1:] or os.environ.get("EVALTRACE_EXAMPLE_LIVE") == "1"
    if asked and not os.environ.get("OPENAI_API_KEY"):
        sys.exit("--live needs OPENAI_API_KEY; without it the example replays the recording")
    return asked


@contextlib.contextmanager
def openai_client(live: bool) -> Iterator[openai.OpenAI]:
    """The real client, or one pointed at the local replay server."""
    if live:
        yield openai.OpenAI()
        return
    with ReplayServer(RECORDINGS / "test_chat_completion_streaming.yaml", event_delay=0.05) as server:
        yield openai.OpenAI(api_key="replay-needs-no-key", base_url=server.base_url, max_retries=0)


def main() -> None:
    live = live_requested()
    memory = InMemorySpanExporter()
    handle = evaltrace.configure(service_name="streaming-example", local_store=True, exporters=[memory], batch=False)
    evaltrace.instrument_openai()
    print(f"({'live OpenAI API' if live else 'replaying a recorded stream on 127.0.0.1'})")
    with openai_client(live) as client:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                print(chunk.choices[0].delta.content, end="", flush=True)
        print()
    stored = handle.force_flush()  # False when a span was lost (the WARNING above says why)
    chat_spans = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    if not chat_spans:
        sys.exit("no chat span was recorded: is the openai extra installed (pip install 'evaltrace[openai]')?")
    span = chat_spans[-1]
    attributes = span.attributes or {}
    print(f"\nStreaming metrics of span {span.name!r}:")
    for key, label, fmt in METRICS:
        value = attributes.get(key)
        print(f"  {label:<20} {'-' if value is None else fmt.format(value):<10} ({key})")
    handle.shutdown()
    if not stored:
        sys.exit("\nNOT all written to .evaltrace/traces.sqlite3: see the warning above")
    print("\nTrace written to .evaltrace/traces.sqlite3 — see it with: evaltrace traces show last --details")


if __name__ == "__main__":
    main()
