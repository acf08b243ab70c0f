"""Fixtures for the instrumentation tests: each instrumentor (OpenAI, Anthropic, LiteLLM, Bedrock) on with content
captured, the sync/async parametrisation, ``instrument_openai()`` on and off, the ``openai_api`` feature marker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai_replay import skip_unless_api
from opentelemetry.sdk.trace import TracerProvider
from tests_paths import CASSETTES

import evaltrace
from evaltrace._internal import settings
from evaltrace.instrumentation.openai import OpenAIInstrumentor


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "openai_api(*dotted): skip unless the installed openai client has client.<dotted> for each name "
        "(feature detection: the supported openai range spans APIs that came later, such as Responses)",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("openai_api"):
        skip_unless_api(*mark.args)


@pytest.fixture(params=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "async")


@pytest.fixture
def capture() -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    yield
    settings.replace(previous)


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[OpenAIInstrumentor]:
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.fixture
def anthropic_instrumented(provider: TracerProvider, capture: None) -> Iterator[object]:
    """``AnthropicInstrumentor`` on, content captured (imported here: anthropic is an optional extra)."""
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.fixture
def litellm_instrumented(provider: TracerProvider, capture: None) -> Iterator[Any]:
    """``LiteLLMInstrumentor`` on, content captured (imported here: litellm is an optional extra); yields it."""
    from evaltrace.instrumentation.litellm import LiteLLMInstrumentor

    instrumentor = LiteLLMInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.fixture
def bedrock_instrumented(provider: TracerProvider, capture: None) -> Iterator[Any]:
    """``BedrockInstrumentor`` on, content captured (imported here: boto3 is an optional extra); yields it."""
    from evaltrace.instrumentation.bedrock import BedrockInstrumentor

    instrumentor = BedrockInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.fixture(params=["openai_instrumented", "openai_off"])
def openai_on(request: pytest.FixtureRequest) -> Iterator[bool]:
    """``instrument_openai()`` on, then off: agent frameworks must record one model span per request either way."""
    on = request.param == "openai_instrumented"
    if on:
        evaltrace.instrument_openai()
    yield on
    if on:
        evaltrace.uninstrument_openai()


@pytest.fixture
def cassettes() -> None:
    if not CASSETTES:
        pytest.fail("recorded OpenAI cassettes not found: they ship in tests/fixtures/openai-cassettes")
