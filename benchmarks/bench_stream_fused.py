"""Prototype: what folding from openai's parsed JSON, in one frame fused with the SDK's stream loop, would save.

    PYTHONPATH=src python benchmarks/bench_stream_fused.py --variants base,fobj,fdict,base [--rounds 2] [--layout N]

Measured as ``bench_stream_ab.py --prebuilt`` measures (one callgrind process, each stream a phase, the same
chunk objects in every stream, a variant's figure ``(200-chunk phases - 20-chunk phases) / 180``), with the SDK's
``Stream.__stream__`` replaced by a stand-in generator that yields the prebuilt chunks (its per-event work, the SSE
decoding, ``sse.json()`` and ``construct_type``, is the same in every variant and left out):

- ``base``: today's path: the stand-in generator (``for chunk in chunks: yield chunk``, the SDK's frame), read by
  the proxy's ``_chunks`` generator, chunks held and folded in batches of 16 by ``ChatAccumulator.add_batch``.
- ``fobj``: design (b): one generator does the SDK loop's stand-in and ``_chunks``'s per-chunk work (a copy of the
  SDK's ``__stream__`` with our lines in it): one generator frame per chunk fewer; the same held chunks and fold.
- ``rdict``: design (a'), (a) without (b): the SDK's frame (the stand-in) also appends the parsed JSON and the chunk
  to a side list, the proxy's ``_chunks`` is today's, and the fold reads a held chunk from its dict when the side
  list's next pair is that very chunk (an identity test per chunk), else from its object.
- ``fdict``: design (a) on top of (b): the fused generator also holds the parsed JSON (``data``, the dict the SDK
  passes to ``process_data``) beside each chunk, and the fold reads the common chunk (one choice, a delta of text
  only, no usage) from the dicts, so without the four pydantic ``__getattr__``-hooked reads; any other chunk is
  folded from its object as today.

This is a prototype for the measurement only: nothing in ``src`` uses it (benchmarks/README.md, s15-ochunk4).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Any

from evaltrace._internal.engine.stream import chunk_failed
from evaltrace._internal.openai.accumulate import _NO_INDEX, _ChoiceBuffer

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _callgrind
import bench_openai_pipeline as pipeline

VARIANTS_ENV = "EVALTRACE_FUSED_VARIANTS"


def _fold_dicts(acc: Any, batch: list[Any]) -> None:
    """``add_batch`` over ``[data, chunk, data, chunk, ...]``: the common chunk from its dicts, others as today."""
    buffers = acc.choices
    last: Any = _NO_INDEX
    buffer: Any = None
    text: Any = None
    kind = type
    n = len(batch)
    i = 0
    while i < n:
        data = batch[i]
        chunk = batch[i + 1]
        i += 2
        try:
            try:
                if kind(data) is not dict or data.get("usage") is not None:
                    raise TypeError
                (choice,) = data["choices"]
                index = choice["index"]
                delta = choice["delta"]
                finish = choice["finish_reason"]
                if len(delta) != 1:
                    raise TypeError
                content = delta["content"]
            except (KeyError, TypeError, ValueError):
                acc._add_chunk(chunk)
                last = _NO_INDEX
                continue
            if index is not last:
                try:
                    buffer = buffers[index]
                except KeyError:
                    buffer = buffers[index] = _ChoiceBuffer()
                text = buffer.text
                last = index
            if content:
                text.append(content)
            if finish is not None:
                buffer.finish_reason = finish
        except Exception:
            chunk_failed()


class _Raw:
    """The side channel of design (a'): ``[data, chunk, data, chunk, ...]`` appended by the SDK's frame, and the
    position of the next pair the fold has not used (pairs of chunks folded elsewhere are skipped over)."""

    __slots__ = ("items", "pos")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.pos = 0


def _fold_raw(acc: Any, raw: _Raw, batch: list[Any]) -> None:  # noqa: C901  # one frame per batch, as add_batch
    """``add_batch`` over held chunks, each read from its parsed JSON when the side channel's next pair is its own.

    The identity test (``items[pos + 1] is chunk``) is what makes the side channel safe: a chunk whose pair is not
    next (folded from its object on the slow path, or read around the recording frame) is read from its object, and
    the pairs before it are skipped, so a dict is never read for another chunk.
    """
    items = raw.items
    pos = raw.pos
    end = len(items)
    buffers = acc.choices
    last: Any = _NO_INDEX
    buffer: Any = None
    text: Any = None
    kind = type
    for chunk in batch:
        try:
            try:
                if pos < end and items[pos + 1] is chunk:
                    data = items[pos]
                    pos += 2
                else:  # resynchronise: skip to this chunk's pair if it is there (once, after the slow path)
                    while pos < end and items[pos + 1] is not chunk:
                        pos += 2
                    if pos >= end:
                        raise TypeError
                    data = items[pos]
                    pos += 2
                if kind(data) is not dict or data.get("usage") is not None:
                    raise TypeError
                (choice,) = data["choices"]
                index = choice["index"]
                delta = choice["delta"]
                finish = choice["finish_reason"]
                if len(delta) != 1:
                    raise TypeError
                content = delta["content"]
            except (KeyError, TypeError, ValueError):
                acc._add_chunk(chunk)
                last = _NO_INDEX
                continue
            if index is not last:
                try:
                    buffer = buffers[index]
                except KeyError:
                    buffer = buffers[index] = _ChoiceBuffer()
                text = buffer.text
                last = index
            if content:
                text.append(content)
            if finish is not None:
                buffer.finish_reason = finish
        except Exception:
            chunk_failed()
    del items[:pos]
    raw.pos = 0


def _recording(raw: _Raw, pairs: Any) -> Any:
    """The SDK's ``__stream__`` stand-in with design (a')'s two appends: the parsed JSON and the chunk made of it."""
    append = raw.items.append
    for data, chunk in pairs:
        append(data)
        append(chunk)
        yield chunk


