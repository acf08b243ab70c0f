"""What evaluators see of a pydantic-ai run's outcomes: failed tool calls, structured output, follow-up turns.

Real pydantic-ai agents (OpenAI Chat Completions model, the real openai client) against recorded traffic served on
127.0.0.1 (tests/fixtures/pydantic-ai-cassettes: OpenInference's pydantic-ai recordings), traced by
``instrument_pydantic_ai()`` and mapped as the pipeline maps them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

pytest.importorskip("pydantic_ai")

from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelRetry
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import evaltrace
from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal import settings
from evaltrace.evaluators import ToolCalled, ToolErrorRate
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace
from evaltrace.testing import TraceCapture, capture_traces, evaluate

T = TypeVar("T")
OPENINFERENCE = FIXTURES / "pydantic-ai-cassettes" / "openinference" / "test_instrumentor"
# The model asks for get_weather(city="Paris"), then answers "The weather in Paris is sunny." (gpt-4o-mini).
WEATHER = OPENINFERENCE / "test_openai_tool_span_instrumentation_v5.yaml"
CALL_ID = "call_HI3bFDQuCgzux3QrZyumWfQf"


@pytest.fixture
def capture() -> Iterator[TraceCapture]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    try:
        with capture_traces() as capture:
            evaltrace.instrument_pydantic_ai()
            yield capture
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)


def _replay(interactions: list[Recorded], run: Callable[[OpenAIChatModel], Awaitable[T]]) -> T:
    """Run ``run`` with a model whose client talks to a server replaying ``interactions``."""

    async def main(url: str) -> T:
        client = AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
        try:
            return await run(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)))
        finally:
            await client.close()

    with ReplayServer(interactions) as server:
        return asyncio.run(main(server.url))


def _weather_run(tool: Callable[[str], str]) -> Callable[[OpenAIChatModel], Awaitable[str]]:
    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(name="get_weather")(tool)
        return (await agent.run("What's the weather in Paris?")).output

    return run


def _retry(city: str) -> str:
    raise ModelRetry("City not found, try again with the country")


def _failed(city: str) -> str:
    raise ToolFailed("weather service down")


def test_a_tool_asking_the_model_to_retry_is_a_failed_call(capture: TraceCapture) -> None:
    """ModelRetry: pydantic-ai ends the tool span in error and sends the model the retry prompt as the result."""
    assert _replay(load_cassette(WEATHER), _weather_run(_retry)) == "The weather in Paris is sunny."
    trace = trace_from_spans(list(capture.spans))
    assert [(r.tool_call_id, r.content) for r in trace.tool_results] == [
        (CALL_ID, {"error": "City not found, try again with the country"})
    ]
    # The messages hold what the model was sent for the call: pydantic-ai's retry prompt, not an error object
    (sent,) = [m.content for m in trace.messages if m.role == "tool"]
    assert isinstance(sent, str) and sent.startswith("City not found, try again with the country")
    assert trace.error is None  # the run itself succeeded
    rate, called = evaluate(trace, ToolErrorRate(threshold=0.0), ToolCalled("get_weather"))
    assert (rate.passed, rate.score) == (False, 1.0)
    assert called.passed is True


def test_a_tool_reporting_a_failure_to_the_model_is_a_failed_call(capture: TraceCapture) -> None:
    """ToolFailed: the model is told and answers anyway; the call still failed."""
    assert _replay(load_cassette(WEATHER), _weather_run(_failed)) == "The weather in Paris is sunny."
    trace = trace_from_spans(list(capture.spans))
    assert [r.content for r in trace.tool_results] == [{"error": "weather service down"}]
    (rate,) = evaluate(trace, ToolErrorRate(threshold=0.0))
    assert rate.passed is False


def test_invalid_tool_arguments_are_a_failed_call(capture: TraceCapture) -> None:
    """The model's arguments fail the tool's schema: the tool never ran, the model got the validation errors."""

    def get_weather(town: int) -> str:
        return "never called"

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(get_weather)
        return (await agent.run("What's the weather in Paris?")).output

    _replay(load_cassette(WEATHER), run)
    (result,) = trace_from_spans(list(capture.spans)).tool_results
    assert isinstance(result.content, dict) and "Field required" in str(result.content["error"])


def test_a_tool_raising_gives_its_exception_as_the_result_and_the_run_an_error(capture: TraceCapture) -> None:
    def get_weather(city: str) -> str:
        raise RuntimeError("weather service down")

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(get_weather)
        return (await agent.run("What's the weather in Paris?")).output

    with pytest.raises(RuntimeError, match="weather service down"):  # the user's exception, unchanged
        _replay(load_cassette(WEATHER)[:1], run)
    trace = trace_from_spans(list(capture.spans))
    assert [r.content for r in trace.tool_results] == [{"error": "RuntimeError: weather service down"}]
    assert trace.error is not None and trace.error.message == "RuntimeError: weather service down"
    assert trace.output.final_answer is None


def test_a_successful_tool_result_stays_as_returned(capture: TraceCapture) -> None:
    _replay(load_cassette(WEATHER), _weather_run(lambda city: f"It's sunny in {city}."))
    assert [r.content for r in trace_from_spans(list(capture.spans)).tool_results] == ["It's sunny in Paris."]


class _Location(BaseModel):
    city: str
    country: str


def test_a_structured_output_is_the_final_answer_as_json(capture: TraceCapture) -> None:
    """Tool output mode: the model answers with the ``final_result`` tool call; the run's output is the answer."""

    async def run(model: OpenAIChatModel) -> _Location:
        return (await Agent(model, name="locator", output_type=_Location).run("The windy city in the US of A.")).output

    first = load_cassette(OPENINFERENCE / "test_openai_agent_and_llm_spans_v2.yaml")[:1]
    assert _replay(first, run) == _Location(city="Chicago", country="USA")
    output = trace_from_spans(list(capture.spans)).output
    assert output.final_answer == '{"city":"Chicago","country":"USA"}'
    assert output.structured == {"city": "Chicago", "country": "USA"}


