"""``evaltrace scores replay`` keeps a dead-letter file's not-evaluated records and says how many, and why.

Real files: a dead-letter file written by the sinks' own writer (two scores) with the records the processor
appends for evaluations cut short (``NotEvaluated.to_line``), replayed into a real JSONL sink.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaltrace.cli import main as cli_main
from evaltrace.evaluation.sinks import write_dead_letters
from evaltrace.evaluation.sinks.deadletter import append_lines
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated

from .test_sinks import SPAN, TRACE, numeric


def _record(evaluator: str, reason: str) -> str:
    return NotEvaluated(TRACE, SPAN, SPAN, evaluator, None, reason).to_line()


def test_replay_counts_the_not_evaluated_records_it_keeps_by_reason_never_as_delivered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    write_dead_letters(dead, "langfuse", [numeric("a"), numeric("b")], "backend down")
    records = [_record("relevance", "shutdown"), _record("tone", "shutdown"), _record("tone", "queue_full")]
    append_lines(dead, records)
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"replayed {dead} to jsonl: 2 delivered" in printed  # the scores only: a record is no score
    assert f"3 not-evaluated record(s) kept in {dead} (no verdict, never sent: shutdown 2, queue_full 1)" in printed
    assert [json.loads(line)["name"] for line in out.read_text().splitlines()] == ["a", "b"]
    assert dead.read_text().splitlines() == records  # kept as written


def test_replay_without_records_says_nothing_about_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    write_dead_letters(dead, "langfuse", [numeric("a")], "backend down")
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    assert "not-evaluated" not in capsys.readouterr().out


def test_a_reason_with_a_line_break_cannot_add_a_line_to_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-edited dead-letter file's reason holding a line break (and a terminal escape) is printed inert, on the
    summary's one line: it cannot print a made-up summary line of its own."""
    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    write_dead_letters(dead, "langfuse", [numeric("a")], "backend down")
    append_lines(dead, [_record("tone", "shutdown\nreplayed FAKE to jsonl: 999 delivered\x1b[2K")])
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"replayed {dead} to jsonl: 1 delivered")
    assert line.endswith(r"never sent: shutdown\x0areplayed FAKE to jsonl: 999 delivered\x1b[2K 1)")


def test_a_replay_killed_before_removing_its_staged_file_leaves_each_record_once_after_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state a kill leaves between ``put_back_after_replay``'s rewrite of the file and its removal of the
    ``.replaying`` copy: both hold the same records (a writer had appended a score meanwhile). Before: the next
    replay appended one to the other and kept every record twice, for good."""
    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    staged = dead.with_name(dead.name + ".replaying")
    records = [_record("relevance", "shutdown"), _record("tone", "queue_full")]
    append_lines(staged, records)  # step 1 done: what the killed replay did not deliver
    append_lines(dead, records)  # step 2's rename done: those lines, then what a writer appended meanwhile
    write_dead_letters(dead, "langfuse", [numeric("late")], "backend down")
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"2 not-evaluated record(s) kept in {dead}" in printed
    assert dead.read_text().splitlines() == records  # each once
    assert not staged.exists()
    assert [json.loads(line)["name"] for line in out.read_text().splitlines()] == ["late"]
