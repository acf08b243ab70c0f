"""What each LangChain / LangGraph GenAI span records for agent evaluation: its own step, its thread, its format.

Replayed through the real LangGraph and ``ChatOpenAI``: the ReAct agent recording (OpenInference's
``test_agent_with_raw_dict_messages``: a ``get_weather`` call, then the answer) served twice for a two-turn
thread, and Chat Completions bodies built with the openai SDK's own types for structured output, on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId
from langchain_replay import AGENT, STREAM, chat_openai, langchain_instrumented, one, replay
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace.mapping import trace_from_spans

pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

CALL_ID = "call_7p1vRWhZc9Pm0j6JVvrHK4ZE"
WEATHER = "The weather in London is sunny."
THREAD = "thread-42"


class City(BaseModel):
    city: str


def _completion(message: dict[str, Any], finish_reason: str) -> Recorded:
    """One Chat Completions response, validated by the openai SDK's ``ChatCompletion`` type."""
    from openai.types.chat import ChatCompletion

    body = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-structured-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
    ).model_dump_json()
    return Recorded(
        "POST", "/v1/chat/completions", b"", 200, "OK", [("content-type", "application/json")], body.encode()
    )


_ANSWER = _completion({"content": '{"city":"Paris"}'}, "stop")
_TOOL_ANSWER = _completion(
    {
        "content": None,
        "tool_calls": [
            {"id": "call_city", "type": "function", "function": {"name": "City", "arguments": '{"city":"Paris"}'}}
        ],
    },
    "tool_calls",
)


@pytest.mark.parametrize(
    ("method", "response", "sent", "output_type"),
    [
        ("json_schema", _ANSWER, "json_schema", "json"),
        ("json_mode", _ANSWER, "json_object", "json"),
        ("function_calling", _TOOL_ANSWER, None, None),
    ],
)
def test_structured_output_records_the_output_format_the_request_asks_for(
    exporter: InMemorySpanExporter, method: str, response: Recorded, sent: str | None, output_type: str | None
) -> None:
    """A response format asked for is ``gen_ai.output.type``; a forced tool call asks for none (its tool is defined)."""
    with ReplayServer([response]) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini")
        result = model.with_structured_output(City, method=method).invoke("Which city is the capital of France?")
    assert result == City(city="Paris")
    request = server.received[0].json()
    assert (request.get("response_format") or {}).get("type") == sent
    attrs = dict(one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {})
    assert attrs.get("gen_ai.output.type") == output_type
    if method == "function_calling":
        assert [t["name"] for t in json.loads(str(attrs["gen_ai.tool.definitions"]))] == ["City"]


def test_a_plain_call_records_no_output_format(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_ANSWER]) as server, langchain_instrumented():
        chat_openai(server, model="gpt-4o-mini").invoke("Which city is the capital of France?")
    assert "response_format" not in server.received[0].json()
    assert "gen_ai.output.type" not in (one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {})


