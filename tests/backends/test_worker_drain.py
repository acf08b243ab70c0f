"""``evaltrace worker`` under load: SIGTERM mid-load never loses an acknowledged span, and never under-counts.

A span is acknowledged once the worker answered 200 to the request carrying it. On SIGTERM the worker refuses
new requests (503 or a refused connection), then drains every acknowledged span through evaluation to its
downstream, a real OTLP/HTTP receiver on 127.0.0.1; what it could not deliver it counts on its last log line.
Client-side: acknowledged = delivered downstream + reported lost, exactly.

The downstream stalls while the load runs (as a busy collector does): the worker used to acknowledge spans
faster than it could export them, pile them up in its export queue and drop them when that filled, or when the
shutdown deadline cut the backlog off, counting some as lost and the batch being exported not at all. It now
holds each span in its byte budget until exported, so a stalled downstream turns senders away with 503 instead.

Deterministic at any load: each client sends a fixed number of requests; the signal goes out on a condition
(the worker pushed back), never after a sleep; the drain deadline is generous; counts are read after exit.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from otlp_receivers import OTLPHttpReceiver, poll
from worker_process import WorkerProcess, start_worker

from evaltrace._internal import semconv
from evaltrace.exporters.local_store import LocalStoreExporter
from evaltrace.worker import EvaluationWorker

CLIENTS = 6
REQUESTS_PER_CLIENT = 25
TRACES_PER_REQUEST = 40  # two spans each: an agent root and its LLM call, as the default evaluators judge them
# About 20 requests' worth: the worker holds at most this much not yet exported, whatever the load.
BUDGET = "256KiB"
PROTOBUF = {"Content-Type": "application/x-protobuf"}
_LOST = re.compile(r"(\d+) acknowledged span\(s\) not delivered")


def request_body(rng: random.Random) -> tuple[bytes, set[str]]:
    """One OTLP/HTTP protobuf export (the SDK's own encoder) and the span ids it carries."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    resource = Resource({"service.name": "load"})
    spans: list[ReadableSpan] = []
    for _ in range(TRACES_PER_REQUEST):
        trace_id, root_id, child_id = rng.getrandbits(128) | 1, rng.getrandbits(64) | 1, rng.getrandbits(64) | 1
        root = SpanContext(trace_id, root_id, False, flags)
        attributes = {semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM, semconv.OUTPUT_VALUE: "It is sunny."}
        spans.append(
            ReadableSpan(
                name="chat gpt-4o-mini",
                context=SpanContext(trace_id, child_id, False, flags),
                parent=root,
                resource=resource,
                attributes=attributes,
                kind=SpanKind.CLIENT,
                start_time=1_700_000_000_100_000_000,
                end_time=1_700_000_000_900_000_000,
            )
        )
        spans.append(
            ReadableSpan(
                name="invoke_agent weather",
                context=root,
                resource=resource,
                attributes={**attributes, semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT},
                start_time=1_700_000_000_000_000_000,
                end_time=1_700_000_001_000_000_000,
            )
        )
    ids = {format(s.context.span_id, "016x") for s in spans if s.context is not None}
    return encode_spans(spans).SerializeToString(), ids


class Load:
    """Clients sending a fixed set of requests to the worker at once; what got a 200 is acknowledged."""

    def __init__(self, url: str) -> None:
        rng = random.Random(24)
        self._bodies = [[request_body(rng) for _ in range(REQUESTS_PER_CLIENT)] for _ in range(CLIENTS)]
        self._url = url + "/v1/traces"
        self._lock = threading.Lock()
        self.acknowledged: set[str] = set()
        self.acked_requests = 0
        self.busy = 0  # 503s with Retry-After
        self._pool = ThreadPoolExecutor(CLIENTS)
        self._futures = [self._pool.submit(self._client, requests) for requests in self._bodies]

    def _client(self, requests: list[tuple[bytes, set[str]]]) -> None:
        with httpx.Client(timeout=60) as http:
            for body, ids in requests:
                try:
                    response = http.post(self._url, content=body, headers=PROTOBUF)
                except httpx.HTTPError:
                    continue  # the worker closed its port (or the connection): not acknowledged
                with self._lock:
                    if response.status_code == 200:
                        self.acknowledged.update(ids)
                        self.acked_requests += 1
                    elif response.status_code == 503 and response.headers.get("Retry-After"):
                        self.busy += 1
                    else:
                        raise AssertionError(f"unexpected {response.status_code}: {response.text}")

    @property
    def done(self) -> bool:
        return all(f.done() for f in self._futures)

    def finish(self) -> None:
        for future in self._futures:
            future.result(timeout=300)
        self._pool.shutdown()


def run_until_pushed_back(worker: WorkerProcess) -> Load:
    """Start the load against a worker whose downstream is stalled; return once the worker refuses requests."""
    load = Load(worker.wait_ready())
    # The budget fills while nothing can be exported: from then on requests get 503 (or all were sent).
    poll(lambda: load.busy or load.done, timeout=240, interval=0.01)
    return load


def reported_lost(worker: WorkerProcess) -> int:
    match = _LOST.search(worker.output())
    assert match is not None, worker.output()
    return int(match.group(1))


# The drain's deadline in the SIGTERM test: not what it is about (a deadline that cuts the drain short is the next
# test's), so generous. 20 s was not at load 25 on 2 cores: 1,155 of the acknowledged spans were still in evaluation
# or export at the deadline (counted exactly, as the next test proves, but this one asserts none is lost).
DRAIN_DEADLINE_S = 120
# The test's wait for the worker's exit: past the drain's deadline and the worker's own exit watchdog (+4 s).
EXIT_WAIT_S = DRAIN_DEADLINE_S + 60


def test_sigterm_under_load_delivers_every_acknowledged_span_once_the_downstream_recovers(tmp_path: Path) -> None:
    stalled = threading.Event()
    with OTLPHttpReceiver(gate=stalled) as downstream:
        worker = start_worker(
            tmp_path, "--otlp-endpoint", downstream.base_url, "--max-inflight-bytes", BUDGET,
            "--shutdown-timeout", str(DRAIN_DEADLINE_S),
        )  # fmt: skip
        try:
            load = run_until_pushed_back(worker)
            worker.process.send_signal(signal.SIGTERM)
            poll(lambda: "stopping" in worker.output(), timeout=60)
            stalled.set()  # the downstream recovers: the drain must get everything acknowledged there
            load.finish()
            assert worker.process.wait(timeout=EXIT_WAIT_S) == 0, worker.output()
        finally:
            stalled.set()
            worker.kill()
        received = downstream.snapshot()

    assert load.busy, "the worker pushed back with 503 + Retry-After while its downstream was stalled"
    assert load.acked_requests < CLIENTS * REQUESTS_PER_CLIENT
    assert load.acknowledged, worker.output()
    assert (len(load.acknowledged - received), reported_lost(worker)) == (0, 0), worker.output()


def test_what_a_dead_downstream_never_got_is_counted_exactly(tmp_path: Path) -> None:
    stalled = threading.Event()  # set only after the worker exited: nothing reaches the downstream meanwhile
    with OTLPHttpReceiver(gate=stalled) as downstream:
        worker = start_worker(
            tmp_path, "--otlp-endpoint", downstream.base_url, "--max-inflight-bytes", BUDGET,
            "--shutdown-timeout", "4",
        )  # fmt: skip
        try:
            load = run_until_pushed_back(worker)
            worker.process.send_signal(signal.SIGTERM)
            load.finish()
            assert worker.process.wait(timeout=60) == 0, worker.output()
            received = downstream.snapshot()
        finally:
            stalled.set()
            worker.kill()

    assert load.acknowledged and not received
    # Every acknowledged span is reported: those queued, and those of the export the deadline cut off.
    assert reported_lost(worker) == len(load.acknowledged), worker.output()


def test_spans_the_local_store_lost_after_accepting_them_are_counted_undelivered(tmp_path: Path) -> None:
    # The local store's writer process takes batches and writes them later: export() said SUCCESS, so only
    # the store's own report of what died with the writer tells the worker that acknowledged spans were lost.
    store = LocalStoreExporter(tmp_path / "store", max_age_s=0, max_bytes=0, writer="process")
    with EvaluationWorker([], [], [store], port=0, batch=False) as worker:
        url = worker.url + "/v1/traces"
        assert httpx.post(url, content=request_body(random.Random(1))[0], headers=PROTOBUF).status_code == 200
        assert store.force_flush(30_000)  # stored: the writer process runs
        pid = store.writer_pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # it reads nothing more
        try:
            response = httpx.post(url, content=request_body(random.Random(2))[0], headers=PROTOBUF)
            assert response.status_code == 200  # handed over (synchronously: batch=False) before the 200
        finally:
            os.kill(pid, signal.SIGKILL)
        worker.stop(10)  # the death is noticed: what the writer had not read is lost
        assert store.stats()["lost_spans"] == worker.stats()["undelivered_spans"] == 2 * TRACES_PER_REQUEST
