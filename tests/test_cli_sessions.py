"""``evaltrace sessions list`` / ``sessions show`` over a real local store written by configure().

The application runs in this process with configure(local_store=...) and a session-scope evaluator; the session
score reaches the store's ``session_evals`` table through the local store's session sink.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.cli import main
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.schema import EvaluationResult

_AT = 1_700_000_000_000_000_000  # the turns' shared start time, in ns


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


@evaluator(name="polite")
def polite(conversation: Any) -> EvaluationResult:
    rude = [turn.index for turn in conversation.turns if "stupid" in (turn.final_answer or "")]
    return EvaluationResult(evaluator="polite", passed=not rude, reason=f"rude turns: {rude}" if rude else "polite")


@evaltrace.tool
def lookup(city: str) -> str:
    return f"sunny in {city}"


@evaltrace.agent(name="assistant")
def assistant(question: str) -> str:
    if "weather" in question:
        return lookup("Paris")
    return "what a stupid question" if "\x1b" in question else f"you said {question}"


def _run_chat(store: Path) -> None:
    handle = evaltrace.configure(
        "chat-app",
        local_store={"directory": store, "writer": "thread"},
        evaluators=[EvaluatorSpec(polite, scope="session")],
        evaluation_options={"trace_quiet_period_s": 0.0, "session_quiet_period_s": 600.0, "dead_letter_dir": None},
    )
    with evaltrace.context(session_id="chat-42", user_id="ada"):
        assistant("hello")
        assistant("what is the weather?")
        assistant("\x1b[31mred\x1b[0m")  # recorded text with a terminal escape: shown escaped, never sent raw
    with evaltrace.context(session_id="chat-43", user_id="bob"):
        assistant("hi")
    assert handle.force_flush(30_000)  # judges both sessions now and writes their scores


def test_sessions_list_and_show_read_turns_and_session_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    _run_chat(store)
    monkeypatch.setenv("COLUMNS", "200")

    assert main(["sessions", "list", "--store", str(store), "--json"]) == 0
    listed = {s["session_id"]: s for s in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"chat-42", "chat-43"}
    chat = listed["chat-42"]
    assert chat["user_id"] == "ada" and chat["turns"] == 3
    assert chat["last_time_ns"] > chat["first_time_ns"]
    (score,) = chat["scores"]
    assert score["evaluator"] == "polite" and score["outcome"] == "fail" and score["revision"] == 1
    assert score["comment"] == "rude turns: [2]"
    assert listed["chat-43"]["scores"][0]["outcome"] == "pass"

    assert main(["sessions", "list", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "chat-42" in table and "ada" in table and "polite fail" in table and "polite pass" in table

    assert main(["sessions", "show", "chat-42", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    turns = [shown.index(f"Turn {n}") for n in (1, 2, 3)]
    assert turns == sorted(turns)  # in order
    assert "user:   hello" in shown and "answer: you said hello" in shown
    assert "tools:  get_weather" not in shown and "tools:  lookup" in shown
    assert "\x1b" not in shown and "\\x1b[31mred" in shown  # escaped, not interpreted
    assert "Session scores" in shown and "rude turns: [2]" in shown

    assert main(["sessions", "show", "chat-42", "--store", str(store), "--json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)
    assert [t["user_input"] for t in data["turns"]] == ["hello", "what is the weather?", "\x1b[31mred\x1b[0m"]
    assert data["turns"][1]["tool_calls"] == ["lookup"] and data["turns"][1]["final_answer"] == "sunny in Paris"

    assert main(["sessions", "show", "nope", "--store", str(store)]) == 1
    assert "No session 'nope'" in capsys.readouterr().out


def test_a_store_of_an_earlier_version_gains_the_session_table_on_first_use(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _run_chat(store)
    with sqlite3.connect(store / DB_NAME) as conn:  # as an earlier evaltrace left it: no session_evals table
        conn.execute("DROP TABLE session_evals")
    assert main(["sessions", "list", "--store", str(store), "--json"]) == 0  # reads as "no session scores"
    _run_chat(store)  # the next session score creates the table again
    with sqlite3.connect(store / DB_NAME) as conn:
        rows = conn.execute("SELECT session_id, evaluator, revision FROM session_evals ORDER BY 1").fetchall()
    assert rows == [("chat-42", "polite", 1), ("chat-43", "polite", 1)]  # one row per (session, evaluator)


def test_a_rejudged_session_keeps_one_row_with_its_latest_revision(tmp_path: Path) -> None:
    from evaltrace.evaluation.sinks.local_store import LocalStoreSessionSink
    from evaltrace.schema import Score

    sink = LocalStoreSessionSink(tmp_path / "store")
    first = Score(id="s", name="polite", value=1.0, session_id="c", metadata={"revision": 1, "passed": True})
    second = first.model_copy(update={"value": 0.0, "metadata": {"revision": 2, "passed": False}})
    assert sink.export([first]).ok and sink.export([second]).ok
    assert sink.export([first]).ok  # a late older revision never overwrites the newer one
    sink.shutdown()
    with sqlite3.connect(tmp_path / "store" / DB_NAME) as conn:
        rows = conn.execute("SELECT revision, outcome, value FROM session_evals").fetchall()
    assert rows == [(2, "fail", 0.0)]


def test_report_renders_a_session_as_a_chat_with_its_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    _run_chat(store)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--session", "chat-42", "--store", str(store)]) == 0
    page = (tmp_path / "evaltrace-session-chat-42.html").read_text()
    turns = [page.index(f'data-turn="{n}"') for n in (1, 2, 3)]
    assert turns == sorted(turns)
    assert page.count('data-role="user"') == 3 and page.count('data-role="assistant"') == 3
    assert 'data-tool="lookup"' in page and "sunny in Paris" in page
    assert "rude turns: [2]" in page and 'data-outcome="fail"' in page
    assert main(["report", "--session", "nope", "--store", str(store)]) == 1
    assert main(["report", "abc", "--session", "chat-42", "--store", str(store)]) == 2
    assert main(["report", "--session", "../../x", "--store", str(store)]) == 1  # never a path outside the cwd
    capsys.readouterr()


def test_a_session_evaluator_attached_by_a_decorator_is_refused_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    seen: list[Any] = []

    @evaluator(name="whole_chat")
    def whole_chat(conversation: Any) -> bool:
        seen.append(conversation)
        return True

    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "t", exporters=[exporter], local_store=False, evaluation_options={"dead_letter_dir": None}
    )

    @evaltrace.agent(evaluators=[EvaluatorSpec(whole_chat, scope="session")])
    def turn(question: str) -> str:
        return "answer"

    with caplog.at_level(logging.WARNING, logger="evaltrace.evaluation"), evaltrace.context(session_id="chat-40"):
        turn("q")
    assert handle.force_flush(10_000)
    assert seen == []  # never judged on one turn's Trace as if it were the conversation
    (span,) = exporter.get_finished_spans()
    assert not any(key.startswith("evaltrace.eval.whole_chat") for key in (span.attributes or {}))
    assert any("scope='session'" in r.getMessage() and "whole_chat" in r.getMessage() for r in caplog.records)


def test_a_sessions_user_is_its_earliest_turn_carrying_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Turns of one session under different users: the user of the earliest turn with one, not the largest."""
    store = tmp_path / "store"
    handle = evaltrace.configure("chat-app", local_store={"directory": store, "writer": "thread"})
    with evaltrace.context(session_id="chat-50"):
        assistant("who is there?")  # the earliest turn carries no user: it does not decide
    # The opener sorts between the later turns' users: neither min() nor max() of them, nor the latest turn's.
    with evaltrace.context(session_id="chat-50", user_id="mia"):
        assistant("hello")
    with evaltrace.context(session_id="chat-50", user_id="zoe"):
        assistant("hi again")
    with evaltrace.context(session_id="chat-50", user_id="ada"):
        assistant("bye")
    with evaltrace.context(session_id="chat-51"):
        assistant("nobody")
    assert handle.force_flush(30_000)
    with sqlite3.connect(store / DB_NAME) as conn:
        users = conn.execute("SELECT user_id FROM traces WHERE session_id = 'chat-50' ORDER BY start_time").fetchall()
    assert users == [(None,), ("mia",), ("zoe",), ("ada",)]  # each trace keeps its own user

    assert main(["sessions", "list", "--store", str(store), "--json"]) == 0
    listed = {s["session_id"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["chat-50"]["user_id"] == "mia" and listed["chat-50"]["turns"] == 4
    assert listed["chat-51"]["user_id"] is None
    assert [s["session_id"] for s in listed.values()] == ["chat-51", "chat-50"]  # most recently active first
    assert main(["sessions", "list", "--store", str(store), "--json", "--limit", "1"]) == 0
    assert [s["session_id"] for s in json.loads(capsys.readouterr().out)] == ["chat-51"]


def test_a_sessions_user_among_turns_starting_together_is_the_smaller_trace_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two turns starting at the same instant: the trace with the smaller id decides, whatever order they were stored."""
    tracer = TracerProvider(resource=Resource({"service.name": "chat-app"})).get_tracer("t")
    spans = [tracer.start_span("turn", start_time=_AT, attributes={"session.id": "chat-60"}) for _ in range(2)]
    smaller, larger = sorted(spans, key=lambda span: span.get_span_context().trace_id)
    # The smaller trace id's user sorts last, and its trace is stored second: neither min(), nor the first stored
    # row (the index's order without the trace id tie-break), nor the larger trace id picks it.
    smaller.set_attribute("user.id", "zed")
    larger.set_attribute("user.id", "amy")
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    for span in (larger, smaller):
        span.end(end_time=_AT + 1_000_000)
        assert isinstance(span, ReadableSpan)
        exporter.export([span])
    exporter.shutdown()
    with sqlite3.connect(tmp_path / DB_NAME) as conn:
        stored = conn.execute("SELECT user_id, start_time FROM traces ORDER BY rowid").fetchall()
    assert stored == [("amy", _AT), ("zed", _AT)]

    assert main(["sessions", "list", "--store", str(tmp_path), "--json"]) == 0
    (session,) = json.loads(capsys.readouterr().out)
    assert session["session_id"] == "chat-60" and session["turns"] == 2
    assert session["user_id"] == "zed"
