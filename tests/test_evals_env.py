"""The ``OTEL_INSTRUMENTATION_GENAI_EVALS_*`` environment surface: validation, and what configure() does with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import evals_env, settings, tracing
from evaltrace._internal.evals_env import EvaluationEnvironment, read_evaluation_environment
from evaltrace.evaluation import evaluator
from evaltrace.evaluators.judge import Judge
from evaltrace.exceptions import ConfigError
from evaltrace.schema import Trace

P = "OTEL_INSTRUMENTATION_GENAI_"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in evals_env.ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


# --- one row per variable: a valid value and what it reads as ---------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        (f"{P}EVALS_EVALUATORS", "pii_leakage, Exact_Match", "evaluators", ("pii_leakage", "exact_match")),
        (f"{P}EVALS_EVALUATORS", "none", "evaluators", ()),
        (f"{P}EVALUATION_SAMPLE_RATE", "0.25", "sample_rate", 0.25),
        (f"{P}EVALS_SAMPLE_RATE", "1", "sample_rate", 1.0),
        (f"{P}EVALUATION_RATE_LIMIT_RPS", "2.5", "rate_limit_per_s", 2.5),
        (f"{P}EVALS_RATE_LIMIT", "10", "rate_limit_per_s", 10.0),
        (f"{P}EVALUATION_RATE_LIMIT_BURST", "4", "rate_limit_burst", 4),
        (f"{P}EVALS_MAX_USD_PER_HOUR", "0.5", "max_usd_per_hour", 0.5),
        (f"{P}EVALS_MAX_USD_PER_DAY", "0", "max_usd_per_day", 0.0),
        (f"{P}EVALS_MAX_TOKENS_PER_HOUR", "20000", "max_tokens_per_hour", 20_000),
        (f"{P}EVALS_MAX_TOKENS_PER_DAY", "0", "max_tokens_per_day", 0),
        (f"{P}EVALS_QUEUE_SIZE", "100", "queue_size", 100),
        (f"{P}EVALS_WORKERS", "8", "workers", 8),
        (f"{P}EVALS_JUDGE_MODEL", "smollm2", "judge_model", "smollm2"),
        (f"{P}EVALS_JUDGE_BASE_URL", "http://127.0.0.1:8001/v1", "judge_base_url", "http://127.0.0.1:8001/v1"),
        ("EVALTRACE_EVALUATION_PROVENANCE", "TRUE", "provenance", True),
        ("EVALTRACE_EVALUATION_PROVENANCE", "off", "provenance", False),
        (f"{P}EVALS_WORKERS", "", "workers", None),  # empty counts as unset
    ],
)
def test_valid_values(variable: str, value: str, field: str, expected: object) -> None:
    assert getattr(read_evaluation_environment({variable: value}), field) == expected


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        (f"{P}EVALS_EVALUATORS", "faithfulnes", "did you mean 'faithfulness'"),
        (f"{P}EVALS_EVALUATORS", "Deepeval(LLMInvocation(bias))", "only catalogue names"),
        (f"{P}EVALS_EVALUATORS", "toxicity,toxicity", "listed twice"),
        (f"{P}EVALUATION_SAMPLE_RATE", "1.5", "between 0 and 1"),
        (f"{P}EVALUATION_SAMPLE_RATE", "half", "expected a number"),
        (f"{P}EVALS_SAMPLE_RATE", "nan", "finite"),
        (f"{P}EVALUATION_RATE_LIMIT_RPS", "0", "> 0"),
        (f"{P}EVALS_RATE_LIMIT", "fast", "expected a number"),
        (f"{P}EVALUATION_RATE_LIMIT_BURST", "0", ">= 1"),
        (f"{P}EVALS_MAX_USD_PER_HOUR", "-1", ">= 0"),
        (f"{P}EVALS_MAX_USD_PER_DAY", "ten", "expected a number"),
        (f"{P}EVALS_MAX_TOKENS_PER_HOUR", "-5", ">= 0"),
        (f"{P}EVALS_MAX_TOKENS_PER_DAY", "1.5", "whole number"),
        (f"{P}EVALS_QUEUE_SIZE", "0", ">= 1"),
        (f"{P}EVALS_QUEUE_SIZE", "1e3", "whole number"),
        (f"{P}EVALS_WORKERS", "-2", ">= 1"),
        (f"{P}EVALS_JUDGE_BASE_URL", "127.0.0.1:8001", "http:// or https://"),
        ("EVALTRACE_EVALUATION_PROVENANCE", "maybe", "true or false"),
    ],
)
def test_bad_values_are_config_errors_naming_the_variable(variable: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_evaluation_environment({variable: value})
    assert caught.value.setting == variable
    assert problem in caught.value.problem


def test_an_alias_conflicting_with_the_utilities_name_is_an_error() -> None:
    environ = {f"{P}EVALUATION_SAMPLE_RATE": "0.1", f"{P}EVALS_SAMPLE_RATE": "0.2"}
    with pytest.raises(ConfigError) as caught:
        read_evaluation_environment(environ)
    assert caught.value.setting == f"{P}EVALS_SAMPLE_RATE"


def test_nothing_set_means_nothing_asked() -> None:
    assert read_evaluation_environment({}) == EvaluationEnvironment()
    assert evals_env.build_evaluators(EvaluationEnvironment()) == []


def test_an_evaluator_that_needs_options_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        evals_env.build_evaluators(read_evaluation_environment({f"{P}EVALS_EVALUATORS": "cost"}))
    assert caught.value.setting == f"{P}EVALS_EVALUATORS"
    assert "'cost' needs options" in caught.value.problem


def test_session_evaluators_named_in_the_environment_are_attached_at_session_scope() -> None:
    env = read_evaluation_environment(
        {f"{P}EVALS_EVALUATORS": "conversation_relevancy,conversation_completeness,pii_leakage,tool_error_rate"}
    )
    scopes = {spec.evaluator.name: spec.scope for spec in evals_env.build_evaluators(env)}
    # A Conversation-only evaluator on spans would error on every span; one that judges both stays on spans.
    assert scopes == {
        "conversation_relevancy": "session",
        "conversation_completeness": "session",
        "pii_leakage": "span",
        "tool_error_rate": "span",
    }


def test_judge_variables_build_one_shared_judge_with_sample_rate() -> None:
    env = read_evaluation_environment(
        {
            f"{P}EVALS_EVALUATORS": "toxicity,sexism,pii_leakage",
            f"{P}EVALS_JUDGE_MODEL": "smollm2",
            f"{P}EVALS_JUDGE_BASE_URL": "http://127.0.0.1:8001/v1",
            f"{P}EVALUATION_SAMPLE_RATE": "0.1",
        }
    )
    specs = evals_env.build_evaluators(env)
    judges = {id(spec.evaluator.judge) for spec in specs if hasattr(spec.evaluator, "judge")}
    assert len(judges) == 1
    judge = specs[0].evaluator.judge
    assert isinstance(judge, Judge) and judge.model == "smollm2"
    assert [spec.sample_rate for spec in specs] == [0.1, 0.1, 0.1]


# --- configure() ------------------------------------------------------------------------------------------


def _configure(**kwargs: Any) -> tuple[evaltrace.EvaltraceHandle, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        tracer_provider=TracerProvider(), exporters=[exporter], local_store=False, batch=False, **kwargs
    )
    return handle, exporter


def _one_span(handle: evaltrace.EvaltraceHandle, exporter: InMemorySpanExporter) -> dict[str, object]:
    with tracing.get_tracer().start_as_current_span("chat"):
        pass
    assert handle.force_flush(10_000)
    (span,) = exporter.get_finished_spans()
    return dict(span.attributes or {})


def test_nothing_is_evaluated_when_the_environment_is_unset() -> None:
    handle, exporter = _configure()
    attributes = _one_span(handle, exporter)
    assert not [key for key in attributes if key.startswith("evaltrace.eval.")]
    assert handle.evaluation_processor.stats()["evaluated"] == 0


def test_configure_runs_the_evaluators_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    monkeypatch.setenv(f"{P}EVALUATION_SAMPLE_RATE", "1")  # every trace (the default is the production 1%)
    monkeypatch.setenv(f"{P}EVALS_QUEUE_SIZE", "64")
    monkeypatch.setenv(f"{P}EVALS_WORKERS", "2")
    handle, exporter = _configure()
    attributes = _one_span(handle, exporter)
    assert "evaltrace.eval.pii_leakage.outcome" in attributes
    options = handle.evaluation_processor.options
    assert (options.max_queue_size, options.sync_workers, options.evaluation_provenance) == (64, 2, False)


def test_evaluators_and_options_in_code_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    @evaluator(name="in_code")
    def in_code(trace: Trace) -> bool:
        return True

    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    monkeypatch.setenv(f"{P}EVALS_WORKERS", "2")
    handle, exporter = _configure(evaluators=[in_code], evaluation_options={"sync_workers": 3})
    attributes = _one_span(handle, exporter)
    assert attributes["evaltrace.eval.in_code.outcome"] == "pass"
    assert "evaltrace.eval.pii_leakage.outcome" not in attributes
    assert handle.evaluation_processor.options.sync_workers == 3


def test_a_bad_variable_fails_configure_before_anything_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = _configure()
    monkeypatch.setenv(f"{P}EVALS_WORKERS", "many")
    with pytest.raises(ConfigError) as caught:
        _configure()
    assert caught.value.setting == f"{P}EVALS_WORKERS"
    from evaltrace import config

    assert config.current_handle() is first


@pytest.mark.parametrize(
    ("env_value", "argument", "expected"),
    [(None, None, False), ("true", None, True), ("true", False, False), (None, True, True)],
)
def test_provenance_opt_in(
    monkeypatch: pytest.MonkeyPatch, env_value: str | None, argument: bool | None, expected: bool
) -> None:
    if env_value is not None:
        monkeypatch.setenv("EVALTRACE_EVALUATION_PROVENANCE", env_value)
    handle, _ = _configure(evaluation_provenance=argument)
    assert handle.evaluation_processor.options.evaluation_provenance is expected


def test_rate_limit_and_budgets_become_the_processor_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltrace.evaluation.limits import Limits

    monkeypatch.setenv(f"{P}EVALUATION_RATE_LIMIT_RPS", "5")
    monkeypatch.setenv(f"{P}EVALUATION_RATE_LIMIT_BURST", "10")
    monkeypatch.setenv(f"{P}EVALS_MAX_USD_PER_DAY", "3.5")
    monkeypatch.setenv(f"{P}EVALS_MAX_TOKENS_PER_HOUR", "1000")
    handle, _ = _configure()
    assert handle.evaluation_processor.options.limits == Limits(
        evaluations_per_second=5.0, burst=10, max_usd_per_day=3.5, max_tokens_per_hour=1000
    )
    handle, _ = _configure(evaluation_options={"limits": {"max_usd_per_hour": 1.0}})
    assert handle.evaluation_processor.options.limits == Limits(max_usd_per_hour=1.0), "code wins as a whole"


def test_the_rate_limit_variable_limits_evaluations_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    monkeypatch.setenv(f"{P}EVALUATION_SAMPLE_RATE", "1")  # every trace (the default is the production 1%)
    monkeypatch.setenv(f"{P}EVALUATION_RATE_LIMIT_RPS", "0.001")  # one evaluation, then none for ~17 minutes
    monkeypatch.setenv(f"{P}EVALUATION_RATE_LIMIT_BURST", "1")
    handle, _ = _configure()
    for _ in range(3):
        with tracing.get_tracer().start_as_current_span("chat"):
            pass
    assert handle.force_flush(10_000)
    stats = handle.evaluation_processor.stats()
    assert stats["evaluated"] == 1
    assert stats["not_evaluated_by_reason"] == {"rate_limited": 2}


def test_the_sample_rate_variable_applies_to_the_environment_evaluators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    monkeypatch.setenv(f"{P}EVALUATION_SAMPLE_RATE", "0")
    handle, exporter = _configure()
    attributes = _one_span(handle, exporter)
    assert "evaltrace.eval.pii_leakage.outcome" not in attributes
    assert handle.evaluation_processor.stats()["evaluated"] == 0


# --- the default production sample rate (issue 29, metrics reference: ProductionMonitor(sample_rate=0.01)) ---

SAMPLED_TRACES = 400


def _evaluated_of_many_traces(monkeypatch: pytest.MonkeyPatch, rate: str | None) -> dict[str, Any]:
    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    if rate is not None:
        monkeypatch.setenv(f"{P}EVALUATION_SAMPLE_RATE", rate)
    handle, _ = _configure()
    for _ in range(SAMPLED_TRACES):  # one root span each: that many traces with random ids
        with tracing.get_tracer().start_as_current_span("chat"):
            pass
    assert handle.force_flush(30_000)
    return handle.evaluation_processor.stats()


def test_production_evaluators_judge_one_percent_of_traces_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live evaluators from the environment judge 1% of traces when no rate is set: not a judge call per trace."""
    stats = _evaluated_of_many_traces(monkeypatch, None)
    evaluated, sampled_out = stats["evaluated"], stats["not_evaluated_by_reason"].get("sampled_out", 0)
    # Binomial(400, 0.01): mean 4; more than 20 has a probability below 1e-9. Every trace is accounted for.
    assert evaluated <= 20 and evaluated + sampled_out == SAMPLED_TRACES
    assert evals_env.DEFAULT_PRODUCTION_SAMPLE_RATE == 0.01


def test_a_sample_rate_set_in_the_environment_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _evaluated_of_many_traces(monkeypatch, "1")["evaluated"] == SAMPLED_TRACES
