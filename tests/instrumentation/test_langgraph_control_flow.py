"""LangGraph's control flow is no failure: a human-in-the-loop ``interrupt()`` and a handoff to the parent graph.

LangGraph raises ``GraphInterrupt`` / ``ParentCommand`` through the runs it leaves and carries on (or returns the
interrupt to the caller); spans marked failed would fail every paused step and every multi-agent handoff. The
agent replays OpenInference's ``test_agent_with_raw_dict_messages`` recording through the real LangGraph and
``ChatOpenAI`` on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_replay import AGENT, by_name, chat_openai, langchain_instrumented, one
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from typing_extensions import TypedDict

from cassettes import ReplayServer, load_cassette
from evaltrace._internal import settings
from evaltrace.evaluators._base import MissingInputError
from evaltrace.evaluators.tool_health import ToolErrorRate
from evaltrace.mapping import trace_from_spans

pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

CALL_ID = "call_7p1vRWhZc9Pm0j6JVvrHK4ZE"


def _events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


def _failed(spans: tuple[ReadableSpan, ...]) -> list[str]:
    return [
        s.name
        for s in spans
        if s.status.status_code is StatusCode.ERROR
        or "error.type" in (s.attributes or {})
        or any(e.name == "exception" for e in s.events)
    ]


def test_a_tool_that_asks_a_human_pauses_the_agent_without_a_failed_span(exporter: InMemorySpanExporter) -> None:
    """The tool calls ``interrupt()``: the run returns the question; resumed, the tool answers and the agent ends."""
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent
    from langgraph.types import Command, interrupt

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return str(interrupt(f"What is the weather in {location}?"))

    config = {"configurable": {"thread_id": "hitl-1"}}
    with ReplayServer(load_cassette(AGENT)) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        agent = create_react_agent(model, [get_weather], checkpointer=InMemorySaver())
        paused = agent.invoke({"messages": [{"role": "user", "content": "Weather in London?"}]}, config=config)
        first = exporter.get_finished_spans()
        done = agent.invoke(Command(resume="The weather in London is sunny."), config=config)
    assert [i.value for i in paused["__interrupt__"]] == ["What is the weather in London?"]
    assert done["messages"][-1].content == "The weather in London is sunny."

    assert _failed(first) == []
    paused_tool = one(first, "execute_tool get_weather")
    assert (paused_tool.attributes or {})["gen_ai.tool.call.id"] == CALL_ID
    assert "gen_ai.tool.call.result" not in (paused_tool.attributes or {})  # it asked; it did not answer yet
    assert paused_tool.status.status_code is StatusCode.UNSET
    [asked] = _events(paused_tool, "evaltrace.langgraph.interrupt")
    assert json.loads(str(asked["evaltrace.langgraph.interrupt.value"])) == "What is the weather in London?"
    assert asked["evaltrace.langgraph.interrupt.id"] == paused["__interrupt__"][0].id
    trace = trace_from_spans(first)
    assert trace.error is None
    # The paused call has no result: a tool evaluator has nothing to judge, neither a pass nor a failure.
    assert [c.id for c in trace.tool_calls] == [CALL_ID]
    assert trace.tool_results == []
    with pytest.raises(MissingInputError):
        ToolErrorRate().check(trace, None)

    spans = exporter.get_finished_spans()
    assert _failed(spans) == []
    tools = [s for s in spans if s.name == "execute_tool get_weather"]
    assert len(tools) == 2  # asked, then run again on resume with the human's answer
    assert json.loads(str((tools[1].attributes or {})["gen_ai.tool.call.result"])) == "The weather in London is sunny."


class _State(TypedDict):
    request: str
    handled_by: str


def test_a_handoff_to_the_parent_graph_fails_no_span(exporter: InMemorySpanExporter) -> None:
    """A subgraph's node hands off with ``Command(graph=Command.PARENT)``: the multi-agent handoff LangGraph runs."""
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command

    def triage(state: _State) -> Command[Any]:
        return Command(graph=Command.PARENT, goto="billing", update={"handled_by": "triage"})

    team = StateGraph(_State)
    team.add_node("triage", triage)
    team.add_edge(START, "triage")

    def billing(state: _State) -> dict[str, str]:
        return {"handled_by": state["handled_by"] + ">billing"}

    graph = StateGraph(_State)
    graph.add_node("team", team.compile(name="team"))
    graph.add_node("billing", billing)
    graph.add_edge(START, "team")
    with langchain_instrumented():
        out = graph.compile(name="support").invoke({"request": "refund", "handled_by": ""})
    assert out["handled_by"] == "triage>billing"
    spans = exporter.get_finished_spans()
    assert _failed(spans) == []
    assert one(spans, "invoke_agent team").end_time is not None
    for handed_off in (one(spans, "triage"), one(spans, "invoke_agent team")):  # the runs the handoff left
        assert _events(handed_off, "evaltrace.langgraph.parent_command") == [{"evaltrace.langgraph.goto": ("billing",)}]
        assert "output.value" not in (handed_off.attributes or {})
    assert one(spans, "billing").end_time is not None
    assert trace_from_spans(spans).error is None


