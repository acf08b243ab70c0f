"""Fixtures for the backend wire tests: a clean environment and configuration for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from evaltrace._internal import settings, tracing

_BACKEND_ENV_PREFIXES = ("OTEL_EXPORTER_OTLP_", "LANGFUSE_", "PHOENIX_")


@pytest.fixture(autouse=True)
def clean_backend_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No exporter settings leak in from the machine running the tests."""
    for key in list(os.environ):
        if key.startswith(_BACKEND_ENV_PREFIXES):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)
