"""CI smoke run of the instruction benchmarks: each row of issue 28's table against ``budgets.toml``.

Run: python benchmarks/smoke.py [--budgets benchmarks/budgets.toml] [--jobs 2] [--rows decorator,openai_call,...]
     [--whole-process] [--verbose]

Each row runs the child of the benchmark that owns it under callgrind (``_callgrind.py``: PYTHONHASHSEED=0,
``--separate-threads=yes``) with a quick call count, and computes one figure, either a ratio to a floor run in the
same run or instructions:

  decorator            ``@evaltrace.trace`` capture on / raw OTel span + JSON capture, all threads, per call
                       (``bench_decorators.py``)
  openai_call          plain call with content: added over the uninstrumented client / the same for the hand-written
                       floor (a raw OTel span with model, id and usage, BatchSpanProcessor), all threads
                       (``bench_openai_pipeline.py`` ``call1``): the issue's definition (its 267k floor is this
                       floor's ~255-262k, not ``floor+json``'s ~290k)
  openai_stream_chunk  instructions per chunk added over the uninstrumented client, application thread: the slope
                       between 200-chunk and 20-chunk streams, measured paired (``bench_openai_pipeline.py``
                       ``paired:slope``, below)
  anthropic_stream_event  the same per event of an Anthropic stream (``bench_anthropic.py``'s client; the child is
                       this script's ``anthropic-paired:slope``, as that benchmark times CPU rather than counting)
  evaluation           work per evaluated span, one cheap evaluator run inline: all threads of ``@agent + cheap
                       evaluator (thread, inline)`` - ``@trace, no evaluator`` (``bench_evaluation.py``)
  startup              whole process: ``configure()`` + ``instrument_openai()`` + the first call, over the same process
                       uninstrumented / the same for the official openai-v2 instrumentation (``bench_openai_pipeline``
                       ``first``: set-up, one call, flush), bytecode cached for every package alike, evaltrace's
                       price file filled by the same uncounted run (``EVALTRACE_PRICE_CACHE=off``: cold processes)
  <provider>_stream_fold  Groq, Mistral, Google Gen AI, Ollama, Bedrock (Converse, and Claude over invoke), Cohere:
                       instructions to fold one recorded stream of 110 content
                       events (~112 chunks, parsed by the SDK at set-up) as the stream proxy does and build its
                       response attributes (``bench_providers.py --rows fold``; per chunk: divide by the chunks)

The rows made of two runs' difference (``decorator``, ``openai_call``, ``evaluation``) count from the child's
measured phase on (``_callgrind.run_totals(from_collect=True)``: callgrind's instrumentation off through the
interpreter's start, the SDKs' imports and the set-up, on from the child's ``gc.collect()`` before its measured calls
to its exit), so those runs pay callgrind's slow-down only for what their figures count, and the figures are the
same differences as before. The stream rows count each measured stream alone (phases, below; before session 10, two
runs' difference whose window ended with the measured streams, ``_callgrind.count_to_here()``), and ``startup`` is
the whole process, counted from the start. ``--whole-process`` counts every other run from the start (the first
versions' way: slower, and noisier, as start-up differences between two runs count too); the paired stream rows
need x86-64 Linux (callgrind's client requests) either way.

Three rows followed the process's memory layout rather than our code (the same tree read 4.2k per OpenAI chunk in
one virtualenv and 8.7k in another). CPython's type cache is indexed by the address of the attribute's name, dicts
and sets keyed by objects hash by address, and glibc ``malloc``'s work depends on its bins, so which lookups miss
follows where things were allocated. A stream slope was the difference of two processes each spending ~780k
instructions per chunk in the client itself, whose own slope moved by up to 3k per chunk between layouts: more than
evaltrace's whole figure. So:

- the stream rows are **paired**: one child runs the uninstrumented and the instrumented client in the same process
  (the instrumentation switched on and off between streams, uncounted), each stream counted as a phase of its own
  (``_callgrind.phase_begin/phase_end``, callgrind's per-thread dump), ``ROUNDS`` rounds of a 20- and a 200-chunk
  stream each way. Both sides of the difference share one layout, and the figure is :func:`paired_slope`.
- those two rows and ``openai_call`` (a ratio of separate processes, all threads) run each child under ``LAYOUTS``
  heap layouts (``_callgrind.padding``: a seeded few thousand objects of mixed sizes allocated before the SDKs are
  imported) and report the median of the per-layout figures, so that no single layout, and no environment's own
  layout, decides the figure. ``--verbose`` prints each layout's figure.

A row fails when its figure exceeds its budget by more than ``tolerance`` (10%). The budget of a row whose issue
target is not met yet is today's figure (``target`` beside it): the run guards against regressions now and shows
what is still to do. Exit status 1 when any row fails. The figures of a quick run are not those of the full
benchmarks (fewer calls, warm-up included in the startup row); compare a row with its own budget only.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _callgrind

HERE = Path(__file__).resolve().parent
DECORATORS, OPENAI, EVALUATION, SELF = (
    str(HERE / name) for name in ("bench_decorators.py", "bench_openai_pipeline.py", "bench_evaluation.py", "smoke.py")
)
PROVIDERS = str(HERE / "bench_providers.py")
FOLDS = 20  # folds of one stream (bench_providers.py's default)
# Quick call counts: enough that one call's noise (a GC pass, a dict resize) stays well under the 10% tolerance.
# 40 OpenAI calls: at 10, a one-off of a few million instructions in one run (a buffer resize, an export batch)
# moved the ratio by 0.3-0.6x between runs of the same tree.
DECORATOR_CALLS, OPENAI_CALLS, ROUNDS, EVALUATIONS = 300, 40, 2, 150
SHORT, LONG = 20, 200  # chunks / events of the two streams whose difference is the per-chunk slope
PAIRED_PHASES = tuple((on, n) for n in (SHORT, LONG) for on in (False, True))  # bench_openai_pipeline's, in order
# Heap layouts (``_callgrind.padding`` seeds 1..LAYOUTS) a layout-sensitive row runs each of its children under; its
# figure is the median of the per-layout figures (see "Figures that do not follow the memory layout" above).
LAYOUTS = 3

Run = tuple[str, str, int]  # script, variant, calls
Totals = dict[int, int]


def _app(t: Totals) -> int:
    return t[1]


def _all(t: Totals) -> int:
    return sum(t.values())


@dataclass(frozen=True)
class Row:
    """One budgeted figure: the runs it needs and how it is computed from their per-thread totals."""

    name: str
    what: str
    runs: tuple[Run, ...]
    compute: Callable[[dict[Run, Totals]], float]
    unit: str  # "x" (a ratio) or "instr"
    whole_process: bool = False  # its runs are counted from the interpreter's start (else from the gc.collect())
    layouts: tuple[int, ...] = (0,)  # heap paddings its runs are made under (0: none); its figure is their median
    phased: bool = False  # its runs count phases (``_callgrind.run_phases``): totals keyed by phase, not thread

    def figures(self, totals: dict[tuple[Run, int], Totals]) -> list[float]:
        """The row's figure under each of its layouts, from every run's totals keyed by (run, layout)."""
        return [self.compute({run: totals[(run, layout)] for run in self.runs}) for layout in self.layouts]


def figure(figures: list[float]) -> float:
    """A row's figure: the median of its per-layout figures (the one figure of a row run under one layout)."""
    return float(statistics.median(figures))


