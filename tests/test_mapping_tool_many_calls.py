"""A long agent run: hundreds of tool calls, with and without ids, each tool span matched to the call it ran.

Tool spans are matched against the conversation as it grows (``_call_index``: the calls indexed once, the pairing
carried on): every rule of a per-span rebuild must hold at any length. Steps reuse call ids (servers that number
them per response) and repeat id-less calls with equal arguments, some results name neither call nor tool, and the
last step's results reach the conversation only through their tool spans. Spans made with the real OpenTelemetry
SDK (``test_mapping``'s helpers), mapped eagerly and lazily. A step's model call that recorded no output (its calls
added by their spans, then taken out for the next input's copies) and a result inserted after other results
change the conversation other than at its end: the index is rebuilt.
"""

from __future__ import annotations

import random
from typing import Any

from evaltrace.mapping import trace_from_spans
from evaltrace.mapping._pairing import answered_calls
from evaltrace.schema import ToolCall, Trace, TraceMessage
from test_mapping import Spans, agent, at, llm, spans, text, tool

__all__ = ["spans"]  # the fixture, used by name

STEPS, PER_STEP = 10, 30  # 300 tool calls
# A step whose model call recorded no output: its tool spans add their calls, which the next model call's input
# holds (the conversation's calls are then taken out and the input's copies stand for them).
SILENT = 4


def _call(step: int, j: int) -> tuple[str | None, str, dict[str, Any]]:
    """Even calls: an id the next response reuses; odd: no id, the same tool and arguments in every step."""
    if j % 2 == 0:
        return f"call_{j}", "search", {"q": f"s{step}-{j}"}
    return None, "ping", {"n": j}


