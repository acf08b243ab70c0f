"""Mapping a long agent run's tool spans: cost per tool call at 50, 200 and 800 calls (should stay flat).

Run: python benchmarks/bench_tool_matching.py [--calls 50,200,800] [--repeats 7] [--quick]

Each trace is made with the real OpenTelemetry SDK (in-memory exporter): an agent root, a model call whose output
asks for N tool calls (half with a call id, half without, as Gemini and Ollama send them; the id-less ones
alternate between two tools whose arguments repeat, so several calls share a tool and its arguments), one tool
span per call, then a model call whose input holds the calls and their results, and the final answer. The message
list is O(N): anything above linear in the figures is the mapping's. ``trace_from_spans`` maps it eagerly (every
field) and lazily (``tool_calls`` and ``tool_results`` read, as a tool evaluator reads them); the best of ``--repeats``
runs (the least disturbed on a shared machine, as ``timeit`` takes it) is printed per tool call, with the growth
against the smallest N (1.0 = linear).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import semconv as sc
from evaltrace.mapping import trace_from_spans

T0_NS = 1_777_800_000 * 1_000_000_000


def _js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _call(n: int) -> tuple[str | None, str, dict[str, Any]]:
    """The n-th call: even ones with an id, odd ones without, on tools whose arguments repeat."""
    if n % 2 == 0:
        return f"call_{n}", "search", {"query": f"q{n}"}
    return None, ("lookup" if n % 4 == 1 else "fetch"), {"key": f"k{n % 10}"}


def _part(call_id: str | None, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": kind, "name": name, **fields}
    if call_id is not None:
        part["id"] = call_id
    return part


def make_spans(calls: int) -> tuple[ReadableSpan, ...]:
    """The spans of one agent run making ``calls`` tool calls in one step (see the module's docstring)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    clock = iter(range(0, 10 * calls + 100))

    def span(name: str, attrs: dict[str, Any], parent: Any) -> None:
        ctx = trace_api.set_span_in_context(parent)
        started = tracer.start_span(name, context=ctx, start_time=T0_NS + next(clock) * 1000, attributes=attrs)
        started.end(end_time=T0_NS + next(clock) * 1000)

    root = tracer.start_span("invoke_agent a", start_time=T0_NS, attributes={sc.EVALTRACE_SPAN_KIND: sc.KIND_AGENT})
    llm = {sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM, sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
    user = {"role": "user", "parts": [{"type": "text", "content": "Do the work."}]}
    asked = [
        {"role": "assistant", "parts": [_part(i, "tool_call", n, arguments=a)]} for i, n, a in map(_call, range(calls))
    ]
    answers = [
        {"role": "tool", "parts": [_part(i, "tool_call_response", n, response=f"r{k}")]}
        for k, (i, n, _) in enumerate(map(_call, range(calls)))
    ]
    first = {**llm, sc.GEN_AI_INPUT_MESSAGES: _js([user]), sc.GEN_AI_OUTPUT_MESSAGES: _js(asked)}
    span("chat m", first, root)
    for k in range(calls):
        call_id, name, arguments = _call(k)
        attrs = {
            sc.EVALTRACE_SPAN_KIND: sc.KIND_TOOL,
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: name,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: _js(arguments),
            sc.GEN_AI_TOOL_CALL_RESULT: _js(f"r{k}"),
        }
        if call_id is not None:
            attrs[sc.GEN_AI_TOOL_CALL_ID] = call_id
        span(f"execute_tool {name}", attrs, root)
    done = {"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}
    last = {**llm, sc.GEN_AI_INPUT_MESSAGES: _js([user, *asked, *answers]), sc.GEN_AI_OUTPUT_MESSAGES: _js([done])}
    span("chat m", last, root)
    root.end(end_time=T0_NS + next(clock) * 1000)
    provider.shutdown()
    return exporter.get_finished_spans()


def _eager(spans: tuple[ReadableSpan, ...]) -> None:
    trace_from_spans(spans)


def _lazy(spans: tuple[ReadableSpan, ...]) -> None:
    trace = trace_from_spans(spans, lazy=True)
    assert trace.tool_calls is not None and trace.tool_results is not None


def measure(calls: int, repeats: int) -> dict[str, float]:
    """Best seconds of each way of mapping the trace of ``calls`` tool calls."""
    spans = make_spans(calls)
    trace = trace_from_spans(spans)
    assert len(trace.tool_calls) == calls and len(trace.tool_results) == calls  # every call counted once
    figures: dict[str, float] = {}
    for label, run in (("eager", _eager), ("lazy", _lazy)):
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            run(spans)
            times.append(time.perf_counter() - started)
        figures[label] = min(times)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="50,200,800", help="comma-separated tool call counts")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="50 and 200 calls, 3 repeats")
    args = parser.parse_args()
    sizes = [50, 200] if args.quick else [int(n) for n in args.calls.split(",")]
    repeats = 3 if args.quick else args.repeats
    print(f"{'calls':>6} | {'eager ms':>9} | {'us/call':>8} | {'growth':>6} | {'lazy ms':>9} | {'us/call':>8} | growth")
    base: dict[str, float] = {}
    for calls in sizes:
        figures = measure(calls, repeats)
        per = {label: seconds / calls for label, seconds in figures.items()}
        base = base or per
        print(
            f"{calls:>6} | {figures['eager'] * 1e3:>9.1f} | {per['eager'] * 1e6:>8.1f} | "
            f"{per['eager'] / base['eager']:>6.2f} | {figures['lazy'] * 1e3:>9.1f} | {per['lazy'] * 1e6:>8.1f} | "
            f"{per['lazy'] / base['lazy']:.2f}"
        )


if __name__ == "__main__":
    main()
