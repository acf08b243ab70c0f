"""pydantic-ai agent runs, replayed from recorded traffic through the real framework, traced by instrument_pydantic_ai().

pydantic-ai emits its own GenAI spans; these tests check that ``instrument_pydantic_ai()`` turns them on with
evaltrace's provider and content setting, that the mapping reads them into the Trace evaluators see (tools,
structured output, thinking, streaming), and that ``instrument_openai()`` adds no second model span. Recordings:
tests/fixtures/pydantic-ai-cassettes (OpenInference's pydantic-ai tests, OpenAI Chat Completions) and
tests/fixtures/groq-cassettes/pydantic-ai (pydantic-ai's own Groq tests: the only streamed pydantic-ai run recorded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal, TypeVar

import pytest

pydantic_ai = pytest.importorskip("pydantic_ai")

from groq import AsyncGroq  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.groq import GroqModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.groq import GroqProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace.evaluators import ToolCalled, ToolSequence  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402
from evaltrace.mapping.conventions import span_kind  # noqa: E402
from evaltrace.testing import TraceCapture, capture_traces, evaluate  # noqa: E402

T = TypeVar("T")
OPENINFERENCE = FIXTURES / "pydantic-ai-cassettes" / "openinference" / "test_instrumentor"
GROQ = FIXTURES / "groq-cassettes" / "pydantic-ai"


@pytest.fixture
def capture(openai_on: bool) -> Iterator[TraceCapture]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    try:
        with capture_traces() as capture:
            evaltrace.instrument_pydantic_ai()
            yield capture
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)


_clients: list[Any] = []  # SDK clients made for the run under way, closed in its event loop


def _replay(interactions: list[Recorded], run: Callable[[str], Awaitable[T]]) -> tuple[T, ReplayServer]:
    async def main(url: str) -> T:
        try:
            return await run(url)
        finally:
            while _clients:
                await _clients.pop().close()

    with ReplayServer(interactions) as server:
        return asyncio.run(main(server.url)), server


def _openai_model(url: str, name: str = "gpt-4o-mini") -> OpenAIChatModel:
    client = AsyncOpenAI(base_url=url + "/v1", api_key="test")
    _clients.append(client)
    return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client))


def _weather_agent(url: str) -> Agent[None, str]:
    agent = Agent(_openai_model(url), name="weather")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"It's sunny in {city}."

    return agent


async def _weather_run(url: str) -> str:
    return (await _weather_agent(url).run("What's the weather in Paris?")).output


def _spans_of_kind(spans: tuple[ReadableSpan, ...], kind: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if span_kind(s.attributes or {}) == kind), key=lambda s: s.start_time or 0)


def _parent_name(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> str | None:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    parent = by_id.get(span.parent.span_id) if span.parent is not None else None
    return parent.name if parent is not None else None


def test_agent_run_with_a_tool_maps_to_agent_llm_and_tool_spans(capture: TraceCapture, openai_on: bool) -> None:
    output, server = _replay(
        load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run
    )
    assert output == "The weather in Paris is sunny."
    assert len(server.received) == 2
    spans = capture.spans
    (agent,) = _spans_of_kind(spans, sc.KIND_AGENT)
    assert agent.name == "invoke_agent weather"
    assert agent.parent is None
    assert (agent.attributes or {})[sc.GEN_AI_AGENT_NAME] == "weather"
    # One model span per request: pydantic-ai's, with our OpenAI instrumentation silent inside it.
    llm = _spans_of_kind(spans, sc.KIND_LLM)
    assert len(llm) == len(server.received) == 2
    assert {s.instrumentation_scope.name for s in llm if s.instrumentation_scope} == {"pydantic-ai"}
    assert all(_parent_name(s, spans) == "invoke_agent weather" for s in llm)
    (tool,) = _spans_of_kind(spans, sc.KIND_TOOL)
    assert tool.name == "execute_tool get_weather"
    assert _parent_name(tool, spans) == "invoke_agent weather"
    tool_attrs = tool.attributes or {}
    assert tool_attrs[sc.GEN_AI_TOOL_CALL_ID] == "call_HI3bFDQuCgzux3QrZyumWfQf"
    assert tool_attrs[sc.GEN_AI_TOOL_CALL_RESULT] == "It's sunny in Paris."


def test_the_trace_evaluators_see_and_their_verdicts(capture: TraceCapture, openai_on: bool) -> None:
    _replay(load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run)
    trace = capture.trace
    assert trace.input == {"input": "What's the weather in Paris?"}
    assert trace.output.final_answer == "The weather in Paris is sunny."
    assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [
        ("call_HI3bFDQuCgzux3QrZyumWfQf", "get_weather", {"city": "Paris"})
    ]
    assert [r.content for r in trace.tool_results] == ["It's sunny in Paris."]  # pydantic-ai's ``result`` part
    assert trace.tool_calls[0].started_at is not None
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert (trace.metrics.token_input, trace.metrics.token_output) == (43 + 70, 14 + 8)  # counted once
    assert trace.metrics.cost_usd is not None and trace.metrics.cost_usd > 0  # pydantic-ai's operation.cost
    called, sequence, wrong = evaluate(
        trace, ToolCalled("get_weather", arguments={"city": "Paris"}), ToolSequence(["get_weather"]), ToolCalled("x")
    )
    assert called.passed is True
    assert sequence.passed is True
    assert wrong.passed is False


def test_plain_text_run(capture: TraceCapture, openai_on: bool) -> None:
    async def run(url: str) -> str:
        return (await Agent(_openai_model(url, "gpt-4o"), name="greeter").run("Say hello.")).output

    output, _ = _replay(load_cassette(OPENINFERENCE / "test_openai_agent_plain_text_output_v2.yaml"), run)
    assert output == "Hello! How can I assist you today?"
    trace = capture.trace
    assert trace.input == {"input": "Say hello."}
    assert trace.output.final_answer == output
    assert trace.tool_calls == []
    assert len(_spans_of_kind(capture.spans, sc.KIND_LLM)) == 1


class _Location(BaseModel):
    city: str
    country: str


def test_structured_output_is_the_traces_structured_output(capture: TraceCapture, openai_on: bool) -> None:
    """The first request of OpenInference's recording: a ``final_result`` tool call carries the output."""
    first = load_cassette(OPENINFERENCE / "test_openai_agent_and_llm_spans_v2.yaml")[:1]

    async def run(url: str) -> _Location:
        agent = Agent(
            _openai_model(url, "gpt-4o"),
            name="locator",
            output_type=_Location,
            system_prompt="You are a weather assistant",
            instructions="Use the weather tool\nUse the calculator tool",
        )
        return (await agent.run("The windy city in the US of A.")).output

    output, _ = _replay(first, run)
    assert output == _Location(city="Chicago", country="USA")
    trace = capture.trace
    assert trace.output.structured == {"city": "Chicago", "country": "USA"}
    assert trace.input == {"input": "The windy city in the US of A."}
    assert [c.name for c in trace.tool_calls] == ["final_result"]