def _part(call_id: str | None, kind: str, name: str | None, **fields: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": kind, **fields}
    if name is not None:
        part["name"] = name
    if call_id is not None:
        part["id"] = call_id
    return part


def _result(step: int, j: int) -> str:
    return f"result {step}:{j}"


def _run(spans: Spans) -> tuple[list[Trace], list[tuple[Any, ...]]]:
    """The run's spans; returns the mapped traces and each call as expected: id, tool, arguments, start."""
    root = spans.start("invoke_agent a", agent(), 0)
    history: list[dict[str, Any]] = [{"role": "user", "parts": [text("Do the work.")]}]
    expected: list[tuple[Any, ...]] = []
    clock = 1
    for step in range(STEPS):
        calls = [_call(step, j) for j in range(PER_STEP)]
        asked = [{"role": "assistant", "parts": [_part(i, "tool_call", n, arguments=a)]} for i, n, a in calls]
        recorded: dict[str, Any] = {"gen_ai.input.messages": history}
        if step != SILENT:
            recorded["gen_ai.output.messages"] = asked
        spans.span("chat m", llm(**recorded), clock, clock + 1, root)
        clock += 2
        answers = []
        for j, (call_id, name, arguments) in enumerate(calls):
            spans.span(f"execute_tool {name}", tool(name, arguments, _result(step, j), call_id), clock, clock + 1, root)
            expected.append((call_id, name, arguments, at(clock)))
            clock += 2
            # An id-less call's result: named by its tool, or (every other one) by nothing at all (Ollama's shape).
            named = name if call_id is not None or j % 4 == 1 else None
            answers.append(
                {"role": "tool", "parts": [_part(call_id, "tool_call_response", named, response=_result(step, j))]}
            )
        if step == STEPS - 2:  # its last result (an id-less call's) reaches the conversation through its span only
            answers.pop()
        if step < STEPS - 1:  # the last step's results: only their tool spans give them
            history = [*history, *asked, *answers]
    root.end(end_time=spans.finished()[-1].end_time + 1_000_000)
    return [trace_from_spans(spans.finished()), trace_from_spans(spans.finished(), lazy=True)], expected


def test_hundreds_of_tool_calls_each_pair_with_their_own_span_and_result(spans: Spans) -> None:
    traces, expected = _run(spans)
    for trace in traces:
        _check(trace, expected)


def _check(trace: Trace, expected: list[tuple[Any, ...]]) -> None:
    messages = trace.messages
    made = [m.tool_call for m in messages if m.role == "assistant" and m.tool_call is not None]
    # Each call once, in the order made, stamped with the start of the tool span that ran it: no span took an
    # earlier step's call under the same id (or tool and arguments), nor a call another span ran.
    assert [(c.id, c.name, c.arguments, c.started_at) for c in made] == expected
    assert not any(c.from_tool_span for c in made)

    # Every call answered by exactly one tool message, holding its own result.
    pairing = answered_calls(messages)
    assert pairing.unanswered == [] and pairing.open == []
    answered = [pairing.answers.get(id(m)) for m in messages if m.role == "tool"]
    assert len(answered) == STEPS * PER_STEP and all(c is not None for c in answered)
    assert len({id(c) for c in answered}) == len(made)
    position = {id(c): n for n, c in enumerate(made)}
    for message in messages:
        if message.role == "tool":
            n = position[id(pairing.answers[id(message)])]
            assert message.content == _result(*divmod(n, PER_STEP)), n

    # The trace's tool views: every call and every result, in order.
    assert [c.arguments for c in trace.tool_calls] == [e[2] for e in expected]
    assert [r.content for r in trace.tool_results] == [_result(*divmod(n, PER_STEP)) for n in range(len(made))]


def _conversation(rng: random.Random, length: int) -> list[TraceMessage]:
    """Random messages of the shapes the pairing tells apart: calls with reused ids or none, results, user turns."""
    messages: list[TraceMessage] = []
    calls: list[ToolCall] = []
    for _ in range(length):
        kind = rng.random()
        if kind < 0.1:
            messages.append(TraceMessage(role="user", content="next"))
        elif kind < 0.5:
            call = ToolCall(id=rng.choice([None, "call_0", "call_1"]), name=rng.choice(["a", "b"]), arguments={})
            if calls and rng.random() < 0.1:  # one object in two messages (a Trace built by hand)
                call = rng.choice(calls)
            calls.append(call)
            messages.append(TraceMessage(role="assistant", tool_call=call))
        else:
            call_id, name = rng.choice([(None, None), (None, "a"), ("call_0", None), ("call_1", "b"), ("call_0", "a")])
            messages.append(TraceMessage(role="tool", tool_call_id=call_id, name=name, content="r"))
    return messages


def test_the_pairing_carried_on_in_pieces_is_the_pairing_of_one_pass() -> None:
    """``PairingPass`` fed a growing conversation piece by piece answers as ``answered_calls`` over it at each size."""
    from evaltrace.mapping._pairing import PairingPass  # here: the test above runs on code before it too

    rng = random.Random(7)
    for _ in range(200):
        messages = _conversation(rng, rng.randrange(1, 40))
        state = PairingPass()
        fed = 0
        while fed < len(messages):
            upto = min(len(messages), fed + rng.randrange(1, 5))
            state.feed(messages[fed:upto])
            fed = upto
            whole = answered_calls(messages[:upto])
            assert state.pairing() == whole
            calls = [m.tool_call for m in messages[:upto] if m.tool_call is not None]
            assert [state.is_waiting(c) for c in calls] == [any(c is o for o in whole.open) for c in calls]
            assert [state.is_unanswered(c) for c in calls] == [any(c is u for u in whole.unanswered) for c in calls]


def test_the_call_index_is_current_only_for_its_list_grown_at_its_end() -> None:
    """A list changed other than by appending (calls taken out, results inserted) is indexed again, from scratch."""
    from evaltrace.mapping._call_index import CallIndex

    def asking(call_id: str) -> TraceMessage:
        return TraceMessage(role="assistant", tool_call=ToolCall(id=call_id, name="t", arguments={"a": [1, {"b": 2}]}))

    messages = [TraceMessage(role="user", content="go"), asking("x")]
    index = CallIndex(messages)
    index.catch_up()
    first = messages[1].tool_call
    assert first is not None
    assert [c.id for c in index.with_id("x")] == ["x"] and index.pairing.is_waiting(first)
    messages.append(TraceMessage(role="tool", tool_call_id="x", content="r"))
    assert index.current(messages)  # grown at its end: carried on
    index.catch_up()
    assert not index.pairing.is_unanswered(first) and not index.pairing.is_waiting(first)
    like = ToolCall(name="t", arguments={"a": [1.0, {"b": 2}]})  # equal arguments (1 == 1.0): the same bucket
    assert [c.id for c in index.like(like)] == ["x"]
    assert not index.current(list(messages))  # another list
    messages[2] = TraceMessage(role="tool", tool_call_id="x", content="r")  # replaced, same length
    assert not index.current(messages)
    del messages[2]
    assert not index.current(messages)  # shorter than what was fed
