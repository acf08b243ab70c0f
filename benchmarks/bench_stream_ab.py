"""OpenAI stream per-chunk cost of fold variants, side by side in ONE callgrind process (one heap layout).

    PYTHONPATH=src python benchmarks/bench_stream_ab.py --old-src /tmp/old/src --variants old16,new16,new32

A variant is ``<tree><batch size>``: ``new`` is the imported tree, ``old`` the stream proxy's ``_chunks``,
``StreamState.flush``, ``SyncStreamProxy.__next__`` and ``ChatAccumulator.add_batch`` loaded from ``--old-src``
(e.g. a ``git archive main`` copy); the batch size is set on ``ChatAccumulator.batch_size``. Each round streams
20 and 200 chunks with evaltrace's instrumentation on, per variant, each stream a callgrind phase; a variant's
figure is ``(200-chunk phases - 20-chunk phases) / 180`` over the rounds. The chunks are built from the recorded
JSON with ``construct_type``, as ``bench_stream_fold.py paired`` builds them (no SSE parsing, no HTTP body), so
what differs between variants is our own code alone, measured in the same process: the separate-process benches
move by hundreds of instructions per chunk with the memory layout, more than most cuts worth trying.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _callgrind
import bench_openai_pipeline as pipeline

OLD_SRC_ENV = "EVALTRACE_AB_OLD_SRC"
VARIANTS_ENV = "EVALTRACE_AB_VARIANTS"
PREBUILT_ENV = "EVALTRACE_AB_PREBUILT"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trees() -> dict[str, dict[str, Any]]:
    from evaltrace._internal.engine import stream
    from evaltrace._internal.openai import accumulate

    trees = {
        "new": {
            "chunks": stream._chunks,
            "flush": stream.StreamState.flush,
            "next": stream.SyncStreamProxy.__next__,
            "add_batch": accumulate.ChatAccumulator.add_batch,
        }
    }
    old_src = os.environ.get(OLD_SRC_ENV)
    if old_src:
        internal = Path(old_src) / "evaltrace" / "_internal"
        old_stream = _load("_ab_old_stream", internal / "engine" / "stream.py")
        old_accumulate = _load("_ab_old_accumulate", internal / "openai" / "accumulate.py")
        trees["old"] = {
            "chunks": old_stream._chunks,
            "flush": old_stream.StreamState.flush,
            "next": old_stream.SyncStreamProxy.__next__,
            "add_batch": old_accumulate.ChatAccumulator.add_batch,
        }
    return trees


def _split(variant: str) -> tuple[str, int]:
    tree = variant.rstrip("0123456789")
    return tree, int(variant[len(tree) :])


def child(rounds: int) -> None:
    """``rounds`` rounds of (variant, 20 chunks), (variant, 200 chunks) phases, after two uncounted rounds."""
    import openai
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    import evaltrace
    from evaltrace._internal.engine import stream
    from evaltrace._internal.openai import accumulate

    trees = _trees()
    variants = os.environ[VARIANTS_ENV].split(",")

    def apply(variant: str) -> None:  # uncounted: between phases
        tree, batch = _split(variant)
        parts = trees[tree]
        stream._chunks = parts["chunks"]
        stream.StreamState.flush = parts["flush"]  # type: ignore[method-assign]
        stream.SyncStreamProxy.__next__ = parts["next"]  # type: ignore[method-assign]
        accumulate.ChatAccumulator.add_batch = parts["add_batch"]  # type: ignore[method-assign]
        accumulate.ChatAccumulator.batch_size = batch

    (api, replay), flush = pipeline.setup("evaltrace")
    values = {
        n: [json.loads(e.decode()[len("data: ") :]) for e in replay.stream_events(n) if b"[DONE]" not in e]
        for n in pipeline.PAIRED_CHUNKS
    }
    current: list[list[Any]] = [[]]
    if os.environ.get(PREBUILT_ENV) == "1":  # the same chunk objects in every stream: no construction per chunk
        made = {n: [construct_type(type_=ChatCompletionChunk, value=v) for v in values[n]] for n in values}

        def built(self: Any) -> Any:
            yield from current[0]

        values = made
    else:

        def built(self: Any) -> Any:
            for value in current[0]:
                yield construct_type(type_=ChatCompletionChunk, value=value)  # what the SDK makes of a parsed event

    openai.Stream.__stream__ = built  # type: ignore[method-assign]
    streams = {n: pipeline.make_case(api, replay, f"stream{n}") for n in pipeline.PAIRED_CHUNKS}
    evaltrace.instrument_openai()

    def run(counted: bool) -> None:
        for variant in variants:
            apply(variant)
            for n in pipeline.PAIRED_CHUNKS:
                current[0] = values[n]
                if counted:
                    _callgrind.phase_begin()
                streams[n]()
                if counted:
                    _callgrind.phase_end()

    run(False)  # the warm-up, uncounted (the first gc.collect() below starts counting)
    run(False)
    flush()
    gc.collect()
    gc.disable()
    for _ in range(rounds):
        run(True)
    flush()


def main() -> None:
    """Run the child under callgrind and print each variant's instructions per chunk."""
    request = _callgrind.child_request(sys.argv)
    if request is not None:
        child(request[1])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--variants", default="new16")
    parser.add_argument("--old-src", default="")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layout", type=int, default=0)
    parser.add_argument("--prebuilt", action="store_true", help="build each chunk once, not per stream")
    args = parser.parse_args()
    os.environ[VARIANTS_ENV] = args.variants
    os.environ[OLD_SRC_ENV] = args.old_src
    os.environ[PREBUILT_ENV] = "1" if args.prebuilt else "0"
    variants = args.variants.split(",")
    phases = _callgrind.run_phases(__file__, "ab", args.rounds, layout=args.layout)
    per_round = 2 * len(variants)
    if len(phases) != args.rounds * per_round:
        raise SystemExit(f"{len(phases)} phases for {args.rounds} rounds of {per_round}")
    for i, variant in enumerate(variants):
        short = sum(phases[r * per_round + 2 * i] for r in range(args.rounds))
        long = sum(phases[r * per_round + 2 * i + 1] for r in range(args.rounds))
        print(f"{variant}: {(long - short) / (args.rounds * 180):,.0f} per chunk")


if __name__ == "__main__":
    main()
