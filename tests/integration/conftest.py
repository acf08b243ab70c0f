"""A real Phoenix server for integration tests (started by ``scripts/ci_phoenix.sh``).

Without a reachable Phoenix the tests skip with the reason, except under CI (``CI=true``), where a missing
Phoenix is a failure: CI must not go green by silently skipping its only real backend.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from phoenix_helpers import PHOENIX_GRPC, PHOENIX_URL, Phoenix

from evaltrace._internal import settings, tracing


def _healthy(url: str) -> str | None:
    try:
        response = httpx.get(url + "/healthz", timeout=3)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if response.status_code == 200 else f"/healthz answered {response.status_code}"


@pytest.fixture(scope="session")
def phoenix() -> Phoenix:
    problem = _healthy(PHOENIX_URL)
    if problem is not None:
        reason = f"Phoenix not reachable at {PHOENIX_URL} ({problem}); start it with: bash scripts/ci_phoenix.sh"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)
    return Phoenix(PHOENIX_URL, PHOENIX_GRPC)


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh Phoenix project for this test (routing by the ``openinference.project.name`` resource attribute)."""
    name = f"evaltrace-it-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={name}")
    for key in list(os.environ):
        if key.startswith(("OTEL_EXPORTER_OTLP_", "LANGFUSE_", "PHOENIX_")):
            monkeypatch.delenv(key)
    return name


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
