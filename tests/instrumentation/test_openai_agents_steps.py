"""Multi-step Agents SDK runs: each LLM step and each tool span records its own step, never another one's.

No recording has several tool-calling turns, a streamed Chat Completions run, a server-side conversation or a tool
awaiting approval, so the bodies here are built and validated with the ``openai`` SDK's own types (``Response``,
``ChatCompletion``, ``ChatCompletionChunk``) and served by ReplayServer on 127.0.0.1 to a real ``AsyncOpenAI``
client that the real ``agents`` SDK drives (the websocket transport: by a ``websockets`` server on 127.0.0.1).
Every test runs with ``instrument_openai()`` on and off.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("agents")

import agents
from agents import (
    Agent,
    GuardrailFunctionOutput,
    ModelBehaviorError,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    input_guardrail,
    trace,
)
from agents_replay import agents_capture, replay
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response
from opentelemetry.sdk.trace import ReadableSpan

import evaltrace
from cassettes import FIXTURES, Recorded, load_cassette
from evaltrace._internal import semconv as sc
from evaltrace.testing import TraceCapture
from langfuse_observation import langfuse_observation_type

# Features the oldest supported SDK (``openai-agents>=0.2``) lacks: their tests skip there, naming what is missing.
OpenAIResponsesWSModel: Any = getattr(agents, "OpenAIResponsesWSModel", None)
needs_websocket_model = pytest.mark.skipif(
    OpenAIResponsesWSModel is None, reason="this openai-agents has no websocket transport (OpenAIResponsesWSModel)"
)
_HAS_APPROVAL = "needs_approval" in inspect.signature(function_tool).parameters
needs_tool_approval = pytest.mark.skipif(
    not _HAS_APPROVAL, reason="this openai-agents has no tool approval (function_tool(needs_approval=...), RunState)"
)
_APPROVAL: dict[str, Any] = {"needs_approval": True} if _HAS_APPROVAL else {}

_JSON = [("content-type", "application/json")]
_SSE = [("content-type", "text/event-stream")]


@pytest.fixture
def capture(openai_on: bool) -> Iterator[TraceCapture]:
    """Agents SDK tracing to evaltrace only, content captured, globals restored."""
    with agents_capture() as capture:
        yield capture


def _replay(bodies: list[Recorded], run: Callable[[AsyncOpenAI], Awaitable[Any]]) -> Any:
    """What ``run(client)`` returned, the client never retrying (a served error is the answer)."""
    return replay(bodies, run, max_retries=0)[0]


# --- bodies, validated by the openai SDK's types ------------------------------------------------------------


def _response(response_id: str, output: list[dict[str, Any]], **extra: Any) -> Response:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    body = {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o-2024-08-06",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
        "usage": usage,
        **extra,
    }
    return Response.model_validate(body)


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _message(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}


def _served(response: Response) -> Recorded:
    return Recorded("POST", "/v1/responses", b"", 200, "OK", _JSON, response.model_dump_json().encode())


def _completion(completion_id: str, message: dict[str, Any], finish_reason: str) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


def _streamed(completion: ChatCompletion) -> Recorded:
    """A completion as the chunks a streamed request gets (content/tool calls, finish reason, usage)."""
    message = completion.choices[0].message
    delta: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        delta["tool_calls"] = [
            {"index": i, **call.model_dump(include={"id", "type", "function"})}
            for i, call in enumerate(message.tool_calls)
        ]
    head = {"id": completion.id, "object": "chat.completion.chunk", "created": 1, "model": completion.model}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": completion.choices[0].finish_reason}]},
        {**head, "choices": [], "usage": completion.usage.model_dump() if completion.usage else None},
    ]
    events = [f"data: {ChatCompletionChunk.model_validate(c).model_dump_json()}\n\n" for c in chunks]
    return Recorded(
        "POST", "/v1/chat/completions", b"", 200, "OK", _SSE, "".join([*events, "data: [DONE]\n\n"]).encode()
    )


def _tool_call(call_id: str, x: int) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "get_n", "arguments": json.dumps({"x": x})}}


@function_tool
def get_n(x: int) -> str:
    """The n of x."""
    return f"n{x}"


def _spans(capture: TraceCapture, kind: str) -> list[ReadableSpan]:
    found = [s for s in capture.spans if (s.attributes or {}).get(sc.EVALTRACE_SPAN_KIND) == kind]
    return sorted(found, key=lambda s: s.start_time or 0)


def _output(span: ReadableSpan) -> Any:
    return json.loads(str((span.attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES]))


def _served_stream(response: Response) -> Recorded:
    """A Response as the SSE events of a streamed call: created, each output item added and done, completed."""
    started = response.model_copy(update={"status": "in_progress", "output": [], "usage": None})
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started.model_dump()}]
    for index, item in enumerate(response.output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            events.append({"type": kind, "output_index": index, "item": item.model_dump()})
    events.append({"type": "response.completed", "response": response.model_dump()})
    body = "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n" for n, e in enumerate(events)
    )
    return Recorded("POST", "/v1/responses", b"", 200, "OK", _SSE, body.encode())


def test_streamed_responses_steps_each_record_their_own_output(capture: TraceCapture, openai_on: bool) -> None:
    """A guard of the product rule: the output on each step's span is that step's, not the previous turn's."""
    bodies = [
        _served_stream(_response("resp_1", [_call("call_1", "get_n", {"x": 1})])),
        _served_stream(_response("resp_2", [_call("call_2", "get_n", {"x": 2})])),
        _served_stream(_response("resp_3", [_message("n1 and n2")])),
    ]

    async def run(_: AsyncOpenAI) -> str:
        result = Runner.run_streamed(Agent(name="a", tools=[get_n]), "n of 1 then of 2?")
        async for _event in result.stream_events():
            pass
        return str(result.final_output)

    assert _replay(bodies, run) == "n1 and n2"
    llm = _spans(capture, sc.KIND_LLM)
    assert [(s.attributes or {})[sc.GEN_AI_RESPONSE_ID] for s in llm] == ["resp_1", "resp_2", "resp_3"]
    assert [_output(s)[0]["parts"][0].get("id") for s in llm[:2]] == ["call_1", "call_2"]
    assert _output(llm[2])[0]["parts"][0]["content"] == "n1 and n2"
    tools = _spans(capture, sc.KIND_TOOL)
    assert [(s.attributes or {})[sc.GEN_AI_TOOL_CALL_ID] for s in tools] == ["call_1", "call_2"]
    assert [(s.attributes or {})[sc.GEN_AI_TOOL_CALL_RESULT] for s in tools] == ['"n1"', '"n2"']
    # Each step's span ends before the next step starts: nothing of a later step was written into it.
    steps = sorted([*llm, *tools], key=lambda s: s.start_time or 0)
    assert all((a.end_time or 0) <= (b.start_time or 0) for a, b in zip(steps, steps[1:], strict=False))