def _fused(proxy: Any, pairs: Any, dicts: bool) -> Any:
    """The SDK loop's stand-in and ``_chunks``'s per-chunk work in one generator frame."""
    from evaltrace._internal.engine import stream as sm

    state = proxy._self_state
    size = state.size * 2 if dicts else state.size
    if dicts:  # the end's fold of the held rest (its chunk count is doubled here: a prototype, costs only)
        state.fold = partial(_fold_dicts, state.acc)
    clock = perf_counter
    mine = False
    pending = state.pending
    try:
        for data, chunk in pairs:  # the SDK's ``for sse in iterator: ... data = sse.json(); chunk = process_data(...)``
            try:
                if pending is None:
                    pending = state.pending
                    if pending is None:
                        try:
                            state.on_chunk(chunk)
                        except Exception:
                            sm.chunk_failed()
                        pending = state.pending
                        yield chunk
                        continue
                state.last = clock()
                if dicts:
                    pending.append(data)
                pending.append(chunk)
                if len(pending) >= size:
                    try:
                        state.flush()
                    except Exception:
                        sm.chunk_failed()
                    pending = state.pending
                yield chunk
            except BaseException:
                mine = True
                raise
    except BaseException as error:
        if not mine:
            state.end(sm.sc.STREAM_END_ERROR, error)
        raise
    state.end(sm.sc.STREAM_END_EXHAUSTED)


