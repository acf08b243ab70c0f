"""A LangGraph thread is an evaltrace session: the turns of one ``thread_id`` are judged as one Conversation.

Replayed through the real LangGraph ReAct agent and ``ChatOpenAI`` (OpenInference's
``test_agent_with_raw_dict_messages`` recording: a ``get_weather`` call, then the answer, served once per turn) on
127.0.0.1, into a real ``EvaluationSpanProcessor`` with a session-scope evaluator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_replay import AGENT, CHAT, chat_openai, langchain_instrumented
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import ReplayServer, load_cassette
from evaltrace._internal import tracing
from evaltrace.context import current_context_attributes
from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation

pytestmark = [
    pytest.mark.usefixtures("capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

THREAD = "thread-42"
QUESTIONS = ["What's the weather in London?", "And now?"]
WEATHER = "The weather in London is sunny."


class _Pipeline:
    def __init__(self, dead_letter: Path) -> None:
        self.seen: list[Conversation] = []

        @evaluator(name="coherent")
        def coherent(conversation: Conversation) -> EvaluationResult:
            self.seen.append(conversation)
            return EvaluationResult(evaluator="coherent", passed=True, score=1.0)

        self.exporter = InMemorySpanExporter()
        self.processor = EvaluationSpanProcessor(
            downstream=[SimpleSpanProcessor(self.exporter)],
            evaluators=[EvaluatorSpec(coherent, scope="session")],
            trace_quiet_period_s=0.0,
            session_quiet_period_s=0.3,
            dead_letter_dir=dead_letter,
        )
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[_Pipeline]:
    p = _Pipeline(tmp_path / "dead-letter")
    previous = tracing.set_tracer_provider(p.provider)
    try:
        yield p
    finally:
        tracing.set_tracer_provider(previous)
        p.provider.shutdown()


def _wait(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return bool(predicate())


def _agent(server: ReplayServer, threaded: bool) -> Any:
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return f"The weather in {location} is sunny."

    model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
    return create_react_agent(
        model,
        [get_weather],
        prompt="You are a helpful assistant.",
        checkpointer=InMemorySaver() if threaded else None,
    )


def _two_turns(config: dict[str, Any]) -> None:
    with ReplayServer(load_cassette(AGENT) * 2) as server, langchain_instrumented():
        agent = _agent(server, threaded="configurable" in config)
        for question in QUESTIONS:
            agent.invoke({"messages": [{"role": "user", "content": question}]}, config=config)


def test_two_invocations_on_one_thread_are_one_conversation_of_two_turns(pipeline: _Pipeline) -> None:
    """Each ``invoke`` is a trace of its own; the thread id is their ``session.id``, so the session-scope evaluator
    judges one Conversation holding both turns, in order. Every span of a turn carries it (model calls and tools
    too), so a backend grouping by any span's session sees the same conversation."""
    _two_turns({"configurable": {"thread_id": THREAD}})
    assert _wait(lambda: len(pipeline.seen) == 1)
    conversation = pipeline.seen[0]
    assert conversation.session_id == THREAD
    assert len(conversation.turns) == 2
    assert [t.final_answer for t in conversation.turns] == [WEATHER, WEATHER]
    spans = pipeline.exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent LangGraph", "invoke_agent LangGraph"]
    assert len({s.context.trace_id for s in roots}) == 2
    assert {(s.attributes or {}).get("session.id") for s in spans} == {THREAD}


def test_a_session_the_user_set_wins_over_the_thread(pipeline: _Pipeline) -> None:
    """``evaltrace.context(session_id=...)`` is the user's word on what the conversation is: the thread is not
    stamped over it (it stays ``gen_ai.conversation.id``)."""
    with evaltrace.context(session_id="chat-7"):
        _two_turns({"configurable": {"thread_id": THREAD}})
    spans = pipeline.exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert [(s.attributes or {}).get("session.id") for s in roots] == [None, None]  # no stamping processor here
    assert {(s.attributes or {}).get("gen_ai.conversation.id") for s in roots} == {THREAD}
    assert not any((s.attributes or {}).get("session.id") == THREAD for s in spans)