# --- a streamed Chat Completions run -------------------------------------------------------------------------


def _run_streamed_chat() -> str:
    completions = [
        _completion(
            "chatcmpl-1", {"role": "assistant", "content": None, "tool_calls": [_tool_call("call_1", 1)]}, "tool_calls"
        ),
        _completion(
            "chatcmpl-2", {"role": "assistant", "content": None, "tool_calls": [_tool_call("call_2", 2)]}, "tool_calls"
        ),
        _completion("chatcmpl-3", {"role": "assistant", "content": "n1 and n2"}, "stop"),
    ]

    async def run(client: AsyncOpenAI) -> str:
        agent = Agent(name="a", tools=[get_n], model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client))
        result = Runner.run_streamed(agent, "n of 1 then of 2?")
        async for _event in result.stream_events():
            pass
        return str(result.final_output)

    answer: str = _replay([_streamed(c) for c in completions], run)
    return answer


def test_streamed_chat_steps_and_tool_spans_are_each_their_own(capture: TraceCapture, openai_on: bool) -> None:
    assert _run_streamed_chat() == "n1 and n2"
    llm = _spans(capture, sc.KIND_LLM)
    assert len(llm) == 3
    assert [_output(s)[0]["parts"][0].get("id") for s in llm[:2]] == ["call_1", "call_2"]
    assert _output(llm[2])[0]["parts"][0]["content"] == "n1 and n2"
    tools = _spans(capture, sc.KIND_TOOL)
    # The SDK's streamed chat model stores its reply as a Response it built: the calls' ids are read from it too.
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == ["call_1", "call_2"]
    assert [(s.attributes or {})[sc.GEN_AI_TOOL_CALL_RESULT] for s in tools] == ['"n1"', '"n2"']
    assert [c.id for c in capture.trace.tool_calls] == ["call_1", "call_2"]


