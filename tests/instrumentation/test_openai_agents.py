"""OpenAI Agents SDK runs, replayed from recorded traffic through the real SDK, traced by instrument_openai_agents().

The recordings (tests/fixtures/openai-agents-cassettes, Logfire's Agents tests) are served by ReplayServer on
127.0.0.1 to a real ``AsyncOpenAI`` client that the SDK uses as its default client. Every test runs twice: with
``instrument_openai()`` on (our OpenAI span is each model call's span, under the agent) and off (the SDK's own
response/generation span becomes it). Either way there is exactly one LLM span per model request.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    input_guardrail,
    set_trace_processors,
)
from agents.models import _openai_shared  # noqa: E402
from agents_replay import agents_capture, replay  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace.evaluators import ToolCalled, ToolSequence  # noqa: E402
from evaltrace.instrumentation.openai_agents import _registered_processors  # noqa: E402
from evaltrace.testing import TraceCapture, evaluate  # noqa: E402

CASSETTES = FIXTURES / "openai-agents-cassettes" / "logfire" / "test_openai_agents"


def _cassette(name: str) -> list[Recorded]:
    return load_cassette(CASSETTES / f"{name}.yaml")


@pytest.fixture
def capture(openai_on: bool) -> Iterator[TraceCapture]:
    """Agents SDK tracing to evaltrace only (the SDK's own exporter off), content captured, globals restored."""
    with agents_capture() as capture:
        yield capture


def _kind(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get(sc.EVALTRACE_SPAN_KIND)


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        found.setdefault(span.name, []).append(span)
    return found


def _parent(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    ids = {s.context.span_id: s for s in spans if s.context is not None}
    return ids.get(span.parent.span_id) if span.parent is not None else None


def _agent_of(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> str | None:
    """The name of the nearest agent span above ``span``."""
    current = _parent(span, spans)
    while current is not None:
        if _kind(current) == sc.KIND_AGENT:
            return str((current.attributes or {}).get(sc.GEN_AI_AGENT_NAME))
        current = _parent(current, spans)
    return None


@function_tool
def random_number() -> int:
    """A random number (fair dice roll)."""
    return 4


def _run_handoff() -> tuple[Any, ReplayServer]:
    agent2 = Agent(name="agent2", instructions="Return double the number")
    agent1 = Agent(name="agent1", tools=[random_number], handoffs=[agent2])
    return replay(
        _cassette("test_responses"),
        lambda _: Runner.run(agent1, "Generate a random number then, hand off to agent2."),
    )


def test_tool_call_handoff_and_answer_become_agent_tool_and_llm_spans(capture: TraceCapture, openai_on: bool) -> None:
    result, server = _run_handoff()
    assert result.final_output == "The random number generated is 4, and it's been handed off to agent2."
    assert [r.path for r in server.received] == ["/v1/responses", "/v1/responses"]
    spans = capture.spans
    names = _by_name(spans)

    (workflow,) = names["invoke_workflow Agent workflow"]
    assert workflow.parent is None
    assert _kind(workflow) == sc.KIND_WORKFLOW
    assert (workflow.attributes or {})[sc.GEN_AI_WORKFLOW_NAME] == "Agent workflow"

    (agent1,) = names["invoke_agent agent1"]
    (agent2,) = names["invoke_agent agent2"]
    for agent, name in ((agent1, "agent1"), (agent2, "agent2")):
        assert _kind(agent) == sc.KIND_AGENT
        assert (agent.attributes or {})[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_AGENT
        assert (agent.attributes or {})[sc.GEN_AI_AGENT_NAME] == name
        assert agent.context.trace_id == workflow.context.trace_id
    assert tuple((agent1.attributes or {})[sc.OPENAI_AGENTS_AGENT_TOOLS]) == ("random_number",)
    assert tuple((agent1.attributes or {})[sc.OPENAI_AGENTS_AGENT_HANDOFFS]) == ("agent2",)

    (tool,) = names["execute_tool random_number"]
    tool_attrs = tool.attributes or {}
    assert _kind(tool) == sc.KIND_TOOL
    assert tool_attrs[sc.GEN_AI_OPERATION_NAME] == sc.OP_EXECUTE_TOOL
    assert tool_attrs[sc.GEN_AI_TOOL_NAME] == "random_number"
    assert tool_attrs[sc.GEN_AI_TOOL_CALL_ID] == "call_vwqy7HyGGnNht9NNfxMnnouY"  # from the recorded response
    assert tool_attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == "{}"
    assert tool_attrs[sc.GEN_AI_TOOL_CALL_RESULT] == "4"
    assert _agent_of(tool, spans) == "agent1"

    (handoff,) = names["handoff agent1 -> agent2"]
    assert (handoff.attributes or {})[sc.OPENAI_AGENTS_HANDOFF_FROM] == "agent1"
    assert (handoff.attributes or {})[sc.OPENAI_AGENTS_HANDOFF_TO] == "agent2"
    # The model's transfer_to_agent2 call (the recorded response) is the handoff's call.
    assert (handoff.attributes or {})[sc.GEN_AI_TOOL_CALL_ID] == "call_oEA0MnUXCwKevx8txteoopNL"
    assert _agent_of(handoff, spans) == "agent1"

    # One LLM span per model request, whichever instrumentation made it, each under the agent that called.
    llm = sorted((s for s in spans if _kind(s) == sc.KIND_LLM), key=lambda s: s.start_time or 0)
    assert len(llm) == len(server.received) == 2
    assert [_agent_of(s, spans) for s in llm] == ["agent1", "agent2"]
    for span in llm:
        assert (span.attributes or {})[sc.GEN_AI_OPERATION_NAME] == sc.OP_CHAT
        assert (span.attributes or {})[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-2024-08-06"
    scopes = {s.instrumentation_scope.name for s in llm if s.instrumentation_scope is not None}
    assert scopes == {"evaltrace"}
    # The OpenAI span (our instrumentation on) records the request the client really sent: the SDK's default model.
    sent_model = server.received[0].json()["model"]
    if openai_on:
        assert all((s.attributes or {})[sc.GEN_AI_REQUEST_MODEL] == sent_model for s in llm)
        assert all((s.attributes or {}).get(sc.OPENAI_AGENTS_SPAN_TYPE) is None for s in llm)
    else:
        assert all((s.attributes or {})[sc.OPENAI_AGENTS_SPAN_TYPE] == "response" for s in llm)
    assert (llm[1].attributes or {})[sc.GEN_AI_USAGE_INPUT_TOKENS] == 89
    assert (llm[1].attributes or {})[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 18


def test_each_agent_span_sums_its_own_model_calls_usage_and_the_trace_total_counts_them_once(
    capture: TraceCapture, openai_on: bool
) -> None:
    """The GenAI conventions recommend ``gen_ai.usage.*`` on ``invoke_agent`` spans: the sum of the agent's calls.

    The Trace's totals (and the store's, which ``traces list`` shows) stay the sum of the model calls.
    """
    from evaltrace.exporters.store_values import span_usage, trace_usage

    _run_handoff()
    spans = capture.spans
    llm = [s for s in spans if _kind(s) == sc.KIND_LLM]
    usage_keys = (sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)
    for name in ("agent1", "agent2"):
        (agent,) = [s for s in spans if s.name == f"invoke_agent {name}"]
        calls = [s.attributes or {} for s in llm if _agent_of(s, spans) == name]
        assert calls
        for key in usage_keys:
            assert (agent.attributes or {})[key] == sum(call[key] for call in calls)
    assert (next(s for s in spans if s.name == "invoke_agent agent2").attributes or {})[
        sc.GEN_AI_USAGE_INPUT_TOKENS
    ] == 89
    total_in = sum((s.attributes or {})[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm)
    total_out = sum((s.attributes or {})[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm)
    metrics = capture.trace.metrics
    assert (metrics.token_input, metrics.token_output) == (total_in, total_out)
    ids = {s.context.span_id: f"{s.context.span_id:016x}" for s in spans if s.context is not None}
    carriers = [(ids[s.context.span_id], u) for s in spans if (u := span_usage(s.attributes or {})).input_tokens]
    links = [(ids[s.context.span_id], ids.get(s.parent.span_id) if s.parent else None) for s in spans]
    stored = trace_usage(carriers, links)
    assert (stored.input_tokens, stored.output_tokens) == (total_in, total_out)


def test_the_trace_evaluators_see_holds_each_call_once_and_the_answer(capture: TraceCapture, openai_on: bool) -> None:
    _run_handoff()
    trace = capture.trace
    question = "Generate a random number then, hand off to agent2."
    assert trace.input == {"input": question}  # the SDK records none: the run's first model input has it
    for span in capture.spans:
        if _kind(span) in (sc.KIND_AGENT, sc.KIND_WORKFLOW):
            assert (span.attributes or {})[sc.INPUT_VALUE] == question, span.name
    assert trace.output.final_answer == "The random number generated is 4, and it's been handed off to agent2."
    assert [(c.id, c.name) for c in trace.tool_calls] == [
        ("call_vwqy7HyGGnNht9NNfxMnnouY", "random_number"),
        ("call_oEA0MnUXCwKevx8txteoopNL", "transfer_to_agent2"),
    ]
    assert [(r.tool_call_id, r.content) for r in trace.tool_results] == [
        ("call_vwqy7HyGGnNht9NNfxMnnouY", "4"),
        ("call_oEA0MnUXCwKevx8txteoopNL", '{"assistant": "agent2"}'),
    ]
    assert trace.tool_calls[0].started_at is not None  # stamped by the tool span that ran it
    assert [m.role for m in trace.messages].count("user") == 1  # the history each call repeats is not repeated
    assert trace.metrics.token_input is not None and trace.metrics.token_input >= 89


def test_evaluators_judge_the_agent_run(capture: TraceCapture, openai_on: bool) -> None:
    _run_handoff()
    trace = capture.trace
    called, sequence, missing = evaluate(
        trace,
        ToolCalled("random_number"),
        ToolSequence(["random_number", "transfer_to_agent2"], mode="exact"),
        ToolCalled("get_weather"),
    )
    assert called.passed is True
    assert sequence.passed is True, sequence.reason
    assert missing.passed is False
    # The agent span's own subtree is a Trace too (what an evaluator attached to agent spans sees).
    (agent1,) = [s for s in capture.spans if s.name == "invoke_agent agent1"]
    from evaltrace.mapping import trace_from_spans

    agent_trace = trace_from_spans(list(capture.spans), root=agent1)
    assert [c.name for c in agent_trace.tool_calls] == ["random_number", "transfer_to_agent2"]
    assert evaluate(agent_trace, ToolCalled("random_number"))[0].passed is True


def test_a_tool_that_raises_is_an_error_span_and_the_run_goes_on(capture: TraceCapture, openai_on: bool) -> None:
    @function_tool
    def tool() -> str:
        raise RuntimeError("Ouch, don't do that again!")

    result, _ = replay(
        _cassette("test_function_tool_exception"),
        lambda _: Runner.run(Agent(name="agent", tools=[tool]), "Call the tool."),
    )
    assert result.final_output.startswith("It seems there was an error")
    (span,) = [s for s in capture.spans if s.name == "execute_tool tool"]
    assert span.status.status_code is StatusCode.ERROR
    assert (span.status.description or "").startswith("Error running tool")  # the SDK redacts the detail
    assert (span.attributes or {})[sc.ERROR_TYPE] == sc.ERROR_TYPE_OTHER
    assert (span.attributes or {})[sc.GEN_AI_TOOL_CALL_ID] == "call_OpJ32C09GImFzxYLe01MiOOd"
    assert [c.name for c in capture.trace.tool_calls] == ["tool"]
    # An error result, with the text the model was sent for it (the SDK's failure message)
    assert [(r.tool_call_id, r.content) for r in capture.trace.tool_results] == [
        ("call_OpJ32C09GImFzxYLe01MiOOd", {"error": "An error occurred while running the tool. Please try again."})
    ]


def test_input_guardrail_span_under_the_agent(capture: TraceCapture, openai_on: bool) -> None:
    @input_guardrail
    async def is_math(ctx: Any, agent: Agent[Any], question: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info={"math": True}, tripwire_triggered=False)

    result, _ = replay(
        _cassette("test_input_guardrails"),
        lambda _: Runner.run(Agent(name="agent", input_guardrails=[is_math]), "1+1?"),
    )
    assert result.final_output == "1 + 1 equals 2."
    spans = capture.spans
    (guardrail,) = [s for s in spans if s.name == "guardrail is_math"]
    assert (guardrail.attributes or {})[sc.OPENAI_AGENTS_GUARDRAIL_NAME] == "is_math"
    assert (guardrail.attributes or {})[sc.OPENAI_AGENTS_GUARDRAIL_TRIGGERED] is False
    assert _kind(guardrail) == sc.KIND_TASK
    assert _agent_of(guardrail, spans) == "agent"
    assert capture.trace.output.final_answer == "1 + 1 equals 2."


def test_a_tripped_guardrail_is_recorded_and_its_exception_reaches_the_caller(capture: TraceCapture) -> None:
    """No recording is needed: a blocking guardrail that trips stops the run before any model request."""
    if "run_in_parallel" not in inspect.signature(input_guardrail).parameters:
        pytest.skip("this openai-agents has no blocking guardrails (input_guardrail(run_in_parallel=...))")

    @input_guardrail(run_in_parallel=False)
    async def no_math(ctx: Any, agent: Agent[Any], question: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info={"math": True}, tripwire_triggered=True)

    agent = Agent(name="agent", input_guardrails=[no_math])
    received: list[Any] = []

    async def run(_: AsyncOpenAI) -> Any:
        try:
            return await Runner.run(agent, "1+1?")
        finally:
            received.append(True)

    with pytest.raises(InputGuardrailTripwireTriggered):
        replay(_cassette("test_input_guardrails"), run)
    assert received == [True]
    (guardrail,) = [s for s in capture.spans if s.name == "guardrail no_math"]
    assert (guardrail.attributes or {})[sc.OPENAI_AGENTS_GUARDRAIL_TRIGGERED] is True
    (turn,) = [s for s in capture.spans if s.name == "turn 1 agent"]  # where the SDK records the tripwire
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.status.description == "Guardrail tripwire triggered"
    assert _agent_of(turn, capture.spans) == "agent"
    assert all(s.end_time is not None for s in capture.spans)


def _run_streamed() -> tuple[str, ReplayServer]:
    """The one streamed Agents recording is the model step of Logfire's voice-pipeline test (the Responses SSE)."""
    streamed = [r for r in _cassette("test_voice_pipeline") if "event-stream" in r.content_type]

    async def run(_: AsyncOpenAI) -> str:
        result = Runner.run_streamed(Agent(name="voice"), "あたし")
        async for _event in result.stream_events():
            pass
        return str(result.final_output)

    return replay(streamed, run)


def test_streamed_run_has_one_llm_span_under_its_agent(capture: TraceCapture, openai_on: bool) -> None:
    answer, server = _run_streamed()
    assert server.received[0].json()["stream"] is True
    assert answer.startswith("「")
    spans = capture.spans
    (llm,) = [s for s in spans if _kind(s) == sc.KIND_LLM]
    assert _agent_of(llm, spans) == "voice"
    assert all(s.end_time is not None for s in spans)


def test_streamed_run_answer_from_the_sdk_span(capture: TraceCapture, openai_on: bool) -> None:
    """Both ways the SDK's span records the streamed call.

    The SDK streams through ``responses.with_streaming_response.create()`` + ``parse()``, a stream our OpenAI
    instrumentation does not follow yet (its span would end with no output), so there the OpenAI span is
    suppressed inside the SDK's, which carries the answer.
    """
    answer, _ = _run_streamed()
    (llm,) = [s for s in capture.spans if _kind(s) == sc.KIND_LLM]
    assert (llm.attributes or {})[sc.OPENAI_AGENTS_SPAN_TYPE] == "response"
    assert (llm.attributes or {})[sc.GEN_AI_REQUEST_STREAM] is True
    trace = capture.trace
    assert trace.output.final_answer == answer
    assert trace.metrics.token_output == 41


def test_chat_completions_model_generation_span(capture: TraceCapture, openai_on: bool) -> None:
    def run(client: AsyncOpenAI) -> Awaitable[Any]:
        agent = Agent(name="agent", model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client))
        return Runner.run(agent, "1+1?")

    result, _ = replay(_cassette("test_chat_completions"), run)
    assert result.final_output == "1 + 1 = 2"
    spans = capture.spans
    (llm,) = [s for s in spans if _kind(s) == sc.KIND_LLM]
    attrs = llm.attributes or {}
    assert llm.name == "chat gpt-4o"
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
    assert attrs.get(sc.OPENAI_AGENTS_SPAN_TYPE) == (None if openai_on else "generation")
    assert _agent_of(llm, spans) == "agent"
    trace = capture.trace
    assert trace.output.final_answer == "1 + 1 = 2"
    assert [m.role for m in trace.messages] == ["user", "assistant"]


def test_uninstrument_stops_recording_and_instrument_again_restarts(capture: TraceCapture) -> None:
    evaltrace.uninstrument_openai_agents()
    _run_handoff()
    assert [s.name for s in capture.spans if _kind(s) != sc.KIND_LLM] == []  # LLM spans: instrument_openai()'s
    processor = evaltrace.instrument_openai_agents()
    assert evaltrace.instrument_openai_agents() is processor  # idempotent: one processor, registered once
    assert (_registered_processors() or []).count(processor) == 1
    _run_handoff()
    assert len([s for s in capture.spans if s.name == "execute_tool random_number"]) == 1


def test_without_content_no_messages_arguments_or_results_are_recorded(capture: TraceCapture) -> None:
    settings.replace(settings.CaptureSettings(capture_content=False))
    _run_handoff()
    for span in capture.spans:
        attrs = span.attributes or {}
        for key in (
            sc.GEN_AI_TOOL_CALL_ARGUMENTS,
            sc.GEN_AI_TOOL_CALL_RESULT,
            sc.GEN_AI_INPUT_MESSAGES,
            sc.INPUT_VALUE,
        ):
            assert key not in attrs, (span.name, key)
        assert sc.GEN_AI_OUTPUT_MESSAGES not in attrs
    assert [s.name for s in capture.spans if _kind(s) == sc.KIND_TOOL] == ["execute_tool random_number"]


def test_fixture_files_are_in_the_repository() -> None:
    assert Path(CASSETTES).is_dir()


# An MCP server (stdio, a child process on this machine) with the one tool of Logfire's recorded MCP run.
_MCP_SERVER = """
try:
    from mcp.server.mcpserver import MCPServer as Server  # mcp 2
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # mcp 1
app = Server("random")

@app.tool()
def random_number() -> int:
    return 4

app.run()
"""


def test_mcp_tools_are_listed_and_called_as_extension_tools(capture: TraceCapture, openai_on: bool) -> None:
    pytest.importorskip("mcp")
    import sys

    from agents.mcp import MCPServerStdio

    async def run(_: AsyncOpenAI) -> Any:
        params: Any = {"command": sys.executable, "args": ["-c", _MCP_SERVER]}
        async with MCPServerStdio(params=params, name="random") as server:
            return await Runner.run(Agent(name="mcp_agent", mcp_servers=[server]), "Give me a random number")

    result, _ = replay(load_cassette(CASSETTES.parent / "test_openai_agents_mcp" / "test_mcp.yaml"), run)
    assert result.final_output == "Here's a random number for you: 4"
    spans = capture.spans
    listed = [s for s in spans if s.name == "mcp list_tools random"]
    (agent,) = [s for s in spans if s.name == "invoke_agent mcp_agent"]
    assert listed
    for span in listed:
        if (span.start_time or 0) > (agent.start_time or 0):
            assert _agent_of(span, spans) == "mcp_agent"
        else:  # the SDK listed the tools before it started the agent span (openai-agents 0.2): under the workflow
            assert _kind(_parent(span, spans)) == sc.KIND_WORKFLOW
    assert tuple((listed[0].attributes or {})[sc.OPENAI_AGENTS_MCP_TOOLS]) == ("random_number",)
    (tool,) = [s for s in spans if s.name == "execute_tool random_number"]
    attrs = tool.attributes or {}
    assert attrs[sc.GEN_AI_TOOL_TYPE] == "extension"
    assert attrs[sc.OPENAI_AGENTS_MCP_SERVER] == "random"
    assert attrs[sc.GEN_AI_TOOL_CALL_ID] == "call_jfYaCkab5PQtyNrcrSgMdlRf"
    assert evaluate(capture.trace, ToolCalled("random_number"))[0].passed is True


def test_code_inside_a_function_tool_nests_under_its_span(capture: TraceCapture, openai_on: bool) -> None:
    @evaltrace.tool
    def roll() -> int:
        return 4

    @function_tool(name_override="random_number")
    def random_number_tool() -> int:
        return roll()

    agent2 = Agent(name="agent2", instructions="Return double the number")
    agent1 = Agent(name="agent1", tools=[random_number_tool], handoffs=[agent2])
    replay(
        _cassette("test_responses"), lambda _: Runner.run(agent1, "Generate a random number then, hand off to agent2.")
    )
    spans = capture.spans
    (inner,) = [s for s in spans if s.name == "execute_tool roll"]
    parent = _parent(inner, spans)
    assert parent is not None and parent.name == "execute_tool random_number"


def test_uninstrument_during_a_run_ends_every_span_it_started(capture: TraceCapture, openai_on: bool) -> None:
    @function_tool(name_override="random_number")
    def random_number_and_stop() -> int:
        evaltrace.uninstrument_openai_agents()
        return 4

    agent2 = Agent(name="agent2", instructions="Return double the number")
    agent1 = Agent(name="agent1", tools=[random_number_and_stop], handoffs=[agent2])
    result, _ = replay(
        _cassette("test_responses"), lambda _: Runner.run(agent1, "Generate a random number then, hand off to agent2.")
    )
    assert result.final_output.startswith("The random number generated is 4")
    names = [s.name for s in capture.spans if _kind(s) != sc.KIND_LLM]
    # Started before: recorded and ended (an unended span would not be exported); started after: not recorded.
    for name in ("invoke_workflow Agent workflow", "invoke_agent agent1", "execute_tool random_number"):
        assert names.count(name) == 1, name
    assert "invoke_agent agent2" not in names
    assert all(s.end_time is not None for s in capture.spans)
    # Unregistered once the spans it started had ended.
    assert not any(type(p).__name__ == "EvaltraceTracingProcessor" for p in _registered_processors() or [])


def test_an_evaluator_on_agent_spans_judges_the_run_in_the_live_pipeline() -> None:
    """configure() with an evaluator for agent spans: the verdict lands on the recorded agent span."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evaltrace import config
    from evaltrace._internal import tracing
    from evaltrace.evaluation import EvaluatorSpec

    saved_settings, saved_processors = settings.current, _registered_processors() or []
    previous_client = _openai_shared.get_default_openai_client()
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="agents",
        exporters=[exporter],
        local_store=False,
        handle_sigterm=False,
        evaluators=[EvaluatorSpec(ToolCalled("random_number"), span_kinds={"agent"})],
    )
    set_trace_processors([])
    try:
        evaltrace.instrument_openai_agents()
        _run_handoff()
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
    spans = {s.name: s for s in exporter.get_finished_spans()}
    agent1 = spans["invoke_agent agent1"]
    assert (agent1.attributes or {})["evaltrace.eval.tool_called.passed"] is True
    assert "evaltrace.eval.tool_called.passed" not in (spans["execute_tool random_number"].attributes or {})
