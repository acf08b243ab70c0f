"""Our per-chunk cost on an OpenAI stream without the client's own: the real ``openai.Stream``, chunks pre-built.

Run one child per (implementation, chunks), e.g. under callgrind (application thread: ``callgrind.out.<pid>-01``):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes \\
        python benchmarks/bench_stream_fold.py evaltrace 550 4

Per chunk added = (evaltrace 550 - evaltrace 50) - (none 550 - none 50), over (4 + 20 warm-up) * 500 chunks. The
SDK's ``Stream.__stream__`` (its SSE parsing and model construction, ~786k instructions per chunk in
``bench_openai_pipeline.py``) is replaced by a generator over chunks the real client parsed once at start, so what
is left per chunk is the ``for`` loop, ``Stream.__iter__``, our proxy and the fold: ``callgrind_annotate`` on the
difference then shows where our instructions go, which the smoke row's 786k-per-chunk client hides.

``paired [ROUNDS] [LAYOUT]``: the smoke row's paired measure over those chunks, in one child under callgrind (run
from the parent, no valgrind command needed), which prints the instructions added per chunk:

    PYTHONPATH=src python benchmarks/bench_stream_fold.py paired 3

Each round streams 20 and 200 chunks with evaltrace's instrumentation off and on in ONE process, each stream a
callgrind phase of its own (``bench_openai_pipeline.py paired:slope``'s measure: both sides share one heap layout).
The SDK's ``__stream__`` is replaced by a generator that builds each chunk from its recorded JSON with
``construct_type``, as the SDK does after parsing the event (the same objects, without the SSE parsing and the
HTTP body), so a child takes minutes, not the smoke row's tens of minutes at load; counted from the child's first
``gc.collect()`` (``--instr-atstart=no``), so its imports run uninstrumented.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _callgrind
import bench_openai_pipeline as pipeline

MAX_CHUNKS = 1000  # parsed once in every child, whatever its length, so the difference between two holds none
WARM_UP = 20


def paired_child(rounds: int) -> None:
    """The child of ``paired``: ``rounds`` rounds of ``PAIRED_PHASES``, each stream a counted phase."""
    import json

    import openai
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    import evaltrace

    (api, replay), flush = pipeline.setup("evaltrace")
    values: dict[int, list[Any]] = {
        n: [json.loads(e.decode()[len("data: ") :]) for e in replay.stream_events(n) if b"[DONE]" not in e]
        for n in pipeline.PAIRED_CHUNKS
    }
    current: list[list[Any]] = [[]]

    def built(self: Any) -> Any:
        for value in current[0]:
            yield construct_type(type_=ChatCompletionChunk, value=value)  # what the SDK makes of a parsed event

    openai.Stream.__stream__ = built  # type: ignore[method-assign]
    streams = {n: pipeline.make_case(api, replay, f"stream{n}") for n in pipeline.PAIRED_CHUNKS}

    def prepare(on: bool, n: int) -> None:  # uncounted: between phases
        evaltrace.instrument_openai() if on else evaltrace.uninstrument_openai()
        current[0] = values[n]

    # The warm-up, uncounted (the first gc.collect() below starts counting): 10 instrumented streams, as the smoke
    # row's child. With 6, code run once per stream was quickened (CPython 3.11: on its 8th call) in the first
    # counted 200-chunk phase: ~124k instructions once, ~340 per chunk of a 2-round figure.
    for on, n in pipeline.PAIRED_PHASES * 5:
        prepare(on, n)
        streams[n]()
    flush()
    gc.collect()
    gc.disable()
    for _ in range(rounds):
        for on, n in pipeline.PAIRED_PHASES:
            prepare(on, n)
            _callgrind.phase_begin()
            streams[n]()
            _callgrind.phase_end()
    flush()


def paired(rounds: int, layout: int) -> None:
    """Run ``paired_child`` under callgrind and print the instructions it adds per chunk (the smoke row's slope)."""
    import smoke

    phases = _callgrind.run_phases(__file__, "paired", rounds, layout=layout)
    print(f"paired, {rounds} rounds, layout {layout}: {smoke.paired_slope(phases, rounds):,.0f} per chunk")


def main() -> None:
    """``IMPL CHUNKS STREAMS``: IMPL ``none`` or ``evaltrace`` (``bench_openai_pipeline``'s set-ups); or ``paired``."""
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        paired_child(child[1])
        return
    if sys.argv[1] == "paired":
        paired(int(sys.argv[2]) if len(sys.argv) > 2 else 3, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
        return
    impl, chunks, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    (api, replay), flush = pipeline.setup(impl)
    import openai

    parsed: list[Any] = []
    sdk_stream = openai.Stream.__stream__

    def recording(self: Any) -> Any:
        for chunk in sdk_stream(self):
            parsed.append(chunk)
            yield chunk

    openai.Stream.__stream__ = recording  # type: ignore[method-assign]
    pipeline.make_case(api, replay, f"stream{MAX_CHUNKS}")()
    body = parsed[: chunks - 2] + parsed[-2:]  # role and content chunks, then the recorded finish and usage chunks

    def replayed(self: Any) -> Any:
        yield from body

    openai.Stream.__stream__ = replayed  # type: ignore[method-assign]
    case = pipeline.make_case(api, replay, f"stream{chunks}")
    for _ in range(WARM_UP):
        case()
    flush()
    gc.collect()
    gc.disable()
    for _ in range(streams):
        case()
    flush()


if __name__ == "__main__":
    main()