def test_streamed_chat_steps_carry_no_placeholder_response_id(capture: TraceCapture, openai_on: bool) -> None:
    """An evaluation event names the step it judges by gen_ai.response.id: it must be that step's own, or none."""
    _run_streamed_chat()
    llm = _spans(capture, sc.KIND_LLM)
    found = [
        tuple((s.attributes or {}).get(key) for key in (sc.GEN_AI_RESPONSE_ID, sc.GEN_AI_RESPONSE_MODEL)) for s in llm
    ]
    reasons = [(s.attributes or {}).get(sc.GEN_AI_RESPONSE_FINISH_REASONS) for s in llm]
    if openai_on:  # our OpenAI span read the provider's own chunks
        assert found == [(f"chatcmpl-{i}", "gpt-4o-2024-08-06") for i in (1, 2, 3)]
        assert reasons == [("tool_calls",), ("tool_calls",), ("stop",)]
    else:  # the SDK's Response has a placeholder id, the requested model and no provider finish reason
        assert found == [(None, None)] * 3
        assert reasons == [None] * 3
    assert [(s.attributes or {})[sc.GEN_AI_REQUEST_MODEL] for s in llm] == ["gpt-4o"] * 3


def test_a_server_side_conversation_and_previous_response_are_on_each_step(
    capture: TraceCapture, openai_on: bool
) -> None:
    """The conversation a run continues (``conversation_id=``, ``previous_response_id=``) is on its model span."""
    in_conversation = _response("resp_1", [_message("one")], conversation={"id": "conv_1"})
    chained = _response("resp_2", [_message("two")], previous_response_id="resp_1")

    async def run(_: AsyncOpenAI) -> None:
        await Runner.run(Agent(name="a"), "first?", conversation_id="conv_1")
        await Runner.run(Agent(name="a"), "second?", previous_response_id="resp_1")

    _replay([_served(in_conversation), _served(chained)], run)
    first, second = (s.attributes or {} for s in _spans(capture, sc.KIND_LLM))
    assert first[sc.GEN_AI_CONVERSATION_ID] == "conv_1"
    assert sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID not in first
    assert second[sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID] == "resp_1"
    assert sc.GEN_AI_CONVERSATION_ID not in second
    assert [first[sc.GEN_AI_RESPONSE_ID], second[sc.GEN_AI_RESPONSE_ID]] == ["resp_1", "resp_2"]


@function_tool(**_APPROVAL)
def delete_file(path: str) -> str:
    """Delete a file (a person approves each call)."""
    return f"deleted {path}"


@needs_tool_approval
def test_a_tool_run_after_approval_keeps_the_call_id_of_the_step_that_asked(
    capture: TraceCapture, openai_on: bool
) -> None:
    """Human in the loop: the call waits (an SDK function span that runs nothing), then runs when resumed."""
    bodies = [
        _served(_response("resp_1", [_call("call_1", "delete_file", {"path": "a"})])),
        _served(_response("resp_2", [_call("call_2", "delete_file", {"path": "a"})])),  # the same call again
        _served(_response("resp_3", [_message("done")])),
    ]

    async def run(_: AsyncOpenAI) -> Any:
        agent = Agent(name="a", tools=[delete_file])
        with trace("Chat"):
            first = await Runner.run(agent, "Delete a, twice.")
            (waiting,) = first.interruptions
            state = first.to_state()
            state.approve(waiting)
            resumed = await Runner.run(agent, state)
            (again,) = resumed.interruptions
            state = resumed.to_state()
            state.approve(again)
            return (await Runner.run(agent, state)).final_output

    assert _replay(bodies, run) == "done"
    tools = _spans(capture, sc.KIND_TOOL)
    ran = [s for s in tools if sc.GEN_AI_TOOL_CALL_RESULT in (s.attributes or {})]
    assert [(s.attributes or {})[sc.GEN_AI_TOOL_CALL_RESULT] for s in ran] == ['"deleted a"'] * 2
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in ran] == ["call_1", "call_2"]
    waited = [s for s in tools if s not in ran]
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in waited] == ["call_1", "call_2"]
    assert [(r.tool_call_id, r.content) for r in capture.trace.tool_results] == [
        ("call_1", "deleted a"),
        ("call_2", "deleted a"),
    ]