def test_a_follow_up_turn_with_message_history(capture: TraceCapture) -> None:
    """Turn 2 is sent turn 1's tool call and result again: they are not turn 2's; the conversation id is shared."""

    async def run(model: OpenAIChatModel) -> tuple[str, str]:
        agent = Agent(model, name="weather")

        @agent.tool_plain
        def get_weather(city: str) -> str:
            return f"It's sunny in {city}."

        first = await agent.run("What's the weather in Paris?")
        second = await agent.run("Say hello.", message_history=first.all_messages())
        return first.output, second.output

    plain = load_cassette(OPENINFERENCE / "test_openai_agent_plain_text_output_v2.yaml")
    assert _replay(load_cassette(WEATHER) + plain, run)[1] == "Hello! How can I assist you today?"
    turns = _turns(capture)
    assert [[c.name for c in t.tool_calls] for t in turns] == [["get_weather"], []]
    assert [t.output.final_answer for t in turns] == [
        "The weather in Paris is sunny.",
        "Hello! How can I assist you today?",
    ]
    assert turns[1].input == {"input": "Say hello."}
    (called,) = evaluate(turns[1], ToolCalled("get_weather"))
    assert called.passed is False
    assert (turns[1].metrics.token_input, turns[1].metrics.token_output) == (10, 9)  # turn 2's model call only
    conversation_ids = {
        (s.attributes or {}).get("gen_ai.conversation.id") for s in capture.spans if s.name.startswith("invoke_agent")
    }
    assert len(conversation_ids) == 1 and None not in conversation_ids  # pydantic-ai carries it over the history


def _turns(capture: TraceCapture) -> list[Trace]:
    by_trace: dict[int, list[Any]] = {}
    for span in capture.spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    traces = [trace_from_spans(spans) for spans in by_trace.values()]
    return sorted(traces, key=lambda t: t.started_at)