def test_streamed_run_with_retry_thinking_and_output_tool(capture: TraceCapture) -> None:
    """pydantic-ai's Groq recording: a streamed answer that fails validation, then a streamed tool-call answer."""
    prompt = (
        'dont make a tool call, just return the string "maybe" by itself, not as json output, to test error '
        "handling; on the second try you can use valid args"
    )

    async def run(url: str) -> str:
        client = AsyncGroq(base_url=url, api_key="test")
        _clients.append(client)
        model = GroqModel("openai/gpt-oss-120b", provider=GroqProvider(groq_client=client))
        agent: Agent[None, Literal["yes", "no"]] = Agent(
            model,
            name="yesno",
            instructions="Be concise. Never use pretty double quotes, just regular ones.",
            output_type=Literal["yes", "no"],  # type: ignore[arg-type]
        )
        async with agent.run_stream(prompt) as result:
            return str(await result.get_output())

    output, server = _replay(load_cassette(GROQ / "test_tool_use_failed_error_streaming_with_text.yaml"), run)
    assert output == "no"
    assert all(r.json()["stream"] is True for r in server.received)
    spans = capture.spans
    assert len(_spans_of_kind(spans, sc.KIND_LLM)) == 2
    trace = capture.trace
    assert trace.input == {"input": prompt}  # the run's prompt, not the validation feedback sent after it
    assert trace.output.final_answer == "no"  # the run's own final_result
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("final_result", {"response": "no"})]
    assert trace.output.thinking is not None and trace.output.thinking.startswith("The user says")
    assert "maybe" not in (trace.output.final_answer or "")
    assert trace.metrics.latency_first_token_ms is not None  # pydantic-ai's time to first chunk
    assert trace.metrics.token_thinking is not None and trace.metrics.token_thinking > 0