def test_runs_without_a_thread_get_no_session(pipeline: _Pipeline) -> None:
    _two_turns({})
    assert not any("session.id" in (s.attributes or {}) for s in pipeline.exporter.get_finished_spans())


def test_the_sdk_span_of_a_model_call_inside_the_thread_carries_the_session_too() -> None:
    """With ``instrument_openai()`` the model calls' spans are the openai SDK's, not the handler's: the thread is
    stamped on them as inside an ``evaltrace.context(session_id=...)`` block (by the stamping processor), beside
    what the user's own ``context()`` block stamps."""
    from evaltrace.context import ContextAttributesProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ContextAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(provider)
    evaltrace.instrument_openai()
    try:
        with evaltrace.context(user_id="u7"):  # what the user stamps is kept beside the thread's session
            _two_turns({"configurable": {"thread_id": THREAD}})
    finally:
        evaltrace.uninstrument_openai()
        tracing.set_tracer_provider(previous)
        provider.shutdown()
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert len(chats) == 4
    assert all(
        "server.address" in (s.attributes or {}) for s in chats
    )  # 4: the SDK's, one per call, the handler's none
    assert {(s.attributes or {}).get("session.id") for s in spans} == {THREAD}
    assert {(s.attributes or {}).get("user.id") for s in spans} == {"u7"}


# --- async runs: the thread's session ends with the run ------------------------------------------------------


@pytest.fixture
def stamped() -> Iterator[InMemorySpanExporter]:
    """``configure()``'s stamping pipeline in front of an in-memory exporter, as evaltrace's provider."""
    from evaltrace.context import StampingPipeline

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(StampingPipeline([SimpleSpanProcessor(exporter)]))
    previous = tracing.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        tracing.set_tracer_provider(previous)
        provider.shutdown()


def _counter(threaded: bool = True) -> Any:
    """A real LangGraph graph of one async node (raising on a negative count), with a checkpointer for threads."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        count: int

    async def step(state: State) -> State:
        if state["count"] < 0:
            raise ValueError("negative count")
        return {"count": state["count"] + 1}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=InMemorySaver() if threaded else None)


def _thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _sessions(spans: Any) -> dict[str, Any]:
    return {s.name: (s.attributes or {}).get("session.id") for s in spans}


async def _run_on_thread_t1(how: str) -> None:
    graph = _counter()
    if how == "ainvoke":
        await graph.ainvoke({"count": 1}, _thread("T1"))
    elif how == "raising ainvoke":
        with pytest.raises(ValueError, match="negative count"):
            await graph.ainvoke({"count": -1}, _thread("T1"))
    else:  # an astream the caller leaves early: the loop closes the generator, ending the run in a task of its own
        async for _ in graph.astream({"count": 1}, _thread("T1")):
            break
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("how", ["ainvoke", "raising ainvoke", "astream left early"])
async def test_after_an_async_run_on_a_thread_the_callers_spans_carry_no_session(
    stamped: InMemorySpanExporter, how: str
) -> None:
    """An async run ends in a copy of the caller's context, so what its start made current stays in the caller's:
    the thread's session must not go on stamping the caller's later spans, its new tasks' spans, or a later
    graph run without a thread."""
    with langchain_instrumented(restored=False):
        await _run_on_thread_t1(how)
        run_spans = stamped.get_finished_spans()
        stamped.clear()
        assert current_context_attributes() == {}
        with tracing.get_tracer().start_as_current_span("user-after"):
            pass

        async def in_a_task() -> None:
            with tracing.get_tracer().start_as_current_span("in-a-task"):
                pass

        await asyncio.create_task(in_a_task())
        await _counter(threaded=False).ainvoke({"count": 1})
    assert {(s.attributes or {}).get("session.id") for s in run_spans} == {"T1"}  # the run itself carried it
    assert _sessions(stamped.get_finished_spans()) == {
        "user-after": None,
        "in-a-task": None,
        "step": None,
        "invoke_agent LangGraph": None,
    }


async def test_a_later_thread_in_the_users_context_block_is_recorded_as_that_thread(
    stamped: InMemorySpanExporter,
) -> None:
    """After a run on thread T1, ``with evaltrace.context(user_id=...)`` and a run on T3: T3 is the session (the
    block opened over T1's leftover stamp must not take T1 as the user's own session), beside the user's id."""
    graph = _counter()
    with langchain_instrumented(restored=False):
        await graph.ainvoke({"count": 1}, _thread("T1"))
        stamped.clear()
        with evaltrace.context(user_id="u"):
            await graph.ainvoke({"count": 1}, _thread("T3"))
    spans = stamped.get_finished_spans()
    assert {((s.attributes or {}).get("session.id"), (s.attributes or {}).get("user.id")) for s in spans} == {
        ("T3", "u")
    }
    assert len(spans) == 2


