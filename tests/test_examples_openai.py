"""The OpenAI examples run offline end to end: replay server, instrumentation, live evaluation, local store.

Each example runs as a user would run it (a subprocess in a fresh directory, no API key); the expected text and
counts come from the recordings the examples replay, so a changed recording cannot silently pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.exporters import LocalTraceStore
from example_output import assert_written_paths_exist

pytest.importorskip("openai")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RECORDINGS = EXAMPLES / "recordings"
_ENV_PREFIXES = ("OPENAI_", "PYTEST_", "OTEL_", "LANGFUSE_", "PHOENIX_", "EVALTRACE_EXAMPLE_")


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr  # evaltrace's internal errors are logged with one
    assert "differs from the recording" not in result.stderr, result.stderr
    assert_written_paths_exist(result.stdout, cwd)
    return result


def _interactions(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((RECORDINGS / name).read_text(encoding="utf-8"))["interactions"])


def _sse_payloads(body: str) -> list[dict[str, Any]]:
    lines = [line for line in body.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
    return [json.loads(line.removeprefix("data: ")) for line in lines]


def _metric(stdout: str, label: str) -> str:
    match = re.search(rf"^\s+{re.escape(label)}\s+(\S+)", stdout, re.MULTILINE)
    assert match, f"no {label!r} line in:\n{stdout}"
    return match.group(1)


def test_openai_agent_replays_the_tool_conversation_and_scores_it(tmp_path: Path) -> None:
    result = _run("openai_agent.py", tmp_path)

    recorded = _interactions("test_chat_completion_tool_calls_with_content.yaml")
    answer = json.loads(recorded[1]["response"]["body"]["string"])["choices"][0]["message"]["content"]
    assert f"A: {answer}" in result.stdout
    assert re.search(r"^\s+tool_called\s+value=1\.0\s+all required tools called", result.stdout, re.MULTILINE)
    assert re.search(r"^\s+pii_leakage\s+value=1\.0", result.stdout, re.MULTILINE)
    assert "evaltrace traces show last" in result.stdout

    store = LocalTraceStore(tmp_path / ".evaltrace")
    (summary,) = store.list_traces()
    spans = store.spans(summary.trace_id)
    (agent,) = [s for s in spans if s.name == "invoke_agent weather-agent"]
    children = [s for s in spans if s.parent is not None and s.parent.span_id == agent.context.span_id]
    chats = [s for s in children if s.name.startswith("chat gpt-4o-mini")]
    tools = [s for s in children if s.name == "execute_tool get_current_weather"]
    assert len(chats) == 2 and len(tools) == 2
    assert {(s.attributes or {}).get("gen_ai.tool.call.result") for s in tools} == {
        '"50 degrees and raining"',
        '"70 degrees and sunny"',
    }

    scores = [json.loads(line) for line in (tmp_path / ".evaltrace" / "scores.jsonl").read_text().splitlines()]
    assert {(s["name"], s["trace_id"], s["value"]) for s in scores} == {
        ("tool_called", summary.trace_id, 1.0),
        ("pii_leakage", summary.trace_id, 1.0),
    }


def test_streaming_prints_the_chunks_and_the_stream_metrics(tmp_path: Path) -> None:
    result = _run("streaming.py", tmp_path)

    (recorded,) = _interactions("test_chat_completion_streaming.yaml")
    events = _sse_payloads(recorded["response"]["body"]["string"])
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text in result.stdout.splitlines()
    assert int(_metric(result.stdout, "chunks")) == len(events)
    assert int(_metric(result.stdout, "output tokens")) == events[-1]["usage"]["completion_tokens"]
    assert _metric(result.stdout, "completed") == "True"
    assert _metric(result.stdout, "end reason") == "exhausted"
    assert float(_metric(result.stdout, "time to first chunk")) > 0
    assert float(_metric(result.stdout, "output tokens/s")) > 0

    store = LocalTraceStore(tmp_path / ".evaltrace")
    (summary,) = store.list_traces()
    (span,) = store.spans(summary.trace_id)
    assert span.name == "chat gpt-4"
    assert (span.attributes or {}).get("evaltrace.stream.chunks") == len(events)
