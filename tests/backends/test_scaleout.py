"""Scale-out: two real ``evaltrace worker`` processes behind a trace-id router, as behind the collector.

The router (``trace_router.py``) stands in for the collector's ``loadbalancing`` exporter; the workers are the
real CLI, each with its own JSONL score sink and its own OTLP/HTTP receiver for the enriched spans it exports.
Traces arrive spread over several export requests (children first, the root last, as an application's batch
exporter sends them), mixed with other traces. Everything asserted is read from the workers' outputs.

What "once" means (collector/README.md, "Scale-out"):
- every span is exported exactly once, and evaluated by each span-level evaluator exactly once;
- every trace gets exactly one trace-level score, from the worker that received its root span; with all
  workers up that worker holds the whole trace, so the score is computed on all of its spans;
- a worker stopped with SIGTERM first drains what it acknowledged (evaluates, scores, exports). A trace
  that was in progress on it continues on the next worker; the part it had acknowledged was exported and
  span-evaluated there, and never trace-evaluated there (no root: counted ``trace_incomplete``), so its single
  trace-level score, from the next worker, covers the part that worker received.
- a worker killed outright (SIGKILL, OOM) loses what it had acknowledged and not yet exported: the sender
  does not send acknowledged data again. That case is not "once" but "at most once", and is not tested here.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from otlp_receivers import OTLPHttpReceiver, ReceivedSpan, poll
from trace_router import TraceRouter
from worker_process import WorkerProcess, start_worker

from evaltrace._internal import semconv
from evaltrace.schema import Score

CHILDREN = 3  # LLM spans per trace, each reporting one input token: a trace-level count of 3 saw them all
SPAN_EVAL = "llm_checked"
TRACE_EVAL = "llm_spans_seen"

EVALUATORS = f"""
from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, evaluator


@evaluator(name="{SPAN_EVAL}")
def llm_checked(trace):
    return True


@evaluator(name="{TRACE_EVAL}")
def llm_spans_seen(trace):
    # One input token per LLM span: the sum is how many of the trace's LLM spans this worker saw.
    return float(trace.metrics.token_input or 0)


EVALUATORS = [
    EvaluatorSpec(llm_checked, span_kinds={{semconv.KIND_LLM}}),
    EvaluatorSpec(llm_spans_seen, trace_level=True),
]
"""


@dataclass
class Worker:
    """A worker process with the receiver its enriched spans go to and its score file."""

    process: WorkerProcess
    receiver: OTLPHttpReceiver
    scores_path: Path

    def scores(self) -> list[Score]:
        if not self.scores_path.exists():
            return []
        text = self.scores_path.read_text()
        # Polled while the worker writes: a last line without its newline is still being written, not a score yet.
        complete = text[: text.rfind("\n") + 1]
        return [Score.model_validate_json(line) for line in complete.splitlines() if line.strip()]

    def spans(self) -> list[ReceivedSpan]:
        return self.receiver.spans


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    (tmp_path / "scaleout_evals.py").write_text(EVALUATORS)
    started: list[Worker] = []
    try:
        for index in range(2):
            receiver = OTLPHttpReceiver().__enter__()
            scores = tmp_path / f"scores-{index}.jsonl"
            process = start_worker(
                tmp_path, "--evaluators", "scaleout_evals:EVALUATORS", "--sink", f"jsonl:{scores}",
                "--otlp-endpoint", receiver.base_url, "--shutdown-timeout", "8", name=f"worker-{index}",
            )  # fmt: skip
            started.append(Worker(process, receiver, scores))
        for worker in started:  # both start at once: on two cores that halves the wait
            worker.process.wait_ready()
        yield started
    finally:
        for worker in started:
            if worker.process.process.poll() is None:
                worker.process.stop()
            worker.receiver.__exit__()


def make_trace(number: int) -> tuple[list[ReadableSpan], ReadableSpan]:
    """A trace's LLM children and its agent root (the root ends last)."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    trace_id = (0x5CA1E << 100) | number
    root_ctx = SpanContext(trace_id, (number << 8) | 0xFF, False, flags)
    resource = Resource({"service.name": "scaleout-app"})
    start = 1_700_000_000_000_000_000 + number * 1_000_000_000
    children = [
        ReadableSpan(
            name=f"chat {number}.{index}",
            context=SpanContext(trace_id, (number << 8) | index + 1, False, flags),
            parent=root_ctx,
            resource=resource,
            attributes={semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM, semconv.GEN_AI_USAGE_INPUT_TOKENS: 1},
            kind=SpanKind.CLIENT,
            start_time=start + index * 1000,
            end_time=start + index * 1000 + 500,
        )
        for index in range(CHILDREN)
    ]
    root = ReadableSpan(
        name=f"invoke_agent {number}",
        context=root_ctx,
        resource=resource,
        attributes={semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT, semconv.OUTPUT_VALUE: "done"},
        start_time=start,
        end_time=start + 1_000_000,
    )
    return children, root


def send_rounds(url: str, traces: Sequence[int], rounds: Sequence[int], per_request: int = 7) -> None:
    """Export round ``r`` of every trace (child r, or the root for r == CHILDREN), ``per_request`` per request.

    Each request mixes spans of several traces, and each trace arrives over ``len(rounds)`` requests.
    """
    exporter = OTLPSpanExporter(endpoint=url + "/v1/traces")
    try:
        for r in rounds:
            spans = [make_trace(n)[0][r] if r < CHILDREN else make_trace(n)[1] for n in traces]
            for i in range(0, len(spans), per_request):
                assert exporter.export(spans[i : i + per_request]) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def trace_hex(number: int) -> str:
    return format((0x5CA1E << 100) | number, "032x")


