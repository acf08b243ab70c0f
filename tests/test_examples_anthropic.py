"""The Anthropic example runs offline end to end: replay server, instrumentation, live evaluation, local store.

It runs as a user would run it (a subprocess in a fresh directory, no API key); the expected text, tool call and
thinking come from the recording it replays, so a changed recording cannot silently pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evaltrace.exporters import LocalTraceStore
from evaltrace.mapping import trace_from_spans
from example_output import assert_written_paths_exist

pytest.importorskip("anthropic")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RECORDING = EXAMPLES / "recordings" / "anthropic_weather_thinking.yaml"
_ENV_PREFIXES = ("ANTHROPIC_", "PYTEST_", "OTEL_", "LANGFUSE_", "PHOENIX_", "EVALTRACE_EXAMPLE_")


def test_anthropic_agent_replays_thinking_and_tool_use_and_scores_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "anthropic_agent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # seconds: a loaded 2-core CI machine ran this ~6 s example past 60
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "differs from the recording" not in result.stderr, result.stderr
    assert_written_paths_exist(result.stdout, tmp_path)

    first, second = yaml.safe_load(RECORDING.read_text(encoding="utf-8"))["interactions"]
    thinking = json.loads(first["response"]["body"]["string"])["content"][0]["thinking"]
    deltas = [
        json.loads(line.removeprefix("data: "))
        for line in second["response"]["body"]["string"].splitlines()
        if line.startswith("data: ")
    ]
    answer = "".join(e["delta"]["text"] for e in deltas if e["type"] == "content_block_delta")
    assert f"A: {answer}" in result.stdout
    for name in ("tool_called", "pii_leakage", "thinking_kept_apart"):
        assert re.search(rf"^\s+{name}\s+value=1\.0", result.stdout, re.MULTILINE), result.stdout

    store = LocalTraceStore(tmp_path / ".evaltrace")
    (summary,) = store.list_traces()
    spans = store.spans(summary.trace_id)
    chats = [s for s in spans if s.name == "chat claude-sonnet-4-6"]
    assert len(chats) == 2
    assert all((s.attributes or {}).get("gen_ai.provider.name") == "anthropic" for s in chats)
    assert [s.name for s in spans].count("execute_tool get_weather") == 1
    trace = trace_from_spans(spans)
    assert trace.output.final_answer == answer
    assert trace.output.thinking == thinking
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [
        ("get_weather", {"location": "San Francisco, CA", "unit": "celsius"})
    ]

    scores = [json.loads(line) for line in (tmp_path / ".evaltrace" / "scores.jsonl").read_text().splitlines()]
    assert {(s["name"], s["trace_id"], s["value"]) for s in scores} == {
        ("tool_called", summary.trace_id, 1.0),
        ("pii_leakage", summary.trace_id, 1.0),
        ("thinking_kept_apart", summary.trace_id, 1.0),
    }