def _weather_agent(server: Any) -> Any:
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return f"The weather in {location} is sunny."

    model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
    return create_react_agent(model, [get_weather], prompt="You are a helpful assistant.", checkpointer=InMemorySaver())


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_each_turn_of_a_thread_records_its_own_steps_and_every_genai_span_names_the_thread(
    exporter: InMemorySpanExporter,
) -> None:
    """Two turns of one LangGraph thread: each model step and tool span holds that step's output, not the last turn's.

    The thread id is the conversation of every GenAI span (agent, model calls, tools), so a model step or a tool
    call judged on its own is still grouped with its conversation.
    """
    config = {"configurable": {"thread_id": THREAD}}
    with ReplayServer(load_cassette(AGENT) * 2) as server, langchain_instrumented():
        agent = _weather_agent(server)
        agent.invoke({"messages": [{"role": "user", "content": "What's the weather in London?"}]}, config=config)
        agent.invoke({"messages": [{"role": "user", "content": "And now?"}]}, config=config)
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    genai = [s for s in spans if s.name.startswith(("invoke_agent", "chat", "execute_tool"))]
    assert [s.name for s in genai] == ["invoke_agent LangGraph", "chat gpt-4o-mini", "execute_tool get_weather"] + [
        "chat gpt-4o-mini"
    ] + ["invoke_agent LangGraph", "chat gpt-4o-mini", "execute_tool get_weather", "chat gpt-4o-mini"]
    assert {s.name: _attrs(s).get("gen_ai.conversation.id") for s in genai} == {s.name: THREAD for s in genai}

    chats = [s for s in genai if s.name.startswith("chat")]
    outputs = [json.loads(_attrs(c)["gen_ai.output.messages"])[0]["parts"] for c in chats]
    call = {"type": "tool_call", "id": CALL_ID, "name": "get_weather", "arguments": {"location": "London"}}
    answer = {"type": "text", "content": WEATHER}
    assert outputs == [[call], [answer], [call], [answer]]
    # The second turn's first step: the whole thread so far plus the new question in, its own tool call out.
    second_in = json.loads(_attrs(chats[2])["gen_ai.input.messages"])
    assert [m["role"] for m in second_in] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second_in[-1]["parts"] == [{"type": "text", "content": "And now?"}]
    tools = [s for s in genai if s.name.startswith("execute_tool")]
    assert [json.loads(_attrs(t)["gen_ai.tool.call.result"]) for t in tools] == [WEATHER, WEATHER]


def test_a_retriever_in_a_thread_names_its_conversation(exporter: InMemorySpanExporter) -> None:
    """A retriever run by a graph node: its retrieval span carries the thread, like the model calls do."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class Facts(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return [Document(page_content="Paris is the capital of France.", id="doc-1")]

    class State(TypedDict):
        question: str
        context: list[str]

    retriever = Facts()

    def retrieve(state: State) -> dict[str, Any]:
        return {"context": [d.page_content for d in retriever.invoke(state["question"])]}

    graph = StateGraph(State)
    graph.add_node("retrieve", retrieve)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", END)
    with langchain_instrumented():
        out = graph.compile().invoke(
            {"question": "capital of France?", "context": []}, config={"configurable": {"thread_id": THREAD}}
        )
    assert out["context"] == ["Paris is the capital of France."]
    span = one(exporter.get_finished_spans(), "retrieval Facts")
    assert _attrs(span)["gen_ai.conversation.id"] == THREAD
    assert json.loads(_attrs(span)["gen_ai.retrieval.documents"])[0]["id"] == "doc-1"


_RESPONSES = FIXTURES / "openai-cassettes" / "otel-contrib"


@pytest.mark.parametrize(
    ("recording", "streaming", "reasons"),
    [
        ("test_responses_create_basic[content_mode0].yaml", False, ["stop"]),
        ("test_responses_create_streaming[content_mode0].yaml", True, ["stop"]),
        ("test_responses_create_captures_tool_call_content[content_mode0].yaml", False, ["tool_call"]),
    ],
    ids=["whole", "streamed", "tool-call"],
)
def test_a_responses_api_answer_has_the_finish_reason_of_its_status(
    exporter: InMemorySpanExporter, recording: str, streaming: bool, reasons: list[str]
) -> None:
    """The Responses API reports a status, not a finish reason: completed is ``stop`` (``tool_call`` with a function
    call), as instrument_openai() records it, the same whether the answer was streamed or whole."""
    from langchain_core.tools import tool

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return "rainy"

    with replay(_RESPONSES / recording) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", use_responses_api=True, streaming=streaming)
        reply = model.bind_tools([get_weather]).invoke("What's the weather in Seattle right now?")
    assert server.received[0].path == "/v1/responses"
    assert server.received[0].json().get("stream", False) is streaming
    attrs = _attrs(one(exporter.get_finished_spans(), "chat gpt-4o-mini"))
    assert list(attrs["gen_ai.response.finish_reasons"]) == reasons
    assert str(attrs["gen_ai.response.id"]).startswith("resp_")
    output = json.loads(attrs["gen_ai.output.messages"])[0]
    assert output["finish_reason"] == reasons[0]
    assert [p["type"] for p in output["parts"]] == (["tool_call"] if reply.tool_calls else ["text"])


def test_a_tool_that_returns_an_error_message_is_a_failed_tool_span(exporter: InMemorySpanExporter) -> None:
    """A tool may report its failure as a ``ToolMessage(status="error")`` instead of raising: the span fails with
    ``error.type`` ``_OTHER`` (no exception type to name) and keeps the message the model is sent back."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Get the weather for a location."""
        return ToolMessage(f"no station in {location}", tool_call_id=tool_call_id, status="error")

    with replay(AGENT) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        create_react_agent(model, [get_weather]).invoke({"messages": [{"role": "user", "content": "Weather?"}]})
    assert server.received[1].json()["messages"][-1]["content"] == "no station in London"
    spans = exporter.get_finished_spans()
    tool_span = one(spans, "execute_tool get_weather")
    attrs = _attrs(tool_span)
    assert tool_span.status.status_code is StatusCode.ERROR
    assert attrs["error.type"] == "_OTHER"
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(attrs["gen_ai.tool.call.result"]) == "no station in London"
    assert one(spans, "invoke_agent LangGraph").status.status_code is StatusCode.UNSET  # the agent carried on
    # Evaluators see an error result (ToolErrorRate counts it), keeping the text the model was sent
    results = trace_from_spans(spans).tool_results
    assert [(r.tool_call_id, r.content) for r in results] == [(CALL_ID, {"error": "no station in London"})]


