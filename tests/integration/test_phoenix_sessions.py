"""Session-scope scores in a real Phoenix: our session annotations read back through its REST API."""

from __future__ import annotations

from typing import Any

from phoenix_helpers import Phoenix, poll

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, PhoenixScoreSink, evaluator
from evaltrace.schema import EvaluationResult


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
    with evaltrace.context(session_id="it-chat-1", user_id="it-user"):
        for message in ("hello", "how are you?", "bye"):
            reply(message)
    # force_flush judges every session with new traces at once, whatever its quiet period (a serverless
    # invocation may freeze after it); the spans and the annotation reach Phoenix in either order.
    assert handle.force_flush(30_000)
    poll(lambda: (found := phoenix.spans(project)) and len(found) >= 3 and found)
    path = f"/v1/projects/{project}/session_annotations"
    (annotation,) = poll(lambda: phoenix.get(path, session_ids="it-chat-1")["data"])
    assert annotation["session_id"] == "it-chat-1"
    assert annotation["name"] == "turns_answered"
    assert annotation["result"]["score"] == 1.0
    assert annotation["result"]["explanation"] == "3 of 3 turns answered"
    assert annotation["annotator_kind"] == "CODE"
    assert handle.evaluation_processor.stats()["sinks"]["phoenix"]["successes"] >= 1
