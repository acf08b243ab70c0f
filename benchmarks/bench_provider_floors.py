"""Per chunk of each provider's stream against its OWN floor, as issue 28 defines the budget: paired, one process.

Run: python benchmarks/bench_provider_floors.py [--providers groq,mistral] [--quick] [--rounds 2] [--layouts 1]

Issue 28: "The new providers of issue 20 get the same per-call and per-chunk budgets relative to their own floors."
The OpenAI per-chunk budget (6k) is ~2.14x its floor's added cost (2.8k: ``bench_openai_pipeline.py``'s
``floor+json``, a raw OTel span around ``create()`` and, for a stream, a generator that re-yields each chunk, appends
``chunk.choices[0].delta.content`` and sets the joined text as one attribute at the end). This benchmark gives every
provider that floor, written by hand for its SDK (:data:`FLOORS`: the text delta read the provider's natural way,
and its reasoning delta where the recorded stream has one, as evaltrace records both), and measures three things in
ONE callgrind child per provider, as ``smoke.py``'s paired stream rows do for OpenAI:

  none       the provider's real client, uninstrumented, answered in-process (``bench_providers.py``'s clients:
             ``httpx.MockTransport``, botocore's ``before-send`` for Bedrock)
  floor      the hand-written floor: a raw OTel span (``_pipeline.raw_otel_tracer`` into ``ReadingExporter``)
  evaltrace  ``configure()`` into ``ReadingExporter`` + ``instrument_<provider>()``, content on

Each round streams ``SHORT`` and ``LONG`` content events (``bench_providers.stream_events``) through each of the
three, each stream a callgrind phase of its own (``_callgrind.phase_begin/phase_end``; the instrumentation is
switched between phases, uncounted), after uncounted warm-up rounds. The figure of an implementation is what it adds
per content event on the application thread: ((impl long - impl short) - (none long - none short)) / (rounds x
(LONG - SHORT)). All three share the process's heap layout, which moved the separate-process slopes by more than
our whole cost (benchmarks/README.md, "Figures that do not follow the memory layout"); ``--layouts 1,2,3`` runs the
child under several heap paddings and reports the median of each figure. The ratio evaltrace / floor is the issue's
measure; ``openai`` runs the same way as the reference (its figures are those of the smoke row's definition).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import _callgrind
import bench_providers as providers
import httpx

SHORT, LONG = providers.SHORT, providers.LONG  # 10 and 110 content events
QUICK_SHORT, QUICK_LONG = providers.QUICK_SHORT, providers.QUICK_LONG
IMPLS = ("none", "floor", "evaltrace")
WARMUP_ROUNDS = 2
SIZES_ENV = "EVALTRACE_FLOOR_SIZES"  # "short,long" for the child
OUTPUT = "gen_ai.output.messages"  # the floor's one content attribute, the joined text (as bench_openai_pipeline's)
REASONING = "gen_ai.output.reasoning"  # set too when the stream carried reasoning

Parts = tuple[list[str], list[str]]  # (text deltas, reasoning deltas) of one stream


# --- each provider's natural read of one chunk: append its text (and reasoning) delta ------------------------------


def _choices_delta(chunk: Any, parts: Parts) -> None:  # OpenAI, Groq, LiteLLM: chunk.choices[0].delta.content
    if chunk.choices:
        content = chunk.choices[0].delta.content
        if content:
            parts[0].append(content)


def _mistral(event: Any, parts: Parts) -> None:  # event.data.choices[0].delta.content: a str or a list of chunks
    choices = event.data.choices
    if not choices:
        return
    content = choices[0].delta.content
    if not content:
        return
    if isinstance(content, str):
        parts[0].append(content)
        return
    for item in content:  # a TextChunk, or a ThinkChunk holding its own TextChunks (magistral's reasoning)
        if item.type == "thinking":
            parts[1].extend(t.text for t in item.thinking if getattr(t, "text", None))
        elif getattr(item, "text", None):
            parts[0].append(item.text)


def _ollama(chunk: Any, parts: Parts) -> None:  # chunk.message.content, and .thinking for a thinking model
    message = chunk.message
    if message.content:
        parts[0].append(message.content)
    if message.thinking:
        parts[1].append(message.thinking)


def _cohere(event: Any, parts: Parts) -> None:  # the content-delta event's delta.message.content.text (or thinking)
    if event.type == "content-delta":
        content = event.delta.message.content
        if content.text:
            parts[0].append(content.text)
        if content.thinking:
            parts[1].append(content.thinking)


def _google(chunk: Any, parts: Parts) -> None:  # chunk.candidates[0].content.parts[..].text, thought parts apart
    candidates = chunk.candidates
    if not candidates or candidates[0].content is None or not candidates[0].content.parts:
        return
    for part in candidates[0].content.parts:
        if part.text:
            parts[1 if part.thought else 0].append(part.text)


def _converse(event: Any, parts: Parts) -> None:  # event["contentBlockDelta"]["delta"]["text"]
    block = event.get("contentBlockDelta")
    if block is not None:
        delta = block["delta"]
        if "text" in delta:
            parts[0].append(delta["text"])
        elif "reasoningContent" in delta and "text" in delta["reasoningContent"]:
            parts[1].append(delta["reasoningContent"]["text"])


def _invoke(event: Any, parts: Parts) -> None:  # the Anthropic event decoded from the message: delta.text
    chunk = event.get("chunk")
    if chunk is None:
        return
    decoded = json.loads(chunk["bytes"])
    if decoded["type"] == "content_block_delta":
        delta = decoded["delta"]
        if delta["type"] == "text_delta":
            parts[0].append(delta["text"])
        elif delta["type"] == "thinking_delta":
            parts[1].append(delta["thinking"])


FLOORS: dict[str, Callable[[Any, Parts], None]] = {
    "openai": _choices_delta,
    "groq": _choices_delta,
    "litellm": _choices_delta,
    "mistral": _mistral,
    "ollama": _ollama,
    "cohere": _cohere,
    "google_genai": _google,
    "bedrock": _converse,
    "bedrock_invoke": _invoke,
}


def _floor_stream(stream: Any, span: Any, read: Callable[[Any, Parts], None]) -> Iterator[Any]:
    parts: Parts = ([], [])
    try:
        for chunk in stream:
            read(chunk, parts)
            yield chunk
    finally:
        span.set_attribute(OUTPUT, json.dumps(["".join(parts[0])]))
        if parts[1]:
            span.set_attribute(REASONING, "".join(parts[1]))
        span.end()


def _target(name: str) -> tuple[Any, str]:
    """The SDK attribute the floor wraps: the one the bench's client calls (for Bedrock, botocore's one door)."""
    if name == "openai":
        from openai.resources.chat.completions import Completions

        return Completions, "create"
    if name == "groq":
        from groq.resources.chat.completions import Completions as GroqCompletions

        return GroqCompletions, "create"
    if name == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # it fetches its price map at import otherwise
        import litellm

        return litellm, "completion"
    if name == "mistral":
        from mistralai.client.chat import Chat

        return Chat, "stream"
    if name == "ollama":
        import ollama

        return ollama.Client, "chat"
    if name == "cohere":
        from cohere.v2.client import V2Client

        return V2Client, "chat_stream"
    if name == "google_genai":
        from google.genai.models import Models

        return Models, "generate_content_stream"
    from botocore.client import BaseClient

    return BaseClient, "_make_api_call"


_BEDROCK_STREAM_KEY = {"ConverseStream": "stream", "InvokeModelWithResponseStream": "body"}


def install_floor(name: str, tracer: Any) -> Callable[[], None]:
    """Wrap ``name``'s streaming call in a raw OTel span whose stream folds the text; return the undo."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    owner, attr = _target(name)
    original = vars(owner)[attr]
    read = FLOORS[name]
    bedrock = name in ("bedrock", "bedrock_invoke")

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if bedrock:
            key = _BEDROCK_STREAM_KEY.get(args[1])
            if key is None:
                return original(*args, **kwargs)
            model = args[2].get("modelId", "")
        else:
            model = kwargs.get("model", "")
        span = tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes={"gen_ai.request.model": model})
        with trace.use_span(span, end_on_exit=False):
            result = original(*args, **kwargs)
        if bedrock:
            return {**result, key: _floor_stream(result[key], span, read)}
        return _floor_stream(result, span, read)

    setattr(owner, attr, wrapper)
    return lambda: setattr(owner, attr, original)