def _per_call(r: dict[Run, Totals], script: str, variant: str, calls: int, scope: Callable[[Totals], int]) -> float:
    return (scope(r[(script, variant, calls)]) - scope(r[(script, variant, 0)])) / calls


def _decorator(r: dict[Run, Totals]) -> float:
    on = _per_call(r, DECORATORS, "@evaltrace.trace (capture on)", DECORATOR_CALLS, _all)
    return on / _per_call(r, DECORATORS, "raw OTel span + JSON capture", DECORATOR_CALLS, _all)


def _openai_call(r: dict[Run, Totals]) -> float:
    none = _per_call(r, OPENAI, "none:call1", OPENAI_CALLS, _all)
    ours = _per_call(r, OPENAI, "evaltrace:call1", OPENAI_CALLS, _all) - none
    return ours / (_per_call(r, OPENAI, "floor:call1", OPENAI_CALLS, _all) - none)


def paired_slope(phases: list[int], rounds: int) -> float:
    """Instructions per chunk added by the instrumentation, from a paired child's phase counts.

    Args:
        phases: Application-thread instructions of each phase, in order: ``rounds`` rounds of
            :data:`PAIRED_PHASES` (short off, short on, long off, long on).
        rounds: The child's rounds.

    Raises:
        ValueError: ``phases`` is not ``rounds`` whole rounds.
    """
    if len(phases) != rounds * len(PAIRED_PHASES):
        raise ValueError(f"{len(phases)} phases for {rounds} rounds of {len(PAIRED_PHASES)}")
    off_short, on_short, off_long, on_long = (sum(phases[i :: len(PAIRED_PHASES)]) for i in range(len(PAIRED_PHASES)))
    return ((on_long - on_short) - (off_long - off_short)) / (rounds * (LONG - SHORT))


