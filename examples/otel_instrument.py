"""Zero-code tracing: ``opentelemetry-instrument`` loads evaltrace's OpenAI instrumentor from its entry point.

What it shows: this app never imports evaltrace. Run under ``opentelemetry-instrument``, every
``chat.completions.create`` still becomes a ``chat {model}`` span with evaltrace's attributes (tokens, cost,
streaming timings, the prompt and the answer). With evaltrace alone, its distro runs ``evaltrace.configure()``
from the environment: the span goes to the local store (``evaltrace traces list``), or wherever
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_TRACES_EXPORTER`` say. With ``opentelemetry-distro`` installed too, that
one sets the SDK up, as before.

Offline (default), the client talks to a replay server on 127.0.0.1 (``_replay.py``) that answers with a real
recorded stream (``recordings/test_chat_completion_streaming.yaml``, or the cassette in
``EVALTRACE_EXAMPLE_CASSETTE``). ``--also-instrument`` calls ``evaltrace.instrument_openai()`` as well, as an app
that was instrumented by hand would: the spans are not doubled.

Run:
    opentelemetry-instrument python examples/otel_instrument.py && evaltrace traces list
    # with opentelemetry-distro installed, print the spans instead:
    OTEL_TRACES_EXPORTER=console OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \\
        opentelemetry-instrument python examples/otel_instrument.py
    # disable ours only: OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=evaltrace_openai
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import openai
from _replay import RECORDINGS, ReplayServer

MODEL = "gpt-4"
QUESTION = "Say this is a test"


def main() -> None:
    if "--also-instrument" in sys.argv:
        import evaltrace

        evaltrace.instrument_openai()
    cassette = Path(os.environ.get("EVALTRACE_EXAMPLE_CASSETTE") or RECORDINGS / "test_chat_completion_streaming.yaml")
    with ReplayServer(cassette) as server:
        client = openai.OpenAI(api_key="replay", base_url=server.base_url, max_retries=0)
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            stream_options={"include_usage": True},
        )
        answer = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        client.close()
    print(f"answer: {answer}", file=sys.stderr)  # stdout is left to the console span exporter


if __name__ == "__main__":
    main()
