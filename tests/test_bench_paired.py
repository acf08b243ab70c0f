"""The paired stream children of the instruction benchmarks (issue 28): what each phase measures, and repeatability.

A paired child streams with an implementation's instrumentation off and on in one process (``smoke.py``'s stream
rows, ``bench_stream_peers.py``): each must really be off in an "off" phase and on in an "on" one, or the slope
measures nothing. Each runs in a subprocess: the switches patch the SDK classes process-wide.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import _callgrind  # noqa: E402

OPENAI_SWITCH = """
import json, sys
sys.path.insert(0, {benchmarks!r})
import _pipeline
import bench_openai_pipeline as bench

seen = []
export = _pipeline.ReadingExporter.export


def counting(self, spans):
    seen.extend(span.name for span in spans)
    return export(self, spans)


_pipeline.ReadingExporter.export = counting
(api, replay), flush = bench.setup({impl!r}, quiet=True)
stream, switch, counts = bench.make_case(api, replay, "stream20"), bench.TOGGLES[{impl!r}], []
for on in (False, True, False, True):
    switch(on)
    stream()
    flush()
    counts.append(len(seen))
print(json.dumps(counts))
"""

ANTHROPIC_SWITCH = """
import json, sys
sys.path.insert(0, {benchmarks!r})
from bench_anthropic import MESSAGES, _client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import smoke

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
client, switch, counts = _client(own_spans=False), smoke._anthropic_switch({impl!r}, provider), []
for on in (True, False, True, False):
    switch(on)
    events = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES, stream=True, metadata={{"user_id": "20"}}
    )
    for _ in events:
        pass
    counts.append(len(exporter.get_finished_spans()))
print(json.dumps(counts))
"""


def _run(code: str) -> list[int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts: list[int] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.parametrize("impl", ["evaltrace", "floor", "official"])  # bench_openai_pipeline.PAIRED_IMPLS
def test_an_openai_paired_childs_switch_turns_its_instrumentation_off_and_on(impl: str) -> None:
    pytest.importorskip("openai")
    if impl == "official" and importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None:
        pytest.skip("the official openai-v2 instrumentation is not installed (the peers extra)")
    # One span per stream streamed while on, none while off: off, on, off, on.
    assert _run(OPENAI_SWITCH.format(benchmarks=str(BENCHMARKS), impl=impl)) == [0, 1, 1, 2]


@pytest.mark.parametrize("impl", ["paired", "paired-floor"])
def test_an_anthropic_paired_childs_switch_turns_its_instrumentation_on_and_off(impl: str) -> None:
    pytest.importorskip("anthropic")
    # Switched on twice in a row is still one instrumentation (a stream makes one span), as instrument() is.
    code = ANTHROPIC_SWITCH.format(benchmarks=str(BENCHMARKS), impl=impl).replace(
        "for on in (True, False, True, False):", "switch(True)\nfor on in (True, False, True, False):"
    )
    assert _run(code) == [1, 1, 2, 2]


def test_a_paired_variants_name_says_its_implementation() -> None:
    pytest.importorskip("openai")
    import bench_openai_pipeline as bench

    assert bench.paired_impl("paired") == "evaltrace"  # the smoke row's child
    assert [bench.paired_impl(f"paired-{impl}") for impl in bench.PAIRED_IMPLS] == list(bench.PAIRED_IMPLS)
    assert bench.paired_impl("paired-floor+json") == "floor+json"


def test_warm_compiles_what_only_a_counted_child_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first counted child must not compile ctypes into the cache: its heap would differ from every later one's.

    (s29-determinism: that first child's per-phase counts were 30-300k instructions off every later run's.) A cache of
    its own: another test's counted children may have filled the shared one.
    """
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(_callgrind, "_CACHE", [str(cache)])
    script = tmp_path / "child.py"
    script.write_text("import sys\n")
    _callgrind.warm([(str(script), "none")])
    compiled = {path.parent.name for path in cache.rglob("__init__.*.pyc")}
    assert "ctypes" in compiled