def _paired(script: str, variant: str) -> Callable[[dict[Run, Totals]], float]:
    # The uninstrumented and the instrumented client in one process, each stream a phase counted apart: both sides
    # of the difference share one heap layout (see "Figures that do not follow the memory layout" above). Counted
    # after the warm-up, the collector off, each stream alone (not the instrumentation's switch between them).
    run = (script, variant, ROUNDS)
    return lambda r: paired_slope([r[run][i] for i in sorted(r[run])], ROUNDS)


def _evaluation(r: dict[Run, Totals]) -> float:
    inline = _per_call(r, EVALUATION, "@agent + cheap evaluator (thread, inline)", EVALUATIONS, _all)
    return inline - _per_call(r, EVALUATION, "@trace, no evaluator", EVALUATIONS, _all)


def _startup(r: dict[Run, Totals]) -> float:
    none = _all(r[(OPENAI, "none:first", 0)])
    return (_all(r[(OPENAI, "evaltrace:first", 0)]) - none) / (_all(r[(OPENAI, "official:first", 0)]) - none)


def _fold(variant: str) -> Callable[[dict[Run, Totals]], float]:
    return lambda r: _per_call(r, PROVIDERS, variant, FOLDS, _app)


def _both(script: str, variants: tuple[str, ...], calls: int) -> tuple[Run, ...]:
    return tuple((script, v, n) for v in variants for n in (0, calls))


ANTHROPIC_WARM_UP = 2
PADDED = tuple(range(1, LAYOUTS + 1))
ROWS = (
    Row(
        "decorator",
        "@evaltrace.trace capture on, x raw OTel span + JSON capture, all threads",
        _both(DECORATORS, ("raw OTel span + JSON capture", "@evaltrace.trace (capture on)"), DECORATOR_CALLS),
        _decorator,
        "x",
    ),
    Row(
        "openai_call",
        "OpenAI plain call with content, added x floor added, all threads",
        _both(OPENAI, ("none:call1", "floor:call1", "evaltrace:call1"), OPENAI_CALLS),
        _openai_call,
        "x",
        layouts=PADDED,
    ),
    Row(
        "openai_stream_chunk",
        "OpenAI stream, instructions per chunk added, app thread",
        ((OPENAI, "paired:slope", ROUNDS),),
        _paired(OPENAI, "paired:slope"),
        "instr",
        layouts=PADDED,
        phased=True,
    ),
    Row(
        "anthropic_stream_event",
        "Anthropic stream, instructions per event added, app thread",
        ((SELF, "anthropic-paired:slope", ROUNDS),),
        _paired(SELF, "anthropic-paired:slope"),
        "instr",
        layouts=PADDED,
        phased=True,
    ),
    Row(
        "evaluation",
        "evaluation work per evaluated span, one cheap evaluator (inline), all threads",
        _both(EVALUATION, ("@trace, no evaluator", "@agent + cheap evaluator (thread, inline)"), EVALUATIONS),
        _evaluation,
        "instr",
    ),
    Row(
        "startup",
        "configure()+instrument_openai()+first call, process over baseline, x official openai-v2",
        ((OPENAI, "none:first", 0), (OPENAI, "evaltrace:first", 0), (OPENAI, "official:first", 0)),
        _startup,
        "x",
        whole_process=True,  # the figure is the whole process
    ),
    *(
        Row(
            f"{name}_stream_fold",
            f"{name} stream: instructions to fold one stream of 110 content events, app thread",
            _both(PROVIDERS, (f"{name}:fold:fold110",), FOLDS),
            _fold(f"{name}:fold:fold110"),
            "instr",
        )
        # LiteLLM was left out at ~18.8M a stream (166k a chunk); its batch fold (s10-provfold) made it ~1.7M.
        for name in ("groq", "mistral", "google_genai", "ollama", "bedrock", "bedrock_invoke", "cohere", "litellm")
    ),
)


