"""Rate limits and judge budgets shared through a real ``redis-server`` on 127.0.0.1 (``redis_url``).

Two processors stand for two replicas: each has its own ``LimitGate`` and Redis client, as two processes would.
Rate limits use a bucket that does not refill within a test (rate 0.0001/s), so counts do not depend on speed.
The URLs carry a 5 s socket timeout (a querystring option of redis-py) where a spurious fallback under load
would change the counts; the outage itself is a killed server, refused at once.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.evaluation import EvaluatorSpec, Limits, evaluator, shared_limits
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Trace
from judge_server import JudgeServer, serve_judge
from redis_server import RedisServer, running_redis

from .conftest import MakePipeline, Pipeline
from .test_limits import OffMainThreadFailingClock

# The oldest-versions step of .ci/run runs tests/evaluation without the redis extra: skip there. The main step
# installs it, and tests/backends/test_worker_shared_limits.py fails under CI when it is missing.
pytest.importorskip("redis", reason="the redis package is not installed (pip install -e '.[redis]')")

STILL = 0.0001  # evaluations per second: a bucket that stays empty once its burst is taken
PROMPT_TOKENS = 1000
COMPLETION_TOKENS = 100
PER_CALL = PROMPT_TOKENS + COMPLETION_TOKENS


@evaluator(name="counted")
def counted(trace: Trace) -> bool:
    return True


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from running_redis()


@pytest.fixture
def chat_server() -> Iterator[JudgeServer]:
    with serve_judge(lambda body: {"score": 1, "reason": "fine"}, prompt_tokens=PROMPT_TOKENS,
                     completion_tokens=COMPLETION_TOKENS) as judge:  # fmt: skip
        yield judge


def llm_judge(server: JudgeServer) -> LLMJudge:
    """A real LLM judge (priced gpt-4o-mini) calling ``server``."""
    return LLMJudge(
        rubric="Answers the question", judge=Judge("gpt-4o-mini", base_url=server.url, api_key="k", max_retries=0)
    )


def patient(url: str) -> str:
    return f"{url}?socket_timeout=5&socket_connect_timeout=5"


def outcome(p: Pipeline, name: str, evaluator_name: str = "counted") -> Any:
    spans: list[ReadableSpan] = p.by_name(name)
    assert len(spans) == 1
    return (spans[0].attributes or {}).get(f"evaltrace.eval.{evaluator_name}.outcome")


def send(p: Pipeline, name: str) -> None:
    with p.tracer.start_as_current_span(name) as span:
        span.set_attribute("output.value", f"answer of {name}")  # distinct prompts: no judge cache hit
    p.flush()


def test_two_replicas_take_from_one_token_bucket(make_pipeline: MakePipeline, redis_server: RedisServer) -> None:
    spec = EvaluatorSpec(counted, limits=Limits(evaluations_per_second=STILL, burst=3))
    replicas = [make_pipeline([spec], redis_url=patient(redis_server.url)) for _ in range(2)]
    for i in range(8):
        send(replicas[i % 2], f"span-{i}")
    outcomes = [outcome(replicas[i % 2], f"span-{i}") for i in range(8)]
    # Per replica, each would have run 3 (6 in all): shared, the fleet runs exactly the burst.
    assert outcomes.count("pass") == 3  # a skip shows on a span only beside another evaluator's result
    reasons = [r.processor.stats()["not_evaluated_by_reason"] for r in replicas]
    assert sum(r.get("rate_limited", 0) for r in reasons) == 5
    assert all(r.processor.stats()["shared_limits"]["fallbacks"] == 0 for r in replicas)


def test_two_replicas_spend_exactly_one_token_budget(
    make_pipeline: MakePipeline, redis_server: RedisServer, chat_server: JudgeServer
) -> None:
    judged = llm_judge(chat_server)
    spec = EvaluatorSpec(judged, limits=Limits(max_tokens_per_hour=3 * PER_CALL))
    replicas = [make_pipeline([spec], redis_url=patient(redis_server.url)) for _ in range(2)]
    for i in range(8):
        send(replicas[i % 2], f"chat-{i}")  # flushed: each spend is charged before the next admission
    assert chat_server.count() == 3  # 3 budgets' worth per replica would be 6 calls
    outcomes = [outcome(replicas[i % 2], f"chat-{i}", judged.name) for i in range(8)]
    assert outcomes == ["pass"] * 3 + [None] * 5  # None: skipped (over_budget, counted below)
    over = sum(r.processor.stats()["not_evaluated_by_reason"].get("over_budget", 0) for r in replicas)
    assert over == 5


def test_a_redis_outage_falls_back_per_replica_with_one_warning_and_recovers(
    make_pipeline: MakePipeline, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    spec = EvaluatorSpec(counted, limits=Limits(evaluations_per_second=STILL, burst=2))
    replicas = [make_pipeline([spec], redis_url=patient(redis_server.url)) for _ in range(2)]
    caplog.set_level(logging.WARNING, logger="evaltrace.evaluation")
    names = [f"span-{i}" for i in range(11)]

    for i in range(3):  # shared: the fleet's burst of 2
        send(replicas[i % 2], names[i])
    redis_server.kill()
    started = time.monotonic()
    for i in range(3, 7):  # down: each replica's own bucket (2 each, untouched so far)
        send(replicas[i % 2], names[i])
    assert time.monotonic() - started < 10  # nothing waited on the dead server
    down = [r for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(down) == 2  # one warning per replica, not one per evaluation
    assert all(r.processor.stats()["shared_limits"]["down"] for r in replicas)

    redis_server.start()  # back, empty: a full shared bucket of 2 again
    time.sleep(shared_limits.RETRY_S + 0.2)
    for i in range(7, 11):  # local buckets are empty now: only the shared one can admit
        send(replicas[i % 2], names[i])
    outcomes = [outcome(replicas[i % 2], names[i]) for i in range(11)]
    assert outcomes[:3] == ["pass", "pass", None]  # None: skipped (rate_limited, counted below)
    assert outcomes[3:7] == ["pass"] * 4
    assert outcomes[7:].count("pass") == 2
    assert len([r for r in caplog.records if "did not answer" in r.getMessage()]) == 2  # still one per replica
    assert len([r for r in caplog.records if "answers again" in r.getMessage()]) == 2
    # Every span got an outcome: nothing was blocked or lost.
    stats = [r.processor.stats() for r in replicas]
    assert sum(s["evaluated"] for s in stats) == 8
    assert sum(s["not_evaluated_by_reason"].get("rate_limited", 0) for s in stats) == 3
    assert [s["shared_limits"]["fallbacks"] for s in stats] == [1, 1]
    assert not any(s["shared_limits"]["down"] for s in stats)


def test_spend_during_an_outage_is_added_to_the_shared_budget_when_redis_returns(
    make_pipeline: MakePipeline, redis_server: RedisServer, chat_server: JudgeServer
) -> None:
    judged = llm_judge(chat_server)
    spec = EvaluatorSpec(judged, limits=Limits(max_tokens_per_hour=2 * PER_CALL))
    a, b = (make_pipeline([spec], redis_url=patient(redis_server.url)) for _ in range(2))
    redis_server.kill()
    send(a, "chat-0")  # down: charged locally to a, owed to Redis
    send(a, "chat-1")
    redis_server.start()
    time.sleep(shared_limits.RETRY_S + 0.2)
    send(a, "chat-2")  # a's probe: Redis answers, a pays what it owes (2 calls), then is over budget
    send(b, "chat-3")  # b never spent: only the shared counter can refuse it
    assert chat_server.count() == 2
    assert outcome(b, "chat-3", judged.name) is None  # skipped
    assert b.processor.stats()["not_evaluated_by_reason"] == {"over_budget": 1}


def test_every_shared_key_expires(
    make_pipeline: MakePipeline, redis_server: RedisServer, chat_server: JudgeServer
) -> None:
    import redis

    judged = llm_judge(chat_server)
    limits = Limits(evaluations_per_second=5, max_tokens_per_hour=10 * PER_CALL, max_usd_per_day=1.0)
    p = make_pipeline([EvaluatorSpec(judged, limits=limits)], limits={"max_tokens_per_day": 10 * PER_CALL},
                      redis_url=patient(redis_server.url))  # fmt: skip
    send(p, "chat-0")
    assert chat_server.count() == 1
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = sorted(key.decode() for key in client.keys("*"))
        prefix = f"evaltrace:limits:evaluator:{judged.name}"
        assert keys == sorted(
            ["evaltrace:limits:global:tokens:86400", f"{prefix}:rate", f"{prefix}:tokens:3600", f"{prefix}:usd:86400"]
        )
        ttls = {key: client.ttl(key) for key in keys}
        # Refilled (burst 5 at 5/s) within a second: forgotten soon after. On a loaded machine it may be gone by
        # the time its TTL is read (-2), or read in its last second (0); never without an expiry (-1).
        assert ttls[f"{prefix}:rate"] == -2 or 0 <= ttls[f"{prefix}:rate"] <= 2
        assert 0 < ttls[f"{prefix}:tokens:3600"] <= 3600 + 60  # the end of the current hour, plus a minute
        assert 0 < ttls[f"{prefix}:usd:86400"] <= 86_400 + 60
        assert float(client.hget(f"{prefix}:tokens:3600", "spent") or 0) == PER_CALL
    finally:
        client.close()


def test_without_limits_no_redis_client_is_made(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([counted], redis_url="redis://127.0.0.1:1/0")  # nothing listens: never asked
    send(p, "span")
    assert outcome(p, "span") == "pass"
    assert "shared_limits" not in p.processor.stats()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://:secret@127.0.0.1:6379", "got scheme 'http'"),
        ("127.0.0.1:6379", "got no scheme"),
        ("", "got no scheme"),
    ],
)
def test_a_redis_url_that_is_not_one_is_a_config_error_that_never_shows_the_url(url: str, shown: str) -> None:
    with pytest.raises(ConfigError, match="redis_url.*redis://") as info:
        ProcessorOptions(redis_url=url)
    assert shown in str(info.value)
    assert "secret" not in str(info.value)


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers: a stalled Redis."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)  # held open, never read from or written to

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_redis_that_never_answers_costs_one_timeout_per_retry_not_one_per_evaluation(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    silent = SilentServer()
    try:
        spec = EvaluatorSpec(counted, limits=Limits(evaluations_per_second=STILL, burst=100))
        p = make_pipeline([spec], redis_url=f"redis://127.0.0.1:{silent.port}/0")  # the default 0.5 s timeout
        caplog.set_level(logging.WARNING, logger="evaltrace.evaluation")
        started = time.monotonic()
        for i in range(20):
            send(p, f"span-{i}")
        elapsed = time.monotonic() - started
        # Every span was evaluated, from this process's own bucket.
        assert p.processor.stats()["evaluated"] == 20
        # One timed-out call, then local decisions; another try only once per RETRY_S. One timeout per
        # evaluation would have taken 10 s.
        tries = len(silent.accepted)
        assert 1 <= tries <= 1 + elapsed / shared_limits.RETRY_S + 1
        assert elapsed < 20 * shared_limits.TIMEOUT_S * 0.75
        assert len([r for r in caplog.records if "did not answer" in r.getMessage()]) == 1
        assert p.processor.stats()["shared_limits"]["down"] is True
    finally:
        silent.close()


def test_a_replica_whose_own_budget_charge_fails_still_charges_the_shared_budget(
    make_pipeline: MakePipeline, redis_server: RedisServer, chat_server: JudgeServer
) -> None:
    """This process's budget windows failing (its ``limits_clock`` raises) never keeps the spend from the fleet's.

    Replica A's judge call is charged to the shared budget (one call's worth), so replica B is over budget at once.
    """
    judged = llm_judge(chat_server)
    spec = EvaluatorSpec(judged, limits=Limits(max_tokens_per_hour=PER_CALL))
    failing = make_pipeline([spec], redis_url=patient(redis_server.url), limits_clock=OffMainThreadFailingClock())
    healthy = make_pipeline([spec], redis_url=patient(redis_server.url))
    send(failing, "chat-0")
    assert failing.processor.stats()["internal_errors"] == 1  # its own windows missed it
    send(healthy, "chat-1")
    assert chat_server.count() == 1
    assert outcome(failing, "chat-0", judged.name) == "pass"
    assert healthy.processor.stats()["not_evaluated_by_reason"] == {"over_budget": 1}