def test_an_interrupts_value_is_recorded_only_with_content_capture(exporter: InMemorySpanExporter) -> None:
    """The question ``interrupt()`` asks is content: without capture the event says a pause happened, and its id."""
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent
    from langgraph.types import interrupt

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return str(interrupt(f"What is the weather in {location}?"))

    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer(load_cassette(AGENT)) as server, langchain_instrumented():
            model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
            agent = create_react_agent(model, [get_weather], checkpointer=InMemorySaver())
            paused = agent.invoke(
                {"messages": [{"role": "user", "content": "Weather in London?"}]},
                config={"configurable": {"thread_id": "hitl-2"}},
            )
    finally:
        settings.replace(previous)
    paused_tool = one(exporter.get_finished_spans(), "execute_tool get_weather")
    assert _events(paused_tool, "evaltrace.langgraph.interrupt") == [
        {"evaltrace.langgraph.interrupt.id": paused["__interrupt__"][0].id}
    ]


class _Steps(TypedDict):
    steps: list[str]


def test_a_drain_at_shutdown_fails_no_span_and_the_run_resumes(exporter: InMemorySpanExporter) -> None:
    """``RunControl.request_drain()`` (a server's SIGTERM) stops the run at the next step boundary with its checkpoint
    saved: LangGraph raises ``GraphDrained`` through the subgraph, its node and the graph, and resumes later."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.errors import GraphDrained
    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime

    def plan(state: _Steps, runtime: Runtime) -> dict[str, list[str]]:
        assert runtime.control is not None
        runtime.control.request_drain("deploy")  # as a server does on SIGTERM
        return {"steps": [*state["steps"], "plan"]}

    def act(state: _Steps) -> dict[str, list[str]]:
        return {"steps": [*state["steps"], "act"]}

    team = StateGraph(_Steps)
    team.add_node("plan", plan)
    team.add_node("act", act)
    team.add_edge(START, "plan")
    team.add_edge("plan", "act")
    graph = StateGraph(_Steps)
    graph.add_node("team", team.compile(name="team"))
    graph.add_edge(START, "team")
    app = graph.compile(name="worker", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "drain-1"}}
    with langchain_instrumented():
        with pytest.raises(GraphDrained):
            app.invoke({"steps": []}, config=config)
        drained = exporter.get_finished_spans()
        out = app.invoke(None, config=config)
    assert out["steps"] == ["plan", "act"]

    assert _failed(drained) == []
    assert by_name(drained, "act") == []  # stopped before the next step
    for span in (one(drained, "invoke_agent worker"), one(drained, "invoke_agent team")):
        assert span.status.status_code is StatusCode.UNSET
        assert _events(span, "evaltrace.langgraph.drain") == [{"evaltrace.langgraph.drain.reason": "deploy"}]
        assert "output.value" not in (span.attributes or {})
    assert trace_from_spans(drained).error is None  # resumable, as an interrupted run is
    assert _failed(exporter.get_finished_spans()) == []
