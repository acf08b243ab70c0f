"""Score delivery under backend faults: every score ends delivered or dead-lettered, none twice after replay.

The backend is a real HTTP server on 127.0.0.1 that misbehaves on purpose (500s, hangs, slow answers, 429/503 with
``Retry-After``) and counts, on its side, what it actually received and acknowledged: the worker's counters are
checked against it, not against themselves.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.cli import build_parser
from evaltrace.cli import main as cli_main
from evaltrace.evaluation import JsonlScoreSink, LangfuseScoreSink, PhoenixScoreSink, RetryPolicy, evaluator
from evaltrace.evaluation.sinks import SinkWorker, read_dead_letters, write_dead_letters
from evaltrace.evaluation.sinks._http import parse_retry_after
from evaltrace.schema import Score, Trace, score_id

from .conftest import wait_until

# Every CLI command module is imported here, at collection, while no other thread runs. `evaltrace scores replay`
# below would import them lazily, in the middle of a test whose fault server threads print tracebacks. Under pytest,
# evaltrace's modules are assertion-rewritten (our pytest11 plugin marks the package), so each lazy import runs
# ast.parse, and CPython 3.11 also runs ast.parse to format a traceback. Two of these racing on two threads raised
# "SystemError: AST constructor recursion depth mismatch" in CI (once in ~7,000 tests; cf. python/cpython#106905).
build_parser()

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TINY = RetryPolicy(max_retries=3, initial_backoff_s=0.001, max_backoff_s=0.01)
SCORES_PATH = "/api/public/scores"


@dataclass(frozen=True)
class Reply:
    """What the backend does with one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang: bool = False  # accept the request and never answer (until the test releases it)


@dataclass
class Received:
    wall: float
    mono: float
    path: str
    score_id: str | None


@dataclass
class FaultBackend:
    """Answers each request as ``behave(index)`` says; records what it received and what it acknowledged."""

    url: str = ""
    behave: Callable[[int], Reply] = lambda index: Reply()
    received: list[Received] = field(default_factory=list)
    stored: Counter[str] = field(default_factory=Counter)  # id -> upserts stored, each answered with a 2xx
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, path: str, raw: bytes) -> Reply:
        score = json.loads(raw).get("id") if path == SCORES_PATH else None
        with self.lock:
            index = len(self.received)
            self.received.append(Received(time.time(), time.monotonic(), path, score))
        return self.behave(index)

    def score_requests(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.score_id is not None]

    def acknowledge(self, raw: bytes, path: str) -> None:
        if path == SCORES_PATH:
            with self.lock:
                self.stored[json.loads(raw)["id"]] += 1


def _handler(backend: FaultBackend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real backends and httpx's pool do
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall per request

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            reply = backend.record(self.path, raw)
            if reply.hang:
                backend.release.wait(30)  # the hung request "lands" only when the test says so
            elif reply.delay_s:
                time.sleep(reply.delay_s)
            payload = b'{"id": "ok"}' if reply.status < 300 else b'{"error": "boom"}'
            if reply.status < 300:
                # Stored before the 2xx goes out, as a real backend commits before it replies: counted after the
                # write, a client (then the test) could read the 2xx before the count (the ``[slow]`` flake).
                backend.acknowledge(raw, self.path)
            try:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
            except OSError:  # the client gave up on us (the upsert is stored all the same, as on a real backend)
                return

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def fault() -> Iterator[FaultBackend]:
    backend = FaultBackend()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(backend))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    backend.url = f"http://{host}:{port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield backend
    finally:
        backend.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def make_scores(count: int, name: str = "quality") -> list[Score]:
    spans = [format(index + 1, "016x") for index in range(count)]
    return [
        Score(id=score_id(TRACE, span, name, "v1"), name=name, value=0.5, trace_id=TRACE, observation_id=span)
        for span in spans
    ]


