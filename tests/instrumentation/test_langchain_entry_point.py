"""LangChain's ``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument`` records LangChain runs.

The end-to-end test runs an application that never imports evaltrace under the real ``opentelemetry-instrument``
command (opentelemetry-distro sets the SDK up with the console exporter). The installed evaltrace metadata may
predate this checkout, so the entry points come from this checkout's pyproject.toml: they are written into a
``dist-info`` placed first on the application's path, where ``importlib.metadata`` finds it before the installed
one. The app's ``ChatOpenAI`` talks to the replay server on 127.0.0.1 serving otel-contrib's recorded answer.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")
pytest.importorskip("opentelemetry.distro")

from langchain_replay import CHAT, chat_openai, replay
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
import evaltrace.instrumentation
from evaltrace.instrumentation.langchain import LangChainInstrumentor
from evaltrace.instrumentation.langchain._register import is_instrumented

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
ANSWER = "The capital of France is Paris."


def _entry_points() -> dict[str, str]:
    return dict(tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["opentelemetry_instrumentor"])


def test_the_entry_point_names_the_langchain_instrumentor() -> None:
    module, _, attr = _entry_points()["evaltrace_langchain"].partition(":")
    instrumentor = getattr(importlib.import_module(module), attr)
    assert instrumentor is LangChainInstrumentor is evaltrace.instrumentation.LangChainInstrumentor
    assert issubclass(instrumentor, BaseInstrumentor)
    (requirement,) = instrumentor().instrumentation_dependencies()
    assert requirement.startswith("langchain-core")


def _france_chain(server: Any) -> Any:
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("user", "{question}")])
    return prompt | chat_openai(server, model="gpt-3.5-turbo")


def test_the_instrumentor_and_instrument_langchain_are_one_switch() -> None:
    """``LangChainInstrumentor().instrument(tracer_provider=...)`` records runs to that provider;
    ``uninstrument_langchain()`` turns the same switch off, and ``instrument_langchain()`` sees it on."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        assert instrumentor.is_instrumented_by_opentelemetry and is_instrumented()
        handler = evaltrace.instrument_langchain()  # already on: the same handler, no second registration
        assert handler is evaltrace.instrument_langchain()
        with replay(CHAT) as server:
            assert _france_chain(server).invoke({"question": "What is the capital of France?"}).content == ANSWER
    finally:
        evaltrace.uninstrument_langchain()
    assert not instrumentor.is_instrumented_by_opentelemetry and not is_instrumented()
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["ChatPromptTemplate", "RunnableSequence", "chat gpt-3.5-turbo"]
    with replay(CHAT) as server:  # off: nothing recorded
        _france_chain(server).invoke({"question": "What is the capital of France?"})
    assert len(exporter.get_finished_spans()) == 3


APP = """
import os
import sys

# The instrumentor loaded no LangChain module: its hook is registered when the app imports LangChain.
print("langchain loaded before the app:", "langchain_core" in sys.modules, file=sys.stderr)
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

model = ChatOpenAI(base_url=os.environ["APP_BASE_URL"], api_key="x", max_retries=0, model="gpt-3.5-turbo")
chain = ChatPromptTemplate.from_messages([("user", "{question}")]) | model
print("answer:", chain.invoke({"question": "What is the capital of France?"}).content, file=__import__("sys").stderr)
"""


def _checkout_metadata(root: Path) -> Path:
    """A ``dist-info`` for evaltrace with this checkout's instrumentor entry points (and no distro of ours)."""
    dist = root / "evaltrace-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evaltrace\nVersion: 0.0.0\n")
    lines = ["[opentelemetry_instrumentor]", *(f"{k} = {v}" for k, v in _entry_points().items())]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return root


def _spans(stdout: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while (start := stdout.find("{", index)) != -1:
        value, index = decoder.raw_decode(stdout, start)
        spans.append(value)
    return spans


def test_opentelemetry_instrument_records_an_apps_langchain_runs(tmp_path: Path) -> None:
    from importlib.metadata import entry_points

    command = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("opentelemetry-instrument is not installed (pip install opentelemetry-instrumentation)")
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    metadata = _checkout_metadata(tmp_path / "meta")
    # Other instrumentations installed beside ours (the peers extra) would record the same calls: off.
    others = sorted({ep.name for ep in entry_points(group="opentelemetry_instrumentor")} - set(_entry_points()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_", "OTEL_", "EVALTRACE_"))}
    with replay(CHAT) as server:
        env.update(
            PYTHONPATH=os.pathsep.join([str(metadata), str(REPO / "src")]),
            APP_BASE_URL=f"{server.url}/v1",
            OTEL_TRACES_EXPORTER="console",
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
            OTEL_SERVICE_NAME="langchain-app",
            OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=",".join(others),
        )
        result = subprocess.run(
            [command, sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
    assert result.returncode == 0, result.stderr
    assert f"answer: {ANSWER}" in result.stderr, result.stderr
    assert "langchain loaded before the app: False" in result.stderr
    spans = {s["name"]: s for s in _spans(result.stdout)}
    # The chain and its prompt are the handler's spans; the model call is our OpenAI instrumentor's (also loaded
    # from its entry point), nested under the chain: one span per model call.
    assert {"RunnableSequence", "ChatPromptTemplate", "chat gpt-3.5-turbo"} <= set(spans), sorted(spans)
    chain, chat = spans["RunnableSequence"], spans["chat gpt-3.5-turbo"]
    assert chain["attributes"]["evaltrace.span.kind"] == "task"
    assert chat["parent_id"] == chain["context"]["span_id"]
    assert chat["attributes"]["gen_ai.provider.name"] == "openai"
    assert chat["resource"]["attributes"]["service.name"] == "langchain-app"
    assert sum(1 for s in _spans(result.stdout) if s["name"].startswith("chat ")) == 1
