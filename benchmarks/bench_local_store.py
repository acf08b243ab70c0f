"""Local store at scale: write N spans (default 1,000,000) through the real exporter, then time the CLI on them.

Run: python benchmarks/bench_local_store.py [--spans 1000000] [--store DIR] [--runs 5] [--quick] [--reads-only]
     [--writer process|thread|both] [--write-only] [--sustain N]
     python benchmarks/bench_local_store.py --growth 1000000 [--growth-batch 8192]  (only 5. below)

1. Span rate of ``@evaltrace.trace`` (capture on) through ``configure()``, as ``bench_decorators.py`` measures it:
   the application-thread rate the store has to keep up with.
2. Write: traces of 10 spans with realistic attributes (an agent root with input/output, session, user and
   evaluation outcomes; 3 LLM calls with messages, tokens and cost; 4 tool calls; 2 tasks) handed to
   ``LocalStoreExporter.export`` in batches of ``LOCAL_STORE_MAX_BATCH`` (8,192), as the export queue's thread
   does. Reported: spans/s of
   the export calls (the exporter thread's rate) over wall time and over that thread's CPU time, and the
   database size; the decorator rate is given both ways too (CPU time is the steadier figure on a shared
   machine). Retention is off for the benchmark
   (the 1 GB default would start deleting before a million spans). With the writer process (``--writer``,
   default ``process``; ``both`` writes a store with each), ``export`` returns once the batch is handed over:
   the wall time then ends with ``force_flush`` (every batch stored), and the writer process's own CPU time
   (``/proc/<pid>/stat``) is reported per span beside the exporter thread's and the decorator's.
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
   Run with each ``--writer`` (``EVALTRACE_LOCAL_STORE_WRITER`` in the child).

5. Store size (``--growth N``): the writer process's CPU per span as its store grows to N spans (see ``growth``).

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


def sustain(calls: int, writer: str) -> dict[str, float]:
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
from evaltrace.exporters import LocalStoreExporter
import gc, os, threading
store_exporters = [o for o in gc.get_objects() if isinstance(o, LocalStoreExporter)]
lost += sum(e.stats()["lost_spans"] for e in store_exporters)

def cpu_s(stat_path):  # utime + stime of a process or thread, from /proc
    try:
        fields = open(stat_path).read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

queue = [t for t in threading.enumerate() if t.name == "evaltrace-export-local_store"]
exporter_cpu = cpu_s(f"/proc/self/task/{{queue[0].native_id}}/stat") if queue else 0.0
writer_cpu = sum(cpu_s(f"/proc/{{e.writer_pid}}/stat") for e in store_exporters if e.writer_pid)
handle.shutdown()
stored = sqlite3.connect(store + "/traces.sqlite3").execute("SELECT count(*) FROM spans").fetchone()[0]
print(json.dumps({{"wall_rate": {calls} / wall, "cpu_rate": {calls} / cpu, "stored": stored, "lost": lost,
                  "exporter_us": exporter_cpu * 1e6 / {calls}, "writer_us": writer_cpu * 1e6 / {calls},
                  "app_s": wall, "total_s": time.perf_counter() - start}}))
"""
    env = {**os.environ, "EVALTRACE_LOCAL_STORE_WRITER": writer}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, check=True, env=env
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 without one, or off Linux)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def write(store: Path, total: int, writer: str) -> tuple[float, float, int, str, float]:
    """Write ``total`` spans with ``writer``.

    Returns:
        Spans/s of the export calls (wall, up to every batch stored; CPU of their thread), the store's bytes, a
        trace id, and the writer process's CPU seconds (0 for the thread writer).
    """
    from evaltrace.exporters import LocalStoreExporter

    exporter = LocalStoreExporter(store, max_age_s=0, max_bytes=0, writer=writer)
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
    flushing = time.perf_counter()
    assert exporter.force_flush(3_600_000)  # the writer process's last batches: part of the wall time
    spent += time.perf_counter() - flushing
    child_cpu = _process_cpu_s(exporter.writer_pid)
    assert exporter.stats()["lost_spans"] == 0
    exporter.shutdown()
    size = sum(p.stat().st_size for p in store.iterdir() if p.is_file())
    return written / spent, written / cpu_spent, size, some_trace, child_cpu


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


def _report_writes(root: Path, spans: int, writers: list[str]) -> tuple[float, float, float, float, str]:
    """The decorator's span rate, then a store of ``spans`` written with each writer (the last one is kept)."""
    decorator_rate, decorator_cpu_rate = decorator_span_rate(rounds=5, calls=5_000)
    print(
        f"decorator span rate (@evaltrace.trace, capture on): {decorator_rate:,.0f} spans/s wall, "
        f"{decorator_cpu_rate:,.0f} spans/s of application-thread CPU",
        flush=True,
    )
    rate = cpu_rate = 0.0
    trace_id = ""
    for writer in writers:
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        rate, cpu_rate, size, trace_id, child_cpu = write(root, spans, writer)
        print(
            f"write ({writer} writer): {spans:,} spans in {time.perf_counter() - started:.0f} s wall; "
            f"{rate:,.0f} spans/s wall (to the last batch stored) = {rate / decorator_rate:.2f}x the "
            f"decorator span rate; exporter thread {cpu_rate:,.0f} spans/s of its CPU = "
            f"{cpu_rate / decorator_cpu_rate:.2f}x the decorator's; store {size / 1e6:,.0f} MB "
            f"({size / spans:,.0f} B/span)",
            flush=True,
        )
        print(
            f"  CPU per span: decorator (application thread) {1e6 / decorator_cpu_rate:.1f} us, exporter "
            f"thread {1e6 / cpu_rate:.1f} us, writer process {child_cpu * 1e6 / spans:.1f} us",
            flush=True,
        )
    return decorator_rate, decorator_cpu_rate, rate, cpu_rate, trace_id


