"""A decorator-attached evaluator's own ``limits`` (``@evaltrace.agent(evaluators=[EvaluatorSpec(..., limits=...)])``)
are honoured as a global evaluator's are: rate limit, judge budget and concurrency cap, refusals counted with the same
skip reasons. Through the real decorator and ``configure()``, the real OTel SDK, and a real OpenAI-shaped judge
server on 127.0.0.1; the rate limit runs on an injected clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, Limits, evaluator
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.schema import Trace
from judge_server import JudgeServer, serve_judge

PER_CALL_TOKENS = 110
# A flush's deadline here only bounds a hang: each flush is a barrier ("charged before the next call is admitted"),
# never a time bound under test. The judge's first call loads the rest of the openai SDK lazily (at load 24 on 2
# cores a bare ``import openai`` took 23-30 s wall), which can outlast the 10 s these flushes had.
FLUSH_MS = 120_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def own_handle(judge_tracing_defaults: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test's ``configure()`` is undone after it, and never becomes a later backfill's default limits."""
    from evaltrace import config

    monkeypatch.setattr(config._state, "handle", config._state.handle)
    yield


def configure(exporter: InMemorySpanExporter, evaluators: list[Any], **options: Any) -> Any:
    return evaltrace.configure(
        tracer_provider=TracerProvider(),
        exporters=[exporter],
        local_store=False,
        batch=False,
        evaluators=evaluators,
        evaluation_options={"dead_letter_dir": None, **options},
    )


def agent(evaluators: list[Any]) -> Callable[[str], str]:
    @evaltrace.agent(name="helper", evaluators=evaluators)
    def helper(question: str) -> str:
        return f"answer to {question}"

    return helper


def verdicts(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    """Every outcome of evaluator ``name`` exported (on the span judged, or a trace-level one's evaluation span).

    A span whose evaluators were all refused goes out with no verdict (as any refusal): only the counts show it.
    """
    return [
        (s.attributes or {})[key]
        for s in exporter.get_finished_spans()
        if (key := f"evaltrace.eval.{name}.outcome") in (s.attributes or {})
    ]


@pytest.mark.parametrize("scope", ["span", "trace"])
@pytest.mark.parametrize("where", ["attached", "global"])
def test_an_attached_evaluators_rate_limit_is_honoured_and_counted_as_a_global_ones(where: str, scope: str) -> None:
    """Four calls under ``evaluations_per_second=1, burst=2`` on a still clock: two run, two are ``rate_limited``,
    exactly as for the same spec given to ``configure()``. (Before the fix the attached one ran all four.)"""

    @evaluator(name="limited")
    def limited(trace: Trace) -> bool:
        return False  # a fail when it runs: a skip must never read as one

    spec = EvaluatorSpec(limited, limits=Limits(evaluations_per_second=1, burst=2), scope=scope, span_kinds={"agent"})  # type: ignore[arg-type]
    exporter = InMemorySpanExporter()
    handle = configure(exporter, [spec] if where == "global" else [], limits_clock=FakeClock())
    helper = agent([spec] if where == "attached" else [])
    for n in range(4):
        helper(f"q{n}")
    assert handle.force_flush(FLUSH_MS)
    assert verdicts(exporter, "limited") == ["fail", "fail"]
    stats = handle.evaluation_processor.stats()
    assert stats["not_evaluated_by_reason"] == {"rate_limited": 2}
    assert stats["evaluators"]["limited"]["failed"] == 2
    assert stats["evaluators"]["limited"]["not_evaluated_by_reason"] == {"rate_limited": 2}


@pytest.fixture
def chat_server() -> Iterator[JudgeServer]:
    """An OpenAI chat-completions endpoint that always answers ``{"score": 1}`` with fixed token usage."""
    with serve_judge(lambda body: {"score": 1, "reason": "fine"}, prompt_tokens=100, completion_tokens=10) as judge:
        yield judge


@pytest.mark.parametrize("where", ["attached", "global"])
def test_an_attached_evaluators_token_budget_stops_its_judge_calls_over_budget(
    where: str, chat_server: JudgeServer
) -> None:
    """A budget of one call's tokens: one judge call, the next two ``over_budget``; the spend is charged although no
    limit was set at ``configure()`` (the gate turns active when the decorator's evaluator is first seen)."""
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)
    spec = EvaluatorSpec(
        LLMJudge(rubric="Answers the question", judge=judge, name="judged"),
        limits=Limits(max_tokens_per_hour=PER_CALL_TOKENS),
        span_kinds={"agent"},
    )
    exporter = InMemorySpanExporter()
    handle = configure(exporter, [spec] if where == "global" else [], limits_clock=FakeClock())
    helper = agent([spec] if where == "attached" else [])
    for n in range(3):
        helper(f"q{n}")  # distinct outputs: no judge cache hit
        assert handle.force_flush(FLUSH_MS)  # charged before the next call is admitted
    assert chat_server.count() == 1
    assert verdicts(exporter, "judged") == ["pass"]
    stats = handle.evaluation_processor.stats()
    assert stats["not_evaluated_by_reason"] == {"over_budget": 2}
    assert stats["evaluators"]["judged"]["not_evaluated_by_reason"] == {"over_budget": 2}


