"""A LangGraph ReAct agent and a RAG chain, replayed through the real framework and ``ChatOpenAI``.

The agent recording (OpenInference's ``test_agent_with_raw_dict_messages``) is two streamed calls of gpt-4o-mini:
a ``get_weather`` tool call, then the answer. The RAG chain's retriever is local code (the documents below); its
one model call replays otel-contrib's "capital of France" answer (the request we send carries the retrieved
context, which the recorded request did not: the replay serves the recorded answer whatever the body).
Judge evaluators run against ``tests/judge_server.py`` on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_replay import (
    AGENT,
    CHAT,
    RESPONSES,
    STREAM,
    chat_openai,
    kind,
    langchain_instrumented,
    one,
    parent_of,
    replay,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from evaltrace import pricing
from evaltrace.evaluators import ContextRelevancy, Faithfulness, Judge, ToolCalled
from evaltrace.instrumentation.openai import OpenAIInstrumentor
from evaltrace.mapping import trace_from_spans
from judge_server import serve_judge

# The real OTel SDK (in-memory exporter) and content capture, from tests/conftest.py and this folder's conftest.
pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

CALL_ID = "call_7p1vRWhZc9Pm0j6JVvrHK4ZE"
WEATHER = "The weather in London is sunny."
DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "France is a country in Western Europe.",
    "Berlin is the capital of Germany.",
]


def _agent(server: Any, weather: Any = None, handle_tool_errors: bool = False) -> Any:
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode, create_react_agent

    def sunny(location: str) -> str:
        return f"The weather in {location} is sunny."

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return (weather or sunny)(location)

    model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
    tools = ToolNode([get_weather], handle_tool_errors=handle_tool_errors)
    agent = create_react_agent(model, tools, prompt="You are a helpful assistant.")
    agent.model = model  # for the async test, which closes the model's async client
    return agent


QUESTION = {"messages": [{"role": "user", "content": "What's the weather in London?"}]}


def _run_agent(server: Any) -> Any:
    return _agent(server).invoke(QUESTION, config={"configurable": {"thread_id": "thread-7"}})


def _ancestors(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> list[str]:
    names = []
    parent = parent_of(spans, span)
    while parent is not None:
        names.append(parent.name)
        parent = parent_of(spans, parent)
    return names


def _check_agent_spans(spans: tuple[ReadableSpan, ...]) -> None:
    """The graph is the agent span; its nodes, the tool and the model calls nest under it as LangGraph ran them."""
    root = one(spans, "invoke_agent LangGraph")
    assert root.parent is None and kind(root) == "agent"
    assert (root.attributes or {})["gen_ai.agent.name"] == "LangGraph"
    assert (root.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
    nodes = [s for s in spans if s.name in ("agent", "tools")]
    assert [s.name for s in nodes] == ["agent", "tools", "agent"]
    assert all(parent_of(spans, s) is root and kind(s) == "task" for s in nodes)
    tool = one(spans, "execute_tool get_weather")
    assert parent_of(spans, tool) is nodes[1] and kind(tool) == "tool"
    attrs = dict(tool.attributes or {})
    assert attrs["gen_ai.tool.name"] == "get_weather" and attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(str(attrs["gen_ai.tool.call.arguments"])) == {"location": "London"}
    assert json.loads(str(attrs["gen_ai.tool.call.result"])) == WEATHER
    assert attrs["gen_ai.tool.description"] == "Get the weather for a location."
    chats = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert len(chats) == 2
    for chat, node in zip(chats, (nodes[0], nodes[2]), strict=True):
        assert kind(chat) == "llm" and node.name in _ancestors(spans, chat)
        assert _ancestors(spans, chat)[-1] == root.name
        assert chat.start_time >= node.start_time and chat.end_time <= node.end_time
    first, second = (dict(c.attributes or {}) for c in chats)
    assert list(first["gen_ai.response.finish_reasons"]) == ["tool_calls"]
    assert list(second["gen_ai.response.finish_reasons"]) == ["stop"]
    assert json.loads(str(first["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "tool_call", "id": CALL_ID, "name": "get_weather", "arguments": {"location": "London"}}
    ]
    assert first["gen_ai.response.time_to_first_chunk"] > 0


def _check_agent_trace(spans: tuple[ReadableSpan, ...]) -> None:
    """What evaluators see: the tool call with its result, and the final answer; ToolCalled judges it."""
    trace = trace_from_spans(spans)
    assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [(CALL_ID, "get_weather", {"location": "London"})]
    assert [r.content for r in trace.tool_results] == [WEATHER]
    assert trace.output.final_answer == WEATHER
    assert trace.input == {"messages": [{"role": "user", "content": "What's the weather in London?"}]}
    assert ToolCalled("get_weather").evaluate(trace).passed is True
    missed = ToolCalled("get_time").evaluate(trace)
    assert missed.passed is False and "get_time" in (missed.reason or "")


def test_react_agent_records_graph_nodes_tool_and_streamed_model_calls(exporter: InMemorySpanExporter) -> None:
    with replay(AGENT) as server, langchain_instrumented():
        state = _run_agent(server)
    assert state["messages"][-1].content == WEATHER
    assert [r.json()["messages"][-1]["role"] for r in server.received] == ["user", "tool"]
    root = one(exporter.get_finished_spans(), "invoke_agent LangGraph")
    assert (root.attributes or {})["gen_ai.conversation.id"] == "thread-7"  # the LangGraph thread
    spans = exporter.get_finished_spans()
    _check_agent_spans(spans)
    _check_agent_trace(spans)
    first_call = next(s for s in spans if s.name == "chat gpt-4o-mini")
    definitions = json.loads(str((first_call.attributes or {})["gen_ai.tool.definitions"]))
    assert [d["name"] for d in definitions] == ["get_weather"]


async def test_react_agent_async_nests_the_same_way(exporter: InMemorySpanExporter) -> None:
    """``ainvoke``: LangGraph runs the nodes as tasks; the spans and the Trace are those of the sync run."""
    with replay(AGENT) as server, langchain_instrumented(restored=False):
        agent = _agent(server)
        state = await agent.ainvoke(QUESTION)
        await agent.model.root_async_client.close()  # the async client's connection, not left to the collector
    assert state["messages"][-1].content == WEATHER
    spans = exporter.get_finished_spans()
    _check_agent_spans(spans)
    _check_agent_trace(spans)


def test_tool_error_handled_by_the_tool_node_is_recorded_on_the_tool_span(exporter: InMemorySpanExporter) -> None:
    """The tool raises; the ToolNode turns the error into a tool message and the agent answers anyway."""

    def broken(location: str) -> str:
        raise ConnectionError(f"weather service down for {location}")

    with replay(AGENT) as server, langchain_instrumented():
        _agent(server, broken, handle_tool_errors=True).invoke(QUESTION)
    spans = exporter.get_finished_spans()
    tool = one(spans, "execute_tool get_weather")
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "ConnectionError"
    assert [e.attributes["exception.message"] for e in tool.events if e.name == "exception"] == [
        "weather service down for London"
    ]
    assert one(spans, "invoke_agent LangGraph").status.status_code is StatusCode.UNSET  # handled inside the graph
    sent_back = server.received[1].json()["messages"][-1]
    assert sent_back["role"] == "tool" and "weather service down" in sent_back["content"]
    trace = trace_from_spans(spans)
    assert [c.name for c in trace.tool_calls] == ["get_weather"]
    assert "weather service down" in str(trace.tool_results[0].content)


def test_tool_error_raised_through_the_graph_passes_unchanged_and_ends_every_span(
    exporter: InMemorySpanExporter,
) -> None:
    error = ConnectionError("weather service down")

    def broken(location: str) -> str:
        raise error

    with replay(AGENT) as server, langchain_instrumented():
        with pytest.raises(ConnectionError) as raised:
            _agent(server, broken).invoke(QUESTION)
    assert raised.value is error
    spans = exporter.get_finished_spans()
    for name in ("execute_tool get_weather", "tools", "invoke_agent LangGraph"):
        span = one(spans, name)
        assert (
            span.status.status_code is StatusCode.ERROR and (span.attributes or {})["error.type"] == "ConnectionError"
        )
    assert len(server.received) == 1
    assert trace_from_spans(spans).error is not None


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_react_agent_with_openai_instrumented_has_one_span_per_model_call(
    exporter: InMemorySpanExporter, instrumented: OpenAIInstrumentor, is_async: bool
) -> None:
    """instrument_openai() on: the SDK call's span is the LLM span, nested under the graph node that made it."""
    with replay(AGENT) as server, langchain_instrumented(restored=not is_async):
        agent = _agent(server)
        if is_async:
            await agent.ainvoke(QUESTION)
            await agent.model.root_async_client.close()
        else:
            agent.invoke(QUESTION)
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if kind(s) == "llm"]
    assert len(llm_spans) == 2 and all("openai.api.type" in (s.attributes or {}) for s in llm_spans)
    _check_agent_spans(spans)
    _check_agent_trace(spans)