def sent_spans(traces: Sequence[int]) -> dict[str, str]:
    """Span id -> trace id (hex) of every span of ``traces``."""
    ids = {}
    for n in traces:
        children, root = make_trace(n)
        for span in (*children, root):
            assert span.context is not None
            ids[format(span.context.span_id, "016x")] = trace_hex(n)
    return ids


def exported_once(workers: Sequence[Worker], expected: Collection[str]) -> dict[str, int]:
    """Which worker exported each sent span; fails if one was exported twice (or never, by the poll)."""
    counts: Counter[str] = Counter()
    owner: dict[str, int] = {}
    for index, worker in enumerate(workers):
        for span in worker.spans():
            if span.span_id in expected:  # result spans (`evaluation <name>`) are the workers' own
                counts[span.span_id] += 1
                owner[span.span_id] = index
    assert not [s for s, c in counts.items() if c > 1], "a span was exported twice"
    assert set(counts) == set(expected)
    return owner


def wait_for_scores(workers: Sequence[Worker], traces: Sequence[int]) -> list[tuple[int, Score]]:
    """(worker index, score) for every score, once each trace has its trace-level and span-level scores."""
    wanted = {trace_hex(n) for n in traces}

    def complete() -> list[tuple[int, Score]] | None:
        scores = [(i, s) for i, w in enumerate(workers) for s in w.scores()]
        traced = {s.trace_id for _, s in scores if s.name == TRACE_EVAL}
        spans = sum(1 for _, s in scores if s.name == SPAN_EVAL)
        return scores if traced >= wanted and spans >= CHILDREN * len(traces) else None

    result: list[tuple[int, Score]] = poll(complete, timeout=25)
    return result


def test_every_trace_is_evaluated_once_by_one_worker(workers: list[Worker]) -> None:
    traces = range(40)
    with TraceRouter([w.process.wait_ready() for w in workers]) as router:
        send_rounds(router.url, traces, range(CHILDREN + 1))
    assert not router.refusals and not router.rejections
    expected = sent_spans(traces)
    poll(lambda: sum(len(w.spans()) for w in workers) >= len(expected))
    scores = wait_for_scores(workers, traces)
    span_owner = exported_once(workers, expected)

    trace_scores = Counter(s.trace_id for _, s in scores if s.name == TRACE_EVAL)
    assert set(trace_scores) == {trace_hex(n) for n in traces}
    assert set(trace_scores.values()) == {1}, "a trace was evaluated twice"
    assert {s.value for _, s in scores if s.name == TRACE_EVAL} == {float(CHILDREN)}, "a trace-level score saw part"
    span_scores = Counter(s.observation_id for _, s in scores if s.name == SPAN_EVAL)
    assert set(span_scores.values()) == {1} and len(span_scores) == CHILDREN * len(traces)

    # No trace split: its spans were exported by, and its scores came from, one worker.
    touched: dict[str, set[int]] = {}
    for span_id, index in span_owner.items():
        touched.setdefault(expected[span_id], set()).add(index)
    for index, score in scores:
        assert score.trace_id is not None
        touched.setdefault(score.trace_id, set()).add(index)
    assert all(len(owners) == 1 for owners in touched.values()), touched
    assert {i for owners in touched.values() for i in owners} == {0, 1}, "both workers take a share"


def test_a_stopped_worker_hands_its_traces_to_the_other_without_loss_or_repeats(workers: list[Worker]) -> None:
    before, during, after = range(0, 16), range(16, 40), range(40, 52)
    urls = [w.process.wait_ready() for w in workers]
    with TraceRouter(urls) as router:
        send_rounds(router.url, before, range(CHILDREN + 1))
        send_rounds(router.url, during, range(CHILDREN - 1))  # the first children of each trace
        owner_of = {n: router.owner(bytes.fromhex(trace_hex(n))) for n in during}
        assert workers[0].process.stop(signal.SIGTERM) == 0, workers[0].process.output()  # drains, then exits
        send_rounds(router.url, during, range(CHILDREN - 1, CHILDREN + 1))  # the last child and the root
        send_rounds(router.url, after, range(CHILDREN + 1))
    assert [worker for worker, _ in router.refusals] == [0]
    assert not router.rejections
    moved = [n for n in during if owner_of[n] == 0]
    assert moved, "some in-progress trace was on the stopped worker"

    traces = range(0, 52)
    expected = sent_spans(traces)
    poll(lambda: sum(len(w.spans()) for w in workers) >= len(expected))
    scores = wait_for_scores(workers, traces)
    exported_once(workers, expected)  # nothing lost, nothing twice, including what worker 0 drained

    trace_scores = Counter(s.trace_id for _, s in scores if s.name == TRACE_EVAL)
    assert set(trace_scores) == {trace_hex(n) for n in traces}
    assert set(trace_scores.values()) == {1}, "a trace was evaluated twice"
    span_scores = Counter(s.observation_id for _, s in scores if s.name == SPAN_EVAL)
    assert set(span_scores.values()) == {1} and len(span_scores) == CHILDREN * len(traces)

    # A moved trace: its single trace-level score comes from worker 1 and covers the part worker 1 received
    # (the last LLM span); worker 0 evaluated and exported the first ones before it stopped.
    values = {s.trace_id: (i, s.value) for i, s in scores if s.name == TRACE_EVAL}
    for n in moved:
        assert values[trace_hex(n)] == (1, 1.0)
    for n in (*before, *[n for n in during if n not in moved], *after):
        assert values[trace_hex(n)][1] == float(CHILDREN)
    assert all(values[trace_hex(n)][0] == 1 for n in after), "after the stop everything goes to worker 1"
