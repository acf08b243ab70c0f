"""Rate limits, judge budgets and skip reasons, through the real pipeline (OTel SDK, Metrics SDK) and a real
OpenAI-shaped judge server on 127.0.0.1.

Rate limits run on an injected clock, so no assertion depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, Limits, evaluator
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Trace
from judge_server import JudgeServer, serve_judge

from .conftest import MakePipeline

PROMPT_TOKENS = 100_000
COMPLETION_TOKENS = 10_000
# gpt-4o-mini in evaltrace.pricing: $0.15 / $0.60 per million tokens.
CALL_USD = PROMPT_TOKENS * 0.15 / 1e6 + COMPLETION_TOKENS * 0.60 / 1e6


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@evaluator(name="limited")
def limited(trace: Trace) -> bool:
    return False  # a fail when it runs: a skipped evaluation must never read as one


@evaluator(name="free")
def free(trace: Trace) -> bool:
    return True


@pytest.fixture
def chat_server() -> Iterator[JudgeServer]:
    """An OpenAI chat-completions endpoint that always answers ``{"score": 1}`` with fixed token usage."""
    fine = {"score": 1, "reason": "fine"}
    with serve_judge(lambda body: fine, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS) as judge:
        yield judge


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_the_token_bucket_skips_evaluations_beyond_the_rate(make_pipeline: MakePipeline) -> None:
    clock = FakeClock()
    limits = Limits(evaluations_per_second=1, burst=2)
    p = make_pipeline([EvaluatorSpec(limited, limits=limits), free], limits_clock=clock)
    for i in range(5):
        with p.tracer.start_as_current_span(f"chat-{i}"):
            pass
    clock.now += 1.0  # one more token
    with p.tracer.start_as_current_span("chat-5"):
        pass
    p.flush()

    outcomes = [attrs(p.one(f"chat-{i}")).get("evaltrace.eval.limited.outcome") for i in range(6)]
    assert outcomes == ["fail", "fail", "not_evaluated", "not_evaluated", "not_evaluated", "fail"]
    skipped = attrs(p.one("chat-2"))
    assert skipped["evaltrace.eval.limited.skip_reason"] == "rate_limited"
    assert "evaltrace.eval.limited.passed" not in skipped
    assert skipped["evaltrace.eval.free.outcome"] == "pass"  # the unlimited evaluator ran on every span
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"rate_limited": 3}
    assert stats["evaluators"]["limited"]["failed"] == 3
    assert stats["evaluators"]["limited"]["not_evaluated_by_reason"] == {"rate_limited": 3}
    assert stats["evaluators"]["free"]["passed"] == 6


def test_a_global_rate_limit_applies_to_every_evaluator_together(make_pipeline: MakePipeline) -> None:
    clock = FakeClock()
    p = make_pipeline([limited, free], limits={"evaluations_per_second": 1, "burst": 3}, limits_clock=clock)
    for i in range(2):
        with p.tracer.start_as_current_span(f"chat-{i}"):
            pass
    p.flush()
    first, second = attrs(p.one("chat-0")), attrs(p.one("chat-1"))
    assert first["evaltrace.eval.limited.outcome"] == "fail"
    assert first["evaltrace.eval.free.outcome"] == "pass"
    assert second["evaltrace.eval.limited.outcome"] == "fail"  # the third token
    assert second["evaltrace.eval.free.outcome"] == "not_evaluated"  # the bucket was empty for it
    assert second["evaltrace.eval.free.skip_reason"] == "rate_limited"
    assert p.processor.stats()["not_evaluated_by_reason"] == {"rate_limited": 1}


def test_a_usd_budget_stops_judge_calls_and_reports_over_budget(
    make_pipeline: MakePipeline, chat_server: JudgeServer
) -> None:
    reader = InMemoryMetricReader()
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)  # priced by evaltrace.pricing
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    budget = Limits(max_usd_per_day=CALL_USD * 1.5)  # the second call crosses it
    p = make_pipeline(
        [EvaluatorSpec(judged, limits=budget), free],
        meter_provider=MeterProvider(metric_readers=[reader]),
        limits_clock=FakeClock(),
    )
    for i in range(4):
        with p.tracer.start_as_current_span(f"chat-{i}") as span:
            span.set_attribute("output.value", f"answer number {i}")  # distinct prompts: no judge cache hit
        p.flush()  # the spend is charged before the next span is admitted

    assert chat_server.count() == 2
    name = judged.name
    outcomes = [attrs(p.one(f"chat-{i}")).get(f"evaltrace.eval.{name}.outcome") for i in range(4)]
    assert outcomes == ["pass", "pass", "not_evaluated", "not_evaluated"]
    assert attrs(p.one("chat-3"))[f"evaltrace.eval.{name}.skip_reason"] == "over_budget"
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"over_budget": 2}
    assert stats["failed"] == 0

    cost = metric_points(reader, "gen_ai.evaluation.client.cost")
    assert len(cost) == 1
    assert cost[0].value == pytest.approx(2 * CALL_USD)
    assert dict(cost[0].attributes) == {"evaltrace.evaluator": name, "gen_ai.request.model": "gpt-4o-mini"}
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum for p in metric_points(reader, "gen_ai.evaluation.client.token.usage")
    }
    assert tokens == {"input": 2 * PROMPT_TOKENS, "output": 2 * COMPLETION_TOKENS}
    durations = metric_points(reader, "gen_ai.evaluation.client.operation.duration")
    assert [d.count for d in durations] == [2]
    skips = {
        (d.attributes["evaltrace.evaluator"], d.attributes["evaltrace.evaluation.skip_reason"]): d.value
        for d in metric_points(reader, "evaltrace.evaluation.not_evaluated")
    }
    assert skips == {(name, "over_budget"): 2}
    # The judge's calls are never application LLM metrics.
    assert metric_points(reader, "gen_ai.client.token.usage") == []


def test_a_token_budget_counts_the_tokens_of_the_judge_replies(
    make_pipeline: MakePipeline, chat_server: JudgeServer
) -> None:
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    per_call = PROMPT_TOKENS + COMPLETION_TOKENS
    p = make_pipeline([EvaluatorSpec(judged, limits=Limits(max_tokens_per_hour=per_call))], limits_clock=FakeClock())
    for i in range(3):
        with p.tracer.start_as_current_span(f"chat-{i}") as span:
            span.set_attribute("output.value", f"answer number {i}")
        p.flush()
    assert chat_server.count() == 1
    assert p.processor.stats()["not_evaluated_by_reason"] == {"over_budget": 2}


def test_sampled_out_evaluators_are_counted_and_shown_on_spans_enriched_anyway(make_pipeline: MakePipeline) -> None:
    reader = InMemoryMetricReader()
    p = make_pipeline(
        [EvaluatorSpec(limited, sample_rate=0.0), free], meter_provider=MeterProvider(metric_readers=[reader])
    )
    with p.tracer.start_as_current_span("chat"):
        pass
    p.flush()
    span = attrs(p.one("chat"))
    assert span["evaltrace.eval.limited.outcome"] == "not_evaluated"
    assert span["evaltrace.eval.limited.skip_reason"] == "sampled_out"
    assert span["evaltrace.eval.free.outcome"] == "pass"
    stats = p.processor.stats()
    assert stats["sampled_out"] == 1
    assert stats["not_evaluated_by_reason"] == {"sampled_out": 1}
    assert stats["evaluated"] == 1  # the skip is not an evaluation that ran
    points = metric_points(reader, "evaltrace.evaluation.not_evaluated")
    assert [(dict(d.attributes), d.value) for d in points] == [
        ({"evaltrace.evaluator": "limited", "evaltrace.evaluation.skip_reason": "sampled_out"}, 1)
    ]


def test_a_full_queue_counts_each_evaluator_as_queue_full(make_pipeline: MakePipeline) -> None:
    release = threading.Event()

    @evaluator(name="slow")
    def slow(trace: Trace) -> bool:
        return release.wait(10)

    p = make_pipeline([slow], max_queue_size=1, hold_timeout_s=10)
    try:
        with p.tracer.start_as_current_span("first"):
            pass
        with p.tracer.start_as_current_span("second"):
            pass
        assert p.processor.stats()["not_evaluated_by_reason"] == {"queue_full": 1}
    finally:
        release.set()
    p.flush()
    assert p.processor.stats()["evaluators"]["slow"]["not_evaluated_by_reason"] == {"queue_full": 1}


def test_max_concurrent_holds_evaluations_to_the_limit() -> None:
    asyncio.run(_concurrency())


async def _concurrency() -> None:
    gate = LimitGate(Limits(max_concurrent=2))
    running = 0
    peak = 0

    async def one() -> None:
        nonlocal running, peak
        async with gate.slot("any"):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)
            running -= 1

    await asyncio.gather(*(one() for _ in range(6)))
    assert peak == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"evaluations_per_secnd": 1}, "limits.evaluations_per_secnd"),
        ({"max_usd_per_day": -1}, "limits.max_usd_per_day"),
        ({"max_concurrent": 0}, "limits.max_concurrent"),
        ({"max_tokens_per_hour": 1.5}, "limits.max_tokens_per_hour"),
    ],
)
def test_bad_limits_are_config_errors_naming_the_key(value: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Limits.coerce(value, "limits")
    with pytest.raises(ConfigError, match=f"limited.{message}".replace(".", r"\.")):
        EvaluatorSpec(limited, limits=value)  # type: ignore[arg-type]


class FailingClock(FakeClock):
    """A ``limits_clock`` that raises while ``failing``: the limiter itself cannot decide (a user clock failing)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def __call__(self) -> float:
        if self.failing:
            raise OSError("clock source unavailable")
        return self.now


