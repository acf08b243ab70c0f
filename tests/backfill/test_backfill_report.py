"""The backfill report breaks ``not_evaluated`` down by reason, per evaluator (never shown as a pass or a fail).

Real stored traces (the local store's own writer), judged by the real backfill into the real store; the
refusals come from a real ``LimitGate`` whose ``limits_clock`` raises and from evaluators that raise
``SkipEvaluation``. The breakdown is checked against the reasons the store holds for the same evaluations.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import evaltrace
from evaltrace.cli.evaluate import not_evaluated_reason_lines
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink
from evaltrace.evaluation.limits import Limits
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.schema import ScoreConfig

from .backfill_evaluators import LongSessions, TurnCount, costly, has_answer, picky
from .stored import assert_consistent, build_store, evaluation_spans, stored_reason_keys, stored_reasons
from .test_backfill_limits import FailingClock

HERE = Path(__file__).resolve().parent
SRC = Path(evaltrace.__file__).resolve().parent.parent  # the evaltrace these tests import, for the subprocess


def test_not_evaluated_is_broken_down_by_reason_per_evaluator_as_the_store_holds_it(tmp_path: Path) -> None:
    """A failing limiter refuses ``costly`` on 4 traces; ``picky`` skips the 2 short answers.

    The report keeps its totals (6 pass, 6 not evaluated) and says why, per evaluator, keyed as ``stats()`` keys
    skips: the code ``limits_unavailable``, and ``picky``'s free-text message under ``other`` (it stays whole on
    the evaluation spans in the store); the evaluator that judged everything has no entry.
    """
    store = tmp_path / "store"
    build_store(store, 4)  # traces 1 and 3 answer "ok"
    spec = EvaluatorSpec(costly, limits=Limits(max_tokens_per_hour=10_000))
    report = evaltrace.evaluate_traces(
        [has_answer, picky, spec], store=store, sinks=[], concurrency=2, limits_clock=FailingClock(failing=True)
    )
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 12, {"pass": 6, "not_evaluated": 6})
    assert report.not_evaluated_by_reason == {"limits_unavailable": 4, "other": 2}
    assert report.not_evaluated_by_evaluator == {"costly": {"limits_unavailable": 4}, "picky": {"other": 2}}
    assert_consistent(report)
    assert report.not_evaluated_by_evaluator == stored_reason_keys(store)
    assert stored_reasons(store) == {"costly": {"limits_unavailable": 4}, "picky": {"no reference answer": 2}}


def test_a_backfill_that_judges_everything_has_an_empty_breakdown(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 3)
    report = evaltrace.evaluate_traces([has_answer], store=store, sinks=[])
    assert (report.outcomes, report.not_evaluated_by_reason, report.not_evaluated_by_evaluator) == ({"pass": 3}, {}, {})
    assert not_evaluated_reason_lines(report.not_evaluated_by_evaluator) == []


def test_the_breakdown_of_a_trace_pass_and_a_session_pass_is_merged(tmp_path: Path) -> None:
    """Trace evaluators and a session evaluator run as two passes; the report of both carries both breakdowns."""
    store = tmp_path / "store"
    build_store(store, 4, sessions=2)  # sessions s0 and s1, two turns each
    report = evaltrace.evaluate_traces([picky, EvaluatorSpec(LongSessions(), scope="session")], store=store, sinks=[])
    assert report.scopes == ["trace", "session"]
    assert report.outcomes == {"pass": 2, "not_evaluated": 4}
    assert report.not_evaluated_by_evaluator == {"long_sessions": {"other": 2}, "picky": {"other": 2}}
    assert report.not_evaluated_by_reason == {"other": 4}
    assert_consistent(report)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
    command = [sys.executable, "-c", "import sys; from evaltrace.cli import main; sys.exit(main())", *args]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120, check=False)


def test_evaluate_prints_one_line_per_reason_under_each_evaluator_and_json_for_scripts(tmp_path: Path) -> None:
    """The summary line is unchanged; below it, the not-evaluated evaluators (only those with a count), one line
    per reason. ``--json`` prints the report with the ``not_evaluated_by_reason`` mapping."""
    store = tmp_path / "store"
    build_store(store, 4)
    evaluators = ("-e", "backfill_evaluators:picky", "-e", "backfill_evaluators:has_answer")
    shown = _cli("evaluate", "--store", str(store), *evaluators, "--no-progress")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "4 trace(s) selected: 4 span(s); 8 evaluation(s): 2 not_evaluated, 6 pass",
        "not evaluated, by evaluator and reason:",
        "  picky: 2 not_evaluated",
        "    other: 2",
    ]
    printed = _cli("evaluate", "--store", str(store), *evaluators, "--json", "--restart")
    assert printed.returncode == 0, printed.stderr
    data = json.loads(printed.stdout)
    assert (data["evaluations"], data["outcomes"]) == (8, {"not_evaluated": 2, "pass": 6})
    assert data["not_evaluated_by_reason"] == {"other": 2}
    assert data["not_evaluated_by_evaluator"] == {"picky": {"other": 2}}
    assert (data["traces"], data["spans"], data["stopped"], data["dry_run"]) == (4, 4, None, False)


def test_json_keeps_the_exit_status_of_a_failed_verdict(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4)
    printed = _cli(
        "evaluate", "--store", str(store), "-e", "backfill_evaluators:short_answer", "--json", "--fail-on-fail"
    )
    assert printed.returncode == 1
    assert json.loads(printed.stdout)["outcomes"] == {"fail": 2, "pass": 2}


def test_the_lines_show_only_reasons_with_a_count_most_frequent_first() -> None:
    lines = not_evaluated_reason_lines({"b": {"x": 1, "y": 3, "z": 0}, "a": {"q": 0}, "c": {"r": 2}})
    assert lines == [
        "not evaluated, by evaluator and reason:",
        "  b: 4 not_evaluated",
        "    y: 3",
        "    x: 1",
        "  c: 2 not_evaluated",
        "    r: 2",
    ]


def test_verdicts_whose_score_a_score_config_refuses_are_counted_rejected(tmp_path: Path) -> None:
    """The verdicts stand (counted, stored on their evaluation spans); the scores an archived ScoreConfig refuses
    are not sent, and the report counts them instead of losing them with only a log line."""
    store = tmp_path / "store"
    build_store(store, 3)
    archived = ScoreConfig(name="has_answer", data_type="BOOLEAN").archive()
    sink = tmp_path / "scores.jsonl"
    report = evaltrace.evaluate_traces(
        [EvaluatorSpec(has_answer, config=archived), picky], store=store, sinks=[JsonlScoreSink(sink)]
    )
    assert (report.outcomes, report.scores_rejected) == ({"pass": 5, "not_evaluated": 1}, 3)
    assert [json.loads(line)["name"] for line in sink.read_text().splitlines()] == [
        "picky"
    ] * 2  # traces 0 and 2 (trace 1 answers "ok": not evaluated, no score)
    assert [row[:2] for row in evaluation_spans(store) if row[0] == "has_answer"] == [("has_answer", "pass")] * 3


def _rejected_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "score rejected" in r.getMessage()
    ]


def test_the_session_pass_s_rejected_scores_are_merged_into_the_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trace pass (``has_answer``, its scores sent) and a session pass whose archived ScoreConfig refuses both
    sessions' scores: the report of both passes counts the session's 2, each logged once, none sent or stored."""
    store = tmp_path / "store"
    build_store(store, 4, sessions=2)  # sessions s0 and s1, two turns each: turn_count passes them
    archived = ScoreConfig(name="turn_count", data_type="NUMERIC").archive()
    sink = tmp_path / "scores.jsonl"
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        report = evaltrace.evaluate_traces(
            [has_answer, EvaluatorSpec(TurnCount(), scope="session", config=archived)],
            store=store,
            sinks=[JsonlScoreSink(sink)],
        )
    assert report.scopes == ["trace", "session"]
    assert (report.outcomes, report.scores_rejected) == ({"pass": 6}, 2)
    assert [json.loads(line)["name"] for line in sink.read_text().splitlines()] == ["has_answer"] * 4
    assert len(_rejected_warnings(caplog)) == 2
    with sqlite3.connect(store / DB_NAME) as conn:
        assert conn.execute("SELECT count(*) FROM session_evals").fetchone() == (0,)


