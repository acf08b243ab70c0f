"""``opentelemetry-instrument python app.py`` picks evaltrace's OpenAI instrumentor up from its entry point.

The example app (which never imports evaltrace) runs under the real ``opentelemetry-instrument`` command with the
SDK set up by opentelemetry-distro and the console span exporter; its openai client talks to a replay server on
127.0.0.1 serving a recorded stream. The spans are read back from the exporter's JSON on stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("opentelemetry.distro")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = REPO_ROOT / "examples" / "otel_instrument.py"
# The same place as tests/conftest.py's CASSETTE_DIR (conftest modules are not importable by name).
CASSETTE_DIR = Path(
    os.environ.get("EVALTRACE_CASSETTE_DIR", REPO_ROOT / "tests" / "fixtures" / "openai-cassettes" / "otel-contrib")
)
CASSETTE = CASSETTE_DIR / "test_chat_completion_streaming.yaml"
_ENV_PREFIXES = ("OPENAI_", "PYTEST_", "OTEL_", "EVALTRACE_")


def _instrument_command() -> str:
    command = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("opentelemetry-instrument is not installed (pip install opentelemetry-instrumentation)")
    return command


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[list[dict[str, Any]], str]:
    """Run the example under opentelemetry-instrument; return the exported spans and stderr."""
    if not CASSETTE.is_file():
        pytest.fail("recorded OpenAI cassettes not found: they ship in tests/fixtures/openai-cassettes")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    clean.update(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="otel-instrument-example",
        EVALTRACE_EXAMPLE_CASSETTE=str(CASSETTE),
        # Other OpenAI instrumentations installed beside ours (the `peers` extra) register as "openai".
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai",
    )
    clean.update(env)
    result = subprocess.run(
        [_instrument_command(), sys.executable, str(EXAMPLE), *args],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert 'answer: "This is a test."' in result.stderr, result.stderr
    return _spans(result.stdout), result.stderr


def _spans(stdout: str) -> list[dict[str, Any]]:
    """The span objects the console exporter printed (pretty-printed JSON, one after another)."""
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while (start := stdout.find("{", index)) != -1:
        value, index = decoder.raw_decode(stdout, start)
        spans.append(value)
    return spans


def _chat_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == "chat gpt-4"]


def test_entry_point_traces_the_app(tmp_path: Path) -> None:
    spans, stderr = _run(tmp_path)
    [chat] = _chat_spans(spans)
    attributes = chat["attributes"]
    assert chat["kind"] == "SpanKind.CLIENT"
    assert chat["resource"]["attributes"]["service.name"] == "otel-instrument-example"
    assert attributes["gen_ai.request.model"] == "gpt-4"
    assert attributes["gen_ai.response.model"] == "gpt-4-0613"
    assert attributes["gen_ai.usage.input_tokens"] == 12
    assert attributes["evaltrace.stream.completed"] is True
    assert "Say this is a test" in attributes["gen_ai.input.messages"]
    # The list views' prompt and answer (Phoenix reads input.value/output.value).
    assert attributes["input.value"] == "Say this is a test"
    # The answer's text is JSON (the model's own quotes), which Langfuse would show as the value it parses to:
    # the list value is the assistant message holding it (issue 24).
    assert attributes["output.value"] == attributes["gen_ai.output.messages"]
    assert json.loads(attributes["output.value"])[0]["parts"][0]["content"] == '"This is a test."'
    assert "Traceback" not in stderr


def test_no_double_instrumentation_when_the_app_instruments_too(tmp_path: Path) -> None:
    spans, stderr = _run(tmp_path, "--also-instrument")
    assert len(_chat_spans(spans)) == 1
    assert "already instrumented" not in stderr


def test_disabled_by_entry_point_name(tmp_path: Path) -> None:
    spans, _ = _run(tmp_path, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai,evaltrace_openai")
    assert _chat_spans(spans) == []
