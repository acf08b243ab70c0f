"""OpenAI instrumentation cost as users run it: recorded traffic, the ``configure()`` pipeline, a reading exporter.

Run: python benchmarks/bench_openai_pipeline.py --instructions [--calls 40] [--cases call1,stream20]
     python benchmarks/bench_openai_pipeline.py --threads [--rounds 9]
     python benchmarks/bench_openai_pipeline.py --breakdown   (where a plain call's instructions go, by step)

Every call goes through the real openai client, answered over ``httpx.MockTransport`` with the real responses
recorded in ``tests/fixtures/openai-cassettes`` (``test_chat_completion_with_content.yaml`` for plain calls,
``test_chat_completion_streaming.yaml`` for streams: its recorded content chunk repeated to 20/200/2000 chunks,
with the recorded role, finish and usage chunks around). Cases: ``call1``/``call10``/``call100`` send a history of
1/10/100 messages; ``stream20``/``stream200``/``stream2000`` stream that many chunks; ``first`` is ``call1`` made
once, with no warm-up: with 0 measured calls, a whole process of set-up and first call (``smoke.py``'s start-up row).

Implementations, each in its own process: ``none`` (uninstrumented client: the baseline subtracted from the
others), ``floor`` (a raw OTel span around ``Completions.create`` with model, id and usage, on a plain SDK
provider with OTel's BatchSpanProcessor), ``floor+json`` (the floor plus the request messages and the answer as
JSON attributes: what content capture costs at the least), ``official`` (opentelemetry-instrumentation-openai-v2
with content on the span: ``gen_ai_latest_experimental``, ``SPAN_ONLY``), ``evaltrace`` (``configure()`` with the
evaluation processor + ``instrument_openai()``, content capture on) and ``evaltrace-before`` (the same, with
evaltrace imported from the source tree in ``$EVALTRACE_BENCH_BASELINE_SRC``: an earlier version measured in the
same run; skipped when unset). Every pipeline exports into
``_pipeline.ReadingExporter``, which reads every attribute of every span, so deferred work is counted.

``--instructions``: callgrind per-call counts, application thread and all threads apart (``_callgrind.py``),
reported as instructions added over ``none``. ``--threads``: 4 application threads making replayed plain calls,
wall time per call (median over rounds, implementations interleaved), against ``none``.
Budget (issue 17): evaltrace <= 450k instructions per plain call (``call1``), all threads.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _callgrind
import httpx
import yaml

CASSETTES = Path(
    os.environ.get(
        "EVALTRACE_CASSETTE_DIR",
        Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "openai-cassettes" / "otel-contrib",
    )
)
IMPLS = ("none", "floor", "floor+json", "official", "evaltrace", "evaltrace-before")
# A source tree of evaltrace to compare against (e.g. ``git archive HEAD src``): ``evaltrace-before`` imports it.
BASELINE_ENV = "EVALTRACE_BENCH_BASELINE_SRC"
CASES = ("call1", "call10", "call100", "stream20", "stream200", "stream2000")
BUDGET = 450_000
# Seconds of sleep in the middle of a child's measured calls: a check that its counts do not depend on how long the
# child runs (a loaded machine stretches it); 0 (unset) in every real measurement.
STALL_ENV = "EVALTRACE_BENCH_STALL_S"
QUIET_DELAY_S = 3600.0
"""Export schedule delay of every pipeline in a plain-call child (``call*`` cases).

