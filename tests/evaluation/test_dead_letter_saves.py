"""The dead-letter file saves every score it can, replay never loses or repeats one, each record is in one file.

Real components failing for real: a JSONL sink whose path is a directory, scores the JSON encoder refuses (an
object in the metadata; a lone surrogate in a comment, which a dead-letter line holds escaped), the Phoenix
sink against a real HTTP server on 127.0.0.1 (its body encoder made to raise on the surrogate, mid-replay), a JSONL
file that reaches the process's file-size limit in the middle of a write, and shutdown's take-over of a stalled
evaluation loop.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evaltrace.cli import main as cli_main
from evaltrace.evaluation import JsonlScoreSink, RetryPolicy
from evaltrace.evaluation.sinks import SinkWorker, phoenix, read_dead_letters, write_dead_letters
from evaltrace.evaluation.sinks.deadletter import append_lines, not_evaluated_lines, put_back_after_replay
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated
from evaltrace.schema import Score

from .conftest import Backend, MakePipeline
from .test_shutdown_stalled_loop import SPANS, _end_spans, _off_the_lane, _stalling
from .test_sinks import SPAN, TRACE, numeric

ONCE = RetryPolicy(max_retries=0)
DEAD_LETTER_LOG = "writing the dead-letter file"


def _with_object(name: str) -> Score:
    return numeric(name).model_copy(update={"metadata": {"raw": object()}})  # the JSON encoder refuses it


def _with_surrogate(name: str) -> Score:
    return numeric(name).model_copy(update={"comment": "half a pair: \ud800"})  # UTF-8 cannot encode it


def _errors_logged(caplog: pytest.LogCaptureFixture, what: str) -> int:
    return sum(what in record.getMessage() and record.levelno >= logging.ERROR for record in caplog.records)


def test_a_score_the_encoder_refuses_leaves_its_neighbours_saved_and_is_logged_once_per_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: one refused score failed the whole batch's dead-letter write: its neighbours "a" and "c" were counted
    # dropped with it, and each such write logged a traceback.
    dead = tmp_path / "dead.jsonl"
    worker = SinkWorker(
        JsonlScoreSink(tmp_path / "scores.jsonl"),  # its export refuses the same scores: the batches fail
        dead_letter_path=dead,
        retry=ONCE,
        batch_size=2,
        schedule_delay_s=0.01,
    )
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        worker.submit([numeric("a"), _with_object("b")])
        assert worker.force_flush(10)
        worker.submit([numeric("c"), _with_object("d")])
        assert worker.force_flush(10)
        worker.shutdown(5)
    stats = worker.stats
    assert stats.submitted == stats.successes + stats.dead_lettered + stats.dropped == 4
    assert (stats.successes, stats.dead_lettered, stats.dropped) == (0, 2, 2)  # only "b" and "d" are lost
    assert stats.internal_errors == 4  # per batch: the sink's export raised, then the write that refused one
    assert [score.name for score in read_dead_letters(dead)[0]] == ["a", "c"]
    assert _errors_logged(caplog, DEAD_LETTER_LOG) == 1  # the second batch's refusal is the same episode
    (logged,) = [r for r in caplog.records if DEAD_LETTER_LOG in r.getMessage()]
    assert "1 score(s) the encoder refused, dropped" in logged.getMessage()


def test_a_dead_letter_episode_ends_with_one_line_when_a_batch_is_saved_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = tmp_path / "dead.jsonl"
    sink = JsonlScoreSink(tmp_path / "scores.jsonl")
    worker = SinkWorker(sink, dead_letter_path=dead, retry=ONCE, batch_size=2, schedule_delay_s=0.01)
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        worker.submit([numeric("a"), _with_object("b")])
        assert worker.force_flush(10)
        (tmp_path / "scores.jsonl").mkdir()  # the sink fails on a disk error now: the next batch is saved whole
        worker.submit([numeric("c"), numeric("e")])
        assert worker.force_flush(10)
        worker.shutdown(5)
    assert (worker.stats.dead_lettered, worker.stats.dropped) == (3, 1)
    assert [score.name for score in read_dead_letters(dead)[0]] == ["a", "c", "e"]
    assert _errors_logged(caplog, DEAD_LETTER_LOG) == 1
    assert any(f"{DEAD_LETTER_LOG} {dead} works again" in r.getMessage() for r in caplog.records), caplog.text


def test_a_score_holding_a_lone_surrogate_is_dead_lettered_escaped_and_replayed_to_the_backend(
    tmp_path: Path, backend: Backend
) -> None:
    # Before: the dead-letter file refused it (UTF-8 cannot encode it): counted dropped, lost.
    dead = tmp_path / "dead.jsonl"
    worker = SinkWorker(JsonlScoreSink(tmp_path), dead_letter_path=dead, retry=ONCE, schedule_delay_s=0.01)
    # pydantic's JSON mode cannot write a nested key with a lone surrogate: that score is dumped by hand.
    rest = {"n": float("nan"), None: 2, "s": frozenset([1.5]), "d": dt.date(2026, 1, 2)}  # as pydantic writes them
    nested = numeric("k").model_copy(update={"metadata": {"m": {"a\ud800": 1, **rest}}})
    worker.submit([numeric("a"), _with_surrogate("d"), nested])  # the JSONL sink's path is a directory
    assert worker.force_flush(10)
    worker.shutdown(5)
    assert (worker.stats.dead_lettered, worker.stats.dropped) == (3, 0)
    assert dead.read_bytes().isascii()  # the surrogate escaped: the file is valid UTF-8
    scores = read_dead_letters(dead)[0]
    assert [(s.name, s.comment) for s in scores][1] == ("d", "half a pair: \ud800")  # the same text back
    as_pydantic = numeric("k").model_copy(update={"metadata": {"m": rest}}).model_dump(mode="json")["metadata"]
    assert scores[2].metadata == {"m": {"a\ud800": 1, **as_pydantic["m"]}}  # the rest as pydantic's JSON mode
    assert scores[2].model_dump(exclude={"metadata"}) == nested.model_dump(exclude={"metadata"})
    args = ["scores", "replay", str(dead), "--sink", "phoenix", "--base-url", backend.url]
    assert cli_main(args) == 0
    assert _sent(backend) == ["a", "d", "k"]
    (sent_d,) = [item for body in backend.bodies() for item in body["data"] if item["name"] == "d"]
    assert sent_d["result"]["explanation"] == "half a pair: \ufffd"  # what a backend can store
    assert not dead.exists()


def _line_as_written(score: Score) -> str:
    # What a dead-letter file can hold: the surrogate escaped (ASCII JSON), so the line itself is valid UTF-8.
    record = {"sink": "phoenix", "error": "down", "failed_at": "2026-01-01T00:00:00+00:00", "score": None}
    record["score"] = score.model_dump(mode="json")
    return json.dumps(record)


def _sent(backend: Backend) -> list[str]:
    return [item["name"] for body in backend.bodies() for item in body["data"]]


class _RaisesOnBad:
    """The Phoenix sink's annotation builder, made to raise (an injected fault) on the score named "bad".

    Replayed lines are plain JSON, which the sink always encodes (a lone surrogate becomes U+FFFD:
    ``test_sink_json_body.py``), so no real input makes the sink raise mid-replay any more. What this file proves
    is the replay's handling of a sink that raises, so the raise is injected inside the sink's export.
    """

    def __init__(self, build: Callable[[Score], dict[str, Any]]) -> None:
        self.build = build

    def __call__(self, score: Score) -> dict[str, Any]:
        if score.name == "bad":
            raise RuntimeError("injected")
        return self.build(score)


def test_replay_stops_at_a_sink_that_raises_keeps_every_line_not_delivered_and_never_sends_one_again(
    tmp_path: Path, backend: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a raise in the Phoenix sink (then httpx's, which could not encode the surrogate) escaped the replay:
    # the CLI crashed, the staged file kept "a" (delivered) with the rest, and the next replay sent "a" again.
    monkeypatch.setattr(phoenix, "phoenix_annotation", _RaisesOnBad(phoenix.phoenix_annotation))
    dead = tmp_path / "phoenix.jsonl"
    bad = _line_as_written(_with_surrogate("bad"))
    record = NotEvaluated(TRACE, SPAN, SPAN, "tone", None, "shutdown").to_line()
    write_dead_letters(dead, "phoenix", [numeric("a")], "down")
    append_lines(dead, [bad])
    write_dead_letters(dead, "phoenix", [numeric("c")], "down")
    append_lines(dead, [record])
    args = ["scores", "replay", str(dead), "--sink", "phoenix", "--base-url", backend.url, "--batch-size", "1"]

    assert cli_main(args) == 1
    printed = capsys.readouterr().out
    assert "1 delivered, 2 kept in" in printed and "of which 1 in a batch whose export raised" in printed
    assert "1 not attempted after the failure" in printed
    assert _sent(backend) == ["a"]
    lines = dead.read_text().splitlines()
    kept = json.loads(lines[0])  # rewritten with the last error, the surrogate escaped again: the same text
    assert (kept["score"]["name"], kept["score"]["comment"]) == ("bad", "half a pair: \ud800") and lines[0].isascii()
    assert "the sink raised RuntimeError" in kept["error"]
    assert json.loads(lines[1])["score"]["name"] == "c"
    assert "the sink raised RuntimeError" in json.loads(lines[1])["error"]
    assert lines[2:] == [record]  # the not-evaluated record, once
    assert not (tmp_path / "phoenix.jsonl.replaying").exists()

    assert cli_main(args) == 1  # the injected fault raises on "bad" again: "a" is never sent again
    assert _sent(backend) == ["a"]
    assert json.loads(dead.read_text().splitlines()[0])["score"]["comment"] == "half a pair: \ud800"
    assert dead.read_text().splitlines()[2:] == [record]
    assert [s.name for s in read_dead_letters(dead)[0]] == ["bad", "c"]


def test_putting_back_keeps_what_writers_appended_during_the_replay_after_the_lines_not_delivered(
    tmp_path: Path,
) -> None:
    dead = tmp_path / "langfuse.jsonl"
    staged = tmp_path / "langfuse.jsonl.replaying"
    write_dead_letters(staged, "langfuse", [numeric("a"), numeric("b")], "down")
    write_dead_letters(dead, "langfuse", [numeric("new")], "dead-lettered while the replay ran")
    written_meanwhile = dead.read_text()
    put_back_after_replay(dead, staged, ['{"kept": 1}'])
    assert dead.read_text() == '{"kept": 1}\n' + written_meanwhile
    assert not staged.exists() and not (tmp_path / "langfuse.jsonl.tmp").exists()
    put_back_after_replay(tmp_path / "none.jsonl", tmp_path / "none.jsonl.replaying", [])
    assert not (tmp_path / "none.jsonl").exists()  # everything delivered and nothing written meanwhile: no file


def _records(count: int) -> list[NotEvaluated]:
    return [NotEvaluated(TRACE, SPAN, SPAN, f"judge{i}", None, "shutdown") for i in range(count)]


@pytest.mark.parametrize("short", [0, 1], ids=["cut-after-a-line", "cut-before-a-line-break"])
def test_not_evaluated_records_a_jsonl_sink_wrote_before_failing_are_not_dead_lettered_too(
    tmp_path: Path, short: int
) -> None:
    # Before: the JSONL sink wrote judge0 and judge1, then hit the file-size limit on judge2 and raised; all three
    # went to the dead-letter file as well, so two were in both files (counted once). With the cut 1 byte short
    # (judge1's line lacks only its "\n": complete JSON readers take), judge1 was counted not written and so was
    # in both files.
    resource = pytest.importorskip("resource")
    out, dead = tmp_path / "scores.jsonl", tmp_path / "dead.jsonl"
    sink = JsonlScoreSink(out)
    assert sink.export([numeric(f"s{i}") for i in range(4_000)]).ok  # big enough for pytest's own files
    records = _records(3)
    limit = out.stat().st_size + sum(len((r.to_line() + "\n").encode()) for r in records[:2]) - short
    worker = SinkWorker(sink, dead_letter_path=dead)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # the third record's write fails (EFBIG)
        worker.not_evaluated(records)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        worker.shutdown(5)
    assert sink.export([numeric("later")]).ok  # the next append starts a line of its own
    in_sink = [json.loads(line)["not_evaluated"]["evaluator"] for line in not_evaluated_lines(out)]
    in_dead = [json.loads(line)["not_evaluated"]["evaluator"] for line in not_evaluated_lines(dead)]
    assert (in_sink, in_dead) == (["judge0", "judge1"], ["judge2"])  # each in one file
    assert json.loads(out.read_text().splitlines()[-1])["name"] == "later"
    stats = worker.stats
    assert (stats.not_evaluated, stats.not_evaluated_dropped, stats.internal_errors) == (3, 0, 1)


def test_without_pread_a_record_cut_before_its_line_break_is_dead_lettered_not_counted_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where os.pread is missing (Windows) no torn-line check ends such a line before the next append, which would
    # glue onto it: judge1 must then go to the dead-letter file too (at least once), never be counted written.
    resource = pytest.importorskip("resource")
    from evaltrace.evaluation.sinks import jsonl

    monkeypatch.setattr(jsonl, "_PREAD", None)
    out, dead = tmp_path / "scores.jsonl", tmp_path / "dead.jsonl"
    sink = JsonlScoreSink(out)
    assert sink.export([numeric(f"s{i}") for i in range(4_000)]).ok
    records = _records(3)
    limit = out.stat().st_size + sum(len((r.to_line() + "\n").encode()) for r in records[:2]) - 1
    worker = SinkWorker(sink, dead_letter_path=dead)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        worker.not_evaluated(records)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        worker.shutdown(5)
    in_dead = [json.loads(line)["not_evaluated"]["evaluator"] for line in not_evaluated_lines(dead)]
    assert in_dead == ["judge1", "judge2"]
    assert (worker.stats.not_evaluated, worker.stats.not_evaluated_dropped) == (3, 0)


_WRITE_ONLY_CHILD = """
import sys
from pathlib import Path
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated
from evaltrace.schema import Score
path = Path(sys.argv[1])
try:
    open(path, "a+").close()
    print("readable")  # the permission bits are not enforced here: nothing to prove
    raise SystemExit(0)
