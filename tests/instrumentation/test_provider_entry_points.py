"""The Cohere, Ollama and LiteLLM instrumentors are reachable the three documented ways.

``opentelemetry-instrument`` loads ``[project.entry-points.opentelemetry_instrumentor]`` (read from pyproject.toml
here: the installed metadata may predate this checkout); ``evaltrace.instrument_<p>()`` and
``evaltrace.instrumentation.<Provider>Instrumentor`` are the Python ways.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

import evaltrace
import evaltrace.instrumentation

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
PROVIDERS = {"cohere": "CohereInstrumentor", "ollama": "OllamaInstrumentor", "litellm": "LiteLLMInstrumentor"}


@pytest.mark.parametrize(("name", "cls"), PROVIDERS.items())
def test_entry_point_names_the_instrumentor(name: str, cls: str) -> None:
    points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["opentelemetry_instrumentor"]
    module, _, attr = points[f"evaltrace_{name}"].partition(":")
    instrumentor = getattr(importlib.import_module(module), attr)
    assert issubclass(instrumentor, BaseInstrumentor)
    assert instrumentor is getattr(evaltrace.instrumentation, cls)
    (requirement,) = instrumentor().instrumentation_dependencies()
    assert requirement.startswith(name)


@pytest.mark.parametrize("name", PROVIDERS)
def test_top_level_functions_instrument_and_restore(name: str) -> None:
    instrumentor = getattr(evaltrace, f"instrument_{name}")()
    try:
        assert instrumentor.is_instrumented_by_opentelemetry
        assert getattr(evaltrace, f"instrument_{name}")() is instrumentor  # idempotent, one instrumentor
    finally:
        getattr(evaltrace, f"uninstrument_{name}")()
    assert not instrumentor.is_instrumented_by_opentelemetry