def _report_sustain(calls: int, writer: str) -> None:
    kept = sustain(calls, writer)
    print(
        f"end to end ({writer} writer): {calls:,} decorated calls flat out into configure(local_store=...): app "
        f"{kept['wall_rate']:,.0f} spans/s wall, {kept['cpu_rate']:,.0f} spans/s of its CPU; stored "
        f"{kept['stored']:,.0f}, lost {kept['lost']:,.0f}: "
        f"{'sustained' if kept['stored'] == calls and not kept['lost'] else 'NOT sustained'}",
        flush=True,
    )
    print(
        f"  CPU per call: application thread {1e6 / kept['cpu_rate']:.1f} us, exporter thread "
        f"{kept['exporter_us']:.1f} us, writer process {kept['writer_us']:.1f} us; calls took {kept['app_s']:.1f} s, "
        f"stored by {kept['total_s']:.1f} s",
        flush=True,
    )


def _written_bytes() -> int:
    """Bytes this process passed to ``write`` calls so far (``wchar``: WAL, checkpoints and temporary files)."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0
    return int(fields["wchar"])


def growth(total: int, batch: int, window: int) -> None:
    """The writer process's cost per span as its store grows (``--growth``), where it goes, and what it writes.

    One-span traces of the decorator (``@evaltrace.trace``, capture on, as ``--sustain`` makes them) with random
    trace ids, ``batch`` spans a transaction (8,192: one export batch; the writer merges up to 32,768 when
    batches wait), written by ``store_session.StoreSession`` as the writer process opens it (its page cache
    included), in this process: CPU time per span over each ``window`` spans, with the write-statement and
    commit (WAL and checkpoint) shares, KB passed to ``write`` per span, and the WAL's size.
    """
    import marshal

    from opentelemetry import trace as otel_trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import evaltrace
    from evaltrace.exporters import store_process, store_writer
    from evaltrace.exporters.store_rows import stored_row
    from evaltrace.exporters.store_session import StoreSession
    from evaltrace.exporters.store_span import from_plain

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    otel_trace.set_tracer_provider(provider)  # this mode runs alone in its process
    evaltrace.trace(lambda question, context: question)("What is the weather in Paris today?", {"turn": 3})
    template = stored_row(memory.get_finished_spans()[-1])
    spent = {"commit": 0.0}
    patched = "write_transaction"  # the name store_writer calls: timed here, restored at the end
    commit = getattr(store_writer, patched)

    def timed_transaction(conn: Any, work: Any) -> Any:
        def timed_work(c: Any) -> Any:
            result = work(c)
            spent["commit"] -= time.process_time()  # the commit follows the work at once
            return result

        result = commit(conn, timed_work)
        spent["commit"] += time.process_time()
        return result

    setattr(store_writer, patched, timed_transaction)
    directory = Path(tempfile.mkdtemp(prefix="evaltrace-growth-"))
    cache = getattr(store_process, "WRITER_CACHE_KIB", None)  # None: a tree from before it (for a baseline)
    session = StoreSession(directory, 0, 0, *([cache] if cache else []))
    rng = random.Random()
    start_ns = time.time_ns()
    print(
        "\n| spans stored | writer CPU us/span | of which commit | KB written/span | WAL MB | load |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    try:
        written = 0
        cpu = wrote = 0.0
        spent["commit"] = 0.0
        while written < total:
            rows = []
            for index in range(batch):
                start = start_ns + (written + index) * 1000
                rows.append((f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(64):016x}", None, *template[3:8]))
                rows[-1] += (start, start + 500, *template[10:20])
            payload = marshal.dumps(rows)  # what the writer process receives and decodes
            before, bytes_before = time.process_time(), _written_bytes()
            assert session.write([from_plain(row) for row in marshal.loads(payload)]) == 0
            cpu += time.process_time() - before
            wrote += _written_bytes() - bytes_before
            written += batch
            if written % window < batch or written >= total:
                spans = window if written % window < batch else written % window or window
                wal = directory / "traces.sqlite3-wal"
                print(
                    f"| {written:,} | {cpu * 1e6 / spans:.1f} | {spent['commit'] * 1e6 / spans:.1f} | "
                    f"{wrote / spans / 1024:.1f} | {wal.stat().st_size / 2**20 if wal.exists() else 0:.0f} | "
                    f"{os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
                cpu = wrote = spent["commit"] = 0.0
    finally:
        session.close()
        setattr(store_writer, patched, commit)
        shutil.rmtree(directory, ignore_errors=True)


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
    parser.add_argument(
        "--writer",
        choices=("process", "thread", "both"),
        default="process",
        help="the store's writer (default process)",
    )
    parser.add_argument("--write-only", action="store_true", help="skip the reads")
    parser.add_argument(
        "--growth", type=int, default=0, help="only: the writer's CPU per span as a store grows to N spans"
    )
    parser.add_argument("--growth-batch", type=int, default=BATCH, help="spans per transaction for --growth")
    args = parser.parse_args()
    if args.growth:
        growth(args.growth, args.growth_batch, max(args.growth_batch, 98_304 // args.growth_batch * args.growth_batch))
    else:
        _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    writers = ["process", "thread"] if args.writer == "both" else [args.writer]
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
            decorator_rate, decorator_cpu_rate, rate, cpu_rate, trace_id = _report_writes(root, args.spans, writers)
        if args.write_only:
            for writer in writers if args.sustain else ():
                _report_sustain(args.sustain, writer)
            return
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
            for writer in writers:
                _report_sustain(args.sustain, writer)
    finally:
        shutil.rmtree(empty, ignore_errors=True)
        if args.store is None:  # a --store is kept, for --reads-only
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