def test_a_call_an_earlier_run_left_unrun_does_not_name_a_later_steps_tool(
    capture: TraceCapture, openai_on: bool
) -> None:
    """Two runs in one trace: the first fails on a call it cannot run; the second asks the same and runs it."""
    bodies = [
        _served(_response("resp_1", [_call("call_1", "get_n", {"x": 1})])),
        _served(_response("resp_2", [_call("call_2", "get_n", {"x": 1})])),
        _served(_response("resp_3", [_message("n1")])),
    ]

    async def run(_: AsyncOpenAI) -> Any:
        with trace("Chat"):
            try:
                await Runner.run(Agent(name="no_tools"), "n of 1?")  # the model asks for a tool it does not have
            except ModelBehaviorError:
                pass
            return (await Runner.run(Agent(name="a", tools=[get_n]), "n of 1?")).final_output

    assert _replay(bodies, run) == "n1"
    (tool,) = _spans(capture, sc.KIND_TOOL)
    assert (tool.attributes or {})[sc.GEN_AI_TOOL_CALL_ID] == "call_2"


_logged: list[int] = []


@function_tool
def log(x: int) -> None:
    """Log x (returns nothing: its span's output is None, like that of a call awaiting approval)."""
    _logged.append(x)


@pytest.mark.parametrize("turn_spans", [True, False])
def test_a_tool_returning_none_twice_gets_each_steps_call_id(
    capture: TraceCapture, openai_on: bool, turn_spans: bool
) -> None:
    bodies = [
        _served(_response("resp_1", [_call("call_1", "log", {"x": 1})])),
        _served(_response("resp_2", [_call("call_2", "log", {"x": 1})])),
        _served(_response("resp_3", [_message("logged twice")])),
    ]
    if "tracing" not in inspect.signature(RunConfig).parameters:  # an SDK without turn spans: the False case only
        if turn_spans:
            pytest.skip("this openai-agents has no turn spans (RunConfig.tracing)")
        config = RunConfig()
    else:
        config = RunConfig(tracing={"include_task_and_turn_spans": turn_spans})

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(Agent(name="a", tools=[log]), "Log 1 twice.", run_config=config)).final_output

    assert _replay(bodies, run) == "logged twice"
    ids = [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in _spans(capture, sc.KIND_TOOL)]
    assert ids == ["call_1", "call_2"]


def test_a_guardrail_span_shows_as_a_guardrail_in_langfuse_and_phoenix(capture: TraceCapture, openai_on: bool) -> None:
    """Both backends have a guardrail type (conventions 4.2): the check is not shown as a plain chain step."""

    @input_guardrail
    async def is_math(ctx: Any, agent: Agent[Any], question: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info={"math": True}, tripwire_triggered=False)

    recorded = load_cassette(FIXTURES / "openai-agents-cassettes/logfire/test_openai_agents/test_input_guardrails.yaml")
    assert _replay(recorded, lambda _: Runner.run(Agent(name="agent", input_guardrails=[is_math]), "1+1?")) is not None
    (guardrail,) = [s for s in capture.spans if s.name == "guardrail is_math"]
    attrs = guardrail.attributes or {}
    assert langfuse_observation_type(attrs) == "guardrail"
    assert attrs[sc.OPENINFERENCE_SPAN_KIND] == "GUARDRAIL"
    assert attrs[sc.EVALTRACE_SPAN_KIND] == sc.KIND_TASK  # evaltrace's own kind (what evaluators select) is kept