def _anthropic_switch(impl: str, provider: Any) -> Callable[[bool], None]:
    """How a paired Anthropic child turns its instrumentation on and off between phases (evaltrace's is on)."""
    if impl == "paired-floor":
        from bench_anthropic import _floor_patch

        undo: list[Callable[[], None]] = []

        def switch(on: bool) -> None:  # as instrument / uninstrument: a no-op when already in that state
            if on and not undo:
                undo.append(_floor_patch(provider))
            elif not on and undo:
                undo.pop()()

        return switch
    from evaltrace.instrumentation.anthropic import instrument_anthropic, uninstrument_anthropic

    return lambda on: instrument_anthropic(tracer_provider=provider) if on else uninstrument_anthropic()


def anthropic_child(variant: str, calls: int) -> None:
    """``anthropic-<none|evaltrace>:stream<N>``: warm-up streams, then ``calls`` streams of N text deltas.

    ``anthropic-paired:slope``: ``calls`` rounds of the paired slope (:data:`PAIRED_PHASES`, as
    ``bench_openai_pipeline.py``'s ``paired:slope``). ``anthropic-paired-floor:slope``: the same for the
    hand-written floor (``bench_anthropic.py``'s ``_floor_patch``; ``bench_stream_peers.py``).
    """
    impl, case = variant.removeprefix("anthropic-").split(":")
    from bench_anthropic import MESSAGES, _client
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    client = _client(own_spans=False)
    if impl in ("evaltrace", "paired"):
        from evaltrace.instrumentation.anthropic import instrument_anthropic

        instrument_anthropic(tracer_provider=provider)

    def stream(deltas: int) -> None:
        events = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            metadata={"user_id": str(deltas)},
        )
        for _event in events:
            pass

    if impl in ("paired", "paired-floor"):
        switch = _anthropic_switch(impl, provider)
        for on, n in PAIRED_PHASES * ANTHROPIC_WARM_UP:
            switch(on)
            stream(n)
        gc.collect()
        gc.disable()
        for _ in range(calls):
            for on, n in PAIRED_PHASES:
                switch(on)
                _callgrind.phase_begin()
                stream(n)
                _callgrind.phase_end()
        return
    deltas = int(case.removeprefix("stream"))

    _callgrind.count_from_here()  # the slope counts the warm-up streams: the runs count from here, not gc.collect()
    for _ in range(ANTHROPIC_WARM_UP):
        stream(deltas)
    gc.collect()
    gc.disable()  # a cyclic collection lands in one run and not the other (millions of instructions)
    for _ in range(calls):
        stream(deltas)
    _callgrind.count_to_here()  # the measured streams alone: not the teardown (see count_to_here)