def test_a_limiter_that_fails_refuses_only_its_evaluator_counted_limits_unavailable(
    make_pipeline: MakePipeline,
) -> None:
    """The limiter raising while a span's evaluators are chosen takes neither the span nor its other evaluators.

    ``free`` (no limit, admitted first) runs and its verdict is on the exported span; ``limited`` is not evaluated,
    skip reason ``limits_unavailable`` (on the span, enriched by ``free``, and counted), never run unchecked; once
    the clock answers again ``limited`` runs as before.
    """
    clock = FailingClock()
    p = make_pipeline(
        [free, EvaluatorSpec(limited, limits=Limits(evaluations_per_second=1, burst=5))], limits_clock=clock
    )
    clock.failing = True
    with p.tracer.start_as_current_span("chat-0"):
        pass
    clock.failing = False
    with p.tracer.start_as_current_span("chat-1"):
        pass
    p.flush()
    first, second = attrs(p.one("chat-0")), attrs(p.one("chat-1"))
    assert first["evaltrace.eval.free.outcome"] == "pass"
    assert first["evaltrace.eval.limited.outcome"] == "not_evaluated"
    assert first["evaltrace.eval.limited.skip_reason"] == "limits_unavailable"
    assert "evaltrace.eval.limited.passed" not in first
    assert second["evaltrace.eval.limited.outcome"] == "fail"
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"limits_unavailable": 1}
    assert stats["evaluators"]["limited"]["not_evaluated_by_reason"] == {"limits_unavailable": 1}
    assert (stats["evaluators"]["free"]["passed"], stats["evaluators"]["limited"]["failed"]) == (2, 1)
    assert stats["internal_errors"] == 1


