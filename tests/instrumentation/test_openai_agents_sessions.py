"""Agents SDK Sessions (``Runner.run(..., session=SQLiteSession(...))``): a session's turns are one conversation.

The real SDK runs against a real ``AsyncOpenAI`` client served by ReplayServer on 127.0.0.1 (Responses bodies
built and validated with the ``openai`` SDK's own types, as in test_openai_agents_steps.py), with the SDK's own
in-memory ``SQLiteSession``. The live tests go through ``configure()``'s real pipeline with a session-scope
evaluator: the Conversation it judges is evaltrace's own grouping of the traces by ``session.id``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, SQLiteSession, set_default_openai_client, set_trace_processors, trace
from agents.models import _openai_shared
from agents_replay import agents_capture, replay
from openai import AsyncOpenAI
from openai.types.responses import Response
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.instrumentation.openai_agents import _registered_processors
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation
from evaltrace.testing import TraceCapture

_JSON = [("content-type", "application/json")]


def _answer(response_id: str, text: str) -> Recorded:
    body = {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o-2024-08-06",
        "output": [
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    payload = Response.model_validate(body).model_dump_json().encode()
    return Recorded("POST", "/v1/responses", b"", 200, "OK", _JSON, payload)


_TURNS = [_answer("resp_1", "Paris."), _answer("resp_2", "About 2.1 million.")]


def _replay(bodies: list[Recorded], run: Callable[[], Awaitable[Any]], by_path: bool = False) -> ReplayServer:
    """The server, once ``run()`` ran against it (the client never retrying: a served error is the answer)."""
    return replay(bodies, lambda _client: run(), by_path=by_path, max_retries=0)[1]


async def _two_turns(session_id: str = "abc") -> None:
    session = SQLiteSession(session_id)  # the SDK's own memory, in memory
    agent = Agent(name="guide", instructions="Answer briefly.")
    await Runner.run(agent, "Capital of France?", session=session)
    await Runner.run(agent, "And its population?", session=session)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _of_kind(spans: Any, kind: str) -> list[ReadableSpan]:
    found = [s for s in spans if _attrs(s).get(sc.EVALTRACE_SPAN_KIND) == kind]
    return sorted(found, key=lambda s: s.start_time or 0)


def _wait(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def _live(run: Callable[[], Awaitable[Any]], session_id: str) -> tuple[list[Conversation], list[ReadableSpan], Any]:
    """``run`` under configure() with a session-scope evaluator; the conversations judged once the session ends."""
    from evaltrace import config
    from evaltrace._internal import tracing

    seen: list[Conversation] = []

    @evaluator(name="turns")
    def turns(conversation: Conversation) -> EvaluationResult:
        seen.append(conversation)
        return EvaluationResult(evaluator="turns", passed=True, score=float(len(conversation.turns)))

    saved_settings, saved_processors = settings.current, _registered_processors() or []
    previous_client = _openai_shared.get_default_openai_client()
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="agents-sessions",
        exporters=[exporter],
        local_store=False,
        handle_sigterm=False,
        evaluators=[EvaluatorSpec(turns, scope="session")],
        evaluation_options={"trace_quiet_period_s": 0.0},
    )
    set_trace_processors([])
    try:
        evaltrace.instrument_openai_agents()
        server = _replay(list(_TURNS), run)
        evaltrace.end_session(session_id)
        assert _wait(lambda: len(seen) == 1), "the session was never judged"
        assert handle.force_flush(10_000)
    finally:
        evaltrace.uninstrument_openai_agents()
        set_trace_processors(saved_processors)
        _openai_shared.set_default_openai_client(previous_client)  # type: ignore[arg-type]
        current = config.current_handle()
        if current is not None:
            current.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved_settings)
    return seen, list(exporter.get_finished_spans()), server


def test_the_turns_of_one_agents_session_are_one_evaltrace_conversation() -> None:
    seen, spans, server = _live(_two_turns, "abc")
    # The session really carried the history: the second request re-sent the first turn from SQLite.
    second_input = str(server.received[1].json()["input"])
    assert "Capital of France?" in second_input and "Paris." in second_input
    (conversation,) = seen
    assert conversation.session_id == "abc"
    assert [t.user_input for t in conversation.turns] == ["Capital of France?", "And its population?"]
    assert [t.final_answer for t in conversation.turns] == ["Paris.", "About 2.1 million."]
    workflows, agents = _of_kind(spans, sc.KIND_WORKFLOW), _of_kind(spans, sc.KIND_AGENT)
    assert len(workflows) == len(agents) == 2
    assert len({s.context.trace_id for s in workflows if s.context is not None}) == 2  # two traces, one session
    for span in (*workflows, *agents):
        assert _attrs(span)[sc.SESSION_ID] == "abc"
        assert _attrs(span)[sc.GEN_AI_CONVERSATION_ID] == "abc"


def test_a_users_own_evaltrace_session_wins_and_the_agents_session_is_the_conversation_id() -> None:
    async def run() -> None:
        with evaltrace.context(session_id="chat-9"):
            await _two_turns("abc")

    seen, spans, _ = _live(run, "chat-9")
    (conversation,) = seen
    assert conversation.session_id == "chat-9"
    assert len(conversation.turns) == 2
    for span in (*_of_kind(spans, sc.KIND_WORKFLOW), *_of_kind(spans, sc.KIND_AGENT)):
        assert _attrs(span)[sc.SESSION_ID] == "chat-9"
        assert _attrs(span)[sc.GEN_AI_CONVERSATION_ID] == "abc"


@pytest.fixture
def capture(openai_on: bool) -> Iterator[TraceCapture]:
    """Agents SDK tracing to evaltrace only, content captured, globals restored."""
    with agents_capture() as capture:
        yield capture


def test_turns_inside_one_sdk_trace_name_the_session_on_the_workflow_too(
    capture: TraceCapture, openai_on: bool
) -> None:
    """``with trace(...)`` opens the workflow before any run: its session is named when the first agent starts."""

    async def run() -> None:
        with trace("Chat"):
            await _two_turns("abc")

    _replay(list(_TURNS), run)
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert _attrs(workflow)[sc.SESSION_ID] == "abc"
    assert _attrs(workflow)[sc.GEN_AI_CONVERSATION_ID] == "abc"
    assert [_attrs(s)[sc.SESSION_ID] for s in _of_kind(capture.spans, sc.KIND_AGENT)] == ["abc", "abc"]


def test_a_streamed_run_in_a_session_names_it(capture: TraceCapture, openai_on: bool) -> None:
    """``run_streamed`` runs in a task it creates: the task sees the run's session."""
    streamed = Recorded(
        "POST",
        "/v1/responses",
        b"",
        200,
        "OK",
        [("content-type", "text/event-stream")],
        _sse(Response.model_validate_json(_TURNS[0].body)),
    )

    async def run() -> None:
        result = Runner.run_streamed(Agent(name="guide"), "Capital of France?", session=SQLiteSession("s-7"))
        async for _ in result.stream_events():
            pass

    _replay([streamed], run)
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    (agent,) = _of_kind(capture.spans, sc.KIND_AGENT)
    assert _attrs(workflow)[sc.SESSION_ID] == _attrs(agent)[sc.SESSION_ID] == "s-7"
    assert capture.trace.output.final_answer == "Paris."


