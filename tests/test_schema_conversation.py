"""Conversation: a session's traces as ordered turns whose parts are read from the traces themselves."""

from __future__ import annotations

import datetime as dt

from evaltrace.schema import Conversation, ToolCall, Trace, TraceMessage, TraceMetrics, TraceOutput

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _turn_trace(second: int, question: str, answer: str | None, **fields: object) -> Trace:
    history = [TraceMessage(role="user", content="earlier question"), TraceMessage(role="assistant", content="earlier")]
    return Trace.model_validate(
        {
            "run_id": "live",
            "case_id": "c",
            "variant_name": "v",
            "started_at": T0 + dt.timedelta(seconds=second),
            "finished_at": T0 + dt.timedelta(seconds=second, milliseconds=1500),
            "messages": [*history, TraceMessage(role="user", content=question)],
            "output": TraceOutput(final_answer=answer),
            "extra": {"trace_id": f"{second:032x}"},
            **fields,
        }
    )


def test_turns_are_ordered_by_start_and_read_the_new_user_message_not_the_history() -> None:
    late = _turn_trace(20, "second question", "second answer", metrics=TraceMetrics(token_input=7, cost_usd=0.5))
    early = _turn_trace(10, "first question", "first answer", metrics=TraceMetrics(token_input=3))
    conversation = Conversation.from_traces("s-1", [late, early], user_id="ada")

    assert [t.index for t in conversation.turns] == [0, 1]
    assert [t.user_input for t in conversation.turns] == ["first question", "second question"]
    assert [t.final_answer for t in conversation.turns] == ["first answer", "second answer"]
    assert conversation.turns[0].trace_id == f"{10:032x}"
    assert conversation.turns[1].latency_ms == 1500
    assert conversation.traces == [early, late]
    assert conversation.token_input == 10
    assert conversation.cost_usd == 0.5  # only the turns whose cost is known
    assert conversation.token_output is None  # no turn reported any: unknown, never 0
    assert conversation.started_at == early.started_at


def test_the_entry_points_argument_is_the_user_input_before_any_message() -> None:
    trace = _turn_trace(1, "what the model was sent", None, input={"question": "what the user asked"})
    (turn,) = Conversation.from_traces("s", [trace]).turns
    assert turn.user_input == "what the user asked"
    assert turn.final_answer is None


def test_tool_calls_of_every_turn_in_order_and_a_round_trip_through_json() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    with_tool = _turn_trace(
        5, "weather?", "sunny", messages=[TraceMessage(role="assistant", tool_call=call)], input={"q": "weather?"}
    )
    conversation = Conversation.from_traces("s", [with_tool, _turn_trace(9, "thanks", "welcome")])
    assert [c.name for c in conversation.tool_calls] == ["get_weather"]
    again = Conversation.model_validate_json(conversation.model_dump_json())
    assert again == conversation
    assert again.turns[0].user_input == "weather?"
