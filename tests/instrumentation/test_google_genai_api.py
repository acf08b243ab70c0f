"""``evaltrace.instrument_google_genai()``: public, lazy (no SDK import until the app imports it), and reachable
from ``opentelemetry-instrument`` through its entry point."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import evaltrace

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_instrumenting_imports_no_sdk_and_patches_it_when_imported() -> None:
    probe = textwrap.dedent("""
        import sys
        import evaltrace

        instrumentor = evaltrace.instrument_google_genai()
        assert evaltrace.instrument_google_genai() is instrumentor  # idempotent, one singleton
        assert "google.genai" not in sys.modules, "instrumenting imported the SDK"
        from google.genai import models

        for cls in (models.Models, models.AsyncModels):
            # one span per request the SDK sends: the per-request methods, under the AFC loop
            for name in ("_generate_content", "_generate_content_stream", "embed_content"):
                assert hasattr(getattr(cls, name), "__wrapped__"), (cls, name)
        evaltrace.uninstrument_google_genai()
        assert not hasattr(models.Models._generate_content, "__wrapped__")
        assert not hasattr(models.Models.generate_content, "__wrapped__")  # never wrapped: it runs the user's tools
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_entry_point_names_the_instrumentor() -> None:
    points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["opentelemetry_instrumentor"]
    module, _, name = points["evaltrace_google_genai"].partition(":")
    from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor

    assert getattr(importlib.import_module(module), name) is GoogleGenAIInstrumentor
    assert GoogleGenAIInstrumentor().instrumentation_dependencies() == ("google-genai >= 1.20",)


def test_public_names() -> None:
    from evaltrace.instrumentation import google_genai

    assert "instrument_google_genai" in evaltrace.__all__ and "uninstrument_google_genai" in evaltrace.__all__
    assert google_genai.__all__ == ["GoogleGenAIInstrumentor", "instrument_google_genai", "uninstrument_google_genai"]