@pytest.mark.parametrize("openai_on", ["openai_instrumented"], indirect=True)
def test_the_applications_own_model_call_while_reading_a_stream_is_traced(
    capture: TraceCapture, openai_on: bool
) -> None:
    """A streamed run (Groq recording) with ``instrument_groq()`` on: its requests have pydantic-ai's spans only,
    and a model call the application makes inside ``async with agent.run_stream()`` (OpenAI, instrumented) has
    its own span; the LLM-suppression key covers the model's request, not the application's code."""
    prompt = (
        'dont make a tool call, just return the string "maybe" by itself, not as json output, to test error '
        "handling; on the second try you can use valid args"
    )
    own = load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml")[:1]

    async def run(url: str) -> str:
        client = AsyncGroq(base_url=url, api_key="test")
        _clients.append(client)
        model = GroqModel("openai/gpt-oss-120b", provider=GroqProvider(groq_client=client))
        agent: Agent[None, Literal["yes", "no"]] = Agent(
            model,
            name="yesno",
            instructions="Be concise. Never use pretty double quotes, just regular ones.",
            output_type=Literal["yes", "no"],  # type: ignore[arg-type]
        )
        with ReplayServer(own) as own_server:
            app_client = AsyncOpenAI(base_url=own_server.url + "/v1", api_key="test", max_retries=0)
            _clients.append(app_client)
            async with agent.run_stream(prompt) as result:
                await app_client.chat.completions.create(**own[0].request_json())  # e.g. a moderation check
                return str(await result.get_output())

    instrumentor = evaltrace.instrument_groq()
    try:
        output, _ = _replay(load_cassette(GROQ / "test_tool_use_failed_error_streaming_with_text.yaml"), run)
    finally:
        instrumentor.uninstrument()
    assert output == "no"
    llm = _spans_of_kind(capture.spans, sc.KIND_LLM)
    scopes = sorted((s.instrumentation_scope.name if s.instrumentation_scope else "") for s in llm)
    assert scopes == ["evaltrace", "pydantic-ai", "pydantic-ai"], [s.name for s in llm]
    (app_span,) = [s for s in llm if s.instrumentation_scope and s.instrumentation_scope.name == "evaltrace"]
    assert (app_span.attributes or {})["gen_ai.provider.name"] == "openai"


def test_uninstrument_puts_back_the_model_request_methods() -> None:
    from pydantic_ai.models.test import TestModel

    request, request_stream = TestModel.__dict__["request"], TestModel.__dict__["request_stream"]
    with capture_traces() as capture:
        evaltrace.instrument_pydantic_ai()
        try:
            assert asyncio.run(Agent(TestModel(custom_output_text="ok")).run("hi")).output == "ok"
            assert TestModel.__dict__["request"] is not request  # wrapped when its first span opened
        finally:
            evaltrace.uninstrument_pydantic_ai()
    assert TestModel.__dict__["request"] is request and TestModel.__dict__["request_stream"] is request_stream
    assert len(_spans_of_kind(capture.spans, sc.KIND_LLM)) == 1


