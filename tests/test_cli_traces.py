from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaltrace.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def store_with_quickstart(tmp_path: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGFUSE_", "PYTEST_"))}
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "light rain" in out.stdout
    return tmp_path / ".evaltrace"


def test_quickstart_trace_is_listed_and_shown(
    store_with_quickstart: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    assert main(["traces", "list", "--store", str(store_with_quickstart)]) == 0
    listed = capsys.readouterr().out
    assert "invoke_agent weather-assistant" in listed
    assert "quickstart" in listed

    assert main(["traces", "show", "last", "--store", str(store_with_quickstart), "--details"]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    agent_line = next(i for i, line in enumerate(lines) if "invoke_agent weather-assistant" in line)
    tool_line = next(i for i, line in enumerate(lines) if "└ execute_tool get_weather" in line)
    assert tool_line > agent_line
    assert "agent" in lines[agent_line] and "tool" in lines[tool_line]
    assert '"city":"Paris"' in shown  # --details prints tool arguments


def test_the_quickstart_failure_is_found_without_reading_json(
    store_with_quickstart: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # a CI log or a pipe
    failed = ["traces", "list", "--failed-evals", "--store", str(store_with_quickstart)]
    assert main([*failed, "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["root_name"] == "invoke_agent weather-assistant"
    assert main([*failed, "--evaluator", "tool_called", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # that check passed
    assert main(failed) == 0
    assert listed["trace_id"][:12] in capsys.readouterr().out  # the table names it too
    assert main(["traces", "show", "last", "--store", str(store_with_quickstart)]) == 0
    shown = capsys.readouterr().out
    assert "evaluations: 1 pass · 1 fail" in shown
    assert "contains_text=0.00 fail" in shown and "tool_called=1.00 pass" in shown


def test_show_unknown_trace_fails_clearly(store_with_quickstart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "show", "ffffffff", "--store", str(store_with_quickstart)]) == 1
    assert "No trace 'ffffffff'" in capsys.readouterr().out


def test_list_on_empty_store_explains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "list", "--store", str(tmp_path / "nothing")]) == 0
    assert "No traces" in capsys.readouterr().out