@needs_websocket_model
@pytest.mark.parametrize("streamed", [False, True])
def test_a_websocket_responses_call_has_its_llm_span(capture: TraceCapture, openai_on: bool, streamed: bool) -> None:
    """The SDK's websocket transport sends each call as a frame, never through the openai client's HTTP methods.

    So no OpenAI span is made for it even with ``instrument_openai()`` on: the SDK's span must stay the step's.
    """
    from websockets.asyncio.server import ServerConnection, serve

    answer = _response("resp_ws", [_message("over the socket")])
    frames: list[dict[str, Any]] = []

    async def respond(socket: ServerConnection) -> None:
        async for frame in socket:
            frames.append(json.loads(frame))
            started = answer.model_copy(update={"status": "in_progress", "output": [], "usage": None})
            for number, (kind, body) in enumerate((("response.created", started), ("response.completed", answer))):
                await socket.send(json.dumps({"type": kind, "sequence_number": number, "response": body.model_dump()}))

    async def run() -> Any:
        async with serve(respond, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
            model = OpenAIResponsesWSModel(model="gpt-4o", openai_client=client)
            agent = Agent(name="a", model=model)
            try:
                if not streamed:
                    return (await Runner.run(agent, "Hello?")).final_output
                result = Runner.run_streamed(agent, "Hello?")
                async for _event in result.stream_events():
                    pass
                return result.final_output
            finally:
                await model.close()
                await client.close()

    assert asyncio.run(run()) == "over the socket"
    assert [f["type"] for f in frames] == ["response.create"]
    (llm,) = _spans(capture, sc.KIND_LLM)
    attrs = llm.attributes or {}
    assert _output(llm)[0]["parts"][0]["content"] == "over the socket"
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "resp_ws"
    assert attrs.get(sc.GEN_AI_REQUEST_STREAM) is (True if streamed else None)
    (agent_span,) = _spans(capture, sc.KIND_AGENT)
    assert llm.context.trace_id == agent_span.context.trace_id


def test_instrumentation_works_with_an_sdk_that_has_no_websocket_model(
    capture: TraceCapture, openai_on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``openai-agents>=0.2`` is supported; ``OpenAIResponsesWSModel`` came much later: its absence breaks nothing."""
    import importlib

    module = importlib.import_module("evaltrace.instrumentation.openai_agents._processor")
    monkeypatch.delattr(agents, "OpenAIResponsesWSModel", raising=False)  # the oldest SDKs have none anyway
    try:
        importlib.reload(module)
        evaltrace.instrument_openai_agents()
        bodies = [_served_stream(_response("resp_1", [_message("streamed")]))]

        async def run(_: AsyncOpenAI) -> str:
            result = Runner.run_streamed(Agent(name="a"), "Hello?")
            async for _event in result.stream_events():
                pass
            return str(result.final_output)

        assert _replay(bodies, run) == "streamed"
    finally:
        monkeypatch.undo()
        importlib.reload(module)
    (llm,) = _spans(capture, sc.KIND_LLM)
    assert _output(llm)[0]["parts"][0]["content"] == "streamed"


class _MyResponsesModel(OpenAIResponsesModel):
    """A user's own Responses model (a trivial subclass): its streamed calls are the SDK's, like its parent's."""


def test_a_subclass_of_the_responses_model_keeps_its_streamed_output(capture: TraceCapture, openai_on: bool) -> None:
    bodies = [_served_stream(_response("resp_1", [_message("streamed")]))]

    async def run(client: AsyncOpenAI) -> str:
        agent = Agent(name="a", model=_MyResponsesModel(model="gpt-4o", openai_client=client))
        result = Runner.run_streamed(agent, "Hello?")
        async for _event in result.stream_events():
            pass
        return str(result.final_output)

    assert _replay(bodies, run) == "streamed"
    (llm,) = _spans(capture, sc.KIND_LLM)
    assert _output(llm)[0]["parts"][0]["content"] == "streamed"
    assert (llm.attributes or {})[sc.GEN_AI_RESPONSE_ID] == "resp_1"


@needs_tool_approval
def test_a_resumed_call_gets_its_own_id_after_an_earlier_run_left_the_same_call_unrun(
    capture: TraceCapture, openai_on: bool
) -> None:
    """Both earlier scenarios in one trace: a failed run's stale call, then a call that waits for approval.

    The resumed run's tool span is in a step that asked for nothing: the call named while waiting is its own.
    """
    bodies = [
        _served(_response("resp_0", [_call("call_0", "delete_file", {"path": "a"})])),  # run 1 cannot run it
        _served(_response("resp_1", [_call("call_1", "delete_file", {"path": "a"})])),  # run 2 waits for approval
        _served(_response("resp_2", [_message("done")])),
    ]

    async def run(_: AsyncOpenAI) -> Any:
        with trace("Chat"):
            try:
                await Runner.run(Agent(name="no_tools"), "Delete a.")
            except ModelBehaviorError:
                pass
            agent = Agent(name="a", tools=[delete_file])
            first = await Runner.run(agent, "Delete a.")
            (waiting,) = first.interruptions
            state = first.to_state()
            state.approve(waiting)
            return (await Runner.run(agent, state)).final_output

    assert _replay(bodies, run) == "done"
    tools = _spans(capture, sc.KIND_TOOL)
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == ["call_1", "call_1"]
    assert [(r.tool_call_id, r.content) for r in capture.trace.tool_results] == [("call_1", "deleted a")]


_failures = [RuntimeError("disk busy")]


@function_tool(failure_error_function=None, **_APPROVAL)
def delete_or_fail(path: str) -> str:
    """Delete a file (approved first); the first try fails, and the error reaches the caller."""
    if _failures:
        raise _failures.pop()
    return f"deleted {path}"


@needs_tool_approval
def test_a_tool_that_raised_uses_its_call_up(capture: TraceCapture, openai_on: bool) -> None:
    """A function span with an error ran its call (no output, but not waiting): a later resume must not get its id."""
    _failures[:] = [RuntimeError("disk busy")]
    bodies = [
        _served(_response("resp_1", [_call("call_1", "delete_or_fail", {"path": "a"})])),
        _served(_response("resp_2", [_call("call_2", "delete_or_fail", {"path": "a"})])),
        _served(_response("resp_3", [_message("done")])),
    ]

    async def approved(agent: Agent[Any], question: str) -> Any:
        first = await Runner.run(agent, question)
        (waiting,) = first.interruptions
        state = first.to_state()
        state.approve(waiting)
        return await Runner.run(agent, state)

    async def run(_: AsyncOpenAI) -> Any:
        agent = Agent(name="a", tools=[delete_or_fail])
        with trace("Chat"):
            with pytest.raises(Exception, match="disk busy"):
                await approved(agent, "Delete a.")
            return (await approved(agent, "Delete a, again.")).final_output

    assert _replay(bodies, run) == "done"
    tools = _spans(capture, sc.KIND_TOOL)
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == ["call_1", "call_1", "call_2", "call_2"]
    assert [s.status.is_ok for s in tools] == [True, False, True, True]


def test_a_handoff_span_has_the_call_id_of_its_transfer_call(capture: TraceCapture, openai_on: bool) -> None:
    """A handoff is a call of its transfer tool: renamed (``tool_name_override``) or not, the span takes its id.

    Each step asks for a tool call first (so the step has a call of another name the handoff must not take), and
    the renamed handoff's call comes first in its response.
    """
    from agents import handoff

    bodies = [
        _served(_response("resp_1", [_call("call_t1", "escalate", {}), _call("call_n1", "get_n", {"x": 1})])),
        _served(_response("resp_2", [_call("call_n2", "get_n", {"x": 2}), _call("call_t2", "transfer_to_closer", {})])),
        _served(_response("resp_3", [_message("closed")])),
    ]
    closer = Agent(name="closer")
    support = Agent(name="support", tools=[get_n], handoffs=[closer])
    triage = Agent(name="triage", tools=[get_n], handoffs=[handoff(support, tool_name_override="escalate")])

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(triage, "help")).final_output

    assert _replay(bodies, run) == "closed"
    handoffs = [s for s in _spans(capture, sc.KIND_TASK) if s.name.startswith("handoff ")]
    assert [s.name for s in handoffs] == ["handoff triage -> support", "handoff support -> closer"]
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in handoffs] == ["call_t1", "call_t2"]
    tools = _spans(capture, sc.KIND_TOOL)
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == ["call_n1", "call_n2"]