def test_a_run_without_a_session_names_none(capture: TraceCapture, openai_on: bool) -> None:
    async def run() -> None:
        await Runner.run(Agent(name="guide"), "Capital of France?")

    _replay(_TURNS[:1], run)
    for span in capture.spans:
        assert sc.SESSION_ID not in _attrs(span)
        assert sc.GEN_AI_CONVERSATION_ID not in _attrs(span)


def _sse(response: Response) -> bytes:
    """A Response as the SSE events of a streamed call: created, each output item added and done, completed."""
    import json

    started = response.model_copy(update={"status": "in_progress", "output": [], "usage": None})
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started.model_dump()}]
    for index, item in enumerate(response.output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            events.append({"type": kind, "output_index": index, "item": item.model_dump()})
    events.append({"type": "response.completed", "response": response.model_dump()})
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n" for n, e in enumerate(events)
    ).encode()


def test_uninstrument_puts_the_runners_own_methods_back() -> None:
    from agents.run import AgentRunner

    own = {name: AgentRunner.__dict__[name] for name in ("run", "run_streamed")}
    evaltrace.instrument_openai_agents()
    try:
        assert all(AgentRunner.__dict__[name] is not method for name, method in own.items())
        evaltrace.instrument_openai_agents()  # idempotent: wrapped once
        assert all(AgentRunner.__dict__[name].__wrapped__ is method for name, method in own.items())
    finally:
        evaltrace.uninstrument_openai_agents()
    assert all(AgentRunner.__dict__[name] is method for name, method in own.items())


