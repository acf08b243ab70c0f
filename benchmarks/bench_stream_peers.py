"""Per chunk / event, evaltrace beside the floor and the official instrumentation: ``python benchmarks/bench_stream_peers.py``.

Run: python benchmarks/bench_stream_peers.py [--jobs 2] [--layouts 3] [--rounds 2]

Issue 28 asks for each stream row's figure with the floor and the official instrumentation measured in the same
run. The smoke rows (``smoke.py``) count evaltrace's stream paired: one callgrind child streams with and without the
instrumentation in one process, each stream a phase of its own, so the client's own ~800k instructions per chunk
share one heap layout on both sides of the difference. This runs the same paired child for each implementation:

  OpenAI chat stream   evaltrace (``paired:slope``, the smoke row's child), the hand-written floor (a raw OTel span
                       around ``Completions.create`` that ends when the stream is exhausted:
                       ``paired-floor:slope``) and the official openai-v2 instrumentation with content on
                       (``paired-official:slope``), all of ``bench_openai_pipeline.py``
  Anthropic stream     evaltrace (``anthropic-paired:slope``, the smoke row's child) and the floor
                       (``bench_anthropic.py``'s ``_floor_patch``: ``anthropic-paired-floor:slope``), of ``smoke.py``;
                       no official Anthropic instrumentation is installed here

Each is instructions added per chunk on the application thread: the paired slope between 200- and 20-chunk streams
(``smoke.paired_slope``), under ``--layouts`` padded heap layouts, median reported beside each layout's figure.
OpenAI's exporters differ (evaltrace's export queue, OTel's BatchSpanProcessor): none exports during a phase,
and the export thread is not the application thread. The Anthropic children's provider has no processor.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _callgrind
from smoke import LAYOUTS, ROUNDS, paired_slope

HERE = Path(__file__).resolve().parent
OPENAI, SMOKE = str(HERE / "bench_openai_pipeline.py"), str(HERE / "smoke.py")
ROWS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "OpenAI stream, per chunk": (
        ("evaltrace", OPENAI, "paired:slope"),
        ("floor", OPENAI, "paired-floor:slope"),
        ("official openai-v2", OPENAI, "paired-official:slope"),
    ),
    "Anthropic stream, per event": (
        ("evaltrace", SMOKE, "anthropic-paired:slope"),
        ("floor", SMOKE, "anthropic-paired-floor:slope"),
    ),
}


def main() -> int:
    """Run every paired child under every layout and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="callgrind children at once")
    parser.add_argument("--layouts", type=int, default=LAYOUTS, help="padded heap layouts per child (seeds 1..N)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of the four phases per child")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if not _callgrind.can_count_from_collect():
        print("paired children need callgrind's client requests (x86-64 Linux)", file=sys.stderr)
        return 2
    children = [(script, variant) for entries in ROWS.values() for _, script, variant in entries]
    runs = [(script, variant, layout) for script, variant in children for layout in range(1, args.layouts + 1)]
    started = time.monotonic()
    _callgrind.warm(children, jobs=args.jobs)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        phases = list(pool.map(lambda r: _callgrind.run_phases(r[0], r[1], args.rounds, layout=r[2]), runs))
    figures = {
        (script, variant): [
            paired_slope(found, args.rounds)
            for (s, v, _), found in zip(runs, phases, strict=True)
            if (s, v) == (script, variant)
        ]
        for script, variant in children
    }
    print(
        f"instructions added per chunk / event, application thread, paired; layouts 1..{args.layouts}, "
        f"{args.rounds} rounds each ({time.monotonic() - started:.0f} s)"
    )
    print(f"{'row':30} {'implementation':20} {'median':>8}  layouts")
    for row, entries in ROWS.items():
        for name, script, variant in entries:
            each = figures[(script, variant)]
            print(f"{row:30} {name:20} {statistics.median(each):8,.0f}  {' / '.join(f'{f:,.0f}' for f in each)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