except PermissionError:
    pass
sink = JsonlScoreSink(path)
score = Score(id="wo", name="wo", value=1.0, data_type="NUMERIC", trace_id="0" * 32, observation_id="0" * 16)
result = sink.export([score])
print("export", result.ok, result.error)
sink.record_not_evaluated([NotEvaluated("0" * 32, "0" * 16, "0" * 16, "judge", "1", "shutdown")])
print("recorded")
"""


def test_a_jsonl_file_the_process_may_append_to_but_not_read_is_written_as_before(tmp_path: Path) -> None:
    # An append-only log (mode 0200): the sink opened it to append before its torn-line check, and must still.
    # As root, permission bits apply only without CAP_DAC_OVERRIDE: the child runs without it (util-linux's
    # setpriv drops it from the bounding set before exec; no Python code runs between fork and exec).
    out = tmp_path / "write-only.jsonl"
    out.write_text('{"earlier": 1}\n')
    out.chmod(0o200)
    command = [sys.executable, "-c", _WRITE_ONLY_CHILD, str(out)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: the file's permission bits cannot be made to apply")
        dropped = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]
        if subprocess.run([*dropped, sys.executable, "-c", ""], capture_output=True, timeout=120).returncode:
            pytest.skip("setpriv cannot drop capabilities here (no CAP_SETPCAP)")
        command = [*dropped, *command]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert child.returncode == 0, child.stderr
    if child.stdout.startswith("readable"):
        pytest.skip("this platform lets the process read a mode-0200 file")
    assert child.stdout.splitlines() == ["export True None", "recorded"], child.stdout + child.stderr
    out.chmod(0o600)
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["name"] == "wo" and "not_evaluated" in json.loads(lines[2])


def test_a_sink_that_keeps_failing_during_a_one_by_one_take_over_logs_one_traceback(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # Before: each of the 12 jobs taken over (marked one by one) logged the sink's failure with a traceback.
    entered, release = threading.Event(), threading.Event()
    unwritable = tmp_path / "scores-dir.jsonl"
    unwritable.mkdir()
    p = make_pipeline([_stalling(entered, release)], sinks=[JsonlScoreSink(unwritable)], hold_timeout_s=60)
    _off_the_lane(p.processor)
    try:
        _end_spans(p.tracer, entered)
        with caplog.at_level(logging.INFO, logger="evaltrace"):
            p.processor.shutdown(timeout_millis=600)
        sink = p.processor.stats()["sinks"]["jsonl"]
        assert sink["not_evaluated"] == SPANS and sink["not_evaluated_dropped"] == 0  # all in its dead-letter file
        assert sink["internal_errors"] >= 1  # each write counted (one per job, or one for the jobs marked in bulk)
        assert _errors_logged(caplog, "recording evaluations not run for score sink jsonl") == 1, caplog.text
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)


def test_a_replay_into_a_jsonl_file_cut_mid_line_keeps_the_batch_and_the_next_replay_loses_no_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file-size limit cuts the replay's write inside "b"'s line: the batch is kept in the dead-letter file.
    # Before: the next replay's first line was glued to the torn fragment, so "b" was reported delivered and yet
    # unreadable in the file (lost). Now the torn line is ended first and every score reads back.
    resource = pytest.importorskip("resource")
    from evaltrace.evaluation.sinks.jsonl import read_score_ids

    dead, out = tmp_path / "dl.jsonl", tmp_path / "scores.jsonl"
    assert JsonlScoreSink(out).export([numeric(f"s{i}") for i in range(4_000)]).ok  # big enough for pytest's files
    scores = [numeric("a"), numeric("b"), numeric("c")]
    write_dead_letters(dead, "jsonl", scores, "disk full")
    limit = out.stat().st_size + len(scores[0].model_dump_json()) + 1 + 20  # "a" whole, 20 bytes of "b"
    args = ["scores", "replay", str(dead), "--sink", "jsonl", "--output", str(out)]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        assert cli_main(args) == 1
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "0 delivered, 3 kept in" in capsys.readouterr().out
    assert [s.name for s in read_dead_letters(dead)[0]] == ["a", "b", "c"]
    assert out.stat().st_size == limit  # the torn line is there

    assert cli_main(args) == 0
    assert "2 delivered, 1 already present" in capsys.readouterr().out  # "a" landed whole the first time
    assert {score.id for score in scores} <= read_score_ids(out)
    assert not dead.exists()