def test_run_sync_in_a_session_names_it(capture: TraceCapture, openai_on: bool) -> None:
    """``Runner.run_sync`` runs ``run`` in an event loop of its own: the session still reaches the run's spans."""
    # The thread's own loop, as an application calling run_sync has: older SDKs run on asyncio.get_event_loop(),
    # which an earlier test's asyncio.run() left unset.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        with ReplayServer(_TURNS[:1]) as server:
            client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
            set_default_openai_client(client, use_for_tracing=False)
            result = Runner.run_sync(Agent(name="guide"), "Capital of France?", session=SQLiteSession("sync-1"))
            loop.run_until_complete(client.close())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert result.final_output == "Paris."
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    (agent,) = _of_kind(capture.spans, sc.KIND_AGENT)
    assert _attrs(workflow)[sc.SESSION_ID] == _attrs(agent)[sc.SESSION_ID] == "sync-1"


def _conversation_calls(conversation_id: str) -> tuple[Recorded, Recorded, Recorded]:
    """The Conversations API answers of a first turn: create, list items (none yet), add items (served twice).

    Bodies built and validated with the ``openai`` SDK's own Conversations types.
    """
    from openai.types.conversations import Conversation as OpenAIConversation
    from openai.types.conversations import ConversationItemList

    created = OpenAIConversation.model_validate(
        {"id": conversation_id, "object": "conversation", "created_at": 1, "metadata": {}}
    )
    empty = ConversationItemList.model_validate(
        {"object": "list", "data": [], "first_id": "", "last_id": "", "has_more": False}
    )
    added = ConversationItemList.model_validate(
        {"object": "list", "data": [], "first_id": "", "last_id": "", "has_more": False}
    )
    return (
        Recorded("POST", "/v1/conversations", b"", 200, "OK", _JSON, created.model_dump_json().encode()),
        Recorded(
            "GET", f"/v1/conversations/{conversation_id}/items", b"", 200, "OK", _JSON, empty.model_dump_json().encode()
        ),
        Recorded(
            "POST",
            f"/v1/conversations/{conversation_id}/items",
            b"",
            200,
            "OK",
            _JSON,
            added.model_dump_json().encode(),
        ),
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_the_first_turn_of_an_openai_conversations_session_names_the_conversation_it_creates(
    capture: TraceCapture, openai_on: bool, streamed: bool
) -> None:
    """A new ``OpenAIConversationsSession`` has no id until the run creates the conversation: read when spans start."""
    from agents import OpenAIConversationsSession

    if not hasattr(OpenAIConversationsSession, "session_id"):
        pytest.skip("this openai-agents' OpenAIConversationsSession has no session_id to name")
    create, listed, add = _conversation_calls("conv_123")
    answer = _TURNS[0]
    if streamed:
        sse = _sse(Response.model_validate_json(answer.body))
        answer = Recorded("POST", "/v1/responses", b"", 200, "OK", [("content-type", "text/event-stream")], sse)

    async def run() -> None:
        session = OpenAIConversationsSession()  # the default client: the replay server's
        if streamed:
            result = Runner.run_streamed(Agent(name="guide"), "Capital of France?", session=session)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(Agent(name="guide"), "Capital of France?", session=session)
        assert session.session_id == "conv_123"

    # Served by path: SDK versions save the user's input before the model call (0.24) or with the answer (0.2).
    server = _replay([create, listed, add, answer, add], run, by_path=True)
    received = [(r.method, r.path.split("?")[0]) for r in server.received]
    assert received[:2] == [("POST", "/v1/conversations"), ("GET", "/v1/conversations/conv_123/items")]
    assert ("POST", "/v1/responses") in received and ("POST", "/v1/conversations/conv_123/items") in received
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    (agent,) = _of_kind(capture.spans, sc.KIND_AGENT)
    for span in (workflow, agent):
        assert _attrs(span)[sc.SESSION_ID] == "conv_123"
        assert _attrs(span)[sc.GEN_AI_CONVERSATION_ID] == "conv_123"


def test_an_agent_run_as_a_tool_with_its_own_session_leaves_the_trace_one_session_id(
    capture: TraceCapture, openai_on: bool
) -> None:
    """The outer run's session is the trace's; the inner run's session is only its agent's conversation id."""
    if "session" not in inspect.signature(Agent.as_tool).parameters:
        pytest.skip("this openai-agents' Agent.as_tool takes no session")
    inner = Agent(name="inner", instructions="Answer briefly.")
    tool = inner.as_tool(tool_name="ask_inner", tool_description="Ask.", session=SQLiteSession("zz-inner"))
    outer = Agent(name="outer", tools=[tool])

    async def run() -> None:
        await Runner.run(outer, "Capital of France?", session=SQLiteSession("aa-outer"))

    _replay([_call("ask_inner", '{"input": "Capital of France?"}'), _TURNS[0], _answer("resp_3", "Paris.")], run)
    sessions = {_attrs(s).get(sc.SESSION_ID) for s in capture.spans} - {None}
    assert sessions == {"aa-outer"}
    by_name = {_attrs(s).get(sc.GEN_AI_AGENT_NAME): _attrs(s) for s in _of_kind(capture.spans, sc.KIND_AGENT)}
    assert by_name["outer"][sc.SESSION_ID] == by_name["outer"][sc.GEN_AI_CONVERSATION_ID] == "aa-outer"
    assert by_name["inner"][sc.GEN_AI_CONVERSATION_ID] == "zz-inner"
    assert sc.SESSION_ID not in by_name["inner"]
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert _attrs(workflow)[sc.SESSION_ID] == "aa-outer"


def _call(name: str, arguments: str) -> Recorded:
    """A Responses reply asking for one call of tool ``name``."""
    body = Response.model_validate_json(_TURNS[0].body).model_dump()
    body["id"] = f"resp_call_{name}"
    body["output"] = [
        {
            "type": "function_call",
            "id": f"fc_{name}",
            "call_id": f"call_{name}",
            "name": name,
            "arguments": arguments,
            "status": "completed",
        }
    ]
    payload = Response.model_validate(body).model_dump_json().encode()
    return Recorded("POST", "/v1/responses", b"", 200, "OK", _JSON, payload)


def _agent_sessions(spans: Any) -> list[Any]:
    """``session.id`` of each agent span, in start order (None: none)."""
    return [_attrs(s).get(sc.SESSION_ID) for s in _of_kind(spans, sc.KIND_AGENT)]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_a_run_without_a_session_after_one_with_a_session_in_the_same_task_names_none(
    capture: TraceCapture, openai_on: bool, streamed: bool
) -> None:
    """The run's session is the run's only: it does not stay behind in the caller's context for its next run."""
    sse = _sse(Response.model_validate_json(_TURNS[0].body))
    body = Recorded("POST", "/v1/responses", b"", 200, "OK", [("content-type", "text/event-stream")], sse)
    agent = Agent(name="guide")

    async def once(session: SQLiteSession | None) -> None:
        if streamed:
            result = Runner.run_streamed(agent, "Capital of France?", session=session)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, "Capital of France?", session=session)

    async def run() -> None:  # one task: both runs see the same caller context
        await once(SQLiteSession("first"))
        await once(None)

    _replay([body, body] if streamed else _TURNS[:1] * 2, run)
    assert _agent_sessions(capture.spans) == ["first", None]
    workflows = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert [_attrs(s).get(sc.SESSION_ID) for s in workflows] == ["first", None]


