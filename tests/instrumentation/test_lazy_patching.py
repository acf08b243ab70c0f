"""``instrument_openai()`` / ``instrument_anthropic()`` patch lazily: at the resource module's import, not before.

Each case runs in a fresh interpreter, because this one has imported every openai resource module already: the
recorded chat cassette is replayed through the real client with ``instrument_openai()`` called before or after
openai loads the module, and the spans reach an in-memory exporter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests_paths import cassette

_HERE = Path(__file__).parent

_PRELUDE = """
import json, sys
from pathlib import Path
sys.path.insert(0, {here!r})
import openai, wrapt
from openai_replay import client, load
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import evaltrace

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
interactions = load(Path({cassette!r}))

def call():
    api, _ = client(list(interactions), is_async=False)
    api.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "Say this is a test"}}])

def patched(cls_path, method):
    module, _, cls = cls_path.rpartition(".")
    return isinstance(vars(getattr(sys.modules[module], cls))[method], wrapt.FunctionWrapper)

result = {{}}
"""


def _run(body: str) -> dict[str, Any]:
    needs = cassette("test_chat_completion_with_content.yaml")
    assert needs.is_file(), f"{needs} not found: the recorded cassettes ship in tests/fixtures/openai-cassettes"
    code = _PRELUDE.format(here=str(_HERE), cassette=str(needs)) + textwrap.dedent(body)
    code += "\nprint(json.dumps(result))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_instrument_imports_no_openai_resource_module() -> None:
    result = _run("""
        before = {m for m in sys.modules if m.startswith(("openai.resources", "evaltrace._internal.openai.wrappers"))}
        evaltrace.instrument_openai(tracer_provider=provider)
        after = {m for m in sys.modules if m.startswith(("openai.resources", "evaltrace._internal.openai.wrappers"))}
        result["new"] = sorted(after - before)
        result["chat_preloaded"] = "openai.resources.chat" in before  # openai < 1.5x imports resources eagerly
    """)
    # In particular not openai.resources.responses, which openai loads lazily. An openai that imported its
    # resource modules itself gets them patched at once, which loads our wrappers, and nothing else.
    expected = ["evaltrace._internal.openai.wrappers"] if result["chat_preloaded"] else []
    assert result["new"] == expected


def test_module_imported_after_instrument_is_patched_at_import() -> None:
    result = _run("""
        if "openai.resources.chat" in sys.modules:  # an older openai imports its resources with the package
            print(json.dumps({"skip": True}))
            raise SystemExit(0)
        evaltrace.instrument_openai(tracer_provider=provider)
        call()  # the client's first .chat access imports openai.resources.chat
        result["spans"] = [s.name for s in exporter.get_finished_spans()]
        result["responses_loaded"] = "openai.resources.responses" in sys.modules
    """)
    if result.get("skip"):
        pytest.skip("this openai imports openai.resources.chat with the package: nothing is imported later")
    assert result == {"spans": ["chat gpt-4o-mini"], "responses_loaded": False}


def test_module_imported_before_instrument_is_patched_at_once() -> None:
    result = _run("""
        import openai.resources.chat
        evaltrace.instrument_openai(tracer_provider=provider)
        result["patched"] = patched("openai.resources.chat.Completions", "create")
        call()
        result["spans"] = [s.name for s in exporter.get_finished_spans()]
    """)
    assert result == {"patched": True, "spans": ["chat gpt-4o-mini"]}


def test_uninstrument_disarms_hooks_that_have_not_fired() -> None:
    result = _run("""
        evaltrace.instrument_openai(tracer_provider=provider)
        evaltrace.uninstrument_openai()
        call()  # imports openai.resources.chat now: the pending hook must not patch it
        result["patched"] = patched("openai.resources.chat.Completions", "create")
        result["spans"] = len(exporter.get_finished_spans())
    """)
    assert result == {"patched": False, "spans": 0}


def test_uninstrument_restores_and_reinstrument_patches_again() -> None:
    result = _run("""
        evaltrace.instrument_openai(tracer_provider=provider)
        call()
        evaltrace.uninstrument_openai()
        result["after_uninstrument"] = patched("openai.resources.chat.Completions", "create")
        call()
        result["spans_after_uninstrument"] = len(exporter.get_finished_spans())
        evaltrace.instrument_openai(tracer_provider=provider)  # the module is loaded now: patched at once
        result["after_reinstrument"] = patched("openai.resources.chat.Completions", "create")
        call()
        result["spans"] = len(exporter.get_finished_spans())
    """)
    assert result == {
        "after_uninstrument": False,
        "spans_after_uninstrument": 1,
        "after_reinstrument": True,
        "spans": 2,
    }


def test_anthropic_patches_at_import_and_uninstrument_disarms() -> None:
    pytest.importorskip("anthropic")
    result = _run("""
        evaltrace.instrument_anthropic(tracer_provider=provider)
        result["loaded_at_instrument"] = "anthropic.resources.messages" in sys.modules
        import anthropic.resources.messages
        result["patched"] = patched("anthropic.resources.messages.Messages", "create")
        evaltrace.uninstrument_anthropic()
        result["restored"] = not patched("anthropic.resources.messages.Messages", "create")
    """)
    assert result == {"loaded_at_instrument": False, "patched": True, "restored": True}