def verdicts(values: dict[str, float], units: dict[str, str], config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The table comparing each measured row with its budget, and the rows over it by more than the tolerance.

    Args:
        values: Measured figure of each row.
        units: ``"x"`` (a ratio) or ``"instr"`` per row.
        config: ``budgets.toml`` read: ``tolerance`` and ``rows.<name>.budget`` (``.target`` optional).

    Raises:
        SystemExit: A measured row has no budget.
    """
    missing = [name for name in values if name not in config.get("rows", {})]
    if missing:
        raise SystemExit(f"budgets: no budget for row(s) {', '.join(missing)}")
    tolerance = float(config.get("tolerance", 0.10))
    lines = [f"{'row':24} {'measured':>12} {'budget':>12} {'limit':>12} {'target':>12}  verdict"]
    failed: list[str] = []
    for name, value in values.items():
        entry, unit = config["rows"][name], units[name]
        budget, target = float(entry["budget"]), entry.get("target")
        over = value > budget * (1 + tolerance)
        failed += [name] if over else []
        verdict = "OVER BUDGET" if over else ("ok" if target is None or value <= target else "ok (target not met)")
        target_text = _fmt(float(target), unit) if target is not None else "-"
        lines.append(
            f"{name:24} {_fmt(value, unit):>12} {_fmt(budget, unit):>12} "
            f"{_fmt(budget * (1 + tolerance), unit):>12} {target_text:>12}  {verdict}"
        )
    return lines, failed


def _fmt(value: float, unit: str) -> str:
    return f"{value:.2f}x" if unit == "x" else f"{value:,.0f}"


def main() -> int:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        anthropic_child(*child)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=Path, default=HERE / "budgets.toml")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind children at once (default 2)")
    parser.add_argument("--rows", default=",".join(r.name for r in ROWS), help="comma-separated row names")
    parser.add_argument(
        "--whole-process", action="store_true", help="count every run from the interpreter's start (slower)"
    )
    parser.add_argument("--verbose", action="store_true", help="print each run's counts and duration")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("the smoke run needs valgrind (apt-get install valgrind)")
    config = tomllib.loads(args.budgets.read_text())
    rows = [r for r in ROWS if r.name in args.rows.split(",")]
    verdicts({r.name: 0.0 for r in rows}, {r.name: r.unit for r in rows}, config)  # every row has a budget
    whole = args.whole_process or not _callgrind.can_count_from_collect()
    whole_runs = {run for row in rows for run in row.runs if whole or row.whole_process}
    phased_runs = {run for row in rows for run in row.runs if row.phased}
    # Longest first, so that the last two runs end together: whole processes, then the long streams.
    runs = sorted(
        {(run, layout) for row in rows for run in row.runs for layout in row.layouts},
        key=lambda item: (
            item[0] not in whole_runs,
            item[0] not in phased_runs and f"stream{LONG}" not in item[0][1],
            item[0][0] == DECORATORS,
            item,
        ),
    )
    started = time.perf_counter()
    _callgrind.warm([(script, variant) for (script, variant, _), _ in runs], jobs=args.jobs)

    def count(item: tuple[Run, int]) -> Totals:
        begin = time.perf_counter()
        run, layout = item
        if run in phased_runs:
            found = dict(enumerate(_callgrind.run_phases(*run, layout=layout), start=1))
        else:
            found = _callgrind.run_totals(*run, from_collect=run not in whole_runs, layout=layout)
        if args.verbose:
            script, variant, calls = run
            counts = (
                f"{len(found)} phases, app thread {_all(found):,}, paired slope "
                f"{paired_slope([found[i] for i in sorted(found)], calls):,.0f}"
                if run in phased_runs
                else f"app thread {_app(found):,}, all threads {_all(found):,}"
            )
            where = f" layout {layout}" if layout else ""
            print(
                f"  {Path(script).name} {variant} {calls}{where}: {counts} ({time.perf_counter() - begin:.0f} s)",
                flush=True,
            )
        return found

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        totals = dict(zip(runs, pool.map(count, runs), strict=True))
    values: dict[str, float] = {}
    for row in rows:
        figures = row.figures(totals)
        values[row.name] = figure(figures)
        if args.verbose and len(figures) > 1:
            each = ", ".join(_fmt(f, row.unit) for f in figures)
            print(
                f"  {row.name}: layouts {', '.join(map(str, row.layouts))}: {each}; median {_fmt(values[row.name], row.unit)}"
            )
    lines, failed = verdicts(values, {row.name: row.unit for row in rows}, config)
    print("\n".join(lines))
    padded = sum(1 for _, layout in runs if layout)
    counted = (
        f"{len(whole_runs)} of them whole processes, the others from the measured phase on; {padded} under a padded"
        " heap layout"
    )
    print(f"{len(runs)} callgrind runs in {time.perf_counter() - started:.0f} s ({args.jobs} at once; {counted})")
    if failed:
        print(f"over budget by more than {float(config.get('tolerance', 0.10)):.0%}: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