def test_in_one_sdk_trace_the_first_run_with_a_session_names_the_trace(capture: TraceCapture, openai_on: bool) -> None:
    """Two runs with different Sessions in one ``with trace(...)``: the trace keeps the first's ``session.id``."""
    agent = Agent(name="guide")

    async def run() -> None:
        with trace("Chat"):
            await Runner.run(agent, "Capital of France?")  # no Session: names nothing
            await Runner.run(agent, "Capital of France?", session=SQLiteSession("one"))
            await Runner.run(agent, "And its population?", session=SQLiteSession("two"))

    _replay(_TURNS[:1] * 3, run)
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert _attrs(workflow)[sc.SESSION_ID] == _attrs(workflow)[sc.GEN_AI_CONVERSATION_ID] == "one"
    assert _agent_sessions(capture.spans) == [None, "one", None]
    conversations = [_attrs(s).get(sc.GEN_AI_CONVERSATION_ID) for s in _of_kind(capture.spans, sc.KIND_AGENT)]
    assert conversations == [None, "one", "two"]


def test_a_session_already_on_the_workflow_span_is_kept(capture: TraceCapture, openai_on: bool) -> None:
    """A workflow span stamped with the user's ``session.id`` at its start keeps it when a later run has a Session.

    The SDK trace starts inside ``evaltrace.context(session_id=...)`` and the run happens after the block: the
    run's spans, children of the workflow, still carry the user's session, and the Session is the conversation.
    """
    from evaltrace.context import ContextAttributesProcessor

    capture.provider.add_span_processor(ContextAttributesProcessor())

    async def run() -> None:
        chat = trace("Chat")
        with evaltrace.context(session_id="u-1"):
            chat.start(mark_as_current=True)
        try:
            await Runner.run(Agent(name="guide"), "Capital of France?", session=SQLiteSession("abc"))
        finally:
            chat.finish(reset_current=True)

    _replay(_TURNS[:1], run)
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert _attrs(workflow)[sc.SESSION_ID] == "u-1"
    assert _attrs(workflow)[sc.GEN_AI_CONVERSATION_ID] == "abc"
    assert {_attrs(s).get(sc.SESSION_ID) for s in capture.spans} == {"u-1"}
    (agent,) = _of_kind(capture.spans, sc.KIND_AGENT)
    assert _attrs(agent)[sc.GEN_AI_CONVERSATION_ID] == "abc"


