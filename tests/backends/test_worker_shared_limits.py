"""Two ``evaltrace worker`` replicas sharing rate limits and a judge budget through a real ``redis-server``.

The replicas are real: two CLI processes (``--redis-url`` and ``EVALTRACE_REDIS_URL``) fed over OTLP/HTTP, and
two in-process ``EvaluationWorker`` objects calling a real OpenAI-shaped judge server. Redis runs on 127.0.0.1,
memory only, started and killed by the test (``tests/redis_server.py``; skipped without ``redis-server``, failed
under CI). Rate limits use a bucket that does not refill within a test (rate 0.0001/s), so every count is exact
whatever the machine's load; the Redis URLs carry a 5 s socket timeout (a redis-py querystring option) so a
loaded machine cannot fake an outage. Every count is read from the workers themselves (``/healthz``, stats).
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags
from otlp_receivers import poll
from worker_process import WorkerProcess, start_worker

from evaltrace.evaluation import EvaluatorSpec, Limits
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.worker import EvaluationWorker
from judge_server import JudgeServer, serve_judge
from redis_server import RedisServer, running_redis

EVALUATORS = textwrap.dedent("""
    from evaltrace.evaluation import EvaluatorSpec, Limits, evaluator

    @evaluator(name="counted")
    def counted(trace):
        return True

    # A burst of 3 and (practically) no refill: 3 evaluations in all, per fleet or per replica.
    EVALUATORS = [EvaluatorSpec(counted, limits=Limits(evaluations_per_second=0.0001, burst=3))]
""")
PROMPT_TOKENS = 1000
COMPLETION_TOKENS = 100
PER_CALL = PROMPT_TOKENS + COMPLETION_TOKENS
_ids = iter(range(1, 1_000_000))


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from running_redis()


def patient(url: str) -> str:
    return f"{url}?socket_timeout=5&socket_connect_timeout=5"


def one_span(label: str) -> list[ReadableSpan]:
    """A one-span trace of its own (a fresh trace id), whose output names it."""
    number = next(_ids)
    context = SpanContext(0xA000 + number, 0xB000 + number, False, TraceFlags(TraceFlags.SAMPLED))
    span = ReadableSpan(
        name=f"chat {label}", context=context, resource=Resource({"service.name": "app"}),
        attributes={"output.value": f"the answer of {label}"},
        start_time=1_700_000_000_000_000_000 + number, end_time=1_700_000_001_000_000_000 + number,
    )  # fmt: skip
    return [span]


def export(url: str, spans: list[ReadableSpan]) -> None:
    sender = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=30)
    try:
        assert sender.export(spans) is SpanExportResult.SUCCESS
    finally:
        sender.shutdown()


def evaluation(worker: WorkerProcess) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(worker.url + "/healthz", timeout=10).json()["evaluation"]
    return stats


def outcomes(worker: WorkerProcess) -> tuple[int, int]:
    """(evaluated, rate_limited) as the worker counts them."""
    stats = evaluation(worker)
    return stats["evaluated"], stats["not_evaluated_by_reason"].get("rate_limited", 0)


def test_two_worker_processes_share_one_rate_limit_and_fall_back_per_replica_when_redis_dies(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "limited_evals.py").write_text(EVALUATORS)
    common = ("--evaluators", "limited_evals:EVALUATORS", "--hold-timeout", "0.5")
    url = patient(redis_server.url)
    a = start_worker(tmp_path, *common, "--local-store", str(tmp_path / "a"), "--redis-url", url, name="a")
    monkeypatch.setenv("EVALTRACE_REDIS_URL", url)  # the other replica takes it from the environment
    b = start_worker(tmp_path, *common, "--local-store", str(tmp_path / "b"), name="b")
    workers = [a, b]
    try:
        for worker in workers:
            worker.wait_ready()
        # 12 traces at once, 6 to each replica: the fleet's burst of 3 is taken exactly once.
        senders = [
            threading.Thread(target=export, args=(w.url, one_span(f"{w.log.stem}-{i}")))
            for w in workers
            for i in range(6)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(60)
        poll(lambda: sum(sum(outcomes(w)) for w in workers) == 12, timeout=60)
        before = [outcomes(w) for w in workers]
        assert sum(evaluated for evaluated, _ in before) == 3  # per replica it would be 6
        assert all(evaluation(w)["shared_limits"] == {"redis": f"127.0.0.1:{redis_server.port}", "down": False,
                                                      "fallbacks": 0} for w in workers)  # fmt: skip

        redis_server.kill()  # mid-run: both replicas keep their connections to a dead server
        for i in range(4):
            for worker in workers:  # every export is accepted: nothing waits on Redis
                export(worker.url, one_span(f"{worker.log.stem}-after-{i}"))
        poll(lambda: sum(sum(outcomes(w)) for w in workers) == 20, timeout=60)
        # Per replica now: each one's own untouched bucket of 3, so 3 of its 4 run.
        after = [outcomes(w) for w in workers]
        assert [(x - y, u - v) for (x, u), (y, v) in zip(after, before, strict=True)] == [(3, 1), (3, 1)]
        assert sum(x + u for x, u in after) == 20  # 20 spans, 20 outcomes: none blocked, none lost
        for worker in workers:
            assert evaluation(worker)["shared_limits"]["down"] is True
            assert worker.output().count("did not answer") == 1  # one warning per replica, not per evaluation
        for worker in workers:
            assert worker.stop() == 0
    finally:
        for worker in workers:
            worker.kill()


@pytest.fixture
def chat_server() -> Iterator[JudgeServer]:
    with serve_judge(lambda body: {"score": 1, "reason": "fine"}, prompt_tokens=PROMPT_TOKENS,
                     completion_tokens=COMPLETION_TOKENS) as judge:  # fmt: skip
        yield judge


def test_two_worker_replicas_spend_exactly_one_judge_budget(
    redis_server: RedisServer, chat_server: JudgeServer
) -> None:
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    spec = EvaluatorSpec(judged, limits=Limits(max_tokens_per_hour=4 * PER_CALL))
    options = {"dead_letter_dir": None, "emit_log_events": False, "redis_url": patient(redis_server.url)}
    replicas = [EvaluationWorker([spec], port=0, batch=False, evaluation_options=options) for _ in range(2)]
    try:
        for replica in replicas:
            replica.start()
        for i in range(10):
            replica = replicas[i % 2]
            export(replica.url, one_span(f"judged-{i}"))
            assert replica.force_flush(30_000)  # charged before the next trace is admitted, on either replica
        assert chat_server.count() == 4  # the budget once; per replica it would be 8 calls
        stats = [r.stats()["evaluation"] for r in replicas]
        assert sum(s["evaluated"] for s in stats) == 4
        assert sum(s["not_evaluated_by_reason"].get("over_budget", 0) for s in stats) == 6
        assert [s["shared_limits"]["fallbacks"] for s in stats] == [0, 0]
    finally:
        for replica in replicas:
            replica.stop(10)
