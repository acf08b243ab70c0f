"""``evaltrace scores replay`` keeps each not-evaluated record once: copies collapse (counted), distinct ones don't.

A record's copies share its random ``record_id``; two records of the same evaluation of the same span (even
recorded in the same microsecond) do not. Records written before ``record_id`` existed collapse only when their
lines are identical. Real files replayed through the CLI into a real JSONL sink.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaltrace.cli import main as cli_main
from evaltrace.evaluation.sinks.deadletter import append_lines
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated

TRACE, SPAN = "ab" * 16, "cd" * 8
AT = "2026-01-01T00:00:00+00:00"


def _replay(tmp_path: Path, dead: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "scores.jsonl"
    assert cli_main(["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]) == 0
    assert not out.exists() or out.read_text() == ""  # a record is never sent as a score
    return capsys.readouterr().out


def test_two_distinct_records_of_the_same_evaluation_at_the_same_instant_are_both_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs cut the same evaluation short: two records, alike but for their ids; neither is a copy."""
    dead = tmp_path / "dl.jsonl"
    first, second = (NotEvaluated(TRACE, SPAN, SPAN, "tone", None, "shutdown", at=AT) for _ in range(2))
    assert first.record_id != second.record_id and len(first.record_id) == 32
    append_lines(dead, [first.to_line(), second.to_line()])
    printed = _replay(tmp_path, dead, capsys)
    assert f"2 not-evaluated record(s) kept in {dead}" in printed
    assert "collapsed" not in printed
    assert dead.read_text().splitlines() == [first.to_line(), second.to_line()]


def test_copies_of_a_record_collapse_to_one_and_the_replay_says_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file replayed twice (its records appended again) and a copy re-encoded: one record, two copies dropped."""
    dead = tmp_path / "dl.jsonl"
    record, other = (
        NotEvaluated(TRACE, SPAN, SPAN, "tone", None, "shutdown"),
        NotEvaluated(TRACE, None, SPAN, "relevance", "2", "shutdown"),
    )
    reencoded = json.dumps(json.loads(record.to_line()), indent=None, separators=(",", ":"), sort_keys=True)
    assert reencoded != record.to_line()
    append_lines(dead, [record.to_line(), other.to_line(), record.to_line(), reencoded])
    printed = _replay(tmp_path, dead, capsys)
    assert f"2 not-evaluated record(s) kept in {dead} (no verdict, never sent: shutdown 2)" in printed
    assert "2 duplicate not-evaluated record(s) collapsed" in printed
    assert dead.read_text().splitlines() == [record.to_line(), other.to_line()]  # the first copy, as written
    # Replayed again: nothing left to collapse, nothing lost.
    printed = _replay(tmp_path, dead, capsys)
    assert "2 not-evaluated record(s) kept" in printed and "collapsed" not in printed


def test_records_without_a_record_id_collapse_only_when_their_lines_are_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file written by an older version: its identical lines are one record, as before; differing ones stay."""
    dead = tmp_path / "dl.jsonl"

    def old(evaluator: str) -> str:
        fields = {"trace_id": TRACE, "observation_id": SPAN, "span_id": SPAN, "evaluator": evaluator}
        return json.dumps({"not_evaluated": {**fields, "evaluator_version": None, "reason": "shutdown", "at": AT}})

    append_lines(dead, [old("tone"), old("relevance"), old("tone")])
    printed = _replay(tmp_path, dead, capsys)
    assert f"2 not-evaluated record(s) kept in {dead}" in printed
    assert "1 duplicate not-evaluated record(s) collapsed" in printed
    assert dead.read_text().splitlines() == [old("tone"), old("relevance")]
