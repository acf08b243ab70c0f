"""``benchmarks/bench_provider_floors.py``: each hand-written floor reads the whole answer evaltrace records.

The benchmark compares evaltrace's per-chunk cost with a floor written by hand for each provider. A floor that read
less than evaltrace records (a skipped reasoning delta, a list-shaped content it ignored) would be cheaper than an
honest instrumentation and make the ratio look worse than it is; one that read nothing would make it meaningless.
So here every recorded stream the benchmark replays (its short and its long stream) goes through the real SDK
client twice: under the floor and under ``instrument_<provider>()``, content on. The floor's joined text and
reasoning must be the text and reasoning parts evaltrace's span records.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_provider_floors as floors  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise
THINK = re.compile(r"</?think>")  # Groq's reasoning models send it inline; evaltrace records it as a reasoning part


@pytest.fixture
def capture() -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    yield
    settings.replace(previous)


def _evaltrace_parts(messages: str) -> tuple[str, str]:
    text, reasoning = [], []
    for message in json.loads(messages):
        for part in message["parts"]:
            if part["type"] == "text":
                text.append(part["content"])
            elif part["type"] == "reasoning":
                reasoning.append(part["content"])
    return "".join(text), "".join(reasoning)


# LiteLLM's own types, built lazily by pydantic on first use (nothing of ours), as in its span tests.
@pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning")
@pytest.mark.filterwarnings("ignore:Accessing the 'model_.*' attribute on the instance:DeprecationWarning")
@pytest.mark.parametrize("contents", [floors.SHORT, floors.LONG])
@pytest.mark.parametrize("name", list(floors.FLOORS))
def test_the_floor_folds_the_text_and_reasoning_evaltrace_records(
    name: str, contents: int, provider: TracerProvider, exporter: InMemorySpanExporter, capture: None
) -> None:
    pytest.importorskip(floors.providers.PROVIDERS[name].sdk)
    floor_exporter = InMemorySpanExporter()
    floor_provider = TracerProvider()
    floor_provider.add_span_processor(SimpleSpanProcessor(floor_exporter))
    undo = floors.install_floor(name, floor_provider.get_tracer("floor"))
    try:  # each client made under its implementation, as the benchmark's child makes them
        stream, size = floors.stream_function(name)
        size(contents)
        stream()
    finally:
        undo()
    instrument = floors.providers.PROVIDERS[name].instrument
    getattr(evaltrace, instrument)()
    try:
        stream, size = floors.stream_function(name)
        size(contents)
        stream()
    finally:
        getattr(evaltrace, "un" + instrument)()

    (floor_span,) = floor_exporter.get_finished_spans()
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and floor_span.attributes is not None
    text, reasoning = _evaltrace_parts(str(span.attributes["gen_ai.output.messages"]))
    (floor_text,) = json.loads(str(floor_span.attributes[floors.OUTPUT]))
    floor_reasoning = str(floor_span.attributes.get(floors.REASONING, ""))
    assert text or reasoning  # the stream carried an answer: the comparison below compares something
    if name == "groq":  # one inline stream: evaltrace splits it at the tags and trims the reasoning's edges
        assert floor_reasoning == ""
        assert THINK.sub("", floor_text).split() == (reasoning + " " + text).split()
        assert len(reasoning) > contents  # the repeated deltas are all there, not just the first
    else:
        assert (floor_text, floor_reasoning) == (text, reasoning)
    floor_provider.shutdown()
