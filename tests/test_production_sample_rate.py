"""The default production sample rate (issue 29, metrics reference: ``ProductionMonitor(sample_rate=0.01)``).

Evaluators named in ``OTEL_INSTRUMENTATION_GENAI_EVALS_EVALUATORS`` (live evaluation of a deployed app) judge 1%
of the traces when ``..._EVALUATION_SAMPLE_RATE`` is unset, not every trace: each would cost a judge call.
Real OTel SDK, real processor; the draw is the deterministic per-trace hash, so what is left out is counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import evals_env, settings, tracing

P = "OTEL_INSTRUMENTATION_GENAI_"
TRACES = 400


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


def _evaluated(monkeypatch: pytest.MonkeyPatch, rate: str | None) -> dict[str, object]:
    monkeypatch.setenv(f"{P}EVALS_EVALUATORS", "pii_leakage")
    if rate is not None:
        monkeypatch.setenv(f"{P}EVALUATION_SAMPLE_RATE", rate)
    handle = evaltrace.configure(
        tracer_provider=TracerProvider(), exporters=[InMemorySpanExporter()], local_store=False, batch=False
    )
    for _ in range(TRACES):  # one root span each: TRACES traces with random ids
        with tracing.get_tracer().start_as_current_span("chat"):
            pass
    assert handle.force_flush(30_000)
    return handle.evaluation_processor.stats()


def test_production_evaluators_judge_one_percent_of_traces_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = _evaluated(monkeypatch, None)
    evaluated = int(stats["evaluated"])  # type: ignore[call-overload]
    sampled_out = stats["not_evaluated_by_reason"].get("sampled_out", 0)  # type: ignore[attr-defined]
    # Binomial(400, 0.01): mean 4; more than 20 has a probability below 1e-9. Every trace is accounted for.
    assert evaluated <= 20 and evaluated + sampled_out == TRACES
    assert evals_env.DEFAULT_PRODUCTION_SAMPLE_RATE == 0.01


def test_a_sample_rate_set_in_the_environment_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = _evaluated(monkeypatch, "1")
    assert stats["evaluated"] == TRACES
