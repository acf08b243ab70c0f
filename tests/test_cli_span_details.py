"""``traces show --details`` prints each model call as the HTML report's chat, not raw message JSON.

The demo trace (tests/report_trace.py: two chat calls with reasoning and a tool round trip, recorded through the
real SDK into a local store) is shown as a user runs the command, at 80 and 160 columns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len

from evaltrace import config
from evaltrace.cli import main
from report_trace import ANSWER, build_demo_trace


@pytest.fixture
def store(tmp_path: Path) -> Path:
    try:
        build_demo_trace(tmp_path / "store")
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
    return tmp_path / "store"


def _details(store: Path, width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["traces", "show", "last", "--store", str(store), "--details"]) == 0
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert max(cell_len(line) for line in lines) <= width
    return lines[lines.index("chat gpt-4o-mini") :]  # the details, after the tree


@pytest.mark.parametrize("width", [80, 160])
def test_a_model_call_reads_as_a_chat_with_roles_reasoning_tool_calls_and_results(
    width: int, store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _details(store, width, capsys, monkeypatch)
    second = lines.index("chat gpt-4o-mini", 1)
    first_call, second_call = lines[:second], lines[second:]
    roles = [line.strip() for line in second_call if line.startswith("  ") and not line.startswith("   ")]
    # What the second call was sent, in order, then its answer below the rule.
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool · get_weather call_1",
        "── response ──",
        "assistant",
    ]
    assert "    thinking: The user wants the weather; call get_weather." in first_call
    assert "    ↪ calls get_weather call_1" in first_call
    assert '      {"city": "Paris"}' in first_call  # the call's arguments, under the call
    tool = second_call.index("  tool · get_weather call_1")
    assert second_call[tool + 1] == "    sunny, 24C"  # the tool's result
    assert second_call[-1] == f"    {ANSWER}"
    shown = "\n".join(lines)
    assert '"parts"' not in shown and "gen_ai.input.messages" not in shown  # no raw message JSON
    # A wrapped message keeps its indentation: no line of a message starts at column 0.
    chat = first_call[1 : first_call.index("execute_tool get_weather")]
    assert all(line.startswith("  ") for line in chat if line), chat


def test_a_failed_tool_span_shows_its_error_and_input(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _details(store, 160, capsys, monkeypatch)
    at = lines.index("execute_tool lookup_timezone")
    assert lines[at + 1].startswith("  error: ") and "timezone service did not answer" in lines[at + 1]
    assert lines[at + 2 : at + 4] == ["  input", '    {"city":"Paris"}']