def test_evaluate_prints_the_rejected_scores(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's parser, run and report, on a real backfill, print the count below the summary (each one logged).

    The evaluator is handed to the CLI's run directly: its loaders (``-e``, ``--evaluators``) cannot attach a
    ScoreConfig to an evaluator, the only way a verdict's score is refused.
    """
    from evaltrace.cli import build_parser
    from evaltrace.cli.evaluate import _report, _run
    from evaltrace.exceptions import ConfigError
    from evaltrace.exporters.store_db import StoreError

    store = tmp_path / "store"
    build_store(store, 3)
    args = build_parser().parse_args(["evaluate", "--store", str(store), "-e", "has_answer", "--no-progress"])
    archived = ScoreConfig(name="has_answer", data_type="BOOLEAN").archive()
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        report = _run(args, [EvaluatorSpec(has_answer, config=archived)], None, ConfigError, StoreError)
        assert _report(report, args, print) == 0
    assert capsys.readouterr().out.splitlines() == [
        "3 trace(s) selected: 3 span(s); 3 evaluation(s): 3 pass",
        "rejected: 3 score(s) their evaluator's ScoreConfig refused (not sent; see the warnings)",
    ]
    assert len(_rejected_warnings(caplog)) == 3


def test_a_reason_quoting_recorded_text_is_printed_inert_on_one_line() -> None:
    (_, _, line) = not_evaluated_reason_lines({"judge": {"answer was \x1b]8;;http://x\x07here\x1b]8;;\x07\nnext": 1}})
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert line.startswith("    answer was \\x1b]8;;http://x")


def test_the_lines_show_ten_reasons_per_evaluator_then_the_others_summed() -> None:
    reasons = {f"reason {i:02d}": 1 for i in range(15)} | {"common": 5}
    lines = not_evaluated_reason_lines({"judge": reasons, "other": {"x": 2}})
    assert lines[:4] == [
        "not evaluated, by evaluator and reason:",
        "  judge: 20 not_evaluated",
        "    common: 5",
        "    reason 00: 1",
    ]
    assert lines[11:] == [
        "    reason 08: 1",
        "    ... and 6 other reason(s): 6 evaluation(s) (all in --json)",
        "  other: 2 not_evaluated",
        "    x: 2",
    ]


def test_evaluate_prints_ten_reasons_of_an_evaluator_and_json_keeps_them_all(tmp_path: Path) -> None:
    """An evaluator whose token reason names the answer: 12 reasons of one evaluation each and one of 12; the
    summary shows the 10 most frequent and sums the other 3; ``--json`` has all 13."""
    store = tmp_path / "store"
    build_store(store, 24)  # the odd traces answer "ok" (too short), the even ones "answer 0" ... "answer 22"
    evaluators = ("-e", "backfill_evaluators:one_token_each")
    shown = _cli("evaluate", "--store", str(store), *evaluators, "--no-progress")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1:4] == [
        "not evaluated, by evaluator and reason:",
        "  one_token_each: 24 not_evaluated",
        "    too_short: 12",
    ]
    assert len(lines) == 14  # the summary, the heading, the evaluator, 10 reasons, the others
    assert lines[-1] == "    ... and 3 other reason(s): 3 evaluation(s) (all in --json)"
    printed = _cli("evaluate", "--store", str(store), *evaluators, "--json", "--restart")
    assert printed.returncode == 0, printed.stderr
    reasons = json.loads(printed.stdout)["not_evaluated_by_evaluator"]["one_token_each"]
    assert reasons == {"too_short": 12} | {f"no_reference_{i}": 1 for i in range(0, 24, 2)}


def test_free_text_reasons_naming_the_answer_are_counted_under_other_and_kept_on_the_spans(tmp_path: Path) -> None:
    """Reasons that quote what was judged are not keys (one key per trace, user data in a summary): the report
    and the CLI count them under ``other``; each evaluation span in the store keeps its own message."""
    store = tmp_path / "store"
    build_store(store, 24)
    evaluators = ("-e", "backfill_evaluators:one_reason_each")
    shown = _cli("evaluate", "--store", str(store), *evaluators, "--no-progress")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "not evaluated, by evaluator and reason:",
        "  one_reason_each: 24 not_evaluated",
        "    other: 24",
    ]
    printed = _cli("evaluate", "--store", str(store), *evaluators, "--json", "--restart")
    assert printed.returncode == 0, printed.stderr
    data = json.loads(printed.stdout)
    assert data["not_evaluated_by_reason"] == {"other": 24}
    assert data["not_evaluated_by_evaluator"] == {"one_reason_each": {"other": 24}}
    stored = stored_reasons(store)["one_reason_each"]
    assert stored == {"answer too short": 12} | {f"no reference for 'answer {i}'": 1 for i in range(0, 24, 2)}


def test_an_email_in_a_skip_message_never_becomes_a_key_and_the_store_redacts_it(tmp_path: Path) -> None:
    """An evaluator skipping with a message that names a user: no report key holds it, and with ``redact=True``
    the stored evaluation span (where the message stays for debugging) masks the address as the rest."""
    from evaltrace import config
    from evaltrace._internal import settings, tracing

    from .backfill_evaluators import names_the_user

    store = tmp_path / "store"
    build_store(store, 3)
    saved = settings.current
    evaltrace.configure("backfill-test", local_store=False, redact=True, evaluation_options={"dead_letter_dir": None})
    try:
        report = evaltrace.evaluate_traces([names_the_user], store=store, sinks=[])
    finally:
        handle = config.current_handle()
        if handle is not None:
            handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)
    assert report.not_evaluated_by_reason == {"other": 3}
    assert report.not_evaluated_by_evaluator == {"names_the_user": {"other": 3}}
    assert "jane.doe@example.com" not in json.dumps(dataclasses.asdict(report))
    (stored,) = stored_reasons(store)["names_the_user"]
    assert "jane.doe@example.com" not in stored and stored.startswith("no consent from ")


def test_a_thousand_distinct_reasons_give_at_most_33_keys_summing_to_the_skips() -> None:
    """1,000 distinct token reasons and 1,000 free-text ones, over a trace pass and a session pass merged: at most
    32 tokens and ``other`` (plus the codes seen) per breakdown, the counts summing to ``not_evaluated``."""
    from evaltrace.backfill.engine import BackfillReport, _count_not_evaluated, merge_reports
    from evaltrace.evaluation.skip_reasons import skip_reason_key

    passes = []
    for offset in (0, 1000):
        report = BackfillReport(outcomes={"not_evaluated": 1000})
        for i in range(500):
            _count_not_evaluated(report, "judge", skip_reason_key(f"case_{offset + i}"))
            _count_not_evaluated(report, "judge", skip_reason_key(f"no answer for user{offset + i}@example.com"))
        passes.append(report)
    merged = merge_reports(passes, ["trace", "session"])
    for breakdown in (merged.not_evaluated_by_reason, merged.not_evaluated_by_evaluator["judge"]):
        assert len(breakdown) <= 33
        assert sum(breakdown.values()) == merged.outcomes["not_evaluated"] == 2000
        assert not any("@" in key for key in breakdown)
        assert breakdown["other"] == 2000 - 32
    assert_consistent(merged)


def test_a_long_reason_is_counted_as_other_stored_capped_and_a_long_key_printed_shortened(tmp_path: Path) -> None:
    """A 100 000-character reason is free text: counted under ``other``, stored on its evaluation span capped to
    ``max_attribute_length``. A key too long for a line (a caller's own mapping) is printed to 200 characters."""
    from .backfill_evaluators import long_reason

    store = tmp_path / "store"
    build_store(store, 2)
    report = evaltrace.evaluate_traces([long_reason], store=store, sinks=[])
    assert report.not_evaluated_by_evaluator == stored_reason_keys(store) == {"long_reason": {"other": 2}}
    ((stored, count),) = stored_reasons(store)["long_reason"].items()
    assert count == 2
    assert 1000 < len(stored) < 100_000  # capped: the configured max_attribute_length (32 768) and a marker
    reason = "x" * 1000
    (_, _, line) = not_evaluated_reason_lines({"long_reason": {reason: 2}})
    assert line.startswith("    " + reason[:200] + "... (") and line.endswith(" characters): 2")
    assert len(line) < 300