def test_a_tool_that_returns_a_command_records_the_tool_message_it_adds(exporter: InMemorySpanExporter) -> None:
    """A tool updating the graph's state returns ``Command(update={"messages": [ToolMessage]})``: the span's result
    is that message (what the model is sent for this call), not the Command around it."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Get the weather for a location."""
        reply = ToolMessage(f"The weather in {location} is sunny.", tool_call_id=tool_call_id)
        return Command(update={"messages": [reply]})

    with replay(AGENT) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        create_react_agent(model, [get_weather]).invoke({"messages": [{"role": "user", "content": "Weather?"}]})
    assert server.received[1].json()["messages"][-1]["content"] == WEATHER
    tool_span = one(exporter.get_finished_spans(), "execute_tool get_weather")
    attrs = _attrs(tool_span)
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(attrs["gen_ai.tool.call.result"]) == WEATHER
    assert tool_span.status.status_code is StatusCode.UNSET


def _command_tool(messages: Any) -> Any:
    """A ``get_weather`` tool returning ``Command(update={"messages": messages(call id)})``."""
    from langchain_core.tools import tool

    @tool
    def get_weather(location: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Get the weather for a location."""
        return Command(update={"messages": messages(tool_call_id)})

    return get_weather


@pytest.mark.parametrize("first", [True, False], ids=["this-call-first", "this-call-second"])
def test_the_call_id_picks_the_tool_message_of_this_call_from_a_command(
    exporter: InMemorySpanExporter, first: bool
) -> None:
    """A Command may add several calls' ``ToolMessage``s: the one with this run's call id is its result."""
    from langgraph.prebuilt import create_react_agent

    def messages(call_id: str) -> list[ToolMessage]:
        other = ToolMessage("another call's result", tool_call_id="call_other")
        this = ToolMessage(WEATHER, tool_call_id=call_id)
        return [this, other] if first else [other, this]

    with replay(AGENT) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        agent = create_react_agent(model, [_command_tool(messages)])
        agent.invoke({"messages": [{"role": "user", "content": "Weather?"}]})
    attrs = _attrs(one(exporter.get_finished_spans(), "execute_tool get_weather"))
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(attrs["gen_ai.tool.call.result"]) == WEATHER


def test_a_tool_message_given_as_a_dict_in_a_command_is_the_result(exporter: InMemorySpanExporter) -> None:
    """ToolNode converts the update's messages (``convert_to_messages``): a ``{"role": "tool", ...}`` dict is a
    ToolMessage to the graph, and so the result, its status included."""
    from langgraph.prebuilt import create_react_agent

    def messages(call_id: str) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": call_id, "content": "no station in London", "status": "error"}]

    with replay(AGENT) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        agent = create_react_agent(model, [_command_tool(messages)])
        agent.invoke({"messages": [{"role": "user", "content": "Weather?"}]})
    assert server.received[1].json()["messages"][-1]["content"] == "no station in London"
    tool_span = one(exporter.get_finished_spans(), "execute_tool get_weather")
    attrs = _attrs(tool_span)
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(attrs["gen_ai.tool.call.result"]) == "no station in London"
    assert tool_span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("capture_content", [True, False], ids=["captured", "not-captured"])
def test_a_command_without_this_calls_tool_message_is_recorded_whole(
    exporter: InMemorySpanExporter, capture_content: bool
) -> None:
    """No message of the Command answers this call (ToolNode then refuses it): nothing is picked as the result, the
    Command is recorded as any other value a tool returns, and only when content is captured."""
    from evaltrace._internal import settings

    tool = _command_tool(lambda call_id: [ToolMessage("another call's result", tool_call_id="call_other")])
    previous = settings.replace(settings.CaptureSettings(capture_content=capture_content))
    try:
        with langchain_instrumented():
            out = tool.invoke({"type": "tool_call", "id": CALL_ID, "name": "get_weather", "args": {"location": "x"}})
    finally:
        settings.replace(previous)
    assert isinstance(out, Command)
    tool_span = one(exporter.get_finished_spans(), "execute_tool get_weather")
    attrs = _attrs(tool_span)
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert tool_span.status.status_code is StatusCode.UNSET
    if capture_content:
        result = json.loads(attrs["gen_ai.tool.call.result"])
        assert result["update"]["messages"][0]["tool_call_id"] == "call_other"
    else:
        assert "gen_ai.tool.call.result" not in attrs


def test_a_command_with_several_tool_messages_and_no_call_id_picks_none(exporter: InMemorySpanExporter) -> None:
    """Called with its arguments only (no tool call, so no call id), a tool whose Command adds two calls' messages
    has no message to call its own: the Command is recorded whole."""
    from langchain_core.tools import tool

    @tool
    def get_weather(location: str) -> Command[Any]:
        """Get the weather for a location."""
        first, second = (ToolMessage(f"result {i}", tool_call_id=f"call_{i}") for i in (1, 2))
        return Command(update={"messages": [first, second]})

    with langchain_instrumented():
        get_weather.invoke({"location": "London"})
    attrs = _attrs(one(exporter.get_finished_spans(), "execute_tool get_weather"))
    assert "gen_ai.tool.call.id" not in attrs
    result = json.loads(attrs["gen_ai.tool.call.result"])
    assert [m["content"] for m in result["update"]["messages"]] == ["result 1", "result 2"]


def test_a_handoff_tool_that_sends_the_history_to_the_parent_records_its_own_message(
    exporter: InMemorySpanExporter,
) -> None:
    """langgraph-supervisor's handoff: the tool returns ``Command(graph=Command.PARENT, update={"messages": history
    + [its ToolMessage]})``. The history holds earlier calls' ToolMessages; the result is this call's message."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(
        location: str, state: Annotated[dict[str, Any], InjectedState], tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command[Any]:
        """Get the weather for a location."""
        handoff = ToolMessage("Transferred to forecaster", tool_call_id=tool_call_id)
        return Command(graph=Command.PARENT, goto="forecaster", update={"messages": [*state["messages"], handoff]})

    def forecaster(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(WEATHER)]}

    earlier = [
        {"role": "user", "content": "Weather in Paris?"},
        AIMessage("", tool_calls=[{"id": "call_paris", "name": "get_weather", "args": {"location": "Paris"}}]),
        ToolMessage("Paris: rainy", tool_call_id="call_paris"),
        {"role": "user", "content": "And in London?"},
    ]
    with replay(AGENT) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
        graph = StateGraph(MessagesState)
        graph.add_node("assistant", create_react_agent(model, [get_weather], name="assistant"))
        graph.add_node("forecaster", forecaster)
        graph.add_edge(START, "assistant")
        out = graph.compile(name="supervisor").invoke({"messages": earlier})
    assert out["messages"][-1].content == WEATHER
    spans = exporter.get_finished_spans()
    attrs = _attrs(one(spans, "execute_tool get_weather"))
    assert attrs["gen_ai.tool.call.id"] == CALL_ID
    assert json.loads(attrs["gen_ai.tool.call.result"]) == "Transferred to forecaster"


