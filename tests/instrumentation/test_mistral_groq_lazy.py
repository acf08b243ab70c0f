"""``instrument_mistral()`` / ``instrument_groq()`` called before the SDK is imported still trace it.

Nothing is imported at ``instrument()``: the endpoint modules (``mistralai.client.chat``,
``groq.resources.chat.completions``) are patched when the application imports them. Run in a fresh interpreter,
so neither SDK is imported before the instrumentors start.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mistralai")
pytest.importorskip("groq")

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import evaltrace

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
evaltrace.instrument_mistral(tracer_provider=provider)
evaltrace.instrument_groq(tracer_provider=provider)
assert "mistralai" not in sys.modules and "groq" not in sys.modules, "instrument() imported an SDK"

import groq
import groq_replay
import mistral_replay
from mistralai.client import Mistral

item = mistral_replay.interactions(mistral_replay.PENALTIES)[0]
with mistral_replay.server(mistral_replay.PENALTIES) as srv, Mistral(api_key="x", server_url=srv.url) as client:
    client.chat.complete(**mistral_replay.call_kwargs(item))
item = groq_replay.interactions(groq_replay.PLAIN)[0]
with groq_replay.server(groq_replay.PLAIN) as srv, groq.Groq(api_key="x", base_url=srv.url) as client:
    client.chat.completions.create(**groq_replay.call_kwargs(item))
print(sorted(span.name for span in exporter.get_finished_spans()))
"""


def test_instrumenting_before_the_sdks_are_imported_traces_them() -> None:
    src = TESTS.parent / "src"
    env_path = f"{src}:{TESTS}:{TESTS / 'instrumentation'}"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['chat llama-3.3-70b-versatile', 'chat mistral-large-latest']"
