"""Fixtures for the OpenAI instrumentation tests: an instrumented client per sync/async mode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from tests_paths import CASSETTES

from evaltrace._internal import settings
from evaltrace.instrumentation.openai import OpenAIInstrumentor


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
def cassettes() -> None:
    if not CASSETTES:
        pytest.skip("recorded OpenAI cassettes not found (set EVALTRACE_CASSETTE_DIR)")