def test_a_run_paused_for_approval_and_its_resume(capture: TraceCapture) -> None:
    """Turn 1 stops at the call needing approval (no answer); turn 2 runs it, then the model answers.

    Turn 2's tool span runs before its model call, which is sent turn 1's call and the result again: one call,
    one result, in the order they happened.
    """

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather", output_type=[str, DeferredToolRequests])

        @agent.tool_plain(requires_approval=True)
        def get_weather(city: str) -> str:
            return f"It's sunny in {city}."

        first = await agent.run("What's the weather in Paris?")
        assert isinstance(first.output, DeferredToolRequests)
        approvals = DeferredToolResults(approvals={call.tool_call_id: True for call in first.output.approvals})
        second = await agent.run(message_history=first.all_messages(), deferred_tool_results=approvals)
        return str(second.output)

    assert _replay(load_cassette(WEATHER), run) == "The weather in Paris is sunny."
    paused, resumed = _turns(capture)
    assert paused.output.final_answer is None  # waiting for approval: nothing answered yet
    assert [c.name for c in paused.tool_calls] == ["get_weather"] and paused.tool_results == []
    assert [(c.id, c.name) for c in resumed.tool_calls] == [(CALL_ID, "get_weather")]
    assert [(r.tool_call_id, r.content) for r in resumed.tool_results] == [(CALL_ID, "It's sunny in Paris.")]
    assert [m.role for m in resumed.messages] == ["user", "assistant", "tool", "assistant"]
    assert resumed.tool_calls[0].started_at is not None  # the tool span's start
    assert resumed.output.final_answer == "The weather in Paris is sunny."


ANTHROPIC = FIXTURES / "anthropic"  # Messages API streams written from Anthropic's documentation (README there)


def _anthropic_stream(name: str) -> Recorded:
    body = (ANTHROPIC / name).read_bytes()
    return Recorded("POST", "/v1/messages", b"", 200, "OK", [("content-type", "text/event-stream")], body)


def _anthropic_replay(interactions: list[Recorded], prompt: str, **settings: Any) -> str:
    """A pydantic-ai agent on ``AnthropicModel`` (the real anthropic client, which pydantic-ai always streams)."""
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    async def main(url: str) -> str:
        client = AsyncAnthropic(base_url=url, api_key="test", max_retries=0)
        try:
            agent = Agent(AnthropicModel("claude-sonnet-4-6", provider=AnthropicProvider(anthropic_client=client)))

            @agent.tool_plain
            def get_weather(location: str) -> str:
                return "15 degrees, cloudy"

            run = await agent.run(prompt, model_settings=AnthropicModelSettings(**settings))
            return str(run.output)
        finally:
            await client.close()

    with ReplayServer(interactions) as server:
        return asyncio.run(main(server.url))


@pytest.mark.parametrize("sdk_instrumented", [False, True], ids=["anthropic_off", "anthropic_instrumented"])
def test_an_anthropic_model_run_with_a_tool(capture: TraceCapture, sdk_instrumented: bool) -> None:
    """A streamed tool use (``input_json_delta`` fragments) then the answer: one model span per request."""
    pytest.importorskip("anthropic")
    instrumentor = evaltrace.instrument_anthropic() if sdk_instrumented else None
    try:
        output = _anthropic_replay(
            [_anthropic_stream("stream_tool.sse"), _anthropic_stream("stream_text.sse")],
            "What's the weather like in San Francisco?",
        )
    finally:
        if instrumentor is not None:
            instrumentor.uninstrument()
    assert output == "Hello! How can I help you today?"
    assert sorted(s.name for s in capture.spans) == [
        "chat claude-sonnet-4-6",
        "chat claude-sonnet-4-6",
        "execute_tool get_weather",
        "invoke_agent agent",
    ]
    trace = trace_from_spans(list(capture.spans))
    assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"location": "San Francisco, CA"})
    ]
    assert [r.content for r in trace.tool_results] == ["15 degrees, cloudy"]
    # The text the model said beside its tool call is not the answer; the last call's is.
    assert trace.output.final_answer == output
    assert (trace.metrics.token_input, trace.metrics.token_output) == (472 + 25, 89 + 15)  # once per request
    assert [s.finish_reasons for s in trace.llm_steps or []] == [["tool_call"], ["stop"]]


def test_anthropic_extended_thinking_is_the_thinking_never_the_answer(capture: TraceCapture) -> None:
    pytest.importorskip("anthropic")
    output = _anthropic_replay(
        [_anthropic_stream("stream_thinking.sse")],
        "What is the GCD of 1071 and 462?",
        anthropic_thinking={"type": "enabled", "budget_tokens": 1024},
    )
    trace = trace_from_spans(list(capture.spans))
    assert trace.output.final_answer == output == "The greatest common divisor of 1071 and 462 is 21."
    assert trace.output.thinking == "I need to find the GCD of 1071 and 462 using the Euclidean algorithm."
    assert (trace.metrics.token_input, trace.metrics.token_output) == (1232, 190)  # 1200 of them read from cache