def test_a_limiter_that_fails_at_a_trace_root_counts_the_trace_evaluator_and_spares_the_span_one(
    make_pipeline: MakePipeline,
) -> None:
    """The same when the trace-level evaluators are chosen as the root ends: the trace is exported, counted."""
    clock = FailingClock()
    trace_spec = EvaluatorSpec(limited, trace_level=True, limits=Limits(evaluations_per_second=1, burst=5))
    p = make_pipeline([free, trace_spec], limits_clock=clock, trace_quiet_period_s=0.0)
    clock.failing = True
    with p.tracer.start_as_current_span("root-0"):
        with p.tracer.start_as_current_span("child-0"):
            pass
    clock.failing = False
    with p.tracer.start_as_current_span("root-1"):
        pass
    p.flush()
    root = attrs(p.one("root-0"))
    assert root["evaltrace.eval.free.outcome"] == "pass"
    assert root["evaltrace.eval.limited.skip_reason"] == "limits_unavailable"
    assert attrs(p.one("child-0"))["evaltrace.eval.free.outcome"] == "pass"
    assert attrs(p.one("root-1"))["evaltrace.eval.limited.outcome"] == "fail"
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"limits_unavailable": 1}
    assert (stats["evaluators"]["free"]["passed"], stats["evaluators"]["limited"]["failed"]) == (3, 1)