def test_a_request_for_text_output_records_the_text_output_type(exporter: InMemorySpanExporter) -> None:
    """``response_format={"type": "text"}`` asks for plain text: ``gen_ai.output.type`` ``text``."""
    with ReplayServer([_ANSWER]) as server, langchain_instrumented():
        chat_openai(server, model="gpt-4o-mini").bind(response_format={"type": "text"}).invoke("Capital of France?")
    assert server.received[0].json()["response_format"] == {"type": "text"}
    assert _attrs(one(exporter.get_finished_spans(), "chat gpt-4o-mini"))["gen_ai.output.type"] == "text"


def _unparsable_tool_call() -> Recorded:
    """The Responses tool-call recording with its function call's arguments cut off mid-JSON."""
    recorded = load_cassette(_RESPONSES / "test_responses_create_captures_tool_call_content[content_mode0].yaml")[0]
    body = json.loads(recorded.body)
    body["output"][0]["arguments"] = '{"location":"Seattle'
    return dataclasses.replace(recorded, body=json.dumps(body).encode())


def test_a_responses_tool_call_whose_arguments_do_not_parse_still_finishes_with_a_tool_call(
    exporter: InMemorySpanExporter,
) -> None:
    """langchain-openai puts a function call whose arguments are no JSON in ``invalid_tool_calls`` only: it is still
    the tool call the answer finished with, ``tool_call`` as instrument_openai() records the same response."""
    from langchain_core.tools import tool

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return "rainy"

    with ReplayServer([_unparsable_tool_call()]) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini", use_responses_api=True)
        reply = model.bind_tools([get_weather]).invoke("What's the weather in Seattle right now?")
    assert reply.tool_calls == []
    assert [c["name"] for c in reply.invalid_tool_calls] == ["get_current_weather"]
    attrs = _attrs(one(exporter.get_finished_spans(), "chat gpt-4o-mini"))
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["tool_call"]
    output = json.loads(attrs["gen_ai.output.messages"])[0]
    assert output["finish_reason"] == "tool_call"
    assert [p["type"] for p in output["parts"]] == ["tool_call"]


