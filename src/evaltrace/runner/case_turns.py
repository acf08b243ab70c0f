"""A simulated-user case's trace: its turns kept inside one case trace, and what is read back from it.

The turns of a conversation are traces of their own (own root span and trace id, one shared ``session.id``). The
run stores the case as one *case trace* (:func:`case_trace`) that holds the turn traces under
``extra["turns"]``: the case is one unit for resume, and the summary, stores and comparisons count it once.
Evaluators at session scope judge :func:`case_conversation`; the run report renders :func:`conversation_messages`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaltrace.mapping._pairing import answered_calls, own_call_messages
from evaltrace.schema import (
    Conversation,
    EvalCase,
    Trace,
    TraceError,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
    Turn,
    utcnow,
)

__all__ = [
    "HISTORY_KEY",
    "MESSAGE_KEY",
    "SESSION_KEY",
    "TURNS_KEY",
    "case_conversation",
    "case_trace",
    "conversation_messages",
    "session_id_of",
    "turn_traces",
]

MESSAGE_KEY = "message"
"""The input key carrying the simulated user's new message."""
HISTORY_KEY = "history"
"""The input key carrying the earlier turns: ``[{"role": "user" | "assistant", "content": ...}, ...]``."""
TURNS_KEY = "turns"
"""``Trace.extra`` key of a case trace holding its turn traces (JSON dumps, in order)."""
SESSION_KEY = "session_id"
"""``Trace.extra`` key of the session id, on the case trace and on each turn trace."""
TURN_KEY = "turn"
"""``Trace.extra`` key of a turn trace's index in its conversation (from 0)."""


def session_id_of(run_id: str, case_id: str, variant: str) -> str:
    """The ``session.id`` every turn of one (case, variant) shares."""
    return f"{run_id}:{case_id}:{variant}"


def _sum(values: Sequence[float | int | None]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def conversation_messages(turns: Sequence[Trace]) -> list[TraceMessage]:
    """The conversation as one message list: per turn the user's message, its tool calls and results, the answer."""
    messages: list[TraceMessage] = []
    for turn in turns:
        said = turn.input.get(MESSAGE_KEY)
        messages.append(TraceMessage(role="user", content=said if isinstance(said, str) else None))
        # The turn's own tool steps only: an application that sends the earlier turns again with each message
        # would otherwise have their calls counted once per later turn (Trace.tool_calls holds the turn's own).
        messages.extend(_own_steps(turn))
        if turn.output.final_answer is not None or turn.output.thinking is not None:
            answer = TraceMessage(role="assistant", content=turn.output.final_answer, thinking=turn.output.thinking)
            messages.append(answer)
    return messages


def _own_steps(turn: Trace) -> list[TraceMessage]:
    """The messages of ``turn`` that hold its own tool calls and results (its views), in order.

    Its own calls are found from the end (``own_call_messages``: an earlier turn's call may equal one of them), its
    results are the tool messages answering them, by position (``answered_calls``), whatever text each holds: a
    failed call's result view is an error, while its message keeps what the model was sent. A tool message that
    answers no call counts when it is one of the turn's results (id and content), the latest such first.
    """
    # Copies, each message once: pairing tells messages apart by identity, and a Trace built by hand may hold one
    # message object twice (an earlier turn's step sent again).
    messages = [m.model_copy() for m in turn.messages]
    mine = {id(m) for m in own_call_messages(messages, turn.tool_calls) if m is not None}
    asked = answered_calls(messages).asked
    loose = [(r.tool_call_id, r.content) for r in turn.tool_results]
    own: list[TraceMessage] = []
    for message in reversed(messages):
        if message.role == "tool":
            answered = asked.get(id(message))
            if answered is not None:
                if id(answered) in mine:
                    own.append(message)
                continue
            said = (_answered(message), message.content if message.content is not None else "")
            if said in loose:
                loose.remove(said)
                own.append(message)
        elif id(message) in mine:
            own.append(message)
    own.reverse()
    return own


def _answered(message: TraceMessage) -> str | None:
    return message.tool_call_id or (message.tool_call.id if message.tool_call is not None else None)


def case_trace(
    case: EvalCase,
    variant: str,
    run_id: str,
    session: str,
    turns: Sequence[Trace],
    facts: dict[str, Any],
    failure: TraceError | None,
) -> Trace:
    """The case's one trace for a conversation: what trace-scope evaluators, the summary and the stores see.

    Its output is the last answer; its messages the whole conversation; its tool calls and results every turn's
    own (so tool calls of every turn count, once each); its tokens and cost the turns' sums; its time from the first
    turn's start to the last turn's end; its error the last turn's, or the simulator's. ``extra`` keeps the turn traces (``turns``), the ``session_id`` and what
    ended the conversation (``simulated_user``).
    """
    last = turns[-1] if turns else None
    started = turns[0].started_at if turns else None
    metrics = TraceMetrics(
        token_input=_sum([t.metrics.token_input for t in turns]),
        token_output=_sum([t.metrics.token_output for t in turns]),
        token_thinking=_sum([t.metrics.token_thinking for t in turns]),
        cost_usd=_sum([t.metrics.cost_usd for t in turns]),
    )
    error = failure if failure is not None else (last.error if last is not None else None)
    extra: dict[str, Any] = {k: v for k, v in (last.extra if last is not None else {}).items() if k != TURN_KEY}
    extra.pop("trace_id", None)  # each turn has its own trace id; the case trace is none of them
    extra.pop("span_id", None)
    extra.update({SESSION_KEY: session, "simulated_user": facts, TURNS_KEY: [t.model_dump(mode="json") for t in turns]})
    now = utcnow()
    return Trace(
        run_id=run_id,
        case_id=case.id,
        variant_name=variant,
        started_at=started or now,
        finished_at=max([t.finished_at for t in turns], default=now),
        input=dict(case.input),
        output=last.output if last is not None else TraceOutput(),
        messages=conversation_messages(turns),
        # Each turn's own views, as it judged them: a failed call's result is an error result, while the message
        # the conversation lists for it keeps the text the model was sent.
        tool_calls=[c for t in turns for c in t.tool_calls],
        tool_results=[r for t in turns for r in t.tool_results],
        metrics=metrics,
        error=error,
        extra=extra,
    )


def turn_traces(trace: Trace) -> list[Trace] | None:
    """The turn traces of a simulated-user case's trace, in order; None for a one-turn case."""
    raw = trace.extra.get(TURNS_KEY)
    if not isinstance(raw, list):
        return None
    return [Trace.model_validate(t) for t in raw]


def case_conversation(trace: Trace) -> Conversation:
    """The conversation a session-scope evaluator judges: the case's turns, or its one trace as a single turn."""
    turns = turn_traces(trace)
    stamped = trace.extra.get(SESSION_KEY)
    session = stamped if isinstance(stamped, str) else session_id_of(trace.run_id, trace.case_id, trace.variant_name)
    # The stored order is the order the turns were played in: never re-sorted by a clock that may tie.
    ordered = turns if turns is not None else [trace]
    return Conversation(session_id=session, turns=[Turn(index=i, trace=t) for i, t in enumerate(ordered)])