def test_a_handoff_whose_sdk_frame_is_not_found_takes_its_call_by_the_transfer_tools_name(
    capture: TraceCapture, openai_on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name-matching fallback, run by the real SDK's handoffs: the frame read is made to find nothing.

    Simulated: on every supported SDK the handoff span ends inside ``execute_handoffs`` (its only caller of
    ``handoff_span``), so the walk up to it is cut to no frame here, as an SDK that renamed it or ended the span
    deeper would leave it. The handoff span then takes the call of ``transfer_to_{agent}`` (the SDK's default
    name) that its step's model asked for, not the step's other call (of ``get_n``, whose function span keeps its
    own id). A handoff renamed with ``tool_name_override`` is not found by the default name: no id, never another
    call's (``call_t1``, its call, is still there unclaimed, and ``get_n``'s calls are not taken).
    """
    import importlib

    from agents import handoff

    # The module, not the package's ``_processor`` attribute (the registered processor instance).
    processor_module = importlib.import_module("evaltrace.instrumentation.openai_agents._processor")
    monkeypatch.setattr(processor_module, "_HANDOFF_FRAME_DEPTH", 0)
    bodies = [
        _served(_response("resp_1", [_call("call_t1", "escalate", {}), _call("call_n1", "get_n", {"x": 1})])),
        _served(_response("resp_2", [_call("call_n2", "get_n", {"x": 2}), _call("call_t2", "transfer_to_closer", {})])),
        _served(_response("resp_3", [_message("closed")])),
    ]
    closer = Agent(name="closer")
    support = Agent(name="support", tools=[get_n], handoffs=[closer])
    triage = Agent(name="triage", tools=[get_n], handoffs=[handoff(support, tool_name_override="escalate")])

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(triage, "help")).final_output

    assert _replay(bodies, run) == "closed"
    handoffs = [s for s in _spans(capture, sc.KIND_TASK) if s.name.startswith("handoff ")]
    assert [s.name for s in handoffs] == ["handoff triage -> support", "handoff support -> closer"]
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in handoffs] == [None, "call_t2"]
    tools = _spans(capture, sc.KIND_TOOL)
    assert [(s.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == ["call_n1", "call_n2"]


@function_tool
def summarise(x: int) -> str:
    """A summary of x, by a model the tool calls itself (recorded by hand)."""
    return _summarised(x)


@evaltrace.trace
def _summarised(x: int) -> str:
    # A plain decorated span with usage set by hand: no span under it counts tokens, so its own count.
    from opentelemetry import trace as otel_trace

    otel_trace.get_current_span().set_attributes({sc.GEN_AI_USAGE_INPUT_TOKENS: 1, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 1})
    return f"s{x}"


def _kept(spans: list[ReadableSpan], **budgets: Any) -> int:
    """How many of a trace's spans export sampling keeps, offered in the order they ended (never by the draw)."""
    from evaltrace.evaluation import ExportSampling
    from evaltrace.evaluation.sampling import ExportGate

    kept: list[ReadableSpan] = []
    gate = ExportGate(ExportSampling(keep_rate=0.0, **budgets), kept.append)
    for span in sorted(spans, key=lambda s: s.end_time or 0):
        gate.offer(span)
    assert gate.parked_spans() == 0  # decided
    return len(kept)