class OffMainThreadFailingClock(FakeClock):
    """A ``limits_clock`` that answers on the test's thread (admission at span end) and raises on any other.

    So admission works and charging the judge's spend afterwards (on the evaluation loop) fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self.main = threading.current_thread()

    def __call__(self) -> float:
        if threading.current_thread() is not self.main:
            raise OSError("clock source unavailable")
        return self.now


def test_a_judge_verdict_stands_when_charging_its_spend_fails(
    make_pipeline: MakePipeline, chat_server: JudgeServer
) -> None:
    """Charging the spend is bookkeeping after the verdict: its failure is an internal error, never a lost verdict.

    The judge's pass and the other evaluator's pass are both on the enriched span and in ``stats()``.
    """
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    p = make_pipeline(
        [EvaluatorSpec(judged, limits=Limits(max_usd_per_day=100.0)), free],
        limits_clock=OffMainThreadFailingClock(),
        hold_timeout_s=600,  # enriched however loaded the machine is: the hold is wall-clock time
    )
    with p.tracer.start_as_current_span("chat-0") as span:
        span.set_attribute("output.value", "an answer")
    p.flush()
    assert chat_server.count() == 1
    name = judged.name
    span_attributes = attrs(p.one("chat-0"))
    assert span_attributes[f"evaltrace.eval.{name}.outcome"] == "pass"
    assert span_attributes["evaltrace.eval.free.outcome"] == "pass"
    stats = p.processor.stats()
    assert (stats["evaluators"][name]["passed"], stats["evaluators"]["free"]["passed"]) == (1, 1)
    assert (stats["enriched"], stats["errors"], stats["internal_errors"]) == (1, 0, 1)


def test_a_failed_budget_charge_keeps_the_judge_spend_metrics(
    make_pipeline: MakePipeline, chat_server: JudgeServer
) -> None:
    """The ``gen_ai.evaluation.client.*`` metrics are not the budget: a charge that fails (its clock) keeps them.

    Only this process's budget windows miss that spend; the failure is one internal error.
    """
    reader = InMemoryMetricReader()
    judge = Judge("gpt-4o-mini", base_url=chat_server.url, api_key="k", max_retries=0)
    judged = LLMJudge(rubric="Answers the question", judge=judge)
    p = make_pipeline(
        [EvaluatorSpec(judged, limits=Limits(max_usd_per_day=100.0)), free],
        meter_provider=MeterProvider(metric_readers=[reader]),
        limits_clock=OffMainThreadFailingClock(),
    )
    with p.tracer.start_as_current_span("chat-0") as span:
        span.set_attribute("output.value", "an answer")
    p.flush()
    assert chat_server.count() == 1
    assert attrs(p.one("chat-0"))[f"evaltrace.eval.{judged.name}.outcome"] == "pass"
    assert p.processor.stats()["internal_errors"] == 1
    cost = metric_points(reader, "gen_ai.evaluation.client.cost")
    assert [point.value for point in cost] == [pytest.approx(CALL_USD)]
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum for p in metric_points(reader, "gen_ai.evaluation.client.token.usage")
    }
    assert tokens == {"input": PROMPT_TOKENS, "output": COMPLETION_TOKENS}
    assert [d.count for d in metric_points(reader, "gen_ai.evaluation.client.operation.duration")] == [1]


@evaluator(name="limited_too")
def limited_too(trace: Trace) -> bool:
    return False


def test_a_limiter_failing_on_every_span_logs_once_per_evaluator_per_episode_and_counts_every_refusal(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    """A persistent fault logs no traceback per evaluator per span on the application's thread (``span.end()``).

    One ERROR (with its traceback) per limited evaluator when the episode starts, one INFO line each when the clock
    answers again, one ERROR each when it fails again; every refusal counted.
    """
    clock = FailingClock()
    many = Limits(evaluations_per_second=1000, burst=1000)
    p = make_pipeline(
        [free, EvaluatorSpec(limited, limits=many), EvaluatorSpec(limited_too, limits=many)], limits_clock=clock
    )
    caplog.set_level(logging.INFO, logger="evaltrace")

    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR and "rate limits" in r.getMessage()]

    clock.failing = True
    for n in range(30):
        with p.tracer.start_as_current_span(f"chat-{n}"):
            pass
    assert len(failures()) == 2 and all(r.exc_info is not None for r in failures())
    clock.failing = False
    with p.tracer.start_as_current_span("chat-ok"):
        pass
    assert len([r for r in caplog.records if "works again after 30 internal error(s)" in r.getMessage()]) == 2
    clock.failing = True
    for n in range(5):
        with p.tracer.start_as_current_span(f"again-{n}"):
            pass
    p.flush()
    assert len(failures()) == 4
    stats = p.processor.stats()
    assert stats["internal_errors"] == 2 * 35
    assert stats["not_evaluated_by_reason"] == {"limits_unavailable": 2 * 35}
    assert stats["evaluators"]["free"]["passed"] == 36


def test_a_limits_clock_that_raises_while_limits_are_set_up_fails_no_set_up_and_refuses_only_its_evaluator(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    """The processor is built with a clock that raises (a token bucket used to read it when made: the processor,
    hence ``configure()``, raised). Now set-up reads no clock: while it raises, ``limited`` is refused on every span
    (``limits_unavailable``, counted, one ERROR), never run unchecked nor failed, and ``free`` runs; once it answers,
    ``limited`` runs from a full burst and its rate limit holds."""
    clock = FailingClock()
    clock.failing = True
    caplog.set_level(logging.INFO, logger="evaltrace")
    p = make_pipeline(
        [free, EvaluatorSpec(limited, limits=Limits(evaluations_per_second=1, burst=2))], limits_clock=clock
    )
    for n in range(3):
        with p.tracer.start_as_current_span(f"down-{n}"):
            pass
    clock.failing = False
    for n in range(3):  # the clock stands still: the burst of 2, then rate limited
        with p.tracer.start_as_current_span(f"up-{n}"):
            pass
    p.flush()
    for n in range(3):
        down = attrs(p.one(f"down-{n}"))
        assert (down["evaltrace.eval.free.outcome"], down["evaltrace.eval.limited.outcome"]) == (
            "pass",
            "not_evaluated",
        )
        assert down["evaltrace.eval.limited.skip_reason"] == "limits_unavailable"
        assert "evaltrace.eval.limited.passed" not in down
    outcomes = [attrs(p.one(f"up-{n}"))["evaltrace.eval.limited.outcome"] for n in range(3)]
    assert outcomes == ["fail", "fail", "not_evaluated"]
    assert attrs(p.one("up-2"))["evaltrace.eval.limited.skip_reason"] == "rate_limited"
    stats = p.processor.stats()
    assert stats["evaluators"]["limited"]["not_evaluated_by_reason"] == {"limits_unavailable": 3, "rate_limited": 1}
    assert (stats["evaluators"]["free"]["passed"], stats["internal_errors"]) == (6, 3)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "rate limits" in r.getMessage()]
    assert len(errors) == 1 and errors[0].exc_info is not None


def test_configure_with_a_global_rate_limit_whose_clock_raises_exports_every_span_unjudged_and_counted(
    judge_tracing_defaults: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``configure()`` with ``limits`` and a ``limits_clock`` that raises returns (it used to raise the clock's
    error into the application); every evaluator is under the global limit, so each span goes out unjudged (no
    verdict: as any span whose evaluators were all refused) with each evaluator counted ``limits_unavailable``, none
    run; once the clock answers, spans are judged again."""
    from evaltrace import config

    # This handle's global limits must not become the default of later backfills in this process (they read the
    # handle in force): the previous one is put back at teardown.
    monkeypatch.setattr(config._state, "handle", config._state.handle)
    clock = FailingClock()
    clock.failing = True
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        tracer_provider=TracerProvider(),
        exporters=[exporter],
        local_store=False,
        batch=False,
        evaluators=[free, limited],
        evaluation_options={
            "limits": {"evaluations_per_second": 10, "burst": 10},
            "limits_clock": clock,
            "dead_letter_dir": None,
        },
    )
    tracer = handle.provider.get_tracer("tests")
    for n in range(2):
        with tracer.start_as_current_span(f"down-{n}"):
            pass
    clock.failing = False
    with tracer.start_as_current_span("up"):
        pass
    assert handle.force_flush(10_000)
    spans = {span.name: attrs(span) for span in exporter.get_finished_spans()}
    assert set(spans) == {"down-0", "down-1", "up"}
    for name in ("down-0", "down-1"):
        assert not [key for key in spans[name] if key.startswith("evaltrace.eval.")]  # no verdict, as any refusal
    assert (spans["up"]["evaltrace.eval.free.outcome"], spans["up"]["evaltrace.eval.limited.outcome"]) == (
        "pass",
        "fail",
    )
    stats = handle.evaluation_processor.stats()
    assert stats["not_evaluated_by_reason"] == {"limits_unavailable": 4}
    assert stats["internal_errors"] == 4
    handle.shutdown()