def test_simple_chain_with_openai_instrumented_keeps_the_sdk_span_under_the_chain(
    exporter: InMemorySpanExporter, instrumented: OpenAIInstrumentor
) -> None:
    from langchain_core.output_parsers import StrOutputParser

    with replay(CHAT) as server, langchain_instrumented():
        (chat_openai(server, model="gpt-3.5-turbo") | StrOutputParser()).invoke("What is the capital of France?")
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if kind(s) == "llm"]
    assert [s.name for s in llm_spans] == ["chat gpt-3.5-turbo"]
    assert (llm_spans[0].attributes or {})["openai.api.type"] == "chat_completions"
    assert parent_of(spans, llm_spans[0]) is one(spans, "RunnableSequence")
    assert trace_from_spans(spans).output.final_answer == "The capital of France is Paris."


def _rag_chain(server: Any) -> Any:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class KeywordRetriever(BaseRetriever):
        """The two documents sharing most words (longer than 3 letters) with the query (local code)."""

        documents: list[Document]

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            def words(text: str) -> set[str]:
                return {w for w in text.lower().strip("?.").split() if len(w) > 3}

            ranked = sorted(self.documents, key=lambda d: -len(words(query) & words(d.page_content)))
            return ranked[:2]

    retriever = KeywordRetriever(
        documents=[Document(page_content=text, id=f"doc-{i}") for i, text in enumerate(DOCUMENTS)]
    )
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a helpful assistant! Answer from this context:\n{context}"), ("user", "{question}")]
    )

    def join(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    model = chat_openai(server, model="gpt-3.5-turbo")
    return {"context": retriever | join, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


def _claims(body: dict[str, Any]) -> dict[str, Any]:
    """The judge finds the answer's one claim supported only if the retrieved Paris document reached it."""
    prompt = "\n".join(str(m["content"]) for m in body["messages"])
    supported = "[1] Paris is the capital and largest city of France." in prompt
    return {"claims": [{"claim": "The capital of France is Paris.", "supported": supported}]}


async def test_rag_chain_retrieved_documents_are_the_context_rag_evaluators_judge(
    exporter: InMemorySpanExporter,
) -> None:
    with replay(CHAT) as server, langchain_instrumented():
        answer = _rag_chain(server).invoke("What is the capital of France?")
    assert answer == "The capital of France is Paris."
    sent = server.received[0].json()["messages"][0]["content"]
    assert DOCUMENTS[0] in sent and DOCUMENTS[2] not in sent
    spans = exporter.get_finished_spans()
    retrieval = one(spans, "retrieval KeywordRetriever")
    attrs = dict(retrieval.attributes or {})
    assert kind(retrieval) == "retriever" and attrs["gen_ai.operation.name"] == "retrieval"
    assert attrs["gen_ai.retrieval.query.text"] == "What is the capital of France?"
    documents = json.loads(str(attrs["gen_ai.retrieval.documents"]))
    assert [(d["id"], d["content"]) for d in documents] == [("doc-0", DOCUMENTS[0]), ("doc-1", DOCUMENTS[1])]
    assert _ancestors(spans, retrieval)[-1] == "RunnableSequence"

    trace = trace_from_spans(spans)
    assert trace.extra["contexts"] == DOCUMENTS[:2]
    assert trace.output.final_answer == "The capital of France is Paris."
    with serve_judge(_claims) as server:
        judge = Judge("judge-model", base_url=server.url, api_key="test", max_retries=0)
        try:
            faithful = await Faithfulness(judge).evaluate(trace)
        finally:
            await judge.aclose()
    assert faithful.status == "completed" and faithful.passed is True and faithful.score == 1.0
    verdicts = {"verdicts": [{"index": 1, "relevant": True}, {"index": 2, "relevant": False}]}
    with serve_judge(lambda body: verdicts) as server:
        judge = Judge("judge-model", base_url=server.url, api_key="test", max_retries=0)
        try:
            relevancy = await ContextRelevancy(judge).evaluate(trace)
        finally:
            await judge.aclose()
        prompt = "\n".join(str(m["content"]) for m in server.requests[0]["body"]["messages"])
    assert relevancy.score == 0.5 and "1/2" in (relevancy.reason or "")
    assert f"[2] {DOCUMENTS[1]}" in prompt and "What is the capital of France?" in prompt


def test_responses_api_agent_records_reasoning_tool_call_and_answer(exporter: InMemorySpanExporter) -> None:
    """Logfire's recording: gpt-5 through the Responses API (``use_responses_api=True``) reasons, calls ``add``,
    then answers; reasoning summaries are reasoning parts and the Trace's thinking, never the answer."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    question = "what's 123 + 456? think carefully and use the tool"
    with replay(RESPONSES) as server, langchain_instrumented():
        model = chat_openai(
            server, model="gpt-5", use_responses_api=True, reasoning={"effort": "medium", "summary": "concise"}
        )
        create_react_agent(model, [add]).invoke({"messages": [{"role": "user", "content": question}]})
    assert [r.path for r in server.received] == ["/v1/responses"] * 2
    spans = exporter.get_finished_spans()
    first, second = (dict(s.attributes or {}) for s in spans if s.name == "chat gpt-5")
    assert first["gen_ai.request.reasoning.level"] == "medium"
    assert first["gen_ai.response.id"] == "resp_033ba4b7d827c976006978a46a8e2c81a288eed3c07ab06db8"
    assert first["gen_ai.response.model"] == "gpt-5-2025-08-07"
    assert (first["gen_ai.usage.output_tokens"], first["gen_ai.usage.reasoning.output_tokens"]) == (424, 384)
    cost = pricing.cost_of("gpt-5-2025-08-07", input_tokens=57, output_tokens=424, reasoning_tokens=384)
    assert cost is not None and first["evaltrace.cost_usd"] == pytest.approx(cost.total_usd)
    assert cost.reasoning_usd > 0 and first["evaltrace.cost_thinking_usd"] == pytest.approx(cost.reasoning_usd)
    assert json.loads(str(first["gen_ai.output.messages"]))[0]["parts"] == [
        {
            "type": "reasoning",
            "content": "**Using tool to add numbers**\n\n**Executing addition and finalizing result**",
        },
        {"type": "tool_call", "id": "call_XlgatTV1bBqLX1fOZTbu7cxO", "name": "add", "arguments": {"a": 123, "b": 456}},
    ]
    assert [d["name"] for d in json.loads(str(first["gen_ai.tool.definitions"]))] == ["add"]
    assert json.loads(str(second["gen_ai.output.messages"]))[0]["parts"] == [{"type": "text", "content": "579"}]
    tool_span = one(spans, "execute_tool add")
    assert (tool_span.attributes or {})["gen_ai.tool.call.id"] == "call_XlgatTV1bBqLX1fOZTbu7cxO"
    trace = trace_from_spans(spans)
    assert trace.output.final_answer == "579"
    assert trace.output.thinking is not None and "Using tool to add numbers" in trace.output.thinking
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("add", {"a": 123, "b": 456})]
    assert (trace.metrics.token_input, trace.metrics.token_output) == (57 + 494, 424 + 5)
    assert ToolCalled("add", arguments={"a": 123}).evaluate(trace).passed is True


def test_openai_client_model_under_another_provider_name_keeps_one_span(
    exporter: InMemorySpanExporter, instrumented: OpenAIInstrumentor
) -> None:
    """A model that talks through the openai client but names another provider (ChatDeepSeek, ChatXAI do, by
    ``ls_provider``): the handler records the call, and the instrumented openai client, asked to stand aside
    while the call runs, makes no second span. After it, the client is traced again."""
    from langchain_openai import ChatOpenAI

    class ChatDeepSeekLike(ChatOpenAI):
        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
            return {**super()._get_ls_params(stop=stop, **kwargs), "ls_provider": "deepseek"}

    with replay(CHAT) as server, langchain_instrumented():
        model = ChatDeepSeekLike(base_url=f"{server.url}/v1", api_key="x", max_retries=0, model="gpt-3.5-turbo")
        model.invoke("What is the capital of France?")
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if kind(s) == "llm"]
    assert [s.name for s in llm_spans] == ["chat gpt-3.5-turbo"]
    attrs = dict(llm_spans[0].attributes or {})
    assert attrs["gen_ai.provider.name"] == "deepseek" and "openai.api.type" not in attrs
    with replay(CHAT) as server:
        ChatOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, model="gpt-3.5-turbo").invoke("hi")
    assert len([s for s in exporter.get_finished_spans() if kind(s) == "llm"]) == 2  # the client's own span


def test_the_applications_own_model_call_inside_a_stream_loop_is_traced(
    exporter: InMemorySpanExporter, instrumented: OpenAIInstrumentor
) -> None:
    """``for chunk in model.stream(...)`` with a model the handler records (the openai client stands aside for
    its request): a model call the application makes in the loop body, between chunks, still gets its span."""
    import openai
    from langchain_openai import ChatOpenAI

    class ChatDeepSeekLike(ChatOpenAI):
        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
            return {**super()._get_ls_params(stop=stop, **kwargs), "ls_provider": "deepseek"}

    with replay(STREAM) as stream_server, replay(CHAT) as app_server, langchain_instrumented(restored=False):
        model = ChatDeepSeekLike(base_url=f"{stream_server.url}/v1", api_key="x", max_retries=0, model="gpt-3.5-turbo")
        client = openai.OpenAI(base_url=f"{app_server.url}/v1", api_key="x", max_retries=0)
        chunks = []
        for chunk in model.stream("Tell me a funny joke, a one-liner."):
            chunks.append(str(chunk.content))
            if len(chunks) == 2:  # the application's own call, e.g. a moderation check of the partial text
                client.chat.completions.create(model="gpt-3.5-turbo", messages=[{"role": "user", "content": "hi"}])
        client.close()
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if kind(s) == "llm"]
    streamed = [s for s in llm_spans if (s.attributes or {}).get("gen_ai.provider.name") == "deepseek"]
    own = [s for s in llm_spans if "openai.api.type" in (s.attributes or {})]
    assert len(streamed) == 1 and "".join(chunks).startswith("Why")  # the stream's request: one span, not two
    assert len(own) == 1 and len(llm_spans) == 2  # the application's call: its own span
    assert len(app_server.received) == 1


def test_a_groq_model_with_instrument_groq_has_the_sdks_span_as_its_one_span(exporter: InMemorySpanExporter) -> None:
    """langchain-groq is not installed here: a chat model that calls the real ``groq`` client and names its provider
    ``groq`` as langchain-groq's ``_get_ls_params`` does stands for it (the recording: pydantic-ai's Groq test).
    With ``instrument_groq()`` on, the SDK's span is the model call's one span, under the chain."""
    import groq
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult

    import evaltrace
    from cassettes import FIXTURES, ReplayServer, load_cassette

    recorded = load_cassette(FIXTURES / "groq-cassettes" / "pydantic-ai" / "test_extra_headers.yaml")
    body = dict(recorded[0].request_json())

    class ChatGroqLike(BaseChatModel):
        url: str

        @property
        def _llm_type(self) -> str:
            return "groq-chat"

        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
            return {"ls_provider": "groq", "ls_model_name": body["model"], "ls_model_type": "chat"}

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            with groq.Groq(api_key="x", base_url=self.url, max_retries=0) as client:
                answer = client.chat.completions.create(**body)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(answer.choices[0].message.content or ""))])

    instrumentor = evaltrace.instrument_groq()
    try:
        with ReplayServer(recorded) as server, langchain_instrumented():
            (ChatGroqLike(url=server.url) | StrOutputParser()).invoke("hello")
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if kind(s) == "llm"]
    assert len(llm_spans) == 1, [s.name for s in llm_spans]
    attrs = dict(llm_spans[0].attributes or {})
    assert attrs["gen_ai.provider.name"] == "groq" and "gen_ai.response.id" in attrs
    assert "langfuse.observation.type" not in attrs  # the SDK's span, not the handler's
    assert parent_of(spans, llm_spans[0]) is one(spans, "RunnableSequence")


def test_chain_inside_a_decorated_agent_nests_under_it_and_its_evaluators_see_the_context(
    exporter: InMemorySpanExporter,
) -> None:
    import evaltrace

    with replay(CHAT) as server, langchain_instrumented():
        chain = _rag_chain(server)

        @evaltrace.agent(name="support")
        def answer(question: str) -> str:
            return str(chain.invoke(question))

        assert answer("What is the capital of France?") == "The capital of France is Paris."
    spans = exporter.get_finished_spans()
    root = one(spans, "invoke_agent support")
    under_root = [s.name for s in spans if parent_of(spans, s) is root]
    assert under_root == ["RunnableSequence"]  # the chain (its retriever | join sequence nests inside it)
    trace = trace_from_spans(spans, root=root)
    assert trace.input == {"question": "What is the capital of France?"}
    assert trace.output.final_answer == "The capital of France is Paris."
    assert trace.extra["contexts"] == DOCUMENTS[:2]


async def test_async_graph_runs_leave_no_ended_runs_behind(exporter: InMemorySpanExporter) -> None:
    """Many ``ainvoke`` of a LangGraph graph (its runs end in copies of their contexts): the handler keeps only
    the last run's left-behind contexts, not every ended run and its span until thousands pile up."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        text: str

    async def first(state: State) -> State:
        return {"text": state["text"] + "a"}

    async def second(state: State) -> State:
        return {"text": state["text"] + "b"}

    graph = StateGraph(State)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    app = graph.compile()
    with langchain_instrumented(restored=False) as handler:
        for _ in range(300):
            state = await app.ainvoke({"text": "p" * 10_000})
            exporter.clear()
        kept = len(handler._contexts._attached)
        spans_kept = [r.span for r in handler._contexts.runs() if r.span is not None]
    assert state["text"].endswith("ab")
    assert kept <= 3, kept  # the graph's and its nodes' contexts of the last run only (900 were kept before)
    assert len(spans_kept) <= 3


def test_google_genai_models_defer_to_the_sdk_only_from_the_integration_that_calls_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """langchain-google-genai before 4 calls another Google client: its model call keeps the handler's span,
    whatever ``instrument_google_genai()`` says (else it would have no span at all)."""
    import importlib.metadata

    import evaltrace
    from evaltrace.instrumentation.langchain import _handler

    instrumentor = evaltrace.instrument_google_genai()
    try:
        for installed, defers in (("3.2.0", False), ("4.0.1", True)):
            _handler._integration_calls_the_sdk.cache_clear()
            monkeypatch.setattr(importlib.metadata, "version", lambda name, v=installed: v)
            assert _handler.provider_traced("google_genai") is defers
        assert _handler.provider_traced("mistralai") is False  # langchain-mistralai calls the API with httpx
    finally:
        instrumentor.uninstrument()
        _handler._integration_calls_the_sdk.cache_clear()