def test_a_run_stopped_by_a_usage_limit_is_an_error(capture: TraceCapture) -> None:
    from pydantic_ai.usage import UsageLimits

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(name="get_weather")(lambda city: f"It's sunny in {city}.")
        return (await agent.run("What's the weather in Paris?", usage_limits=UsageLimits(request_limit=1))).output

    with pytest.raises(Exception, match="request_limit of 1") as raised:
        _replay(load_cassette(WEATHER), run)
    assert type(raised.value).__name__ == "UsageLimitExceeded"
    trace = trace_from_spans(list(capture.spans))
    assert trace.error is not None and "UsageLimitExceeded" in trace.error.message
    assert trace.output.final_answer is None
    assert [c.name for c in trace.tool_calls] == ["get_weather"]
    assert (trace.metrics.token_input, trace.metrics.token_output) == (43, 14)  # the one request made


# Streamed Chat Completions (OpenTelemetry's openai instrumentation tests, tests/fixtures/openai-cassettes): two
# parallel get_current_weather calls in fragments, then a streamed answer.
STREAMS = FIXTURES / "openai-cassettes" / "otel-contrib"


@pytest.mark.parametrize("how", ["run_stream", "iter", "run_stream_events"])
def test_streamed_runs_map_as_a_run_does(capture: TraceCapture, how: str) -> None:
    prompt = "What's the weather in Seattle and San Francisco?"

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(name="get_current_weather")(lambda location: f"Rainy in {location}")
        if how == "run_stream":
            async with agent.run_stream(prompt) as streamed:
                return str(await streamed.get_output())
        if how == "iter":
            async with agent.iter(prompt) as graph_run:
                async for node in graph_run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(graph_run.ctx) as events:
                            async for _ in events:
                                pass
            assert graph_run.result is not None
            return str(graph_run.result.output)
        async with agent.run_stream_events(prompt) as stream:
            return str([event async for event in stream][-1].result.output)  # type: ignore[attr-defined]

    streams = load_cassette(STREAMS / "test_async_chat_completion_multiple_tools_streaming_with_content.yaml")
    streams += load_cassette(STREAMS / "test_async_chat_completion_streaming.yaml")
    assert _replay(streams, run) == "This is a test."
    trace = trace_from_spans(list(capture.spans))
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [
        ("get_current_weather", {"location": "Seattle, WA"}),
        ("get_current_weather", {"location": "San Francisco, CA"}),
    ]
    assert [r.content for r in trace.tool_results] == ["Rainy in Seattle, WA", "Rainy in San Francisco, CA"]
    assert trace.output.final_answer == "This is a test."
    assert (trace.metrics.token_input, trace.metrics.token_output) == (75 + 12, 51 + 5)
    assert trace.metrics.latency_first_token_ms is not None


def test_turns_are_grouped_by_the_session_the_application_names() -> None:
    """pydantic-ai's conversation id is not a session (it makes one up per fresh run); ``evaltrace.context`` is."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evaltrace.context import ContextAttributesProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ContextAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def run(model: OpenAIChatModel) -> str:
        agent = Agent(model, name="weather")
        agent.tool_plain(name="get_weather")(lambda city: f"It's sunny in {city}.")
        with evaltrace.context(session_id="chat-1"):
            first = await agent.run("What's the weather in Paris?")
        with evaltrace.context(session_id="chat-1"):
            second = await agent.run("Say hello.", message_history=first.all_messages())
        assert second.conversation_id == first.conversation_id
        return second.output

    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    evaltrace.instrument_pydantic_ai(tracer_provider=provider)
    try:
        plain = load_cassette(OPENINFERENCE / "test_openai_agent_plain_text_output_v2.yaml")
        _replay(load_cassette(WEATHER) + plain, run)
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 2
    assert {(s.attributes or {}).get("session.id") for s in spans} == {"chat-1"}