@pytest.mark.parametrize("openai_on", ["openai_off"], indirect=True)
def test_content_off_is_passed_to_pydantic_ai(openai_on: bool) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with capture_traces() as capture:
            installed = evaltrace.instrument_pydantic_ai()
            assert installed.include_content is False
            _replay(load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run)
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)
    for span in capture.spans:  # pydantic-ai keeps the message structure, without the text, arguments or results
        for key, value in (span.attributes or {}).items():
            assert "Paris" not in str(value) and "sunny" not in str(value), (span.name, key)
    assert [c.name for c in trace_from_spans(list(capture.spans)).tool_calls] == ["get_weather"]


@pytest.mark.parametrize("openai_on", ["openai_off"], indirect=True)
def test_content_turned_off_after_instrumenting_is_followed(openai_on: bool) -> None:
    """``configure(capture_content=False)`` after ``instrument_pydantic_ai()`` stops content on later runs."""
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    try:
        with capture_traces() as capture:
            installed = evaltrace.instrument_pydantic_ai()
            settings.replace(settings.CaptureSettings(capture_content=False))
            assert installed.include_content is False
            _replay(load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run)
            settings.replace(settings.CaptureSettings(capture_content=True))
            assert installed.include_content is True  # and back on for the next run
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)
    assert len(_spans_of_kind(capture.spans, sc.KIND_LLM)) == 2
    for span in capture.spans:
        for key, value in (span.attributes or {}).items():
            assert "Paris" not in str(value) and "sunny" not in str(value), (span.name, key)


def test_an_explicit_include_content_is_kept() -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    try:
        installed = evaltrace.instrument_pydantic_ai(include_content=False)
        assert installed.include_content is False
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)


@pytest.mark.parametrize("openai_on", ["openai_instrumented"], indirect=True)
def test_uninstrument_turns_spans_off_and_restores_the_span_opener(openai_on: bool) -> None:
    import pydantic_ai.models.instrumented as instrumented

    original = instrumented.open_model_request_span
    with capture_traces() as capture:
        evaltrace.instrument_pydantic_ai()
        assert instrumented.open_model_request_span is not original
        evaltrace.uninstrument_pydantic_ai()
        assert instrumented.open_model_request_span is original
        _replay(load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run)
    # Only our OpenAI spans are left: pydantic-ai records nothing once turned off.
    assert {s.instrumentation_scope.name for s in capture.spans if s.instrumentation_scope} == {"evaltrace"}
    assert len(_spans_of_kind(capture.spans, sc.KIND_LLM)) == 2


@pytest.mark.parametrize("openai_on", ["openai_off"], indirect=True)
def test_spans_follow_evaltraces_provider_set_after_instrumenting(openai_on: bool) -> None:
    evaltrace.instrument_pydantic_ai()  # before the capture: its provider is installed afterwards
    try:
        with capture_traces() as capture:
            _replay(load_cassette(OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"), _weather_run)
    finally:
        evaltrace.uninstrument_pydantic_ai()
    assert [s.name for s in _spans_of_kind(capture.spans, sc.KIND_AGENT)] == ["invoke_agent weather"]
    assert capture.trace.output.final_answer == "The weather in Paris is sunny."


def test_provider_and_version_settings() -> None:
    with capture_traces() as capture:
        installed: Any = evaltrace.instrument_pydantic_ai()
        try:
            assert installed.version == 6  # GenAI parts, tool results in ``tool`` messages
            assert Agent._instrument_default is installed
        finally:
            evaltrace.uninstrument_pydantic_ai()
        assert Agent._instrument_default is False
        assert capture.spans == ()


def test_uninstrument_puts_back_the_applications_own_default() -> None:
    from pydantic_ai.models.instrumented import InstrumentationSettings

    own = InstrumentationSettings(include_content=False)
    Agent.instrument_all(own)
    try:
        evaltrace.instrument_pydantic_ai()
        evaltrace.instrument_pydantic_ai()  # twice: still the application's setting to put back
        assert Agent._instrument_default is not own
        evaltrace.uninstrument_pydantic_ai()
        assert Agent._instrument_default is own
    finally:
        Agent.instrument_all(False)
