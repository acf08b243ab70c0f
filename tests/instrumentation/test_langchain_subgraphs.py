"""A compiled LangGraph graph used as a node of another graph is an agent span, with its nodes nested under it.

The multi-agent case: a ReAct agent (``create_react_agent``, real ``ChatOpenAI``) is the node of a parent graph.
Its two streamed model calls replay OpenInference's recorded ``test_agent_with_raw_dict_messages`` (gpt-4o-mini:
a ``get_weather`` tool call, then the answer) through the replay server on 127.0.0.1. The other tests run local
graphs without a model, to pin what is *not* a subgraph: a chain a node calls, and a functional-API task.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_replay import AGENT, chat_openai, kind, langchain_instrumented, one, parent_of, replay
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.evaluators import ToolCalled
from evaltrace.mapping import trace_from_spans

pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

WEATHER = "The weather in London is sunny."
QUESTION = {"messages": [{"role": "user", "content": "What's the weather in London?"}]}


class Text(TypedDict):
    text: str


def _supervised_weather_agent(server: Any) -> Any:
    """A parent graph: ``intake`` (a function) then ``weather`` (a compiled ReAct agent as the node)."""
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return f"The weather in {location} is sunny."

    model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
    agent = create_react_agent(model, [get_weather], prompt="You are a helpful assistant.", name="weather")

    def intake(state: MessagesState) -> dict[str, Any]:
        return {}

    parent = StateGraph(MessagesState)
    parent.add_node("intake", intake)
    parent.add_node("weather", agent)
    parent.add_edge(START, "intake")
    parent.add_edge("intake", "weather")
    parent.add_edge("weather", END)
    app = parent.compile(name="supervisor")
    app.model = model  # for the async test, which closes the model's async client
    return app


def _check_subgraph_agent(spans: tuple[ReadableSpan, ...]) -> None:
    root = one(spans, "invoke_agent supervisor")
    assert root.parent is None and kind(root) == "agent"
    node = one(spans, "weather")  # the parent graph's node that runs the subgraph
    assert parent_of(spans, node) is root and kind(node) == "task"
    sub = one(spans, "invoke_agent weather")
    assert parent_of(spans, sub) is node
    attrs = dict(sub.attributes or {})
    assert attrs["evaltrace.span.kind"] == "agent"
    assert attrs["gen_ai.operation.name"] == "invoke_agent" and attrs["gen_ai.agent.name"] == "weather"
    assert attrs["openinference.span.kind"] == "AGENT" and attrs["langfuse.observation.type"] == "agent"
    assert attrs["gen_ai.conversation.id"] == "thread-9"
    # The subgraph's own nodes nest under its agent span, the tool and the model calls under them.
    nodes = [s for s in spans if s.name in ("agent", "tools")]
    assert [s.name for s in nodes] == ["agent", "tools", "agent"]
    assert all(parent_of(spans, s) is sub and kind(s) == "task" for s in nodes)
    tool = one(spans, "execute_tool get_weather")
    assert parent_of(spans, tool) is nodes[1]
    chats = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert len(chats) == 2 and all(parent_of(spans, c) is not None for c in chats)
    for chat, agent_node in zip(chats, (nodes[0], nodes[2]), strict=True):
        ancestors = []
        parent = parent_of(spans, chat)
        while parent is not None:
            ancestors.append(parent)
            parent = parent_of(spans, parent)
        assert agent_node in ancestors and sub in ancestors
    assert sub.start_time >= node.start_time and sub.end_time <= node.end_time
    # Exactly two agent spans: the parent graph and the subgraph; the intake node stays a task.
    assert sorted(s.name for s in spans if kind(s) == "agent") == ["invoke_agent supervisor", "invoke_agent weather"]
    assert kind(one(spans, "intake")) == "task"
    trace = trace_from_spans(spans, root=root)
    assert ToolCalled("get_weather").evaluate(trace).passed is True
    assert trace.output.final_answer == WEATHER


def test_a_compiled_graph_as_a_node_is_an_agent_span_with_its_nodes_under_it(exporter: InMemorySpanExporter) -> None:
    with replay(AGENT) as server, langchain_instrumented():
        state = _supervised_weather_agent(server).invoke(QUESTION, config={"configurable": {"thread_id": "thread-9"}})
    assert state["messages"][-1].content == WEATHER
    assert [r.json()["messages"][-1]["role"] for r in server.received] == ["user", "tool"]
    _check_subgraph_agent(exporter.get_finished_spans())


async def test_a_compiled_graph_as_a_node_is_an_agent_span_async(exporter: InMemorySpanExporter) -> None:
    with replay(AGENT) as server, langchain_instrumented(restored=False):
        app = _supervised_weather_agent(server)
        state = await app.ainvoke(QUESTION, config={"configurable": {"thread_id": "thread-9"}})
        await app.model.root_async_client.close()
    assert state["messages"][-1].content == WEATHER
    _check_subgraph_agent(exporter.get_finished_spans())


def _inner_graph() -> Any:
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph import END, START, StateGraph

    def first(state: Text) -> Text:
        # A chain a node calls shares the node's checkpoint namespace: it stays a task span.
        return {"text": RunnableLambda(lambda t: t + "a", name="append_a").invoke(state["text"])}

    def second(state: Text) -> Text:
        return {"text": state["text"] + "b"}

    graph = StateGraph(Text)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile(name="research")


def test_a_subgraph_invoked_inside_a_node_is_an_agent_and_a_chain_a_node_calls_is_not(
    exporter: InMemorySpanExporter,
) -> None:
    """A node function calling ``subgraph.invoke`` (no state shared): the subgraph is an agent span too; the
    ``RunnableLambda`` the node calls (whose metadata looks like a subgraph's at its start) stays a task."""
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph import END, START, StateGraph

    research = _inner_graph()

    def delegate(state: Text) -> Text:
        shout = RunnableLambda(lambda t: t.upper(), name="shout").invoke(state["text"])
        return {"text": research.invoke({"text": shout})["text"]}

    outer = StateGraph(Text)
    outer.add_node("delegate", delegate)
    outer.add_edge(START, "delegate")
    outer.add_edge("delegate", END)
    with langchain_instrumented():
        state = outer.compile().invoke({"text": "x"})
    assert state["text"] == "Xab"
    spans = exporter.get_finished_spans()
    sub = one(spans, "invoke_agent research")
    assert parent_of(spans, sub) is one(spans, "delegate")
    assert [parent_of(spans, s) is sub for s in (one(spans, "first"), one(spans, "second"))] == [True, True]
    for name in ("shout", "append_a", "delegate", "first", "second"):
        assert kind(one(spans, name)) == "task", name
    assert parent_of(spans, one(spans, "append_a")) is one(spans, "first")
    assert sorted(s.name for s in spans if kind(s) == "agent") == ["invoke_agent LangGraph", "invoke_agent research"]


def test_nested_subgraphs_are_each_an_agent_span(exporter: InMemorySpanExporter) -> None:
    from langgraph.graph import END, START, StateGraph

    middle = StateGraph(Text)
    middle.add_node("research", _inner_graph())
    middle.add_edge(START, "research")
    middle.add_edge("research", END)
    top = StateGraph(Text)
    top.add_node("team", middle.compile(name="team"))
    top.add_edge(START, "team")
    top.add_edge("team", END)
    with langchain_instrumented():
        assert top.compile(name="top").invoke({"text": ""})["text"] == "ab"
    spans = exporter.get_finished_spans()
    chain = []
    span: ReadableSpan | None = one(spans, "first")
    while span is not None:
        chain.append((span.name, kind(span)))
        span = parent_of(spans, span)
    assert chain == [
        ("first", "task"),
        ("invoke_agent research", "agent"),
        ("research", "task"),
        ("invoke_agent team", "agent"),
        ("team", "task"),
        ("invoke_agent top", "agent"),
    ]


def test_a_functional_api_task_does_not_make_its_entrypoint_node_an_agent(exporter: InMemorySpanExporter) -> None:
    """``@task`` runs in a namespace below its ``@entrypoint`` node's, like a subgraph's node: the node, whose
    metadata never looked like a graph's, stays a task span and the entrypoint stays the one agent."""
    from langgraph.func import entrypoint, task

    @task
    def upper(text: str) -> str:
        return text.upper()

    @entrypoint()
    def flow(text: str) -> str:
        return str(upper(text).result()) + "!"

    with langchain_instrumented():
        assert flow.invoke("hi") == "HI!"
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans if kind(s) == "agent"] == ["invoke_agent LangGraph"]
    assert kind(one(spans, "flow")) == "task" and kind(one(spans, "upper")) == "task"
