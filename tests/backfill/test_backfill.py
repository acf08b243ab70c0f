"""Re-judging stored traces (issue 25): ``evaltrace.evaluate_traces`` and ``evaltrace evaluate``.

Real components throughout: SDK spans written by the local store's own writer, the real store read back, the
JSONL score sink, the CLI in a real subprocess killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evaltrace
import evaltrace.backfill
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.evaluators import create_evaluator
from evaltrace.exceptions import ConfigError
from evaltrace.exporters import LocalStoreExporter, TraceFilter
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.exporters.store_sessions import find_sessions
from evaltrace.schema.scores import session_score_id

from .backfill_evaluators import TurnCount, chatty, costly, has_answer, short_answer
from .stored import agent_spans, build_store

HERE = Path(__file__).resolve().parent
SRC = Path(evaltrace.__file__).resolve().parent.parent  # the evaltrace these tests import, for the subprocesses


def _rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / DB_NAME) as conn:
        return conn.execute(sql).fetchall()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from evaltrace.cli import main; sys.exit(main())", *args],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_run_over_10000_traces_upserts_every_result(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 10_000)
    scores = tmp_path / "scores.jsonl"
    for _ in range(2):
        report = evaltrace.evaluate_traces(
            [short_answer, has_answer], store=store, sinks=[JsonlScoreSink(scores)], concurrency=16
        )
        assert report.traces == 10_000 and report.evaluations == 20_000
        assert report.outcomes == {"pass": 15_000, "fail": 5_000}
    assert _rows(store, "SELECT count(*) FROM evals") == [(20_000,)]
    # One evaluation span per result, replaced (same id) by the second run, never added.
    assert _rows(store, "SELECT count(*) FROM spans WHERE span_type = 'evaluation'") == [(20_000,)]
    assert _rows(store, "SELECT sum(eval_pass), sum(eval_fail) FROM traces") == [(15_000, 5_000)]
    ids = [json.loads(line)["id"] for line in scores.read_text().splitlines()]
    assert len(ids) == 40_000 and len(set(ids)) == 20_000  # the sink got each score twice, under one id


def _logged_backfill(
    tmp_path: Path, traces: int, judged: int
) -> tuple[Path, Path, dict[str, str], tuple[str, ...], subprocess.Popen[str]]:
    """Start a one-at-a-time backfill of ``traces`` stored traces and return once ``judged`` were judged.

    Returns the store, the judged log, the environment and arguments to run it again, and the running process.
    """
    store = tmp_path / "store"
    build_store(store, traces)
    log = tmp_path / "judged.log"
    env = {"BACKFILL_LOG": str(log), "BACKFILL_SLEEP_S": "0.01"}
    args = (
        "evaluate",
        "--store",
        str(store),
        "-e",
        "backfill_evaluators:logged",
        "--concurrency",
        "1",
        "--no-progress",
    )
    process = _cli(*args, env=env)
    deadline = time.monotonic() + 120
    while (not log.exists() or len(log.read_text().splitlines()) < judged) and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    return store, log, env, args, process


def test_a_killed_backfill_resumes_and_judges_every_trace_once(tmp_path: Path) -> None:
    store, log, env, args, first = _logged_backfill(tmp_path, 400, judged=150)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    killed_at = len(log.read_text().splitlines())
    assert killed_at < 400, "the backfill finished before it could be killed"
    checkpoints = list((store / "backfill").glob("*.done"))
    assert len(checkpoints) == 1 and checkpoints[0].read_text()

    second = _cli(*args, env=env)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert "resumed" in out
    judged = log.read_text().splitlines()
    all_ids = {row[0] for row in _rows(store, "SELECT trace_id FROM traces")}
    assert set(judged) == all_ids  # every trace judged
    # Only the batch in flight at the kill (64 traces at most) was judged again; its rows were replaced.
    assert len(judged) - 400 <= 64
    assert _rows(store, "SELECT count(*) FROM evals") == [(400,)]
    assert _rows(store, "SELECT count(*) FROM spans WHERE span_type = 'evaluation'") == [(400,)]
    assert not checkpoints[0].exists()  # a finished backfill forgets its checkpoint


def test_span_scope_judges_each_matching_span_with_its_subtree(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 5)
    report = evaltrace.evaluate_traces([short_answer], store=store, scope="span", span_kinds=["tool"])
    assert (report.spans, report.evaluations) == (5, 5)
    rows = _rows(store, "SELECT s.name FROM evals AS e JOIN spans AS s USING (trace_id, span_id)")
    assert [name for (name,) in rows] == ["execute_tool lookup"] * 5


def test_session_scope_passes_a_conversation_of_the_sessions_traces(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 8, sessions=2)
    scores = tmp_path / "scores.jsonl"
    TurnCount.seen.clear()
    report = evaltrace.evaluate_traces(
        [TurnCount()], store=store, scope="session", where=TraceFilter(session_id="s0"), sinks=[JsonlScoreSink(scores)]
    )
    assert (report.sessions, report.spans, report.outcomes) == (1, 4, {"fail": 1})
    (conversation,) = TurnCount.seen
    assert conversation.session_id == "s0" and len(conversation.turns) == 4
    assert [t.user_input for t in conversation.turns] == ["question 0", "question 2", "question 4", "question 6"]
    (score,) = [json.loads(line) for line in scores.read_text().splitlines()]
    assert score["session_id"] == "s0" and score["trace_id"] is None and score["value"] == 4.0


def test_traces_read_from_an_otlp_json_export_are_judged_into_the_store(tmp_path: Path) -> None:
    source = tmp_path / "source"
    build_store(source, 3)
    exported = tmp_path / "traces.jsonl"
    export = _cli("traces", "export", "--store", str(source), "--output", str(exported))
    export.communicate(timeout=120)
    assert export.returncode == 0
    target = tmp_path / "target"
    report = evaltrace.evaluate_traces([has_answer], store=target, otlp_json=[exported])
    assert (report.traces, report.evaluations) == (3, 3)
    # The traces are written next to their results.
    assert _rows(target, "SELECT count(*), sum(eval_pass) FROM traces") == [(3, 3)]
    assert _rows(target, "SELECT count(*) FROM spans") == [(9,)]


def test_dry_run_counts_and_estimates_the_judge_cost_without_judging(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 6, sessions=2)
    # A session judge (answer_relevancy, a trace judge, cannot take scope session: exit 2).
    cli = _cli("evaluate", "--store", str(store), "-e", "conversation_completeness", "--scope", "session", "--dry-run")
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert "6 trace(s) selected: 2 session(s) of 6 trace(s), 2 evaluation(s) would run" in out
    assert "estimated judge cost: $" in out and "an estimate" in out
    assert _rows(store, "SELECT count(*) FROM evals") == [(0,)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-e", "no_such_evaluator"), "unknown evaluator 'no_such_evaluator'"),
        (("-e", "pii_leakage", "--service", "nobody"), "no traces in"),
        (("-e", "length:max_chars=3"), "unknown option of length"),
        ((), "no evaluator given"),
    ],
)
def test_usage_errors_exit_2_with_a_message(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    store = tmp_path / "store"
    build_store(store, 2)
    cli = _cli("evaluate", "--store", str(store), "--no-progress", *args)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 2, (out, err)
    assert message in err and "Traceback" not in err


def test_fail_on_fail_sets_the_exit_status(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4)
    cli = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:short_answer", "--no-progress")
    out, _ = cli.communicate(timeout=120)
    assert cli.returncode == 0 and "4 evaluation(s): 2 fail, 2 pass" in out
    cli = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:short_answer", "--fail-on-fail")
    cli.communicate(timeout=120)
    assert cli.returncode == 1


def test_the_live_rate_limit_is_waited_out_not_skipped(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 12)
    started = time.monotonic()
    report = evaltrace.evaluate_traces(
        [has_answer], store=store, limits={"evaluations_per_second": 20, "burst": 1}, concurrency=4
    )
    # 12 evaluations at 20 a second after a burst of 1: at least 0.5 s, and none left "not evaluated".
    assert time.monotonic() - started >= 0.5
    assert report.outcomes == {"pass": 12}


def test_a_spent_judge_budget_stops_the_backfill_and_a_later_run_judges_the_rest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 20)
    report = evaltrace.evaluate_traces([costly], store=store, limits={"max_tokens_per_hour": 450}, concurrency=1)
    # 100 tokens an evaluation: the fifth reaches the budget, and nothing runs after it.
    assert (report.stopped, report.evaluations) == ("over_budget", 5)
    assert _rows(store, "SELECT count(*) FROM evals") == [(5,)]
    report = evaltrace.evaluate_traces([costly], store=store, limits={"max_tokens_per_hour": 10_000})
    assert (report.stopped, report.resumed, report.evaluations) == (None, 5, 15)
    assert _rows(store, "SELECT count(*) FROM evals") == [(20,)]


def test_where_and_trace_select_what_is_judged(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 6)
    where = TraceFilter(attributes=(("input.value", "question 3"),))
    assert evaltrace.evaluate_traces([has_answer], store=store, where=where).traces == 1
    (trace_id,) = _rows(store, "SELECT trace_id FROM evals")[0]
    cli = _cli(
        "evaluate", "--store", str(store), "-e", "backfill_evaluators:short_answer", "--trace", str(trace_id)[:10]
    )
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert "1 trace(s) selected" in out
    assert _rows(store, f"SELECT evaluator FROM evals WHERE trace_id = '{trace_id}' ORDER BY 1") == [
        ("has_answer",),
        ("short_answer",),
    ]
    cli = _cli("evaluate", "--store", str(store), "-e", "backfill_evaluators:short_answer", "--trace", "ffff")
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 2 and "no trace 'ffff'" in err


@pytest.fixture
def configured() -> Iterator[None]:
    from evaltrace import config
    from evaltrace._internal import settings, tracing

    saved = settings.current
    yield
    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


def test_without_sinks_scores_go_to_configures_sinks_redacted_as_live_ones(tmp_path: Path, configured: None) -> None:
    store, scores = tmp_path / "store", tmp_path / "scores.jsonl"
    build_store(store, 2)
    evaltrace.configure(
        "backfill-test",
        local_store=False,
        sinks=[JsonlScoreSink(scores)],
        redact=True,
        evaluation_options={"dead_letter_dir": None},
    )
    report = evaltrace.evaluate_traces([chatty], store=store)
    assert report.outcomes == {"fail": 2}
    comments = [json.loads(line)["comment"] for line in scores.read_text().splitlines()]
    assert len(comments) == 2 and all("jane.doe@example.com" not in c and "the answer leaks" in c for c in comments)
    blobs = _rows(store, "SELECT data FROM spans WHERE span_type = 'evaluation'")
    assert len(blobs) == 2 and all("jane.doe@example.com" not in str(blob) for (blob,) in blobs)


def test_the_dry_run_estimate_prices_each_judge_call_from_the_text_it_would_be_sent(tmp_path: Path) -> None:
    from evaltrace import pricing
    from evaltrace.backfill.estimate import PROMPT_OVERHEAD_CHARS, REPLY_TOKENS
    from evaltrace.evaluators.judge import Judge

    store = tmp_path / "store"
    build_store(store, 3)
    judged = LLMJudgeStub(Judge("gpt-4o-mini", base_url="http://127.0.0.1:9", api_key="unused"))
    report = evaltrace.evaluate_traces([judged, has_answer], store=store, dry_run=True)
    assert (report.traces, report.spans, report.evaluations, report.judge_models) == (3, 3, 6, ["gpt-4o-mini"])
    price = pricing.price_of("gpt-4o-mini")
    assert price is not None
    # Each trace: its input ({"input": "question N"}), final answer and messages (the agent's conversation: the
    # user turn "question N" and the answer, around a tool call without text), plus the rubric, / 4.
    expected = 0.0
    for index in range(3):
        answer = "ok" if index % 2 else f"answer {index}"
        messages = len(f"question {index}") + len(answer)
        chars = len(json.dumps({"input": f"question {index}"})) + len(answer) + messages + PROMPT_OVERHEAD_CHARS
        cost = pricing.cost_at(price, input_tokens=chars // 4, output_tokens=REPLY_TOKENS)
        assert cost is not None
        expected += cost.total_usd
    assert report.estimated_cost_usd == pytest.approx(expected)
    assert _rows(store, "SELECT count(*) FROM evals") == [(0,)]


class LLMJudgeStub:
    """An evaluator with a judge (the estimate reads ``evaluator.judge.model``); never called by a dry run."""

    name = "judged"
    version = None

    def __init__(self, judge: object) -> None:
        self.judge = judge

    def evaluate(self, trace: object, case: object) -> bool:
        raise AssertionError("a dry run judges nothing")


def test_ctrl_c_exits_130_saying_how_to_finish_without_a_traceback(tmp_path: Path) -> None:
    store, log, env, args, cli = _logged_backfill(tmp_path, 200, judged=80)
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 130, err
    assert "interrupted: run the same command again" in err and "Traceback" not in err
    again = _cli(*args, env=env)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    resumed = int(out.split("resumed: ")[1].split()[0])
    assert 0 < resumed < 200 and resumed % 64 == 0  # whole batches (of 64) finished before the interrupt
    assert _rows(store, "SELECT count(*) FROM evals") == [(200,)]


def test_a_trace_evaluator_given_a_conversation_errors_its_evaluations_not_the_backfill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4, sessions=2)
    report = evaltrace.evaluate_traces([has_answer], store=store, scope="session")
    assert (report.sessions, report.evaluations, report.outcomes) == (2, 2, {"error": 2})
    # As live session evaluation: an error is counted, never a verdict of the session (no session_evals row).
    assert _rows(store, "SELECT count(*) FROM session_evals") == [(0,)]


def test_evaluators_come_from_an_eval_yaml_as_written(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 3)
    config = tmp_path / "eval.yaml"
    config.write_text(
        "name: x\ncases: cases.yaml\nevaluators:\n"
        "  - import: backfill_evaluators:short_answer\n    name: terse\n"
        "  - name: long_enough\n    type: length\n    min_words: 2\n"
    )
    cli = _cli("evaluate", "--store", str(store), "--evaluators", str(config), "--no-progress")
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert "6 evaluation(s)" in out
    rows = _rows(store, "SELECT evaluator, outcome, count(*) FROM evals GROUP BY 1, 2 ORDER BY 1, 2")
    # Answers "answer 0", "ok", "answer 2": two of two words, one short.
    assert rows == [("long_enough", "fail", 1), ("long_enough", "pass", 2), ("terse", "fail", 2), ("terse", "pass", 1)]
    config.write_text("name: x\n")
    cli = _cli("evaluate", "--store", str(store), "--evaluators", str(config))
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 2 and "has no 'evaluators:' list" in err


def test_at_trace_scope_an_evaluators_filters_apply_to_the_root_as_live(tmp_path: Path) -> None:
    from evaltrace.evaluation import EvaluatorSpec

    store = tmp_path / "store"
    build_store(store, 3)
    tool_only = EvaluatorSpec(has_answer, span_kinds={"tool"})
    assert evaltrace.evaluate_traces([tool_only], store=store).evaluations == 0
    agents = EvaluatorSpec(has_answer, span_kinds={"agent"})
    assert evaltrace.evaluate_traces([agents], store=store).evaluations == 3


def test_a_pretty_printed_otlp_file_is_read_and_a_bad_one_is_named(tmp_path: Path) -> None:
    source = tmp_path / "source"
    build_store(source, 1)
    exported = tmp_path / "traces.jsonl"
    export = _cli("traces", "export", "--store", str(source), "--output", str(exported))
    export.communicate(timeout=120)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(exported.read_text()), indent=2))
    report = evaltrace.evaluate_traces([has_answer], store=tmp_path / "target", otlp_json=[pretty])
    assert (report.traces, report.evaluations) == (1, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(exported.read_text() + '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}\n')
    cli = _cli("evaluate", "--store", str(tmp_path / "target"), "-e", "pii_leakage", "--otlp-json", str(bad))
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 2 and f"{bad}:2:" in err and "Traceback" not in err


def test_a_backfilled_session_score_has_the_id_live_session_evaluation_gives_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4, sessions=2)
    scores = tmp_path / "scores.jsonl"
    evaltrace.evaluate_traces([TurnCount()], store=store, scope="session", sinks=[JsonlScoreSink(scores)])
    got = {s["session_id"]: s["id"] for s in map(json.loads, scores.read_text().splitlines())}
    # schema.scores.session_score_id is what the live session engine gives a session's score (it upserts there).
    assert got == {sid: session_score_id(sid, "turn_count", None) for sid in ("s0", "s1")}
    assert _rows(store, "SELECT session_id, score_id FROM session_evals ORDER BY session_id") == sorted(got.items())


def test_a_grown_session_judged_again_keeps_one_verdict_the_new_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 3, sessions=1)
    report = evaltrace.evaluate_traces([TurnCount()], store=store, scope="session", sinks=[])
    assert report.outcomes == {"pass": 1}  # 3 turns
    exporter = LocalStoreExporter(store, writer="thread", max_age_s=0, max_bytes=0)
    exporter.export(agent_spans(1, sessions=1))  # a fourth turn of s0
    exporter.shutdown()
    report = evaltrace.evaluate_traces([TurnCount()], store=store, scope="session", sinks=[])
    assert report.outcomes == {"fail": 1}  # 4 turns
    # One row per (session, evaluator), what `sessions show` and `report --session` read: the newer verdict.
    with sqlite3.connect(store / DB_NAME) as conn:
        (summary,) = find_sessions(conn, session_id="s0")
    assert [(s.evaluator, s.outcome, s.revision, s.value) for s in summary.scores] == [("turn_count", "fail", 4, 4.0)]
    # No per-trace result left behind on an earlier last turn (traces list --evaluator / --failed-evals).
    assert _rows(store, "SELECT count(*) FROM evals") == [(0,)]
    assert _rows(store, "SELECT sum(eval_pass), sum(eval_fail) FROM traces") == [(0, 0)]


def test_an_attribute_name_the_store_cannot_query_is_a_config_error_naming_where(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 1)
    with pytest.raises(ConfigError, match="invalid setting 'where': attribute name 'a\"b' holds a double quote"):
        evaltrace.evaluate_traces([has_answer], store=store, where=TraceFilter(attributes=(('a"b', "x"),)))


def test_session_scope_progress_counts_selected_traces_up_to_the_total(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4, sessions=2)
    exporter = LocalStoreExporter(store, writer="thread", max_age_s=0, max_bytes=0)
    exporter.export(agent_spans(3))  # three traces without a session.id: selected, never judged
    exporter.shutdown()
    calls: list[tuple[int, int]] = []
    report = evaltrace.evaluate_traces(
        [TurnCount()], store=store, scope="session", sinks=[], on_progress=lambda d, t: calls.append((d, t))
    )
    assert (report.traces, report.sessions, report.without_session) == (7, 2, 3)
    assert {total for _, total in calls} == {7} and calls[-1] == (7, 7)  # one unit, traces, from start to end
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_a_stopped_backfill_is_not_resumed_by_one_with_other_evaluator_options(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 20)

    def run(max_words: int, tokens: int) -> evaltrace.backfill.BackfillReport:
        evaluators = [costly, create_evaluator("length", max_words=max_words)]
        return evaltrace.evaluate_traces(
            evaluators, store=store, sinks=[], limits={"max_tokens_per_hour": tokens}, concurrency=1
        )

    assert run(200, 450).stopped == "over_budget"  # a few traces done, the rest left in the checkpoint
    # Other options judge the traces differently: the first run's checkpoint is not theirs to resume.
    other = run(100, 450)
    assert (other.stopped, other.resumed) == ("over_budget", 0)
    same = run(200, 10_000)  # the first backfill, run again: it resumes its own checkpoint
    assert same.stopped is None and same.resumed > 0 and same.evaluations == 2 * (20 - same.resumed)


class _RefusingSink:
    """A score sink whose backend refuses every score for good (as a 4xx would)."""

    name = "refusing"

    def export(self, batch: Any) -> Any:
        from evaltrace.evaluation.sinks.base import SinkResult

        return SinkResult(rejected=tuple(batch), error="400 bad score")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def test_scores_a_sink_refused_are_counted_undelivered_in_the_summary(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 3)
    report = evaltrace.evaluate_traces([has_answer], store=store, sinks=[_RefusingSink()])
    assert (report.evaluations, report.undelivered) == (3, 3)  # checkpointed as settled, never as delivered
    delivered = evaltrace.evaluate_traces([has_answer], store=store, sinks=[JsonlScoreSink(tmp_path / "s.jsonl")])
    assert delivered.undelivered == 0


def test_conversation_only_evaluators_default_to_session_scope_beside_trace_ones(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 8, sessions=2)
    report = evaltrace.evaluate_traces([create_evaluator("turn_count", max_turns=3), has_answer], store=store, sinks=[])
    # turn_count judges conversations only: the two sessions (4 turns each, over max_turns); has_answer each trace.
    assert report.scopes == ["trace", "session"] and report.sessions == 2
    assert report.outcomes == {"fail": 2, "pass": 8}  # no error: nothing was given a subject it cannot take
    assert _rows(store, "SELECT session_id, outcome FROM session_evals ORDER BY 1") == [("s0", "fail"), ("s1", "fail")]
    assert _rows(store, "SELECT evaluator, count(*) FROM evals GROUP BY 1") == [("has_answer", 8)]


def test_a_scope_an_evaluator_cannot_take_exits_2_before_judging_anything(tmp_path: Path) -> None:
    store = tmp_path / "store"
    build_store(store, 4, sessions=1)
    cli = _cli("evaluate", "--store", str(store), "-e", "turn_count:max_turns=3", "--scope", "span", "--no-progress")
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 2, (out, err)
    assert "evaluator 'turn_count' judges a session's conversation only; it cannot take scope 'span'" in err
    assert "Traceback" not in err and _rows(store, "SELECT count(*) FROM evals") == [(0,)]
    with pytest.raises(ConfigError, match="'answer_relevancy' judges one trace only; it cannot take scope 'session'"):
        evaltrace.evaluate_traces([create_evaluator("answer_relevancy")], store=store, scope="session")


def test_sessions_in_otlp_json_files_are_indexed_once_not_scanned_per_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source"
    build_store(source, 40, sessions=20)
    exported = tmp_path / "traces.jsonl"
    export = _cli("traces", "export", "--store", str(source), "--output", str(exported))
    export.communicate(timeout=120)
    assert export.returncode == 0
    from evaltrace.backfill import sources

    read: list[str | None] = []
    real = sources.session_of
    monkeypatch.setattr(sources, "session_of", lambda spans: read.append(real(spans)) or read[-1])
    target = tmp_path / "target"
    report = evaltrace.evaluate_traces([TurnCount()], store=target, otlp_json=[exported], scope="session", sinks=[])
    assert (report.sessions, report.outcomes) == (20, {"pass": 20})
    # Each trace's session read once for the index; a scan of every trace per session read 20 x 40 of them.
    assert len(read) == 40


def test_a_dry_run_estimates_a_session_judge_from_the_calls_it_will_make(tmp_path: Path) -> None:
    from evaltrace.evaluators import ConversationRelevancy, Judge
    from judge_server import serve_judge  # tests/judge_server.py (tests is on the path)

    store = tmp_path / "store"
    build_store(store, 12, sessions=1)  # one session of 12 turns
    with serve_judge(lambda body: {"relevant": True, "reason": "on topic"}) as server:
        judge = Judge("gpt-4o-mini", base_url=server.url, api_key="none", max_retries=0)
        relevancy = ConversationRelevancy(judge, window=3)
        planned = evaltrace.evaluate_traces([relevancy], store=store, dry_run=True)
        assert server.requests == []  # a dry run judges nothing
        report = evaltrace.evaluate_traces([relevancy], store=store, sinks=[])
    assert report.outcomes == {"pass": 1}
    # One call per answered turn, each with its window: what the judge was actually sent.
    assert planned.estimated_judge_calls == len(server.requests) == 12
    sent = sum(len(m["content"]) for r in server.requests for m in r["body"]["messages"])
    estimated = planned.estimated_input_tokens * 4
    assert sent / 2 <= estimated <= sent * 2, (estimated, sent)
