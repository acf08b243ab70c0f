"""Our per-event cost on an Anthropic stream without the client's own: the real ``anthropic.Stream``, events pre-built.

Run one child per (implementation, events) under callgrind (application thread: ``callgrind.out.<pid>-01``), counting
from the measured streams (``_callgrind.count_from_here`` / ``count_to_here``):

    EVALTRACE_CALLGRIND_FROM_COLLECT=1 PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes \\
        --instr-atstart=no python benchmarks/bench_anthropic_fold.py evaltrace 200 4

Per event added = (evaltrace 200 - evaltrace 20) - (none 200 - none 20), over 4 * 180 events. The SDK's
``Stream.__stream__`` (its SSE parsing and model construction, the bulk of the smoke row's ~2.5M instructions per
stream event) is replaced by a generator over events the real client parsed once at start (``smoke.py``'s client
and stream of text deltas, 20 warm-up streams), so what is left per event is the ``for`` loop, ``Stream.__iter__``
(or the proxy's own loop), our proxy and the fold: ``callgrind_annotate`` on the difference shows where our
instructions go, which the client hides in ``smoke.py --rows anthropic_stream_event``.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _callgrind
from bench_anthropic import MESSAGES, _client

MAX_EVENTS = 200  # the recorded stream's deltas: every child parses the same stream, whatever its length
WARM_UP = 20


def main() -> None:
    """``IMPL EVENTS STREAMS``: IMPL ``none`` or ``evaltrace`` (``instrument_anthropic()``), EVENTS <= 200 deltas."""
    impl, deltas, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import anthropic
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    client = _client(own_spans=False)
    if impl == "evaltrace":
        from evaltrace.instrumentation.anthropic import instrument_anthropic

        instrument_anthropic(tracer_provider=provider)
    parsed: list[Any] = []
    sdk_stream = anthropic.Stream.__stream__

    def recording(self: Any) -> Any:
        for event in sdk_stream(self):
            parsed.append(event)
            yield event

    def stream() -> None:
        events = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            metadata={"user_id": str(MAX_EVENTS)},
        )
        for _event in events:
            pass

    anthropic.Stream.__stream__ = recording  # type: ignore[method-assign]
    stream()
    # message_start, content_block_start, the first ``deltas`` text deltas, block stop, message_delta, message_stop
    body = parsed[: 2 + deltas] + parsed[-3:]

    def replayed(self: Any) -> Any:
        yield from body

    anthropic.Stream.__stream__ = replayed  # type: ignore[method-assign]
    for _ in range(WARM_UP):
        stream()
    gc.collect()
    gc.disable()
    _callgrind.count_from_here()
    for _ in range(streams):
        stream()
    _callgrind.count_to_here()


if __name__ == "__main__":
    main()