def test_a_model_call_on_a_thread_outside_any_run_nests_its_sdk_span_under_the_users_span() -> None:
    """``instrument_openai()`` records the call (the handler makes no span of its own) and the thread is given in
    the call's metadata: the SDK's span carries the thread's session and nests under the span the user had open,
    in its trace (the session's stamp must not hide the current span)."""
    from evaltrace.context import ContextAttributesProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ContextAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.set_tracer_provider(provider)
    evaltrace.instrument_openai()
    try:
        with ReplayServer(load_cassette(CHAT)) as server, langchain_instrumented():
            model = chat_openai(server, model="gpt-3.5-turbo")
            with tracing.get_tracer().start_as_current_span("user-root"):
                answer = model.invoke("hi", config={"metadata": {"thread_id": "T9"}})
    finally:
        evaltrace.uninstrument_openai()
        tracing.set_tracer_provider(previous)
        provider.shutdown()
    assert answer.content
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat gpt-3.5-turbo", "user-root"]
    chat, root = spans
    assert "server.address" in (chat.attributes or {})  # the SDK's span
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert chat.context.trace_id == root.context.trace_id
    assert (chat.attributes or {}).get("session.id") == "T9"


def test_inside_a_thread_every_span_carries_the_threads_session(stamped: InMemorySpanExporter) -> None:
    """A span the node's own code starts (no LangChain run: an SDK call, the user's tracer) carries the thread's
    session, from what the runs' starts made current. A chain the node runs inside a ``context()`` block of the
    user's naming another session is a run of the thread: its span carries the thread's session too (the
    stamping processor would otherwise stamp the block's over it), so the trace is one conversation's."""
    from typing import TypedDict

    from langchain_core.runnables import RunnableLambda
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        count: int

    def step(state: State) -> State:
        with tracing.get_tracer().start_as_current_span("node-code"):
            pass
        with evaltrace.context(session_id="inner"):
            count = RunnableLambda(lambda n: n + 1, name="add_one").invoke(state["count"])
        return {"count": count}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    with langchain_instrumented():
        state = graph.compile(checkpointer=InMemorySaver()).invoke({"count": 1}, _thread("T1"))
    assert state == {"count": 2}
    assert _sessions(stamped.get_finished_spans()) == {
        "node-code": "T1",
        "add_one": "T1",
        "step": "T1",
        "invoke_agent LangGraph": "T1",
    }


async def test_a_thread_id_given_as_a_uuid_is_the_session(stamped: InMemorySpanExporter) -> None:
    """Applications often key threads by ``uuid.uuid4()``: LangGraph takes it as the thread, so is the session."""
    import uuid

    thread = uuid.uuid4()
    with langchain_instrumented(restored=False):
        await _counter().ainvoke({"count": 1}, {"configurable": {"thread_id": thread}})
    spans = stamped.get_finished_spans()
    assert len(spans) == 2
    assert {(s.attributes or {}).get("session.id") for s in spans} == {str(thread)}
    graph = next(s for s in spans if s.name == "invoke_agent LangGraph")
    assert (graph.attributes or {}).get("gen_ai.conversation.id") == str(thread)
