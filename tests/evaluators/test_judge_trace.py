"""Judges you can follow: each judge call is a trace of its own, in the local store, named by its score.

Real components throughout: ``configure()`` with the local store (its writer process), an LLMJudge talking to the
scripted judge server on 127.0.0.1 through the real openai client, a JSONL score sink, the ``evaltrace`` CLI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import evaltrace
from evaltrace.cli import main
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.store_query import TraceFilter
from evaltrace.exporters.store_reader import LocalTraceStore
from evaltrace.schema import Trace
from judge_server import JudgeServer, serve_judge

SECRET = "alice.smith@example.com"
ANSWER = f"Write to {SECRET} for a refund."


pytestmark = pytest.mark.usefixtures("judge_tracing_defaults")


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    with serve_judge(lambda body: {"score": 0.9, "reason": "answers with a contact"}) as server:
        yield server


@evaltrace.agent(name="support")
def support(question: str) -> str:
    return ANSWER


seen_by_catch_all: list[str] = []


@evaluator(name="catch_all")
def catch_all(trace: Trace) -> bool:
    seen_by_catch_all.append(str(trace.extra.get("trace_id")))
    return True


def _run(tmp_path: Path, judge_server: JudgeServer, runs: int = 1, **options: Any) -> tuple[Path, list[dict[str, Any]]]:
    """Configure with the local store, run the app once, flush; return the store and the scores written."""
    store, scores = tmp_path / "store", tmp_path / "scores.jsonl"
    judge = Judge("judge-model", base_url=judge_server.url, api_key="test-key", max_retries=0)
    specs = [EvaluatorSpec(LLMJudge("Gives a way to get help", judge=judge), span_kinds={"agent"}), catch_all]
    handle = evaltrace.configure(
        "judged-app",
        local_store=str(store),
        evaluators=specs,
        sinks=[JsonlScoreSink(scores)],
        evaluation_options={"dead_letter_dir": None, "sink_schedule_delay_s": 0.01},
        **options,
    )
    seen_by_catch_all.clear()
    for _ in range(runs):
        assert support("How do I get a refund?") == ANSWER
        assert handle.force_flush(30_000)
    handle.shutdown()
    written = [json.loads(line) for line in scores.read_text().splitlines()] if scores.exists() else []
    return store, written


def _judge_score(scores: list[dict[str, Any]]) -> dict[str, Any]:
    (score,) = [s for s in scores if s["name"] == "llm_judge"]
    return score


def _trace(store: Path, trace_id: str) -> list[ReadableSpan]:
    return LocalTraceStore(store).spans(trace_id)


def test_a_judge_call_is_its_own_trace_named_by_the_score_and_never_evaluated(
    tmp_path: Path, judge_server: JudgeServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, scores = _run(tmp_path, judge_server)
    score = _judge_score(scores)
    judge_trace_id = score["metadata"]["judge_trace_id"]
    app_trace_id = score["trace_id"]
    assert judge_trace_id != app_trace_id  # a trace of its own, never inside the application's

    spans = _trace(store, judge_trace_id)
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"judge llm_judge", "chat judge-model"}
    root, chat = by_name["judge llm_judge"], by_name["chat judge-model"]
    assert root.parent is None  # no parent: not even a remote one
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert format(root.context.span_id, "016x") == score["metadata"]["judge_span_id"]
    (link,) = root.links  # the judge trace links back to the span it judged
    assert format(link.context.trace_id, "032x") == app_trace_id
    assert format(link.context.span_id, "016x") == score["observation_id"]
    attributes = dict(chat.attributes or {})
    assert chat.kind is SpanKind.CLIENT
    assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] == "judge-model"
    assert attributes["gen_ai.usage.input_tokens"] == 50 and attributes["gen_ai.usage.output_tokens"] == 10
    assert attributes["gen_ai.response.id"].startswith("chatcmpl-")
    assert attributes["gen_ai.request.temperature"] == 0.0
    assert attributes["server.address"] == "127.0.0.1"
    prompt = json.loads(attributes["gen_ai.input.messages"])
    assert "How do I get a refund?" in json.dumps(prompt) and "Gives a way to get help" in json.dumps(prompt)
    reply = json.loads(attributes["gen_ai.output.messages"])
    assert "answers with a contact" in json.dumps(reply)
    assert attributes["evaltrace.judge"] is True and root.attributes["evaltrace.judge"] is True
    assert (
        root.attributes["evaltrace.span.kind"] == "judge" and root.attributes["openinference.span.kind"] == "EVALUATOR"
    )
    assert attributes["openinference.span.kind"] == "LLM"

    # Never evaluated: the catch-all evaluator ran on the application's span only, never on a judge span.
    assert seen_by_catch_all == [app_trace_id]
    assert not any(key.startswith("evaltrace.eval.") for span in spans for key in span.attributes or {})
    # The evaluated span's result event names the judge trace, and the enriched span links to its root.
    (agent,) = [s for s in _trace(store, app_trace_id) if s.name == "invoke_agent support"]
    (event,) = [e for e in agent.events if e.attributes and e.attributes["gen_ai.evaluation.name"] == "llm_judge"]
    assert event.attributes["evaltrace.judge.trace_id"] == judge_trace_id
    assert [format(li.context.trace_id, "032x") for li in agent.links] == [judge_trace_id]

    # `evaltrace traces show <judge trace>` prints the prompt and the reply.
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["traces", "show", judge_trace_id, "--store", str(store), "--details"]) == 0
    shown = capsys.readouterr().out
    assert "judge llm_judge" in shown and "chat judge-model" in shown
    assert "Gives a way to get help" in shown and "answers with a contact" in shown
    assert "Write to" in shown and "for a refund." in shown  # the judged answer, deep in the prompt: not cut


def test_the_stored_judge_trace_is_redacted_like_any_trace(tmp_path: Path, judge_server: JudgeServer) -> None:
    # The built-in masks, and a pattern of the user's that would also match a hex trace id.
    store, scores = _run(tmp_path, judge_server, redact=[r"\b[0-9a-f]{32}\b"])
    # The judge itself saw the real text (evaluators see it; redaction is at the export boundary).
    assert SECRET in json.dumps(judge_server.requests[0]["body"]["messages"])
    spans = _trace(store, _judge_score(scores)["metadata"]["judge_trace_id"])
    stored = json.dumps([dict(span.attributes or {}) for span in spans])
    assert SECRET not in stored and "[REDACTED:EMAIL]" in stored


def test_a_cached_judgement_makes_no_trace_and_names_the_call_that_made_it(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    store, scores = _run(tmp_path, judge_server, runs=2)
    first, second = [s for s in scores if s["name"] == "llm_judge"]
    assert first["trace_id"] != second["trace_id"]  # two application traces judged...
    assert judge_server.count() == 1  # ...by one call: the second judgement came from the cache
    assert second["metadata"]["judge_trace_id"] == first["metadata"]["judge_trace_id"]
    everything = LocalTraceStore(store).list_traces(where=TraceFilter(judges=True))
    roots = [t for t in everything if t.root_name.startswith("judge ")]
    assert [t.trace_id for t in roots] == [first["metadata"]["judge_trace_id"]]


def test_trace_judges_false_makes_no_judge_trace(tmp_path: Path, judge_server: JudgeServer) -> None:
    store, scores = _run(tmp_path, judge_server, trace_judges=False)
    score = _judge_score(scores)
    assert "judge_trace_id" not in score["metadata"]
    assert judge_server.count() == 1  # the judgement was made, only not traced
    everything = LocalTraceStore(store).list_traces(where=TraceFilter(judges=True))
    names = {span.name for summary in everything for span in _trace(store, summary.trace_id)}
    assert "invoke_agent support" in names and not any(name.startswith(("judge", "chat")) for name in names)


def test_the_environment_turns_judge_tracing_off_and_a_bad_value_is_named(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_TRACE_JUDGES", "false")
    _, scores = _run(tmp_path, judge_server)
    assert "judge_trace_id" not in _judge_score(scores)["metadata"]
    monkeypatch.setenv("EVALTRACE_TRACE_JUDGES", "sometimes")
    with pytest.raises(ConfigError, match="EVALTRACE_TRACE_JUDGES"):
        evaltrace.configure("judged-app", local_store=False)
    with pytest.raises(ConfigError, match="trace_judges"):
        evaltrace.configure("judged-app", local_store=False, trace_judges="yes")  # type: ignore[arg-type]


def test_a_failed_judgement_is_followed_too(tmp_path: Path) -> None:
    with serve_judge(lambda body: {"verdict": "no score here"}) as server:  # parses as JSON, lacks the score
        store, scores = _run(tmp_path, server)
    assert server.count() == 2  # the reply and its one retry
    assert not [s for s in scores if s["name"] == "llm_judge"]  # an error is no score
    app_trace_id = next(t.trace_id for t in LocalTraceStore(store).list_traces() if t.root_name.startswith("invoke"))
    (agent,) = _trace(store, app_trace_id)
    (event,) = [e for e in agent.events if e.attributes and e.attributes["gen_ai.evaluation.name"] == "llm_judge"]
    assert "error.type" in event.attributes
    spans = _trace(store, event.attributes["evaltrace.judge.trace_id"])
    (root,) = [s for s in spans if s.parent is None]
    assert root.status.status_code is StatusCode.ERROR
    chats = [s for s in spans if s.name == "chat judge-model"]
    assert len(chats) == 2  # one span per attempt; the second shows the model its reply and the error
    assert "no score here" in chats[1].attributes["gen_ai.input.messages"]


def test_a_judge_evaluating_inside_a_capture_leaves_the_captured_trace_alone(judge_server: JudgeServer) -> None:
    from evaltrace.testing import capture_traces, evaluate

    judge = Judge("judge-model", base_url=judge_server.url, api_key="test-key", max_retries=0)
    with capture_traces() as capture:
        support("How do I get a refund?")
        (result,) = evaluate(capture.trace, LLMJudge("Gives a way to get help", judge=judge))
        # The judge's trace was captured (its id is real), but it is not one of the code under test's traces.
        assert result.metadata is not None and result.metadata["judge_trace_id"]
        assert any(span.name == "chat judge-model" for span in capture.spans)
        assert capture.trace.extra["trace_id"] != result.metadata["judge_trace_id"]
        assert len(capture.traces) == 1


def test_an_offline_run_records_no_judge_trace_and_names_none(judge_server: JudgeServer) -> None:
    from evaltrace.runner.capture import capture_run
    from evaltrace.testing import evaluate

    judge = Judge("judge-model", base_url=judge_server.url, api_key="test-key", max_retries=0)
    with capture_run("offline") as capture:
        for index in range(3):  # judged while the run's provider is evaltrace's: what `evaltrace run` does
            trace = Trace(
                run_id="r",
                case_id="c",
                variant_name="v",
                started_at="2026-01-01T00:00:00Z",
                finished_at="2026-01-01T00:00:01Z",
                input={"input": f"question {index}"},
                output={"final_answer": ANSWER},
            )
            (result,) = evaluate(trace, LLMJudge("Gives a way to get help", judge=judge))
            assert result.status == "completed" and "judge_trace_id" not in (result.metadata or {})
        # The collector keeps spans per trace until a case takes its own: no judge span ever reached it.
        assert not capture._collector._spans
    assert judge_server.count() == 3


def test_traces_list_and_last_leave_judge_traces_out_unless_asked(
    tmp_path: Path, judge_server: JudgeServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, scores = _run(tmp_path, judge_server)
    judge_trace_id = _judge_score(scores)["metadata"]["judge_trace_id"]
    assert main(["traces", "list", "--store", str(store), "--json"]) == 0
    assert [t["root_name"] for t in json.loads(capsys.readouterr().out)] == ["invoke_agent support"]
    assert main(["traces", "list", "--store", str(store), "--json", "--judges"]) == 0
    listed = {t["trace_id"]: t["root_name"] for t in json.loads(capsys.readouterr().out)}
    assert listed[judge_trace_id] == "judge llm_judge" and len(listed) == 2
    # The judge trace ended after the application's, yet `last` is the application's.
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["traces", "show", "last", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "invoke_agent support" in shown and "judge llm_judge" not in shown