@pytest.mark.parametrize("openai_on", [False, True], ids=["handler", "instrument_openai"])
def test_a_streamed_chat_completion_has_its_id_only_from_the_sdks_span(
    exporter: InMemorySpanExporter, openai_on: bool
) -> None:
    """langchain-openai (1.7) keeps a streamed Chat Completion's id in no public field (not the chunks'
    ``response_metadata`` or ``generation_info``; the message id is LangChain's run id): the handler's span has no
    ``gen_ai.response.id`` rather than a made-up one. With ``instrument_openai()`` the SDK's span reads the stream
    itself and has it. (A guard: this passed before; the docs say so.)"""
    import evaltrace

    if openai_on:
        evaltrace.instrument_openai()
    try:
        with replay(STREAM) as server, langchain_instrumented():
            chat_openai(server, model="gpt-3.5-turbo", streaming=True).invoke("Tell me a joke")
    finally:
        if openai_on:
            evaltrace.uninstrument_openai()
    attrs = _attrs(one(exporter.get_finished_spans(), "chat gpt-3.5-turbo"))
    assert attrs.get("gen_ai.response.id") == ("chatcmpl-9rD4cbxcufhWUCMSJ0LP0ZNuora53" if openai_on else None)
    assert attrs["gen_ai.response.model"] == "gpt-3.5-turbo-0125"