# --- the paired child ---------------------------------------------------------------------------------------------


def stream_function(name: str) -> tuple[Callable[[], None], Callable[[int], None]]:
    """``name``'s recorded stream through its real client: (one stream, set the number of content events)."""
    provider = providers.PROVIDERS[name]
    item = providers.recorded(provider, "stream")
    current = {"events": providers.stream_events(item, SHORT)}
    providers._BEDROCK_STREAMS.clear()
    fn = providers.CLIENTS[name](
        item, httpx.MockTransport(lambda r: providers.handler(item, current["events"])(r)), True
    )
    bodies = list(providers._BEDROCK_STREAMS)

    def size(contents: int) -> None:
        current["events"] = providers.stream_events(item, contents)
        for body in bodies:
            body["events"] = current["events"]

    size(SHORT)
    return fn, size


def switcher(name: str) -> tuple[Callable[[str], None], Callable[[], None]]:
    """Set-up of all three implementations in one process: (switch to one of :data:`IMPLS`, flush every span)."""
    from _pipeline import ReadingExporter, evaltrace_pipeline, raw_otel_tracer

    import evaltrace
    from evaltrace._internal import settings

    handle = evaltrace_pipeline(ReadingExporter())
    settings.replace(settings.CaptureSettings(capture_content=True))
    floor_provider, tracer = raw_otel_tracer(ReadingExporter())
    module = providers.PROVIDERS[name].instrument.removeprefix("instrument_")
    instrument = getattr(evaltrace, f"instrument_{module}")
    uninstrument = getattr(evaltrace, f"uninstrument_{module}")
    undo: list[Callable[[], None]] = []

    def switch(impl: str) -> None:
        while undo:  # the one implementation on: its undo
            undo.pop()()
        if impl == "floor":
            undo.append(install_floor(name, tracer))
        elif impl == "evaltrace":
            instrument()
            undo.append(uninstrument)

    def flush() -> None:
        handle.force_flush()
        floor_provider.force_flush()

    return switch, flush