@pytest.mark.parametrize("where", ["attached", "global"])
def test_an_attached_evaluators_max_concurrent_holds_its_evaluations_to_one(where: str) -> None:
    """``max_concurrent=1``: each evaluation waits (up to 0.5 s) for a second one to start beside it; with the cap
    none ever does. (Before the fix the attached one's three evaluations overlapped.)"""
    running = 0
    peak = 0

    @evaluator(name="capped")
    async def capped(trace: Trace) -> bool:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(50):  # a loaded machine may start the next late: waiting longer only makes overlap likelier
            if running > 1:
                break
            await asyncio.sleep(0.01)
        running -= 1
        return True

    spec = EvaluatorSpec(capped, limits=Limits(max_concurrent=1), span_kinds={"agent"})
    exporter = InMemorySpanExporter()
    handle = configure(exporter, [spec] if where == "global" else [], hold_timeout_s=0.0)
    helper = agent([spec] if where == "attached" else [])
    for n in range(3):
        helper(f"q{n}")
    assert handle.force_flush(FLUSH_MS)
    assert peak == 1
    assert handle.evaluation_processor.stats()["evaluators"]["capped"]["passed"] == 3


FORKED = """
import json, os, sys, warnings
warnings.filterwarnings("ignore", ".*multi-threaded.*fork", DeprecationWarning)  # Python 3.12+
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import evaltrace
from evaltrace.evaluation import EvaluatorSpec, Limits, evaluator

@evaluator(name="limited")
def limited(trace):
    return True

spec = EvaluatorSpec(limited, limits=Limits(evaluations_per_second=1, burst=1))
handle = evaltrace.configure(
    exporters=[InMemorySpanExporter()], local_store=False, batch=False,
    evaluation_options={"dead_letter_dir": None, "limits_clock": lambda: 1000.0},
)

@evaltrace.agent(name="helper", evaluators=[spec])
def helper(question):
    return question

helper("parent")  # resolves the decorator's evaluators (their limits registered) and takes the parent's token
assert handle.force_flush(10_000)
pid = os.fork()
if pid == 0:
    helper("child-0")  # the child's own bucket, full: one evaluation, then rate limited
    helper("child-1")
    handle.force_flush(10_000)
    stats = handle.evaluation_processor.stats()
    with open(sys.argv[1], "w") as out:
        json.dump({"evaluated": stats["evaluated"], "skipped": stats["not_evaluated_by_reason"]}, out)
    os._exit(0)
os.waitpid(pid, 0)
handle.shutdown()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_keeps_the_attached_evaluators_limits(tmp_path: Path) -> None:
    """A child forked after the decorator's evaluators were first seen rebuilds its limits (fresh buckets, as for
    a global evaluator's) with theirs still in: before, it kept only the global evaluators' and judged every span.
    Run in a fresh Python process, so the test runner's threads are not forked."""
    out = tmp_path / "child.json"
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    done = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {"evaluated": 1, "skipped": {"rate_limited": 1}}, done.stderr
