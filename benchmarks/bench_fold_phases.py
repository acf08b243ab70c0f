"""Where a provider's fold row goes: its stream's fold, ``outcome()``, response attributes and first ``add`` apart.

Run: ``PYTHONPATH=$PWD/src python benchmarks/bench_fold_phases.py groq mistral [--layouts 0,1]``

The smoke row ``<provider>_stream_fold`` counts all of one stream's work on the application thread (see
``bench_providers.fold_function``). This runs the same set-up in one callgrind child per provider and layout, and
counts, per stream (20 streams each, from the child's ``gc.collect()``):

* ``fold``: ``add`` up to the first chunk with output, then ``add_batch`` in the proxy's batches;
* ``outcome``: ``outcome()`` of the folded accumulators;
* ``attributes``: the engine's ``response_attributes``, its ``outcome()`` call included;
* ``first add``: ``add`` of the stream's first chunk on a fresh accumulator (in ``fold`` too).

The row is about ``fold + attributes``. Compare before and after in the same environment
(``PYTHONPATH=<git archive of the old tree>/src`` for before).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any

import _callgrind
import bench_providers as bp
import httpx

STREAMS = 20
PHASES = ("fold", "outcome", "attributes", "first add")


def child(name: str, calls: int) -> None:
    """Set up one provider's recorded stream as the fold row does, warm up, then count the four phases."""
    from evaltrace._internal.engine import build
    from evaltrace._internal.engine.codec import add_each
    from evaltrace._internal.engine.stream import BATCH

    item = bp.recorded(bp.PROVIDERS[name], "fold110")
    events = bp.stream_events(item, 110)
    chunks: list[Any] = []
    bp._drain = chunks.extend  # the uninstrumented client's stream is kept, as in the fold row's child
    client_call = bp.CLIENTS[name](item, httpx.MockTransport(bp.handler(item, events)), True)
    for body in bp._BEDROCK_STREAMS:  # after the client is made, as the fold row's child: it registers its body
        body["events"] = events
    client_call()
    print(len(chunks), file=sys.stderr)
    module, cls = bp.ACCUMULATORS[name]
    make = getattr(importlib.import_module(module), cls)
    if name == "ollama":
        make = lambda: getattr(importlib.import_module(module), cls)(chat=True)  # noqa: E731

    def fold() -> Any:
        acc = make()
        index = 0
        for index, chunk in enumerate(chunks, 1):  # noqa: B007  (index: where the batches start)
            if acc.add(chunk):
                break
        batch = getattr(acc, "add_batch", None) or (lambda part: add_each(acc.add, part))
        size = getattr(acc, "batch_size", BATCH)
        for start in range(index, len(chunks), size):
            batch(chunks[start : start + size])
        return acc

    def attributes(acc: Any) -> None:
        build.response_attributes(acc.outcome, None, True, 128 * 1024, "model", name)

    for _ in range(5):
        attributes(fold())
    folded = [fold() for _ in range(calls)]
    fresh = [make() for _ in range(calls)]
    gc.collect()
    gc.disable()
    _count(lambda _: fold(), range(calls))
    _count(lambda acc: acc.outcome(), folded)
    _count(attributes, folded)
    _count(lambda acc: acc.add(chunks[0]), fresh)


def _count(step: Callable[[Any], object], items: Iterable[Any]) -> None:
    """One phase: ``step`` of each item (what a step leaves is freed in the phase, as in the fold row's loop)."""
    _callgrind.phase_begin()
    for item in items:
        step(item)
    _callgrind.phase_end()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("providers", nargs="+", choices=sorted(bp.ACCUMULATORS))
    parser.add_argument("--layouts", default="0", help="comma-separated heap layout seeds (0: none)")
    args = parser.parse_args()
    for name in args.providers:
        for layout in (int(seed) for seed in args.layouts.split(",")):
            counts = _callgrind.run_phases(__file__, name, STREAMS, layout=layout)
            figures = ", ".join(f"{phase} {count // STREAMS:,}" for phase, count in zip(PHASES, counts, strict=True))
            print(f"{name} (layout {layout}), per stream: {figures}", flush=True)


if __name__ == "__main__":
    request = _callgrind.child_request(sys.argv)
    if request is not None:
        child(*request)
    else:
        main()