def child(rounds: int) -> None:  # noqa: C901  # a prototype: set-up, check and phases in one place
    """``rounds`` rounds of (variant, 20 chunks), (variant, 200 chunks) phases, after two uncounted rounds."""
    import openai
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    import evaltrace
    from evaltrace._internal.engine import stream
    from evaltrace._internal.openai.accumulate import ChatAccumulator

    variants = os.environ[VARIANTS_ENV].split(",")
    original_chunks = stream._chunks
    original_flush = stream.StreamState.flush
    current: list[Any] = [None, None]

    def dict_flush(self: Any) -> None:
        with self.lock:
            pending = self.pending
            if pending:
                held = len(pending)
                batch = pending[:held]
                del pending[:held]
                self.chunks += held >> 1
                _fold_dicts(self.acc, batch)

    def apply(variant: str) -> None:  # uncounted: between phases
        if variant == "base":
            stream._chunks = original_chunks
            stream.StreamState.flush = original_flush  # type: ignore[method-assign]
            return
        if variant == "rdict":

            def recorded(proxy: Any, source: Any) -> Any:  # once per stream
                raw = _Raw()
                proxy._self_state.fold = partial(_fold_raw, proxy._self_state.acc, raw)
                return original_chunks(proxy, _recording(raw, zip(current[0], current[1], strict=True)))

            stream._chunks = recorded
            stream.StreamState.flush = original_flush  # type: ignore[method-assign]
            return
        dicts = variant == "fdict"
        stream._chunks = lambda proxy, source: _fused(proxy, zip(current[0], current[1], strict=True), dicts)
        stream.StreamState.flush = dict_flush if dicts else original_flush  # type: ignore[method-assign]

    (api, replay), flush = pipeline.setup("evaltrace")
    raws = {
        n: [json.loads(e.decode()[len("data: ") :]) for e in replay.stream_events(n) if b"[DONE]" not in e]
        for n in pipeline.PAIRED_CHUNKS
    }
    made = {n: [construct_type(type_=ChatCompletionChunk, value=v) for v in raws[n]] for n in raws}
    for n in raws:  # uncounted: the dict fold folds the recorded streams as add_batch does
        one, two = ChatAccumulator(), ChatAccumulator()
        one.add(made[n][0])
        two.add(made[n][0])
        one.add_batch(made[n][1:])
        _fold_dicts(two, [x for pair in zip(raws[n][1:], made[n][1:], strict=True) for x in pair])
        three, raw = ChatAccumulator(), _Raw()
        three.add(made[n][0])
        raw.items.extend(x for pair in zip(raws[n], made[n], strict=True) for x in pair)
        for i in range(1, len(made[n]), 16):
            _fold_raw(three, raw, made[n][i : i + 16])
        if not one.outcome() == two.outcome() == three.outcome():
            raise SystemExit(f"the dict fold differs on stream{n}")

    def built(self: Any) -> Any:
        for chunk in current[1]:  # noqa: UP028  # the SDK's ``__stream__`` frame: a for loop that yields
            yield chunk

    openai.Stream.__stream__ = built  # type: ignore[method-assign]
    streams = {n: pipeline.make_case(api, replay, f"stream{n}") for n in pipeline.PAIRED_CHUNKS}
    evaltrace.instrument_openai()

    def run(counted: bool) -> None:
        for variant in variants:
            apply(variant)
            for n in pipeline.PAIRED_CHUNKS:
                current[0] = raws[n]
                current[1] = made[n]
                if counted:
                    _callgrind.phase_begin()
                streams[n]()
                if counted:
                    _callgrind.phase_end()

    run(False)
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
    parser.add_argument("--variants", default="base,fobj,fdict,base")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layout", type=int, default=0)
    args = parser.parse_args()
    os.environ[VARIANTS_ENV] = args.variants
    variants = args.variants.split(",")
    phases = _callgrind.run_phases(__file__, "fused", args.rounds, layout=args.layout)
    per_round = 2 * len(variants)
    if len(phases) != args.rounds * per_round:
        raise SystemExit(f"{len(phases)} phases for {args.rounds} rounds of {per_round}")
    for i, variant in enumerate(variants):
        short = sum(phases[r * per_round + 2 * i] for r in range(args.rounds))
        long = sum(phases[r * per_round + 2 * i + 1] for r in range(args.rounds))
        print(f"{variant}: {(long - short) / (args.rounds * 180):,.0f} per chunk")


if __name__ == "__main__":
    main()
