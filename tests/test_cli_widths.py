"""What the terminal prints at 80 and 160 columns: the tree keeps its shape, no token is split, names shorten.

``traces show`` on the deterministic agent trace (tests/snapshot_traces.py) and ``runs show`` on a real run whose
cells cover every outcome (tests/run_report_project.py), run as a user runs them with ``COLUMNS`` set (rich
reads it). Checked on the printed text: no line wider than the terminal, every row of the span tree indented
under its parent (a folded name used to restart at column 0), a score, an error type, an evaluator name and a
``traces.jsonl:N`` reference always on one line, a long span name shortened in its middle, never at its end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from evaltrace.cli import main
from evaltrace.cli.wrap import shorten_middle, wrap_words
from run_report_project import forget, write_project
from snapshot_traces import AGENT_TRACE, write_fixture_store

WIDTHS = (80, 160)


def _run(argv: list[str], width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVALTRACE_LOCAL_STORE_MAX_AGE", "0")  # the fixture times are fixed: keep them
    write_fixture_store(tmp_path / "store")
    return tmp_path / "store"


@pytest.mark.parametrize("width", WIDTHS)
def test_traces_show_keeps_the_tree_indented_and_tokens_whole(
    width: int, store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = _run(["traces", "show", AGENT_TRACE, "--store", str(store)], width, capsys, monkeypatch)
    lines = [line.rstrip() for line in shown.splitlines()]
    assert max(cell_len(line) for line in lines) <= width, [line for line in lines if cell_len(line) > width]
    body = lines[lines.index(next(line for line in lines if line.startswith("───"))) + 1 :]
    tree = [line for line in body if line and not line.startswith(" " * 20) and not line.startswith("not shown")]
    # One root, every other row indented under it: "  └ " for the agent, "    └ " for its children.
    assert tree[0].startswith("POST /ask")
    assert [re.match(r" *(└ )?", line).group() for line in tree[1:]] == ["  └ ", *["    └ "] * 4]  # type: ignore[union-attr]
    agent = tree[1].split("  ")[1].lstrip("└ ")
    if width == 80:
        # Too long for its column: shortened in the middle, both ends kept.
        assert agent.startswith("invoke_agent") and agent.endswith("assistant") and "…" in agent
    else:
        assert "invoke_agent weather-assistant" in tree[1]
    for token in ("judge=ERROR(ConnectionError)", "relevance=0.82 pass", "concise=0.50 fail", "1 error"):
        assert any(token in line for line in lines), token


@pytest.mark.parametrize("width", WIDTHS)
def test_run_summary_lines_wrap_between_words_with_continuations_indented(
    width: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = write_project(tmp_path / "project")
    try:
        run = ["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
        shown = _run(run, width, capsys, monkeypatch)
    finally:
        forget(tmp_path / "project")
    lines = shown.splitlines()
    too_wide = [line for line in lines if cell_len(line) > width and not line.startswith("Traces: ")]
    assert not too_wide, too_wide
    failed = lines.index("Failed (5):")
    listed = lines[failed + 1 : lines.index(next(line for line in lines[failed:] if line.startswith("Evaluation")))]
    # Each case starts "  <case> × <variant>:"; its continuation lines are indented further, never at column 0.
    assert all(line.startswith("  ") for line in listed)
    assert sum(bool(re.match(r"  \S+ × v\d:", line)) for line in listed) == 5
    assert all(re.match(r"  \S+ × v\d:", line) or line.startswith("      ") for line in listed), listed
    text = "\n".join(lines)
    for token in ("contains_text", "(exception)", "RuntimeError:", "0.00:"):
        assert all(token in line or not line.strip().endswith(token[: len(token) // 2]) for line in lines)
        assert token in text
    # A reference is read whole: "[trace traces.jsonl:N]" on one line.
    references = re.findall(r"\[trace[^\]]*\]", text)
    assert references and all(re.fullmatch(r"\[trace traces\.jsonl:\d+\]", ref) for ref in references), references
    assert "picky error (exception)" in text.replace("\n     ", "")  # words, not letters, are what wrap


def test_shorten_middle_keeps_both_ends() -> None:
    assert shorten_middle("invoke_agent very_long_agent_name", 25) == "invoke_agent…g_agent_name"
    assert shorten_middle("short", 25) == "short"
    assert cell_len(shorten_middle("日本語のエージェント名前", 9)) <= 9


def test_wrap_words_never_splits_a_token() -> None:
    lines = wrap_words("  q1 × v2: judge ERROR(exception): boom; contains_text fail", 24, 4)
    assert lines == ["  q1 × v2: judge", "      ERROR(exception):", "      boom;", "      contains_text fail"]
    assert wrap_words("a " + "x" * 30, 10) == ["a", "x" * 30]  # longer than the line: whole, on its own


@pytest.mark.parametrize(
    "cell", ["12:30", "2026-11-28 19:20", "$0.02", "1.2 s", ":smile:", "a :+1: b", "[bold]x[/bold]", "\\[x]"]
)
def test_a_plain_cells_width_is_that_of_its_rendered_markup(cell: str) -> None:
    """Cells without markup skip the markup parser (issue 28): what is measured is still what rich prints."""
    from rich.text import Text

    from evaltrace.cli.tables import _plain

    assert _plain(cell) == Text.from_markup(cell).plain