def test_export_sampling_counts_an_agent_runs_tokens_once(capture: TraceCapture, openai_on: bool) -> None:
    """Two model calls of 15 tokens each, and a tool's hand-recorded 2: a token budget sees 32, not the agent's too.

    The ``invoke_agent`` span repeats its calls' 30 tokens; summed with them, a 32-token budget would keep the trace.
    """
    bodies = [
        _served(_response("resp_1", [_call("call_1", "summarise", {"x": 1})])),
        _served(_response("resp_2", [_message("done")])),
    ]

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(Agent(name="writer", tools=[summarise]), "go")).final_output

    assert _replay(bodies, run) == "done"
    spans = list(capture.spans)
    (agent,) = _spans(capture, sc.KIND_AGENT)
    assert (agent.attributes or {})[sc.GEN_AI_USAGE_INPUT_TOKENS] == 20  # the agent repeats its calls' counts
    assert _kept(spans, max_tokens=32) == 0  # 30 + 2, each once: within budget, and the draw keeps nothing
    assert _kept(spans, max_tokens=31) == len(spans)  # over: the whole trace is kept
    cost = sum(float((s.attributes or {}).get(sc.EVALTRACE_COST_USD, 0.0)) for s in spans)  # the model calls'
    assert cost > 0
    assert _kept(spans, max_cost_usd=cost * 1.01) == 0
    assert _kept(spans, max_cost_usd=cost * 0.99) == len(spans)


