"""Our per-chunk cost on an OpenAI stream without the client's own: the real ``openai.Stream``, chunks pre-built.

Run one child per (implementation, chunks), e.g. under callgrind (application thread: ``callgrind.out.<pid>-01``):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes \\
        python benchmarks/bench_stream_fold.py evaltrace 550 4

Per chunk added = (evaltrace 550 - evaltrace 50) - (none 550 - none 50), over (4 + 20 warm-up) * 500 chunks. The
SDK's ``Stream.__stream__`` (its SSE parsing and model construction, ~786k instructions per chunk in
``bench_openai_pipeline.py``) is replaced by a generator over chunks the real client parsed once at start, so what
is left per chunk is the ``for`` loop, ``Stream.__iter__``, our proxy and the fold: ``callgrind_annotate`` on the
difference then shows where our instructions go, which the smoke row's 786k-per-chunk client hides.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_openai_pipeline as pipeline

MAX_CHUNKS = 1000  # parsed once in every child, whatever its length, so the difference between two holds none
WARM_UP = 20


def main() -> None:
    """``IMPL CHUNKS STREAMS``: IMPL ``none`` or ``evaltrace`` (``bench_openai_pipeline``'s set-ups)."""
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
