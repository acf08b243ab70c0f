"""Every ``configure()`` argument of the wrong type is refused with a ConfigError naming it; bad env values fail closed."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace import config
from evaltrace._internal import settings, tracing
from evaltrace._internal.configure_args import CHECKS
from evaltrace.evaluation import JsonlScoreSink, evaluator
from evaltrace.schema import Trace

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# One bad value per parameter, and a fragment of the message it must give. Adding a parameter to configure()
# without a row here fails test_every_parameter_has_a_row.
BAD_VALUES: dict[str, tuple[Any, str]] = {
    "service_name": (42, "expected a string or None, got int"),
    "environment": (["prod"], "got list"),
    "otlp_endpoint": (4318, "got int"),
    "protocol": (b"grpc", "got bytes"),
    "headers": (123, "expected a mapping of str to str"),
    "langfuse": ("yes", "expected True, False or None, got str"),
    "phoenix": (6006, "got int"),
    "phoenix_project": (1.5, "got float"),
    "local_store": (42, "a directory (str or os.PathLike)"),
    "console": (1, "expected True or False, got int"),
    "exporters": ([object()], "got object at [0]"),
    "capture_content": ("off", "got str"),
    "max_attribute_length": ("100", "got str"),
    "redact": (3.5, "got float"),
    "evaluators": ([42], "Evaluator or EvaluatorSpec objects, got int at [0]"),
    "sinks": ("jsonl", "got str"),
    "evaluation_options": ([("concurrency", 2)], "got list"),
    "evaluation": (None, 'expected True, False or "process", got NoneType'),
    "evaluation_provenance": ("yes", "expected True, False or None, got str"),
    "trace_judges": ("yes", "expected True, False or None, got str"),
    "tracer_provider": (object(), "TracerProvider or None, got object"),
    "batch": ("false", "got str"),
    "shutdown_timeout_s": ("10", "got str"),
    "handle_sigterm": (0, "got int"),
    "export_queue_max_bytes": (1.5, "got float"),
}


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    settings._warned.clear()
    yield
    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


def test_every_parameter_has_a_row() -> None:
    parameters = set(inspect.signature(evaltrace.configure).parameters)
    assert set(BAD_VALUES) == parameters
    assert set(CHECKS) == parameters


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_a_wrong_type_raises_config_error_naming_the_setting(name: str, tmp_path: Path) -> None:
    value, fragment = BAD_VALUES[name]
    kwargs: dict[str, Any] = {"local_store": tmp_path / "traces", name: value}
    before = config.current_handle()
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(**kwargs)
    assert info.value.setting == name
    message = str(info.value)
    assert message.startswith(f"configure({name}="), message
    assert fragment in message, message
    assert config.current_handle() is before  # refused before anything was built or replaced
    assert not (tmp_path / "traces").exists()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"headers": {"authorization": 1}}, "got a str -> int item"),
        ({"local_store": ""}, "got an empty string"),
        ({"max_attribute_length": -1}, "got -1"),
        ({"max_attribute_length": True}, "got bool"),
        ({"shutdown_timeout_s": 0}, "got 0"),
        ({"shutdown_timeout_s": float("inf")}, "got inf"),
        ({"export_queue_max_bytes": -1}, "got -1"),
        ({"exporters": InMemorySpanExporter()}, "expected a list of SpanExporter objects"),
        ({"evaluation_options": {1: 2}}, "got a int key"),
        ({"redact": ["ACME", 42]}, "got int at [1]"),
    ],
)
def test_values_of_the_right_type_but_unusable_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(**kwargs)
    assert info.value.setting == next(iter(kwargs))
    assert fragment in str(info.value)


def test_a_misplaced_secret_is_not_echoed() -> None:
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=False, headers=["authorization=Bearer sk-live-123"])  # type: ignore[arg-type]
    assert "sk-live-123" not in str(info.value)
    assert "configure(headers=<list>)" in str(info.value)


def test_a_malformed_header_string_is_not_echoed() -> None:
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(
            local_store=False, otlp_endpoint="http://127.0.0.1:4318", headers="authorization Bearer sk-9"
        )
    assert info.value.setting == "headers"
    assert "sk-9" not in str(info.value)
    assert "item 1 has no =" in str(info.value)


@evaluator(name="nonempty")
def nonempty(trace: Trace) -> bool:
    return trace.latency_ms >= 0


def test_every_accepted_form_still_configures(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "svc",
        environment="test",
        headers={"x-team": "evals"},
        phoenix_project="proj",
        local_store=tmp_path / "traces",
        exporters=[exporter],
        capture_content=False,
        max_attribute_length=0,
        redact=["ACME-[0-9]+"],
        evaluators=[nonempty],
        sinks=[JsonlScoreSink(tmp_path / "scores.jsonl")],
        evaluation_options={},
        tracer_provider=TracerProvider(),
        batch=False,
        shutdown_timeout_s=2,
        handle_sigterm=False,
    )
    assert handle.exporter_names == ["custom[0]", "local_store"]
    assert settings.get().capture_content is False


# --- OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT ---------------------------------------------------


def _captured_input(monkeypatch: pytest.MonkeyPatch, value: str) -> bool:
    monkeypatch.setenv(CAPTURE_ENV, value)
    exporter = InMemorySpanExporter()
    evaltrace.configure(exporters=[exporter], local_store=False, batch=False, evaluation=False, handle_sigterm=False)

    @evaltrace.trace
    def echo(text: str) -> str:
        return text

    echo("private")
    (span,) = exporter.get_finished_spans()
    return "input.value" in dict(span.attributes or {})


@pytest.mark.parametrize("value", ["nope", "ture", "SPAN_ONLYY", "2"])
def test_an_unknown_capture_value_turns_capture_off_with_one_warning(
    value: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert _captured_input(monkeypatch, value) is False
        assert settings.capture_content_from_env() is False  # read again: no second warning
    warnings = [r for r in caplog.records if CAPTURE_ENV in r.getMessage()]
    assert len(warnings) == 1
    assert repr(value) in warnings[0].getMessage() and warnings[0].levelno == logging.WARNING


@pytest.mark.parametrize(
    ("value", "captured"),
    [("true", True), ("SPAN_ONLY", True), ("span_and_event", True), ("1", True), ("false", False),
     ("no_content", False), ("EVENT_ONLY", False), ("", True)],
)  # fmt: skip
def test_known_capture_values_keep_their_meaning(
    value: str, captured: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        assert _captured_input(monkeypatch, value) is captured
    assert not [r for r in caplog.records if CAPTURE_ENV in r.getMessage()]


# --- evaluation_options: values (nested ones too) are checked against ProcessorOptions' annotations -----------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"hold_timeout_s": "fast"}, "hold_timeout_s: expected float, got 'fast'"),
        ({"max_queue_size": True}, "max_queue_size: expected int, got True"),
        ({"evaluator_timeout_s": [30]}, "evaluator_timeout_s: expected float | None, got <list>"),
        ({"limits": {"max_usd_per_day": "twenty"}}, "limits.max_usd_per_day: expected float | None, got 'twenty'"),
        ({"limits": {"max_concurrent": 2.5}}, "limits.max_concurrent: expected int | None, got 2.5"),
        ({"sink_retry": {"max_retries": 3}}, "sink_retry: expected RetryPolicy, got <dict>"),
        ({"score_configs": {"tone": {"min_value": 0}}}, "score_configs.tone: expected ScoreConfig, got <dict>"),
        ({"emit_log_events": "no"}, "emit_log_events: expected bool, got 'no'"),
        ({"redis_url": 6379}, "redis_url: expected str | None, got 6379"),
    ],
)
def test_evaluation_option_values_are_type_checked_before_anything_is_built(
    options: dict[str, Any], fragment: str, tmp_path: Path
) -> None:
    before = config.current_handle()
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=tmp_path / "traces", evaluators=[nonempty], evaluation_options=options)
    assert info.value.setting == "evaluation_options"
    assert fragment in str(info.value), str(info.value)
    assert config.current_handle() is before
    assert not (tmp_path / "traces").exists()


def test_a_processor_built_directly_checks_its_option_values_too() -> None:
    from evaltrace.evaluation import EvaluationSpanProcessor

    with pytest.raises(evaltrace.ConfigError) as info:
        EvaluationSpanProcessor((), [nonempty], limits={"max_tokens_per_day": "lots"})
    assert info.value.setting == "limits.max_tokens_per_day"
    assert "expected int | None, got 'lots'" in str(info.value)


def test_evaluation_options_of_the_right_types_still_configure(tmp_path: Path) -> None:
    from evaltrace.evaluation.sinks.worker import RetryPolicy

    handle = evaltrace.configure(
        local_store=False,
        evaluators=[nonempty],
        evaluation_options={
            "hold_timeout_s": 1,  # an int where a float is annotated
            "evaluator_timeout_s": None,
            "limits": {"max_usd_per_day": 20, "max_concurrent": 8},  # a mapping of Limits' fields
            "sink_retry": RetryPolicy(max_retries=1),
            "dead_letter_dir": tmp_path / "dead",
            "limits_clock": lambda: 0.0,
        },
        handle_sigterm=False,
    )
    assert handle is config.current_handle()