def langfuse_worker(backend: FaultBackend, dead: Path | None, *, timeout_s: float = 5.0, **kwargs: Any) -> SinkWorker:
    kwargs.setdefault("retry", TINY)
    kwargs.setdefault("schedule_delay_s", 0.01)
    sink = LangfuseScoreSink(backend.url, "pk", "sk", timeout_s=timeout_s)
    return SinkWorker(sink, dead_letter_path=dead, **kwargs)


def dead_ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["score"]["id"] for line in path.read_text().splitlines()]


def replay(dead: Path, backend: FaultBackend) -> int:
    return cli_main(
        ["scores", "replay", str(dead), "--sink", "langfuse", "--host", backend.url, "--public-key", "pk"]
        + ["--secret-key", "sk"]
    )


# --- the fault backend itself ------------------------------------------------------------------------------


def test_the_fault_backend_stores_an_upsert_before_its_2xx_can_be_read(
    fault: FaultBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend counts a score stored before it answers, as a real one commits before replying.

    It used to count it after writing the 2xx: a client that read the reply (the replay CLI, then the test) could
    look at ``stored`` before the handler thread had counted it. That was the ``[slow]`` flake of
    ``test_every_score_is_delivered_or_dead_lettered_then_replayed_once`` under load: the last score replayed was
    received and answered, yet missing from ``stored`` when compared. A slow count widens that window here.
    """
    acknowledge = fault.acknowledge

    def slow_acknowledge(raw: bytes, path: str) -> None:
        time.sleep(0.3)  # the handler thread descheduled on a busy machine
        acknowledge(raw, path)

    monkeypatch.setattr(fault, "acknowledge", slow_acknowledge)
    (score,) = make_scores(1)
    sink = LangfuseScoreSink(fault.url, "pk", "sk")
    try:
        assert sink.export([score]).ok
    finally:
        sink.shutdown()
    assert set(fault.stored) == {score.id}  # the 2xx the client read implies the upsert is counted


# --- Retry-After -----------------------------------------------------------------------------------------


def test_retry_after_seconds_delays_every_next_request(tmp_path: Path, fault: FaultBackend) -> None:
    fault.behave = lambda index: Reply(429, {"Retry-After": "1"}) if index == 0 else Reply()
    worker = langfuse_worker(fault, tmp_path / "dl.jsonl", batch_size=1)
    worker.submit(make_scores(3))
    assert worker.force_flush(10)
    assert worker.shutdown(5)
    first, *later = fault.score_requests()
    assert len(later) == 3  # the retry of the first score, then the two others
    # Not only the retry: the next batches also wait, since the backend asked this client to hold off.
    assert all(request.mono - first.mono >= 1.0 for request in later), [r.mono - first.mono for r in later]
    assert (worker.stats.successes, worker.stats.retries, worker.stats.dead_lettered) == (3, 1, 0)


def test_retry_after_http_date_is_honoured(tmp_path: Path, fault: FaultBackend) -> None:
    not_before: list[int] = []

    def behave(index: int) -> Reply:
        if index:
            return Reply()
        when = math.ceil(time.time() + 0.5)  # an HTTP-date has whole seconds: at least 0.5 s ahead
        not_before.append(when)
        return Reply(503, {"Retry-After": email.utils.formatdate(when, usegmt=True)})

    fault.behave = behave
    worker = langfuse_worker(fault, tmp_path / "dl.jsonl")
    worker.submit(make_scores(1))
    assert worker.force_flush(10)
    worker.shutdown(5)
    first, retry = fault.score_requests()
    assert retry.wall >= not_before[0] > first.wall
    assert worker.stats.successes == 1


def test_retry_after_past_the_shutdown_deadline_dead_letters_instead_of_retrying_early(
    tmp_path: Path, fault: FaultBackend
) -> None:
    dead = tmp_path / "dl.jsonl"
    fault.behave = lambda index: Reply(429, {"Retry-After": "30"})
    worker = langfuse_worker(fault, dead, batch_size=10)
    scores = make_scores(4)
    worker.submit(scores)
    assert wait_until(lambda: len(fault.score_requests()) == 1)
    started = time.monotonic()
    worker.shutdown(0.5)
    assert time.monotonic() - started < 3.0  # the deadline, not the 30 s the backend asked for
    # One request only: the rest of the batch was not sent into a 429 either.
    assert len(fault.score_requests()) == 1
    assert sorted(dead_ids(dead)) == sorted(s.id for s in scores)
    assert worker.stats.dead_lettered == 4


def test_retry_after_beyond_the_cap_dead_letters_at_once(tmp_path: Path, fault: FaultBackend) -> None:
    dead = tmp_path / "dl.jsonl"
    fault.behave = lambda index: Reply(503, {"Retry-After": "3600"})
    retry = RetryPolicy(max_retries=5, initial_backoff_s=0.001, max_backoff_s=0.01, max_retry_after_s=2.0)
    worker = langfuse_worker(fault, dead, retry=retry)
    worker.submit(make_scores(1))
    assert worker.force_flush(5)
    worker.submit(make_scores(1, name="later"))  # the backend's hour is not over: this one is not sent either
    assert worker.force_flush(5)
    worker.shutdown(5)
    assert len(fault.score_requests()) == 1
    assert worker.stats.dead_lettered == 2 and worker.stats.retries == 0
    assert all("Retry-After" in json.loads(line)["error"] for line in dead.read_text().splitlines())


def test_retry_after_reaches_the_worker_from_phoenix_and_bad_values_are_ignored(fault: FaultBackend) -> None:
    fault.behave = lambda index: Reply(429, {"Retry-After": ["7", "soon", "-3"][index]})
    sink = PhoenixScoreSink(fault.url)
    try:
        waits = [sink.export(make_scores(1)).retry_after_s for _ in range(3)]
    finally:
        sink.shutdown()
    assert waits == [7.0, None, None]  # unreadable values fall back to the worker's own backoff
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 - 5) == 5.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


# --- produced == delivered + dead-lettered, then replay without duplicates ----------------------------------


def _always(reply: Reply) -> Callable[[int], Reply]:
    return lambda index: reply


BEHAVIOURS: dict[str, Callable[[int], Reply]] = {
    "500": _always(Reply(500)),
    # Healthy at first, then hangs: the batch in flight at the deadline is the one that used to vanish.
    "hang-after-10": lambda index: Reply() if index < 10 else Reply(hang=True),
    "slow": _always(Reply(delay_s=0.05)),
    "flaky": lambda index: Reply(500) if index % 3 == 0 else Reply(),
    "429": _always(Reply(429, {"Retry-After": "1"})),
}


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_every_score_is_delivered_or_dead_lettered_then_replayed_once(
    tmp_path: Path, fault: FaultBackend, behaviour: str
) -> None:
    dead = tmp_path / "langfuse.jsonl"
    fault.behave = BEHAVIOURS[behaviour]
    scores = make_scores(40)
    produced = {score.id for score in scores}
    # The client timeout (5 s) is far longer than the shutdown deadline: shutdown must not wait for it.
    worker = langfuse_worker(fault, dead, batch_size=5, timeout_s=5.0)
    worker.submit(scores)
    if behaviour == "hang-after-10":
        # Shut down once the hang has begun, not after a guess of how long ten requests take on a loaded machine.
        assert wait_until(lambda: len(fault.score_requests()) == 11)
    started = time.monotonic()
    worker.shutdown(0.5)
    assert time.monotonic() - started < 2.0  # within the deadline (slack for a loaded machine)

    stats = worker.stats
    written = dead_ids(dead)
    assert stats.submitted == 40
    assert stats.successes + stats.dead_lettered == 40 and stats.dropped == 0
    assert len(written) == len(set(written)) == stats.dead_lettered
    if behaviour == "hang-after-10":
        # The batch hung in flight at the deadline: dead-lettered, not lost, and counted abandoned whichever came
        # first, shutdown taking it from the hung thread or the request's own timeout (capped at the deadline).
        assert stats.abandoned == 5
        hung = {request.score_id for request in fault.score_requests()[10:]}
        assert len(hung) == 1 and hung <= set(written)  # the one request sent into the hang, then no more
    acknowledged = set(fault.stored)
    assert produced == acknowledged | set(written)  # nothing lost
    assert stats.successes <= len(acknowledged)  # never counted as delivered without the backend's 2xx

    # The hung requests land now; the abandoned worker thread must neither count them nor write them again.
    fault.behave = _always(Reply())
    fault.release.set()
    worker._thread.join(10)
    assert not worker._thread.is_alive()
    assert (stats.successes, stats.dead_lettered) == (40 - len(written), len(written))
    assert dead_ids(dead) == written

    if written:
        assert replay(dead, fault) == 0
    assert not dead.exists()
    received = {r.score_id for r in fault.score_requests()}
    assert received == produced == set(fault.stored)  # every id stored, nothing else, each an upsert on its id


def test_shutdown_while_a_request_hangs_returns_by_the_deadline(tmp_path: Path, fault: FaultBackend) -> None:
    fault.behave = _always(Reply(hang=True))
    worker = langfuse_worker(fault, tmp_path / "dl.jsonl", timeout_s=30.0)
    worker.submit(make_scores(1))
    assert wait_until(lambda: len(fault.score_requests()) == 1)
    started = time.monotonic()
    assert not worker.shutdown(0.3)
    assert time.monotonic() - started < 2.0
    assert worker.stats.dead_lettered == 1 and worker.stats.abandoned == 1


def test_a_closed_sink_sends_nothing_more_once_its_hung_request_lands(tmp_path: Path, fault: FaultBackend) -> None:
    """After ``shutdown()`` the abandoned thread neither sends the rest of its batch nor retries, nor takes more.

    A stale thread still sending after its sink is closed would reach whatever server later listens on that port.
    """
    fault.behave = lambda index: Reply(hang=True) if index == 0 else Reply()
    dead = tmp_path / "dl.jsonl"
    worker = langfuse_worker(fault, dead, timeout_s=30.0, batch_size=5)
    scores = make_scores(10)
    worker.submit(scores)
    assert wait_until(lambda: len(fault.score_requests()) == 1)
    assert not worker.shutdown(0.3)
    fault.release.set()  # the hung request lands: the backend answers 2xx, the thread is free again
    assert worker._thread is not None
    worker._thread.join(10)
    assert not worker._thread.is_alive()
    worker.submit(make_scores(1, name="after"))  # a closed sink takes nothing more to send
    time.sleep(0.2)
    assert [r.score_id for r in fault.score_requests()] == [scores[0].id]  # the hung one only
    assert sorted(dead_ids(dead)) == sorted(s.id for s in [*scores, *make_scores(1, name="after")])
    assert worker.stats.dead_lettered == 11 and worker.stats.successes == 0


@pytest.mark.parametrize("max_retries", [0, 1])
def test_a_request_its_timeout_ends_at_the_deadline_is_counted_abandoned_whatever_settles_it_first(
    tmp_path: Path, fault: FaultBackend, monkeypatch: pytest.MonkeyPatch, max_retries: int
) -> None:
    fault.behave = _always(Reply(hang=True))
    retry = RetryPolicy(max_retries=max_retries, initial_backoff_s=0.01)
    worker = langfuse_worker(fault, tmp_path / "dl.jsonl", timeout_s=30.0, retry=retry)
    worker.submit(make_scores(1))
    assert wait_until(lambda: len(fault.score_requests()) == 1)
    thread = worker._thread
    assert thread is not None
    # The worker thread settles the batch first: its request's timeout, capped at the deadline, ends it while
    # shutdown's caller is descheduled (a busy machine), on its last attempt or with a retry left alike.
    join = thread.join
    monkeypatch.setattr(thread, "join", lambda timeout=None: join(None if timeout is None else timeout + 0.5))
    worker.shutdown(0.2)
    assert worker.stats.dead_lettered == 1 and worker.stats.abandoned == 1 and worker.stats.dropped == 0
    fault.release.set()


def test_exit_without_shutdown_dead_letters_what_a_hung_backend_never_took(tmp_path: Path, fault: FaultBackend) -> None:
    fault.behave = lambda index: Reply() if index < 3 else Reply(hang=True)
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(f"""
        import time
        import evaltrace
        from evaltrace.evaluation import LangfuseScoreSink

        @evaltrace.evaluator(name="quality")
        def quality(trace, case=None) -> float:
            return 0.5

        @evaltrace.agent(evaluators=[quality])
        def answer(i):
            return f"answer {{i}}"

        evaltrace.configure(
            "exit-sinks",
            local_store="traces",
            sinks=[LangfuseScoreSink({fault.url!r}, "pk", "sk", timeout_s=60)],
            shutdown_timeout_s=1.0,
            evaluation_options={{"dead_letter_dir": "dead", "sink_schedule_delay_s": 0.01, "sink_batch_size": 2}},
        )
        for i in range(12):
            answer(i)
        print(time.monotonic(), flush=True)  # the exit starts here
        """)
    )
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )
    exited = time.monotonic()
    assert done.returncode == 0, done.stderr
    # The exit alone (CLOCK_MONOTONIC is system-wide): start-up and import on a loaded machine took 15 s of a
    # whole-run bound once. The hung request would hold the exit 60 s (its timeout), the deadline holds it ~1 s.
    exit_s = exited - float(done.stdout.split()[-1])
    assert exit_s < 10, f"exit waited {exit_s:.1f} s for the hung backend instead of the shutdown deadline"
    written = dead_ids(tmp_path / "dead" / "langfuse.jsonl")
    assert len(written) == len(set(written))
    delivered = {r.score_id for r in fault.score_requests()[:3]}
    assert len(delivered | set(written)) == 12 and len(written) >= 9, done.stderr


# --- replay of a bad file --------------------------------------------------------------------------------


def test_replay_keeps_what_it_could_not_deliver_and_rejects_bad_lines(tmp_path: Path, fault: FaultBackend) -> None:
    dead = tmp_path / "langfuse.jsonl"
    good = make_scores(4)
    write_dead_letters(dead, "langfuse", good[:2], "down")
    invalid = {"sink": "langfuse", "score": {"name": "x", "data_type": "BOOLEAN", "value": 7, "trace_id": TRACE}}
    with dead.open("a") as handle:
        handle.write('{"sink": "langfuse", "score": {"name": \n')  # cut short by a crash mid-write
        handle.write(json.dumps(invalid) + "\n")
    write_dead_letters(dead, "langfuse", good[2:], "down")
    fault.behave = lambda index: Reply() if index < 2 else Reply(500)  # fails part way

    assert replay(dead, fault) == 1
    # The backend's handler thread counts an upsert stored after it has written the 2xx, which the client may read
    # first: wait for the count (it lagged the reply under load) before comparing.
    assert wait_until(lambda: len(fault.stored) >= 2, timeout=30)
    assert set(fault.stored) == {good[0].id, good[1].id}
    assert sorted(s.id for s in read_dead_letters(dead)[0]) == sorted(s.id for s in good[2:])
    assert not dead.with_name(dead.name + ".replaying").exists()
    rejects = [json.loads(line) for line in (tmp_path / "langfuse.jsonl.rejects.jsonl").read_text().splitlines()]
    assert [r["raw"] for r in rejects] == ['{"sink": "langfuse", "score": {"name": ', json.dumps(invalid)]
    assert "JSON" in rejects[0]["reason"] and "BOOLEAN" in rejects[1]["reason"]

    fault.behave = _always(Reply())  # the backend recovers: the rest goes, the rejects stay put for a human
    assert replay(dead, fault) == 0
    assert wait_until(lambda: len(fault.stored) >= len(good), timeout=30)
    assert set(fault.stored) == {s.id for s in good}
    assert not dead.exists()
    assert len((tmp_path / "langfuse.jsonl.rejects.jsonl").read_text().splitlines()) == 2


def test_replay_of_a_file_that_only_holds_bad_lines_keeps_them(tmp_path: Path, fault: FaultBackend) -> None:
    dead = tmp_path / "langfuse.jsonl"
    dead.write_text("not json at all\n")
    assert replay(dead, fault) == 1
    assert fault.score_requests() == []
    (reject,) = (tmp_path / "langfuse.jsonl.rejects.jsonl").read_text().splitlines()
    assert json.loads(reject)["raw"] == "not json at all"


# --- failures are visible --------------------------------------------------------------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("evaltrace")]


def test_an_outage_logs_one_warning_and_one_recovery(
    tmp_path: Path, fault: FaultBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="evaltrace")
    fault.behave = lambda index: Reply(500) if index < 6 else Reply()
    retry = RetryPolicy(max_retries=10, initial_backoff_s=0.001, max_backoff_s=0.01)
    worker = langfuse_worker(fault, tmp_path / "dl.jsonl", retry=retry, batch_size=1)
    worker.submit(make_scores(5))
    assert worker.force_flush(10)
    worker.shutdown(5)
    failing, recovered = _warnings(caplog)
    assert "langfuse" in failing and "HTTP 500" in failing
    assert "langfuse" in recovered and "delivering again after 6 failed attempt(s)" in recovered
    assert worker.stats.successes == 5


def test_dead_lettering_logs_once_per_episode(
    tmp_path: Path, fault: FaultBackend, caplog: pytest.LogCaptureFixture
) -> None:
    dead = tmp_path / "dl.jsonl"
    fault.behave = _always(Reply(503))
    no_retry = RetryPolicy(max_retries=0, initial_backoff_s=0.001, max_backoff_s=0.01)
    worker = langfuse_worker(fault, dead, retry=no_retry, batch_size=1)
    worker.submit(make_scores(5))
    assert worker.force_flush(10)
    failing, dead_lettering = _warnings(caplog)
    assert "HTTP 503" in failing
    assert str(dead) in dead_lettering and "evaltrace scores replay" in dead_lettering
    assert worker.stats.dead_lettered == 5

    fault.behave = _always(Reply())
    worker.submit(make_scores(1, name="later"))
    assert worker.force_flush(10)
    worker.shutdown(5)
    (recovered,) = _warnings(caplog)[2:]
    assert "delivering again" in recovered and "5 score(s)" in recovered


def test_without_a_dead_letter_file_losses_are_counted_and_logged_once(
    fault: FaultBackend, caplog: pytest.LogCaptureFixture
) -> None:
    fault.behave = _always(Reply(500))
    worker = langfuse_worker(fault, None, retry=RetryPolicy(max_retries=0), batch_size=1)
    worker.submit(make_scores(3))
    assert worker.force_flush(10)
    worker.shutdown(5)
    assert (worker.stats.dropped, worker.stats.dead_lettered, worker.stats.submitted) == (3, 0, 3)
    warnings = _warnings(caplog)
    assert len(warnings) == 2 and "dropped" in warnings[1]


# --- configure(sinks=[...]) adds ---------------------------------------------------------------------------


@pytest.fixture
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


@evaluator(name="said_hi")
def said_hi(trace: Trace) -> bool:
    return True


@pytest.mark.usefixtures("reset_configuration")
def test_configure_sinks_add_to_the_backend_sinks(
    tmp_path: Path, fault: FaultBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk")
    monkeypatch.setenv("LANGFUSE_HOST", fault.url)
    options = {"dead_letter_dir": None, "sink_schedule_delay_s": 0.01}

    def run(sinks: Any) -> list[str]:
        handle = evaltrace.configure(
            "adds", local_store=False, batch=False, evaluators=[said_hi], sinks=sinks, evaluation_options=options
        )
        with tracing.get_tracer().start_as_current_span("step"):
            pass
        assert handle.force_flush(10_000)
        names = sorted(handle.evaluation_processor.stats()["sinks"])
        handle.shutdown()
        return names

    out = tmp_path / "scores.jsonl"
    assert run([JsonlScoreSink(out)]) == ["jsonl", "langfuse"]
    assert len(out.read_text().splitlines()) == 1
    assert len(fault.score_requests()) == 1  # the Langfuse scores API still gets the score

    # A sink of the same name replaces the backend's (here: a Langfuse sink with an environment), never doubles it.
    custom = LangfuseScoreSink(fault.url, "pk", "sk", environment="staging")
    assert run([custom]) == ["langfuse"]
    assert len(fault.score_requests()) == 2
    assert run([]) == ["langfuse"]  # [] adds nothing; the backend's own sink stays
    assert len(fault.score_requests()) == 3


def test_docker_stop_with_a_hung_score_backend_dead_letters_every_pending_score(
    tmp_path: Path, fault: FaultBackend
) -> None:
    """``docker stop``: SIGTERM, then SIGKILL 10 s later. The default deadline fits inside, with margin."""
    fault.behave = lambda index: Reply(hang=True)  # accepts every request, never answers
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(f"""
        import time
        import evaltrace
        from evaltrace.evaluation import LangfuseScoreSink

        @evaltrace.evaluator(name="quality")
        def quality(trace, case=None) -> float:
            return 0.5

        @evaltrace.agent(evaluators=[quality])
        def answer(i):
            return f"answer {{i}}"

        handle = evaltrace.configure(
            "docker-stop",
            local_store="traces",
            sinks=[LangfuseScoreSink({fault.url!r}, "pk", "sk")],
            evaluation_options={{"dead_letter_dir": "dead"}},
        )
        for i in range(50):
            answer(i)
        # Every score made before the stop (a loaded machine may still be evaluating): the stop is about scores
        # pending in a hung sink, and an evaluation the stop cut short would leave a mark, not a score.
        while handle.evaluation_processor.stats()["sinks"]["langfuse"]["submitted"] < 50:
            time.sleep(0.01)
        print("served", flush=True)
        while True:  # a server: it ends when the container is stopped
            time.sleep(1)
        """)
    )
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    child = subprocess.Popen(
        [sys.executable, "-u", str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "served"
        # A batch hangs in flight. A generous wait: a precondition, not the bound under test (the 10 s below is).
        assert wait_until(lambda: len(fault.score_requests()) >= 1, timeout=120)
        child.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            # docker stop's grace period: the bound under test, kept as it is. At load 24 on 2 cores the exit took
            # 9.3-11.3 s: evaltrace's drain and shutdown ended at 5.8 s, CPython's finalization took the rest.
            child.wait(10)
            killed = False
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
            killed = True
        elapsed = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
        _, stderr = child.communicate(timeout=10)  # reads and closes the pipes
    assert not killed, f"still running 10 s after SIGTERM: SIGKILL would lose what it holds\n{stderr}"
    assert child.returncode == 143, stderr
    written = dead_ids(tmp_path / "dead" / "langfuse.jsonl")
    assert len(set(written)) == 50, (len(written), elapsed, stderr)


def test_evaluations_cut_short_at_shutdown_leave_a_shutdown_mark_in_the_store_and_every_score_file(
    tmp_path: Path, fault: FaultBackend
) -> None:
    """Each evaluation is a result or a ``shutdown`` "not evaluated" record: on the span, in JSONL and dead letters."""
    fault.behave = lambda index: Reply(hang=True)  # the Langfuse sink dead-letters all it holds at the deadline
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(f"""
        import asyncio, json, time
        import evaltrace
        from evaltrace.evaluation import JsonlScoreSink, LangfuseScoreSink

        @evaltrace.evaluator(name="slow")
        def slow(trace, case=None) -> bool:
            time.sleep(0.05)
            return True

        @evaltrace.evaluator(name="aslow")
        async def aslow(trace, case=None) -> bool:
            await asyncio.sleep(0.05)
            return True

        handle = evaltrace.configure(
            "cut-short",
            local_store={{"directory": "traces", "writer": "thread"}},  # no writer process to start in the deadline
            # Each span is written to the store as it is forwarded, the marks shutdown forwards included: batched, the
            # store's queue got what the hung sink left of the 3 s (50 ms at least), and at load 25 the last marks
            # missed it (counted by the store's queue, yet absent from the store this test reads).
            batch=False,
            sinks=[JsonlScoreSink("scores.jsonl"), LangfuseScoreSink({fault.url!r}, "pk", "sk")],
            evaluation_options={{"dead_letter_dir": "dead"}},
        )

        @evaltrace.agent(evaluators=[slow, aslow])
        def answer(i):
            return f"answer {{i}}"

        for i in range(300):
            answer(str(i))
        handle.shutdown(timeout_s=3.0)
        stats = handle.evaluation_processor.stats()
        print(json.dumps(stats["exporters"]), flush=True)
        print(json.dumps(stats["not_evaluated_by_reason"]), flush=True)
        """)
    )
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    cut = json.loads(done.stdout.strip().splitlines()[-1]).get("shutdown", 0)
    assert cut > 0, "the deadline cut nothing short: the test proves nothing"

    # The store: each agent span carries each evaluator's result or its "not evaluated: shutdown" mark.
    from evaltrace.exporters import LocalTraceStore

    store_marks = 0
    with LocalTraceStore(tmp_path / "traces") as store:
        spans = [span for t in store.list_traces() for span in store.spans(t.trace_id)]
    agents = [span for span in spans if span.name.startswith("invoke_agent")]
    assert len(agents) == 300, done.stdout  # the exporters' counts, should the store have lost any
    # A span held past hold_timeout_s went out before its results: they follow as child "evaluation <name>" spans.
    late = {(span.parent.span_id, span.name.removeprefix("evaluation ")): span for span in spans if span.parent}
    expected: set[tuple[str, str, str]] = set()
    for span in agents:
        for name in ("slow", "aslow"):
            carrier = late.get((span.context.span_id, name), span)
            outcome = carrier.attributes.get(f"evaltrace.eval.{name}.outcome")
            if outcome == "not_evaluated":
                assert carrier.attributes[f"evaltrace.eval.{name}.skip_reason"] == "shutdown"
                store_marks += 1
            else:
                assert outcome == "pass", (name, dict(carrier.attributes))
            expected.add((format(span.context.trace_id, "032x"), format(span.context.span_id, "016x"), name))
    assert store_marks == cut

    def marks_and_scores(lines: list[dict[str, Any]]) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
        marks, scores = set(), set()
        for line in lines:
            if "not_evaluated" in line:
                mark = line["not_evaluated"]
                assert mark["reason"] == "shutdown"
                marks.add((mark["trace_id"], mark["span_id"], mark["evaluator"]))
            else:
                score = line.get("score", line)
                scores.add((score["trace_id"], score["observation_id"], score["name"]))
        return marks, scores

    jsonl = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    dead = [json.loads(line) for line in (tmp_path / "dead" / "langfuse.jsonl").read_text().splitlines()]
    for lines in (jsonl, dead):
        marks, scores = marks_and_scores(lines)
        assert len(lines) == len(expected)  # one line each, none twice
        assert marks | scores == expected and not marks & scores
        assert len(marks) == cut

    # A replay sends the scores and keeps the records (they are no scores): nothing rejected.
    fault.behave = lambda index: Reply()
    assert replay(tmp_path / "dead" / "langfuse.jsonl", fault) == 0
    kept = [json.loads(line) for line in (tmp_path / "dead" / "langfuse.jsonl").read_text().splitlines()]
    assert len(kept) == cut and all("not_evaluated" in line for line in kept)
    assert not (tmp_path / "dead" / ("langfuse.jsonl" + ".rejects.jsonl")).exists()
