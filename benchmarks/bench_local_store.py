"""Local store at scale: write N spans (default 1,000,000) through the real exporter, then time the CLI on them.

Run: python benchmarks/bench_local_store.py [--spans 1000000] [--store DIR] [--runs 5] [--quick] [--reads-only]

1. Span rate of ``@evaltrace.trace`` (capture on) through ``configure()``, as ``bench_decorators.py`` measures it:
   the application-thread rate the store has to keep up with.
2. Write: traces of 10 spans with realistic attributes (an agent root with input/output, session, user and
   evaluation outcomes; 3 LLM calls with messages, tokens and cost; 4 tool calls; 2 tasks) handed to
   ``LocalStoreExporter.export`` in batches of ``LOCAL_STORE_MAX_BATCH`` (8,192), as the export queue's thread
   does. Reported: spans/s of
   the export calls (the exporter thread's rate) over wall time and over that thread's CPU time, and the
   database size; the decorator rate is given both ways too (CPU time is the steadier figure on a shared
   machine). Retention is off for the benchmark
   (the 1 GB default would start deleting before a million spans).
3. Read, each in a fresh process, ``--runs`` times: ``evaltrace traces list`` (latest 50), ``evaltrace traces list
   --failed-evals --service web`` and ``evaltrace traces show <12-digit prefix>``: wall time; CPU time
   (user + sys of the child, from ``wait4``); the child's peak
   RSS (``VmHWM``: ``getrusage`` would count the parent's pages copied at fork too); and, inside the child, the
   time of ``main()`` (no interpreter start-up, no ``import evaltrace``).
   Baseline in the same run: ``evaltrace traces list`` on an empty store (interpreter + imports + nothing read).

4. End to end (``--sustain N``, default 1,000,000; 0 skips it), in a fresh process: ``configure(local_store=...)``
   and N calls of a decorated function flat out on one thread, then ``force_flush``: the application's span
   rate with the store writing beside it, and the spans stored and lost (every span must be stored). N must
   be well past what the export queue absorbs (65,536 spans): a shorter burst only shows the queue's size.

Budgets (issue 16): list and show < 200 ms and < 150 MB each; write rate >= the decorator span rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from evaltrace.config import LOCAL_STORE_MAX_BATCH

BATCH = LOCAL_STORE_MAX_BATCH  # the local store's export queue batch
SPANS_PER_TRACE = 10
BUDGET_MS, BUDGET_MB = 200.0, 150.0
SCOPE = InstrumentationScope("evaltrace", "1.0")
RESOURCES = [Resource({"service.name": name, "deployment.environment.name": "dev"}) for name in ("web", "batch")]
QUESTIONS = ["What is the weather in Paris?", "Summarise this contract", "Refund order 1234", "Plan a trip to Rome"]


def _message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _span(
    trace_id: int, span_id: int, parent: int | None, name: str, start: int, attributes: dict[str, Any], **extra: Any
) -> ReadableSpan:
    ctx = SpanContext(trace_id, span_id, False, TraceFlags(1))
    return ReadableSpan(
        name=name,
        context=ctx,
        parent=SpanContext(trace_id, parent, False) if parent else None,
        resource=extra.get("resource", RESOURCES[0]),
        attributes=attributes,
        events=extra.get("events", ()),
        kind=extra.get("kind", SpanKind.INTERNAL),
        status=extra.get("status", Status(StatusCode.UNSET)),
        start_time=start,
        end_time=start + extra.get("duration", 1_000_000),
        instrumentation_scope=SCOPE,
    )


def make_trace(rng: random.Random, start: int) -> list[ReadableSpan]:
    """One agent run of 10 spans."""
    trace_id, root = rng.getrandbits(128), rng.getrandbits(64)
    question = rng.choice(QUESTIONS) + f" (#{rng.randrange(10**6)})"
    answer = "Here is what I found: " + " ".join(
        rng.choice(("light", "rain", "sun", "refund", "clause")) for _ in range(40)
    )
    failed = rng.random() < 0.1
    error = rng.random() < 0.05
    resource = RESOURCES[rng.random() < 0.2]
    spans = [
        _span(
            trace_id, root, None, "invoke_agent assistant", start,
            {
                "evaltrace.span.kind": "agent", "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant",
                "input.value": question, "output.value": answer, "session.id": f"s-{rng.randrange(5000)}",
                "user.id": f"u-{rng.randrange(500)}", "evaltrace.eval.helpfulness.outcome": "fail" if failed else "pass",
                "evaltrace.eval.helpfulness.score": 0.2 if failed else 0.9, "evaltrace.eval.no_pii.outcome": "pass",
            },
            resource=resource, duration=2_000_000_000,
        )
    ]  # fmt: skip
    offset = 1000
    for i in range(3):
        spans.append(
            _span(
                trace_id, rng.getrandbits(64), root, "chat gpt-4o-mini", start + offset,
                {
                    "evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "gen_ai.usage.input_tokens": rng.randrange(50, 2000), "gen_ai.usage.output_tokens": rng.randrange(10, 500),
                    "evaltrace.cost_usd": rng.random() / 1000, "gen_ai.response.finish_reasons": ("stop",),
                    "gen_ai.input.messages": _message("user", question), "gen_ai.output.messages": _message("assistant", answer[: 80 * (i + 1)]),
                },
                resource=resource, kind=SpanKind.CLIENT, duration=400_000_000,
                status=Status(StatusCode.ERROR, "rate limited") if error and i == 2 else Status(StatusCode.UNSET),
                events=(Event("gen_ai.content.chunk", {"index": 0}, start + offset + 10),),
            )
        )  # fmt: skip
        offset += 500_000_000
    for i in range(4):
        spans.append(
            _span(
                trace_id, rng.getrandbits(64), root, "execute_tool lookup", start + offset,
                {
                    "evaltrace.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": json.dumps({"query": question, "page": i}),
                    "gen_ai.tool.call.result": json.dumps({"items": [answer[:60]]}),
                },
                resource=resource, duration=20_000_000,
            )
        )  # fmt: skip
        offset += 30_000_000
    for name in ("task retrieve", "task format"):
        spans.append(
            _span(trace_id, rng.getrandbits(64), root, name, start + offset, {"evaltrace.span.kind": "task"}, resource=resource)
        )  # fmt: skip
    return spans


def decorator_span_rate(rounds: int, calls: int) -> tuple[float, float]:
    """Median spans/s of ``@evaltrace.trace`` (capture on) through ``configure()``, as bench_decorators runs it.

    Returns (wall rate, CPU rate): the second divides by the application thread's CPU time, which the other
    processes on a shared machine do not inflate.
    """
    sys.path.insert(0, str(Path(__file__).parent))
    from _pipeline import ReadingExporter, evaltrace_pipeline

    import evaltrace

    handle = evaltrace_pipeline(ReadingExporter())

    @evaltrace.trace
    def answer(question: str, context: dict[str, Any]) -> str:
        return question + str(len(context))

    rates, cpu_rates = [], []
    for _ in range(rounds):
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            answer("What is the weather in Paris today?", {"user": "ada", "locale": "en-GB", "turn": 3})
        rates.append(calls / (time.perf_counter() - start))
        cpu_rates.append(calls / (time.thread_time() - cpu))
        handle.force_flush()
    handle.shutdown()
    return statistics.median(rates), statistics.median(cpu_rates)


def sustain(calls: int) -> dict[str, float]:
    """End to end: ``configure(local_store=...)``, ``calls`` decorated calls flat out on one thread, then a flush.

    Runs in a fresh process (nothing of the write phase in its heap). Returns the application's span rate (wall
    and thread CPU) while the store writes beside it, the spans the store holds afterwards (``count(*)``) and
    the spans its export queue counted lost.
    """
    code = f"""
