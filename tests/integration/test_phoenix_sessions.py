"""Session-scope scores in a real Phoenix: our session annotations read back through its REST API."""

from __future__ import annotations

from typing import Any

import httpx
from phoenix_helpers import Phoenix, poll

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, PhoenixScoreSink, evaluator
from evaltrace.schema import EvaluationResult, Score


@evaluator(name="turns_answered")
def turns_answered(conversation: Any) -> EvaluationResult:
    answered = sum(1 for turn in conversation.turns if turn.final_answer)
    return EvaluationResult(
        evaluator="turns_answered",
        passed=answered == len(conversation.turns),
        score=answered / max(1, len(conversation.turns)),
        reason=f"{answered} of {len(conversation.turns)} turns answered",
    )


@evaltrace.agent(name="chat")
def reply(message: str) -> str:
    return f"echo: {message}"


def session_annotations(phoenix: Phoenix, project: str, session_id: str) -> list[dict[str, Any]]:
    """The session's annotations; none while Phoenix does not know the session yet (it answers 404 then)."""
    path = f"/v1/projects/{project}/session_annotations"
    response = httpx.get(phoenix.url + path, params={"session_ids": session_id}, timeout=10)
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return list(response.json()["data"])


def test_session_scores_become_phoenix_session_annotations(phoenix: Phoenix, project: str) -> None:
    handle = evaltrace.configure(
        "it-sessions",
        phoenix=phoenix.url,
        evaluators=[EvaluatorSpec(turns_answered, scope="session")],
        sinks=[PhoenixScoreSink(phoenix.url)],
        local_store=False,
        evaluation_options={
            "dead_letter_dir": None,
            "sink_schedule_delay_s": 0.05,
            "emit_log_events": False,
            "trace_quiet_period_s": 0.0,
            "session_quiet_period_s": 600.0,
        },
    )
    session_id = f"chat-{project}"  # Phoenix's session ids are global: one of an earlier run's project must not match
    with evaltrace.context(session_id=session_id, user_id="it-user"):
        for message in ("hello", "how are you?", "bye"):
            reply(message)
    # force_flush judges every session with new traces at once, whatever its quiet period (a serverless
    # invocation may freeze after it); the spans and the annotation reach Phoenix in either order.
    assert handle.force_flush(30_000)
    poll(lambda: (found := phoenix.spans(project)) and len(found) >= 3 and found)
    (annotation,) = poll(lambda: session_annotations(phoenix, project, session_id))
    assert annotation["session_id"] == session_id
    assert annotation["name"] == "turns_answered"
    assert annotation["result"]["score"] == 1.0
    assert annotation["result"]["explanation"] == "3 of 3 turns answered"
    assert annotation["annotator_kind"] == "CODE"
    assert handle.evaluation_processor.stats()["sinks"]["phoenix"]["successes"] >= 1


def test_a_session_batch_with_a_score_that_cannot_be_encoded_stores_the_rest(phoenix: Phoenix, project: str) -> None:
    # Before, a session batch was one body: one score JSON cannot carry at all rejected every score in it.
    handle = evaltrace.configure("it-sessions-split", phoenix=phoenix.url, local_store=False)
    session_id = f"split-{project}"
    with evaltrace.context(session_id=session_id):
        reply("hello")
    assert handle.force_flush(30_000)
    poll(lambda: (found := phoenix.spans(project)) and len(found) >= 1 and found)

    def on_session(name: str, metadata: dict[str, Any]) -> Score:
        return Score(name=name, value=1.0, session_id=session_id, comment=f"{name} \ud800", metadata=metadata)

    good, bad = on_session("kept", {"turns": 1}), on_session("unwritable", {"raw": object()})
    sink = PhoenixScoreSink(phoenix.url)
    try:
        result = sink.export([bad, good])
    finally:
        sink.shutdown()
    assert result.rejected == (bad,) and result.failed == ()
    assert result.error is not None and "could not be encoded as JSON" in result.error
    (annotation,) = poll(lambda: session_annotations(phoenix, project, session_id))
    assert annotation["name"] == "kept"
    assert annotation["result"]["explanation"] == "kept \ufffd"  # the lone surrogate replaced, as for spans
