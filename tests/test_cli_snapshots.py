"""What the CLI prints at 80, 120 and 200 columns, compared with checked-in snapshots (tests/snapshots/).

The commands run as a user runs them (``evaltrace.cli.main``, output captured as a pipe: no colour) on
deterministic traces (fixed ids and times, tests/snapshot_traces.py) and on a checked-in run directory. Besides
matching its snapshot, every output must fit its width and hold no "…" (nothing cut) but in the middle of a
span name too long for its column (issue 27: the tree keeps its indentation).

Regenerate after an intended change of the output, then review the diff:

    EVALTRACE_UPDATE_SNAPSHOTS=1 python -m pytest -p no:cacheprovider tests/test_cli_snapshots.py
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len

from evaltrace.cli import main
from snapshot_traces import AGENT_TRACE, write_fixture_store

SNAPSHOTS = Path(__file__).parent / "snapshots"
RUN_FIXTURE = Path(__file__).parent / "fixtures" / "runs_1_0"
RUN_ID = "2026-01-15T09-00-00_support_bot"
UPDATE = os.environ.get("EVALTRACE_UPDATE_SNAPSHOTS") == "1"
WIDTHS = (80, 120, 200)

COMMANDS = {
    "traces-list": ["traces", "list", "--store", "store"],
    "traces-show": ["traces", "show", AGENT_TRACE[:16], "--store", "store"],
    "runs-list": ["runs", "list", "--runs-dir", "runs"],
    "runs-show": ["runs", "show", RUN_ID, "--runs-dir", "runs"],
    "compare": ["compare", RUN_ID, RUN_ID, "--runs-dir", "runs"],
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding the fixture store (``store``) and run (``runs``); paths print relative to it."""
    monkeypatch.setenv("EVALTRACE_LOCAL_STORE_MAX_AGE", "0")  # the fixture times are fixed: keep them forever
    write_fixture_store(tmp_path / "store")
    shutil.copytree(RUN_FIXTURE, tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(argv: list[str], width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))  # rich reads it; without it a pipe is 80 columns wide
    assert main(argv) == 0
    # rich pads table lines to the width: trailing blanks carry nothing and would make the files fragile.
    return "\n".join(line.rstrip() for line in capsys.readouterr().out.splitlines()) + "\n"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_output_matches_snapshot(
    name: str, width: int, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = _run(COMMANDS[name], width, capsys, monkeypatch)
    # Nothing cut, except a span name too long for its column: shortened in its middle, both ends kept.
    middles = re.findall(r"\S…\S", shown)
    assert shown.count("…") == len(middles) and (not middles or name == "traces-show"), middles
    assert "..." not in shown.replace("... ", "")
    # "Traces: <path>, ..." is printed soft-wrapped on purpose: the terminal wraps it, the path stays one piece.
    too_wide = [line for line in shown.splitlines() if cell_len(line) > width and not line.startswith("Traces: ")]
    assert not too_wide, too_wide
    snapshot = SNAPSHOTS / f"{name}-{width}.txt"
    if UPDATE:
        snapshot.parent.mkdir(exist_ok=True)
        snapshot.write_text(shown, encoding="utf-8")
    assert snapshot.is_file(), f"no snapshot {snapshot.name}: run with EVALTRACE_UPDATE_SNAPSHOTS=1"
    assert shown == snapshot.read_text(encoding="utf-8")


def test_piped_output_is_80_columns_and_keeps_what_matters(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(COMMANDS["traces-show"]) == 0
    shown = capsys.readouterr().out
    assert max(cell_len(line) for line in shown.splitlines()) <= 80
    # The totals, the durations as people read them, tokens and every outcome in words.
    assert "tokens 1,349 in · 43 out · cost $0.000042" in shown
    for duration in ("6.24 s", "809 ms", "850 µs", "4.20 s", "1.23 s"):
        assert duration in shown
    assert "52→31" in shown and "1,297→12" in shown
    assert "judge=ERROR(ConnectionError)" in shown and "relevance=0.82 pass" in shown
    assert "session sess-7f3a · user user-42" in shown
    assert "not shown at this width: kind, cost, timeline" in shown  # what was left out is said


def test_a_listed_prefix_is_accepted_by_show(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = _run(COMMANDS["traces-list"], 80, capsys, monkeypatch)
    ids = [line.split()[0] for line in listed.splitlines() if line[:1].isalnum() and "  " in line][1:]
    assert len(ids) == 3 and all(12 <= len(i) < 32 for i in ids), ids  # prefixes at 80 columns
    for prefix in ids:
        assert main(["traces", "show", prefix, "--store", "store"]) == 0
        assert capsys.readouterr().out.splitlines()[0].startswith(f"trace {prefix}")
