"""``instrument_ollama()`` before ``import ollama``: the module functions are traced once, and untraced after.

``ollama.chat`` is a method of the default client bound while ``ollama`` is imported, so whether the class was
patched by then decides what it holds. This interpreter imported ollama long ago: the case runs in a fresh one,
replaying the recorded chat cassette through the default client pointed at the replay server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]

_CODE = """
import json, sys
sys.path[:0] = [{tests!r}, {here!r}]
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import evaltrace

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
evaltrace.instrument_ollama(tracer_provider=provider)
assert "ollama" not in sys.modules
import ollama
from cassettes import ReplayServer
from ollama_replay import MODEL, client_of, recorded

result = {{}}
with ReplayServer(recorded("test_chat.yaml") * 3) as server, client_of(server.url) as replay:
    previous, ollama._client._client = ollama._client._client, replay._client
    ollama.chat(MODEL, [{{"role": "user", "content": "hi"}}])
    result["module_function"] = len(exporter.get_finished_spans())
    replay.chat(MODEL, [{{"role": "user", "content": "hi"}}])
    result["client"] = len(exporter.get_finished_spans())
    evaltrace.uninstrument_ollama()
    ollama.chat(MODEL, [{{"role": "user", "content": "hi"}}])
    result["after_uninstrument"] = len(exporter.get_finished_spans())
    ollama._client._client = previous
print(json.dumps(result))
"""


def test_instrumented_before_import_module_functions_make_one_span_and_none_after_uninstrument() -> None:
    code = textwrap.dedent(_CODE.format(tests=str(_TESTS), here=str(Path(__file__).parent)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"module_function": 1, "client": 2, "after_uninstrument": 2}