def paired_child(name: str, rounds: int) -> None:
    """``rounds`` rounds of (short, long) x :data:`IMPLS`, each stream a phase, after uncounted warm-up rounds."""
    short, long = (int(n) for n in os.environ.get(SIZES_ENV, f"{SHORT},{LONG}").split(","))
    switch, flush = switcher(name)
    streams = {}
    for impl in IMPLS:  # each client made under its own implementation: Cohere's binds chat_stream when made
        switch(impl)
        streams[impl] = stream_function(name)

    def one_round(counted: bool) -> None:
        for n in (short, long):
            for impl in IMPLS:
                fn, size = streams[impl]
                size(n)
                switch(impl)
                if counted:
                    _callgrind.phase_begin()
                fn()
                if counted:
                    _callgrind.phase_end()

    for _ in range(WARMUP_ROUNDS):
        one_round(False)
    flush()
    gc.collect()
    gc.disable()
    for _ in range(rounds):
        one_round(True)
    switch("none")
    flush()


def added(phases: list[int], rounds: int, contents: int) -> dict[str, float]:
    """Per content event added over ``none`` by ``floor`` and ``evaltrace``, from one child's phases in order.

    Args:
        phases: Application-thread instructions of each phase: ``rounds`` rounds of (short, long) x :data:`IMPLS`.
        rounds: The child's rounds.
        contents: ``LONG - SHORT``, the content events between the two streams.

    Raises:
        ValueError: ``phases`` is not ``rounds`` whole rounds.
    """
    per_round = 2 * len(IMPLS)
    if len(phases) != rounds * per_round:
        raise ValueError(f"{len(phases)} phases for {rounds} rounds of {per_round}")
    slope = {}
    for i, impl in enumerate(IMPLS):
        short = sum(phases[i::per_round])
        long = sum(phases[len(IMPLS) + i :: per_round])
        slope[impl] = (long - short) / (rounds * contents)
    return {impl: slope[impl] - slope["none"] for impl in IMPLS[1:]} | {"none": slope["none"]}


def main() -> None:
    child = _callgrind.child_request(sys.argv)
    if child is not None:
        paired_child(*child)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--providers", default=",".join(FLOORS), help="comma-separated: " + ",".join(FLOORS))
    parser.add_argument("--quick", action="store_true", help=f"streams of {QUICK_SHORT} and {QUICK_LONG} events")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layouts", default="1", help="heap paddings (seeds, comma-separated); median reported")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    names = [n for n in args.providers.split(",") if n]
    unknown = [n for n in names if n not in FLOORS]
    if unknown:
        parser.error(f"unknown provider(s) {', '.join(unknown)}; choose from {', '.join(FLOORS)}")
    short, long = (QUICK_SHORT, QUICK_LONG) if args.quick else (SHORT, LONG)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ[SIZES_ENV] = f"{short},{long}"
    layouts = [int(n) for n in args.layouts.split(",")]
    for name in [n for n in names if providers.sdk_missing(n)]:
        print(f"{name:15} (skipped: {providers.sdk_missing(name)} is not installed)", flush=True)
    names = [n for n in names if not providers.sdk_missing(n)]
    print(f"callgrind, PYTHONHASHSEED=0, paired; {args.rounds} rounds of {short} and {long} content events; "
          f"layouts {args.layouts}; per content event, application thread, added over the uninstrumented client")  # fmt: skip
    print(
        f"{'provider':15} {'client':>10} {'floor':>8} {'evaltrace':>10} {'x floor':>8}   per layout (floor/evaltrace)"
    )

    def measure(run: tuple[str, int]) -> dict[str, float]:
        phases = _callgrind.run_phases(__file__, run[0], args.rounds, layout=run[1])
        return added(phases, args.rounds, long - short)

    runs = [(name, layout) for name in names for layout in layouts]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for name, layout, result in zip(
            (r[0] for r in runs), (r[1] for r in runs), pool.map(measure, runs), strict=True
        ):  # printed as each provider's layouts are all done (the map keeps the order)
            results.setdefault(name, {})[layout] = result
            if len(results[name]) == len(layouts):
                _print(name, list(results[name].values()))


results: dict[str, dict[int, dict[str, float]]] = {}


def _print(name: str, per_layout: list[dict[str, float]]) -> None:
    median = {impl: statistics.median(r[impl] for r in per_layout) for impl in ("none", "floor", "evaltrace")}
    each = "  ".join(f"{r['floor']:,.0f}/{r['evaltrace']:,.0f}" for r in per_layout)
    ratio = median["evaltrace"] / median["floor"]
    print(
        f"{name:15} {median['none']:10,.0f} {median['floor']:8,.0f} {median['evaltrace']:10,.0f} {ratio:8.2f}   {each}",
        flush=True,
    )
    print(json.dumps({"provider": name, **median, "layouts": per_layout}), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