def _usage(span: ReadableSpan) -> tuple[Any, Any]:
    attrs = span.attributes or {}
    return attrs.get(sc.GEN_AI_USAGE_INPUT_TOKENS), attrs.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)


def test_a_failed_model_call_the_sdk_retried_is_in_no_agents_usage(capture: TraceCapture, openai_on: bool) -> None:
    """The SDK retries a call that failed (its own span, in error, reporting nothing): the agent counts the retry."""
    retry = pytest.importorskip("agents.retry", reason="this openai-agents has no runner-managed model retries")
    from agents import ModelSettings

    failed = Recorded(
        "POST",
        "/v1/responses",
        b"",
        500,
        "Internal Server Error",
        _JSON,
        b'{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}',
    )
    settings_ = ModelSettings(
        retry=retry.ModelRetrySettings(
            max_retries=1, backoff={"initial_delay": 0, "jitter": False}, policy=lambda _: True
        )
    )

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(Agent(name="writer", model_settings=settings_), "go")).final_output

    assert _replay([failed, _served(_response("resp_1", [_message("done")]))], run) == "done"
    llm = _spans(capture, sc.KIND_LLM)
    assert [s.status.is_ok for s in llm] == [False, True]  # the failed try has its own (error) span
    (agent,) = _spans(capture, sc.KIND_AGENT)
    assert _usage(agent) == (10, 5)  # the retry's counts alone: the failed try is no call without counts


def test_an_agent_run_as_a_tool_is_in_the_usage_of_the_agent_that_called_it(
    capture: TraceCapture, openai_on: bool
) -> None:
    """``inner.as_tool()`` runs inside the outer agent's span: the outer agent's counts include the inner run's."""
    inner_usage = {
        "input_tokens": 100,
        "output_tokens": 50,
        "total_tokens": 150,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    bodies = [
        _served(_response("resp_1", [_call("call_1", "ask_inner", {"input": "x"})])),
        _served(_response("resp_2", [_message("inner says hi")], usage=inner_usage)),
        _served(_response("resp_3", [_message("done")])),
    ]
    inner = Agent(name="inner")
    outer = Agent(name="outer", tools=[inner.as_tool(tool_name="ask_inner", tool_description="Ask the inner agent.")])

    async def run(_: AsyncOpenAI) -> Any:
        return (await Runner.run(outer, "go")).final_output

    assert _replay(bodies, run) == "done"
    agents_ = {(s.attributes or {})[sc.GEN_AI_AGENT_NAME]: s for s in _spans(capture, sc.KIND_AGENT)}
    assert _usage(agents_["inner"]) == (100, 50)
    assert _usage(agents_["outer"]) == (10 + 100 + 10, 5 + 50 + 5)


def test_a_handoff_span_has_its_call_id_as_the_sdk_ran_it_even_when_the_sdk_recorded_no_response(
    capture: TraceCapture, openai_on: bool
) -> None:
    """``trace_include_sensitive_data=False``: no model span holds the calls, yet the handoff names the call it ran.

    The id is the one ``execute_handoffs`` ran (the first of two calls of the same transfer tool: the SDK runs
    only the first), not one matched by the tool's name.
    """
    bodies = [
        _served(
            _response(
                "resp_1",
                [_call("call_t1", "transfer_to_closer", {}), _call("call_t2", "transfer_to_closer", {})],
            )
        ),
        _served(_response("resp_2", [_message("closed")])),
    ]
    triage = Agent(name="triage", handoffs=[Agent(name="closer")])

    async def run(_: AsyncOpenAI) -> Any:
        config = RunConfig(trace_include_sensitive_data=False)
        return (await Runner.run(triage, "help", run_config=config)).final_output

    assert _replay(bodies, run) == "closed"
    (handoff,) = [s for s in _spans(capture, sc.KIND_TASK) if s.name.startswith("handoff ")]
    assert handoff.name == "handoff triage -> closer"
    assert (handoff.attributes or {}).get(sc.GEN_AI_TOOL_CALL_ID) == "call_t1"