The export threads (OTel's BatchSpanProcessor, our export queues) otherwise wake on a timer (5 s / 1 s) and
callgrind counts every wake-up: a child slowed ~50x on a loaded machine ran longer, woke more often and counted
more (the same tree gave 1.79x at load 11 and 2.99x at load 20). With this delay nothing fires by timer while
the child runs; the flush after the measured calls still exports every span on the same threads, so each call's
export work is counted, identically for every implementation.
"""


def _recorded(name: str) -> tuple[dict[str, Any], list[tuple[str, str]], str]:
    """(request body, response headers, response body) of a cassette's first interaction."""
    item = yaml.safe_load((CASSETTES / name).read_text())["interactions"][0]
    headers = []
    for key, values in item["response"]["headers"].items():
        if key.lower() in ("content-length", "content-encoding", "transfer-encoding"):
            continue
        headers += [(key, str(v)) for v in (values if isinstance(values, list) else [values])]
    return json.loads(item["request"]["body"]), headers, item["response"]["body"]["string"]


def _history(n: int, question: str) -> list[dict[str, Any]]:
    """A conversation of ``n`` messages ending with the recorded question (alternating user / assistant turns)."""
    turns: list[dict[str, Any]] = []
    for i in range(n - 1):
        role = "user" if i % 2 == 0 else "assistant"
        turns.append({"role": role, "content": f"Turn {i}: tell me one more fact about the weather in Paris."})
    return [*turns, {"role": "user", "content": question}]


class Replay:
    """The recorded responses, served by a ``MockTransport`` handler; streams stretched to the case's length."""

    def __init__(self) -> None:
        self.call_request, self.call_headers, body = _recorded("test_chat_completion_with_content.yaml")
        self.call_body = body.encode()
        self.stream_request, self.stream_headers, sse = _recorded("test_chat_completion_streaming.yaml")
        events = [e + "\n\n" for e in sse.split("\n\n") if e.strip() and "[DONE]" not in e]
        # Recorded: role chunk, five content chunks, finish chunk, usage chunk.
        self.role, self.contents, self.tail = events[0], events[1:-2], events[-2:]
        self.streams: dict[int, list[bytes]] = {}

    def stream_events(self, chunks: int) -> list[bytes]:
        if chunks not in self.streams:
            body = [self.contents[i % len(self.contents)] for i in range(chunks - 3)]
            events = [self.role, *body, *self.tail, "data: [DONE]\n\n"]
            self.streams[chunks] = [e.encode() for e in events]
        return self.streams[chunks]

    def handler(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        if payload.get("stream"):
            events = self.stream_events(payload["max_tokens"])
            return httpx.Response(200, headers=self.stream_headers, content=iter(events))
        return httpx.Response(200, headers=self.call_headers, content=self.call_body)


def make_case(api: Any, replay: Replay, case: str) -> Callable[[], None]:
    """One call of ``case`` through the real client; streams are read to the end."""
    if case.startswith("call"):
        messages = _history(int(case[4:]), replay.call_request["messages"][-1]["content"])
        model = replay.call_request["model"]

        def call() -> None:
            api.chat.completions.create(model=model, messages=messages)

        return call
    chunks = int(case[6:])
    messages = _history(1, replay.stream_request["messages"][-1]["content"])
    model = replay.stream_request["model"]

    def stream() -> None:
        for _ in api.chat.completions.create(
            model=model, messages=messages, stream=True, max_tokens=chunks, stream_options={"include_usage": True}
        ):
            pass

    return stream


# --- implementations -----------------------------------------------------------------------------------------


def _floor(json_capture: bool) -> Callable[[], None]:
    """A raw OTel span around ``Completions.create``: what the least tracing costs (``json_capture``: + content)."""
    from _pipeline import ReadingExporter, raw_otel_tracer
    from openai.resources.chat.completions import Completions
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    provider, tracer = raw_otel_tracer(ReadingExporter())
    original = Completions.create

    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        model = kwargs.get("model", "")
        span = tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes={"gen_ai.request.model": model})
        if json_capture:
            span.set_attribute("gen_ai.input.messages", json.dumps(kwargs.get("messages")))
        with trace.use_span(span, end_on_exit=False):
            result = original(self, *args, **kwargs)
        if kwargs.get("stream"):
            return _floor_stream(result, span, json_capture)
        span.set_attribute("gen_ai.response.id", result.id)
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
        if json_capture:
            span.set_attribute("gen_ai.output.messages", json.dumps([c.message.content for c in result.choices]))
        span.end()
        return result

    Completions.create = create  # type: ignore[method-assign]
    TOGGLES["floor+json" if json_capture else "floor"] = lambda on: setattr(
        Completions, "create", create if on else original
    )
    return provider.force_flush  # type: ignore[return-value]


def _floor_stream(stream: Any, span: Any, json_capture: bool) -> Iterator[Any]:
    parts: list[str] = []
    try:
        for chunk in stream:
            if json_capture and chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            yield chunk
    finally:
        if json_capture:
            span.set_attribute("gen_ai.output.messages", json.dumps(["".join(parts)]))
        span.end()


def _official() -> Callable[[], None]:
    from _pipeline import ReadingExporter, raw_otel_tracer
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider, _ = raw_otel_tracer(ReadingExporter())
    instrumentor = OpenAIInstrumentor()  # type: ignore[no-untyped-call]
    instrumentor.instrument(tracer_provider=provider)

    def toggle(on: bool) -> None:
        instrumentor.instrument(tracer_provider=provider) if on else instrumentor.uninstrument()

    TOGGLES["official"] = toggle
    return provider.force_flush  # type: ignore[return-value]


def _evaltrace(quiet: bool, impl: str = "evaltrace") -> Callable[[], None]:
    from _pipeline import ReadingExporter, evaltrace_pipeline

    import evaltrace
    from evaltrace._internal import settings

    handle = evaltrace_pipeline(ReadingExporter())
    if quiet:  # read by the queue's thread at its next wait: the warm-up's flush wakes it before the measured calls
        for queue in getattr(handle, "_export_queues", ()):
            queue._delay = QUIET_DELAY_S
    settings.replace(settings.CaptureSettings(capture_content=True))
    evaltrace.instrument_openai()
    TOGGLES[impl] = lambda on: evaltrace.instrument_openai() if on else evaltrace.uninstrument_openai()
    return handle.force_flush  # type: ignore[return-value]


TOGGLES: dict[str, Callable[[bool], None]] = {}
"""How each implementation set up by :func:`setup` is switched off and on again (``paired_child``)."""


def setup(impl: str, quiet: bool = False) -> tuple[Any, Callable[[], None]]:
    """Instrument for ``impl``; return the client and the flush that completes the export of every span so far.

    ``quiet``: no export thread wakes on a timer (``QUIET_DELAY_S``); spans are exported by the flush.
    """
    if quiet:  # read by BatchSpanProcessor when it is made (the floor's and the official's)
        os.environ["OTEL_BSP_SCHEDULE_DELAY"] = str(int(QUIET_DELAY_S * 1000))
    if impl == "official":
        # Before the import: both are read at import / instrument time.
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    if impl == "evaltrace-before":
        sys.path.insert(0, os.environ[BASELINE_ENV])
    import openai

    flush: Callable[[], None] = lambda: None  # noqa: E731
    if impl in ("floor", "floor+json"):
        flush = _floor(impl == "floor+json")
    elif impl == "official":
        flush = _official()
    elif impl.startswith("evaltrace"):
        flush = _evaltrace(quiet, impl)
    replay = Replay()
    transport = httpx.MockTransport(replay.handler)
    api = openai.OpenAI(api_key="bench", http_client=httpx.Client(transport=transport))  # type: ignore[arg-type]
    return (api, replay), flush


PAIRED_CHUNKS = (20, 200)  # the two stream lengths of ``paired:slope``
PAIRED_IMPLS = ("evaltrace", "floor", "official")  # ``paired:slope`` (evaltrace), ``paired-floor:slope``, ...


def paired_impl(name: str) -> str:
    """The implementation a paired variant's name says: ``paired`` is evaltrace's, ``paired-<impl>`` is ``impl``."""
    return name.removeprefix("paired").removeprefix("-") or "evaltrace"


PAIRED_PHASES = tuple((on, n) for n in PAIRED_CHUNKS for on in (False, True))  # its phases in each round, in order


def paired_child(rounds: int, impl: str = "evaltrace") -> None:
    """``paired:slope``: the uninstrumented client and evaltrace's in ONE process, each stream counted apart.

    ``paired-floor:slope`` and ``paired-official:slope``: the same for the hand-written floor and the official
    openai-v2 instrumentation (``bench_stream_peers.py`` runs the three; the smoke row runs evaltrace's).

    Each round streams 20 and 200 chunks with the instrumentation off and on (``PAIRED_PHASES``), each
    stream a phase of its own (``_callgrind.phase_begin/phase_end``; the instrumentation is switched between
    phases, uncounted). Both sides of the difference then share one heap layout: the same addresses of attribute
    names and types, so the same type-cache collisions and dict probes in the client's own ~780k instructions per
    chunk. In separate processes, the client's slope alone moved by 3k per chunk between layouts, more than
    evaltrace's whole figure (benchmarks/README.md, "Figures that do not follow the memory layout").

    Nothing in the process depends on wall time before or during the phases, so a run's counts follow its heap
    layout only (the same environment and layout seed give the same figure): the export thread is made quiet
    (``QUIET_DELAY_S``) and woken once to read that delay, before the warm-up, and the process sleeps until it is
    parked again; no flush between the warm-up and the phases. Before, the thread woke every second (callgrind
    slows a child ~50x, and a loaded machine more), and the flush before the phases waited for it in a 50 ms poll:
    how often either ran, and so what each allocated and freed between the child's own allocations, followed the
    machine's load, and runs of the same tree in the same environment moved by up to ~500 per chunk.
    """
    (api, replay), flush = setup(impl, quiet=True)
    # Nothing is queued yet: evaltrace's flush only wakes its export thread, which then waits QUIET_DELAY_S (OTel's
    # BatchSpanProcessor, the floor's and the official's, read that delay when it was made).
    flush()
    time.sleep(1)  # the thread back in its wait before anything counted could interleave with it
    streams = {n: make_case(api, replay, f"stream{n}") for n in PAIRED_CHUNKS}
    switch = TOGGLES[impl]

    for on, n in PAIRED_PHASES * 5:  # the warm-up: 20 streams, as the other stream children's
        switch(on)
        streams[n]()
    # No flush here: the warm-up's ten spans stay queued (far under a batch: nothing wakes the thread).
    gc.collect()
    gc.disable()
    for _ in range(rounds):
        for on, n in PAIRED_PHASES:
            switch(on)
            _callgrind.phase_begin()
            streams[n]()
            _callgrind.phase_end()
    flush()


def callgrind_child(variant: str, calls: int) -> None:
    """``impl:case``: ``calls`` calls after a warm-up, the pipeline flushed before exit."""
    impl, case = variant.split(":")
    if impl == "step":
        breakdown_child(case, calls)
        return
    if impl == "paired" or impl.startswith("paired-"):
        paired_child(calls, paired_impl(impl))
        return
    (api, replay), flush = setup(impl, quiet=case.startswith("call"))
    fn = make_case(api, replay, "call1" if case == "first" else case)
    for _ in range(1 if case == "first" else 20):
        fn()
    flush()
    # A cyclic collection costs millions of instructions and lands in one run and not the other: off while
    # measured (a call of the client itself is ~6.5M instructions, so a collection swamps our ~0.3M).
    gc.collect()
    gc.disable()
    stall = float(os.environ.get(STALL_ENV, "0"))
    for i in range(calls):
        if stall and i == calls // 2:
            time.sleep(stall)  # what a loaded machine does to a child's wall time, on purpose
        fn()
    if case.startswith("stream"):
        _callgrind.count_to_here()  # a slope counts the app thread's streams, not the flush and teardown after them
    flush()
    if case.startswith("call"):
        # Every span is exported by now (the flush waits for it): the application thread's teardown after this is
        # the interpreter's, and it varied by millions between runs of one child (as bench_evaluation's did).
        _callgrind.count_to_here()


def instructions(calls: int, impls: list[str], cases: list[str]) -> None:
    variants = [f"{impl}:{case}" for case in cases for impl in ["none", *impls]]
    results = _callgrind.measure(__file__, variants, calls)
    print(f"instructions added per call over the uninstrumented client (callgrind, {calls} calls, PYTHONHASHSEED=0)")
    print(f"{'case':11} {'implementation':16} {'app thread':>11} {'x floor':>8} {'all threads':>12} {'x floor':>8}")
    for case in cases:
        base = results[f"none:{case}"]
        floor = results.get(f"floor:{case}")
        for impl in impls:
            r = results[f"{impl}:{case}"]
            app, total = r.app_thread - base.app_thread, r.all_threads - base.all_threads
            fa = floor.app_thread - base.app_thread if floor else float("nan")
            ft = floor.all_threads - base.all_threads if floor else float("nan")
            print(f"{case:11} {impl:16} {app:11,.0f} {app / fa:8.2f} {total:12,.0f} {total / ft:8.2f}")
        print(f"{case:11} {'(client itself)':16} {base.app_thread:11,.0f} {'':8} {base.all_threads:12,.0f}")
    for impl in ("evaltrace", "evaltrace-before"):
        key = f"{impl}:call1"
        if key in results and "none:call1" in results:
            total = results[key].all_threads - results["none:call1"].all_threads
            verdict = "OK" if total <= BUDGET else "OVER"
            print(f"budget {impl} call1 all threads <= {BUDGET:,}: {total:,.0f} {verdict}")


# --- where a plain call's instructions go -----------------------------------------------------------------------

STEPS = ("whole", "request", "response", "span", "span+set_built", "span+set_attributes")


def breakdown_child(step: str, calls: int) -> None:
    """One step of an instrumented plain call, in the ``configure()`` pipeline, with a pre-parsed response."""
    from _pipeline import ReadingExporter, evaltrace_pipeline
    from openai import OpenAI
    from openai.types.chat import ChatCompletion
    from opentelemetry import trace

    from evaltrace._internal import deferred_attributes, settings
    from evaltrace._internal.openai import build
    from evaltrace._internal.openai.call import LLMCall
    from evaltrace._internal.openai.registry import ENDPOINTS, EndpointKind
    from evaltrace._internal.openai.response import chat_outcome
    from evaltrace._internal.openai.wrappers import Telemetry, make_wrapper

    handle = evaltrace_pipeline(ReadingExporter())
    settings.replace(settings.CaptureSettings(capture_content=True))
    replay = Replay()
    completion = ChatCompletion.model_validate_json(replay.call_body)
    kwargs = {"model": replay.call_request["model"], "messages": replay.call_request["messages"]}
    provider = trace.get_tracer_provider()
    tracer = provider.get_tracer("bench")
    wrapper = make_wrapper(ENDPOINTS[0], Telemetry(provider, None))
    resource = OpenAI(api_key="bench").chat.completions
    max_len = settings.current.max_attribute_length

    def request() -> dict[str, Any]:
        return build.request_attributes(EndpointKind.CHAT, kwargs, True, max_len)

    def response() -> dict[str, Any]:
        return build.result_attributes(chat_outcome, completion, True, max_len, kwargs["model"], "openai")

    built = {**request(), **response()}

    def span(write: Callable[[Any], None] | None = None) -> None:
        call = LLMCall(tracer, EndpointKind.CHAT, kwargs, ("api.openai.com", 443), None)
        if write is not None:
            write(call.span)
        call.span.end()

    steps: dict[str, Callable[[], Any]] = {
        "whole": lambda: wrapper(lambda **_: completion, resource, (), kwargs),
        "request": request,
        "response": response,
        "span": span,
        "span+set_built": lambda: span(lambda s: deferred_attributes.set_built(s, built)),
        "span+set_attributes": lambda: span(lambda s: s.set_attributes(built)),
    }
    fn = steps[step]
    for _ in range(200):
        fn()
    handle.force_flush()
    gc.collect()
    gc.disable()
    for _ in range(calls):
        fn()
    handle.force_flush()


def breakdown(calls: int) -> None:
    results = _callgrind.measure(__file__, [f"step:{s}" for s in STEPS], calls)
    print(f"instructions per plain call, by step (no HTTP, pre-parsed response; callgrind, {calls} calls)")
    for name, value in results.items():
        print(f"{name[5:]:22} app thread {value.app_thread:10,.0f}   all threads {value.all_threads:10,.0f}")


# --- wall time with application threads ----------------------------------------------------------------------


def threads_child(impl: str, threads: int, calls: int) -> float:
    """Median-free single measurement: wall µs per call with ``threads`` threads making ``calls`` calls each."""
    (api, replay), flush = setup(impl)
    fn = make_case(api, replay, "call1")
    for _ in range(50):
        fn()
    flush()
    gc.collect()
    barrier = threading.Barrier(threads + 1)

    def worker() -> None:
        barrier.wait()
        for _ in range(calls):
            fn()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    flush()  # the export thread's backlog is part of what the application's threads competed with
    total = time.perf_counter() - start
    print(json.dumps({"calls": elapsed / (threads * calls) * 1e6, "flushed": total / (threads * calls) * 1e6}))
    return elapsed


def wall_times(rounds: int, impls: list[str], threads: int = 4, calls: int = 150) -> None:
    samples: dict[str, list[dict[str, float]]] = {impl: [] for impl in ["none", *impls]}
    for round_ in range(rounds):
        order = list(samples)
        order = order[round_ % len(order) :] + order[: round_ % len(order)]
        for impl in order:
            out = subprocess.run(
                [sys.executable, __file__, "--threads-child", impl, str(threads), str(calls)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )
            samples[impl].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{threads} application threads x {calls} plain calls each; wall us per call, medians of {rounds} rounds")
    print(f"{'implementation':16} {'calls':>9} {'+ over none':>12} {'to flushed':>11} {'+ over none':>12}")
    med = {k: {m: statistics.median(s[m] for s in v) for m in ("calls", "flushed")} for k, v in samples.items()}
    for impl, value in med.items():
        print(
            f"{impl:16} {value['calls']:9.1f} {value['calls'] - med['none']['calls']:12.1f}"
            f" {value['flushed']:11.1f} {value['flushed'] - med['none']['flushed']:12.1f}"
        )


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        callgrind_child(*child)
        return
    if sys.argv[1:2] == ["--threads-child"]:
        threads_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--impls", default=",".join(IMPLS[1:]), help="comma-separated, from: " + ",".join(IMPLS[1:]))
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, from: " + ",".join(CASES))
    parser.add_argument("--instructions", action="store_true", help="count instructions with callgrind")
    parser.add_argument("--threads", action="store_true", help="wall time of 4 application threads")
    parser.add_argument("--breakdown", action="store_true", help="instructions of each step of a plain call")
    args = parser.parse_args()
    impls = [i for i in args.impls.split(",") if i and (i != "evaltrace-before" or os.environ.get(BASELINE_ENV))]
    if args.instructions:
        instructions(args.calls, impls, [c for c in args.cases.split(",") if c])
    if args.breakdown:
        breakdown(max(args.calls, 500))
    if args.threads or not (args.instructions or args.breakdown):
        wall_times(args.rounds, impls)


if __name__ == "__main__":
    main()
