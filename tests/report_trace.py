"""Build a realistic agent trace (two chat calls with reasoning and a tool round trip, scores) in a local store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

import evaltrace
from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, evaluator

SCRIPT = "<script>window.__pwned = 1</script>"  # recorded text is untrusted: it must render as text
USER = [{"role": "user", "parts": [{"type": "text", "content": f"What's the weather in Paris? <b>bold?</b> {SCRIPT}"}]}]
SYSTEM = [{"type": "text", "content": "You are a weather assistant."}]
CALL = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
FIRST_OUT = [
    {
        "role": "assistant",
        "parts": [{"type": "reasoning", "content": "The user wants the weather; call get_weather."}, CALL],
        "finish_reason": "tool_call",
    }
]
TOOL_MSG = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny, 24C"}]}]
ANSWER = "It is sunny and 24C in Paris."
SECOND_OUT = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
FIRST_COST = 4.185e-05  # recorded by the instrumentation; the report shows it as $0.000042
SESSION, USER_ID, TAGS = "sess-42", "user-7", ["beta", "<i>vip</i>"]


@evaluator(name="mentions_city")
def mentions_city(trace: Any) -> bool:
    return "Paris" in (trace.output.final_answer or "")


@evaluator(name="concise", threshold=0.9)
def concise(trace: Any) -> float:
    return 0.5  # fails on purpose: the report must show a failing score


def _chat(
    tracer: Any,
    messages: list[dict[str, Any]],
    output: list[dict[str, Any]],
    tokens: tuple[int, int],
    cost: float | None = None,
) -> None:
    attributes: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        semconv.GEN_AI_RESPONSE_MODEL: "gpt-4o-mini",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1],
        semconv.GEN_AI_INPUT_MESSAGES: json.dumps(messages),
        semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(output),
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps(SYSTEM),
        semconv.EVALTRACE_SPAN_KIND: semconv.KIND_LLM,
    }
    if cost is not None:
        attributes[semconv.EVALTRACE_COST_USD] = cost
    with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=attributes):
        pass


def build_demo_trace(store: Path) -> str:
    """Record the demo trace into ``store`` and return its trace id."""

    @evaltrace.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return "sunny, 24C"

    @evaltrace.tool(name="lookup_timezone")
    def lookup_timezone(city: str) -> str:
        raise TimeoutError("timezone service did not answer")

    handle = evaltrace.configure(
        "report-demo",
        local_store=store,
        batch=False,
        evaluators=[EvaluatorSpec(mentions_city, span_kinds={"agent"}), EvaluatorSpec(concise, span_kinds={"agent"})],
        evaluation_options={"dead_letter_dir": None, "emit_log_events": False},
    )
    tracer = handle.provider.get_tracer("report-demo")

    @evaltrace.agent(name="weather")
    def answer(question: str) -> str:
        _chat(tracer, USER, FIRST_OUT, (52, 31), FIRST_COST)
        get_weather("Paris")
        try:
            lookup_timezone("Paris")
        except TimeoutError:
            pass
        _chat(tracer, USER + FIRST_OUT + TOOL_MSG, SECOND_OUT, (97, 12))
        return ANSWER

    try:
        with (
            evaltrace.context(session_id=SESSION, user_id=USER_ID, tags=TAGS),
            tracer.start_as_current_span("request") as root,
        ):
            root.set_status(Status(StatusCode.OK))
            answer("What's the weather in Paris?")
            trace_id = format(root.get_span_context().trace_id, "032x")
        assert handle.force_flush(30_000)
    finally:
        handle.shutdown()
    return trace_id