def test_session_attributes_keep_a_session_id_the_span_already_has() -> None:
    """``existing``: the span's own ``session.id`` (stamped at its start) wins even where no user context is current.

    Reached when the first SDK span of a trace is its agent (SDKs before the ``task`` span wrapped a run): the
    workflow's stamp is then in no current context when the agent starts.
    """
    from evaltrace.instrumentation.openai_agents._sessions import session_attributes

    assert session_attributes("abc", {sc.SESSION_ID: "u-1"}) == {sc.GEN_AI_CONVERSATION_ID: "abc"}
    assert session_attributes("abc", {sc.LANGFUSE_SESSION_ID: "u-1"}) == {sc.GEN_AI_CONVERSATION_ID: "abc"}
    assert session_attributes("abc", {}) == {sc.GEN_AI_CONVERSATION_ID: "abc", sc.SESSION_ID: "abc"}


@pytest.mark.parametrize(("given", "named"), [("  s-9 \n", "s-9"), ("   ", None)])
def test_a_session_id_is_named_stripped_and_a_blank_one_names_none(
    capture: TraceCapture, openai_on: bool, given: str, named: str | None
) -> None:
    async def run() -> None:
        await Runner.run(Agent(name="guide"), "Capital of France?", session=SQLiteSession(given))

    _replay(_TURNS[:1], run)
    (workflow,) = _of_kind(capture.spans, sc.KIND_WORKFLOW)
    assert _attrs(workflow).get(sc.SESSION_ID) == named
    assert _agent_sessions(capture.spans) == [named]