import json, sqlite3, sys, tempfile, time
import evaltrace
store = tempfile.mkdtemp(prefix="evaltrace-sustain-")
handle = evaltrace.configure(service_name="bench", local_store=store, handle_sigterm=False)

@evaltrace.trace
def answer(question, context):
    return question + str(len(context))

context = {{"user": "ada", "locale": "en-GB", "turn": 3}}
start, cpu = time.perf_counter(), time.thread_time()
for _ in range({calls}):
    answer("What is the weather in Paris today?", context)
wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
handle.force_flush(600_000)
stats = handle.evaluation_processor.stats() if handle.evaluation_processor is not None else {{}}
lost = sum(int(queue.get("lost", 0)) for queue in stats.get("exporters", {{}}).values())
handle.shutdown()
stored = sqlite3.connect(store + "/traces.sqlite3").execute("SELECT count(*) FROM spans").fetchone()[0]
print(json.dumps({{"wall_rate": {calls} / wall, "cpu_rate": {calls} / cpu, "stored": stored, "lost": lost}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def write(store: Path, total: int) -> tuple[float, float, int, str]:
    """Write ``total`` spans; returns (spans/s of the export calls: wall, CPU of their thread; bytes; a trace id)."""
    from evaltrace.exporters import LocalStoreExporter

    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=0)
    rng = random.Random(16)
    now = time.time_ns()
    spent = cpu_spent = 0.0
    written = 0
    some_trace = ""
    pending: list[ReadableSpan] = []

    def export(batch: list[ReadableSpan]) -> tuple[float, float]:
        # On its own thread, like the export queue's: what is timed is that thread's work (wall and CPU).
        box: list[tuple[float, float]] = []

        def run() -> None:
            begin, cpu = time.perf_counter(), time.thread_time()
            assert exporter.export(batch).name == "SUCCESS"
            box.append((time.perf_counter() - begin, time.thread_time() - cpu))

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        return box[0]

    traces = total // SPANS_PER_TRACE
    for n in range(traces):
        spans = make_trace(rng, now - (traces - n) * 500_000_000)  # one trace every 0.5 s, the newest now
        if n == traces // 2:
            some_trace = format(spans[0].context.trace_id, "032x")  # type: ignore[union-attr]
        pending.extend(spans)
        if len(pending) >= BATCH:
            wall, cpu = export(pending)
            spent, cpu_spent, written, pending = spent + wall, cpu_spent + cpu, written + len(pending), []
            if written % 100_000 < BATCH:
                print(
                    f"  ... {written:,} spans, {written / spent:,.0f} spans/s wall, {written / cpu_spent:,.0f} CPU",
                    file=sys.stderr,
                    flush=True,
                )
    if pending:
        wall, cpu = export(pending)
        spent, cpu_spent, written = spent + wall, cpu_spent + cpu, written + len(pending)
    exporter.shutdown()
    size = sum(p.stat().st_size for p in store.iterdir() if p.is_file())
    return written / spent, written / cpu_spent, size, some_trace


CHILD = """
import sys, time, io, contextlib
from evaltrace.cli import main
begin = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
elapsed = (time.perf_counter() - begin) * 1000
# The peak RSS of this process image: getrusage() would also count the parent's pages copied at fork.
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
sys.stderr.write(f"COMMAND_MS={elapsed:.2f} CODE={code} HWM_KB={hwm}\\n")
"""


def run_child(args: list[str]) -> tuple[float, float, float, float]:
    """(wall ms, CPU ms (user + sys), command ms, peak RSS MB) of ``evaltrace ARGS`` in a fresh process."""
    env = {**os.environ, "COLUMNS": "120"}
    begin = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - begin) * 1000
    cpu = (usage.ru_utime + usage.ru_stime) * 1000
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    line = next((x for x in err.splitlines() if x.startswith("COMMAND_MS=")), None)
    if line is None or "CODE=0" not in line:
        raise SystemExit(f"evaltrace {' '.join(args)} failed:\n{err}")
    fields = dict(item.split("=") for item in line.split())
    return wall, cpu, float(fields["COMMAND_MS"]), int(fields["HWM_KB"]) / 1024


def measure(label: str, args: list[str], runs: int) -> dict[str, float]:
    run_child(args)  # warm the page cache: the figures are those of a store in use, not of a cold disk
    samples = [run_child(args) for _ in range(runs)]
    result = {
        "wall": statistics.median(s[0] for s in samples),
        "cpu": statistics.median(s[1] for s in samples),
        "command": statistics.median(s[2] for s in samples),
        "rss": statistics.median(s[3] for s in samples),
    }
    print(
        f"| {label} | {result['wall']:.0f} | {result['cpu']:.0f} | {result['command']:.1f} | {result['rss']:.0f} |",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans to write (default 1,000,000)")
    parser.add_argument("--store", type=Path, help="store directory to (re)create (default: a temporary one)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per read command (median)")
    parser.add_argument("--quick", action="store_true", help="20,000 spans, 3 runs")
    parser.add_argument("--reads-only", action="store_true", help="time the reads of an existing --store only")
    parser.add_argument(
        "--sustain", type=int, default=1_000_000, help="decorated calls of the end-to-end check (0: skip it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.spans, args.runs = 20_000, 3
    root = args.store or Path(tempfile.mkdtemp(prefix="evaltrace-bench-"))
    if args.reads_only and args.store is None:
        parser.error("--reads-only needs --store")
    if not args.reads_only:
        shutil.rmtree(root, ignore_errors=True)
    empty = Path(tempfile.mkdtemp(prefix="evaltrace-empty-"))
    try:
        rate = cpu_rate = decorator_rate = decorator_cpu_rate = 0.0
        if args.reads_only:
            from evaltrace.exporters import LocalTraceStore

            with LocalTraceStore(root) as store:
                listed_ids = [s.trace_id for s in store.list_traces()]
            trace_id = listed_ids[len(listed_ids) // 2]
        else:
            decorator_rate, decorator_cpu_rate = decorator_span_rate(rounds=5, calls=5_000)
            print(
                f"decorator span rate (@evaltrace.trace, capture on): {decorator_rate:,.0f} spans/s wall, "
                f"{decorator_cpu_rate:,.0f} spans/s of application-thread CPU",
                flush=True,
            )
            started = time.perf_counter()
            rate, cpu_rate, size, trace_id = write(root, args.spans)
            print(
                f"write: {args.spans:,} spans in {time.perf_counter() - started:.0f} s wall; exporter thread "
                f"{rate:,.0f} spans/s wall = {rate / decorator_rate:.2f}x the decorator span rate, "
                f"{cpu_rate:,.0f} spans/s of its CPU = {cpu_rate / decorator_cpu_rate:.2f}x the decorator's; "
                f"store {size / 1e6:,.0f} MB ({size / args.spans:,.0f} B/span)",
                flush=True,
            )
        print(
            "\n| command (fresh process, median) | wall ms | CPU ms | command ms | peak RSS MB |\n|---|---:|---:|---:|---:|"
        )
        base = measure(
            "baseline: `traces list` on an empty store", ["traces", "list", "--store", str(empty)], args.runs
        )
        listed = measure("`traces list` (latest 50)", ["traces", "list", "-n", "50", "--store", str(root)], args.runs)
        measure(
            "`traces list --json` (latest 50)",
            ["traces", "list", "--json", "-n", "50", "--store", str(root)],
            args.runs,
        )
        filtered = measure(
            "`traces list --failed-evals --service web`",
            ["traces", "list", "-n", "50", "--failed-evals", "--service", "web", "--store", str(root)],
            args.runs,
        )
        shown = measure(
            f"`traces show {trace_id[:12]}`", ["traces", "show", trace_id[:12], "--store", str(root)], args.runs
        )
        print()
        for name, result in (("list", listed), ("list filtered", filtered), ("show", shown)):
            over = result["wall"] - base["wall"]
            verdict = "within" if result["wall"] < BUDGET_MS and result["rss"] < BUDGET_MB else "OVER"
            print(
                f"{name}: {result['wall']:.0f} ms wall, {result['cpu']:.0f} ms CPU ({over:+.0f} ms wall over the "
                f"empty-store baseline, command {result['command']:.1f} ms), {result['rss']:.0f} MB: {verdict} the "
                f"{BUDGET_MS:.0f} ms / {BUDGET_MB:.0f} MB budget (wall; CPU {'within' if result['cpu'] < BUDGET_MS else 'OVER'})"
            )
        if not args.reads_only:
            print(
                f"write rate {'meets' if rate >= decorator_rate else 'is BELOW'} the decorator span rate (wall); "
                f"{'meets' if cpu_rate >= decorator_cpu_rate else 'is BELOW'} it (CPU)"
            )
        if args.sustain and not args.reads_only:
            kept = sustain(args.sustain)
            print(
                f"end to end: {args.sustain:,} decorated calls flat out into configure(local_store=...): app "
                f"{kept['wall_rate']:,.0f} spans/s wall, {kept['cpu_rate']:,.0f} spans/s of its CPU; stored "
                f"{kept['stored']:,.0f}, lost {kept['lost']:,.0f}: "
                f"{'sustained' if kept['stored'] == args.sustain and not kept['lost'] else 'NOT sustained'}"
            )
    finally:
        shutil.rmtree(empty, ignore_errors=True)
        if args.store is None:  # a --store is kept, for --reads-only
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
