"""Langfuse: traces as typed observations (agent, tool, generation) and evaluator scores via the scores API.

Shows: `configure(langfuse=True)` exporting OTLP/HTTP to `{LANGFUSE_HOST}/api/public/otel/v1/traces` (Basic auth,
`x-langfuse-ingestion-version: 4`); session, user and tags on every span through `evaltrace.context`; evaluator
results posted to `POST /api/public/scores` by `LangfuseScoreSink` (deterministic ids, so re-sends upsert).

Run:
    export LANGFUSE_PUBLIC_KEY=pk-lf-... LANGFUSE_SECRET_KEY=sk-lf-...
    export LANGFUSE_HOST=https://cloud.langfuse.com        # or your self-hosted URL (>= v3.22)
    python examples/langfuse.py
    # then Langfuse -> Tracing -> filter Session "langfuse-demo-session"; the trace id is printed.
    # Scores show on the trace and on the agent observation ("tool_called", "mentions_city").
"""

from __future__ import annotations

import os
import sys
from typing import Any

from opentelemetry import trace as otel_trace

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, LangfuseScoreSink, evaluator
from evaltrace.evaluators import ToolCalled


@evaltrace.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (canned)."""
    return {"city": city, "sky": "sunny", "temp_c": 24}


@evaltrace.llm(name="chat demo-model", attributes={"gen_ai.request.model": "demo-model"})
def call_model(prompt: str) -> str:
    """A stand-in for an LLM call, so the example needs no model API key."""
    return f"It is sunny and 24C in Paris ({prompt})."


@evaluator(name="mentions_city")
def mentions_city(trace: Any) -> bool:
    return "Paris" in (trace.output.final_answer or "")


@evaltrace.agent(name="weather-bot")
def answer(question: str) -> str:
    weather = get_weather("Paris")
    return call_model(f"{question} {weather}")


def main() -> int:
    if not (os.environ.get("LANGFUSE_PUBLIC_KEY") and os.environ.get("LANGFUSE_SECRET_KEY")):
        print("set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (and LANGFUSE_HOST) first", file=sys.stderr)
        return 2
    handle = evaltrace.configure(
        "evaltrace-langfuse-demo",
        langfuse=True,
        evaluators=[EvaluatorSpec(ToolCalled("get_weather"), span_kinds={"agent"}), EvaluatorSpec(mentions_city)],
        sinks=[LangfuseScoreSink()],
    )
    tracer = otel_trace.get_tracer("examples.langfuse", tracer_provider=handle.provider)
    with evaltrace.context(session_id="langfuse-demo-session", user_id="demo-user", tags=["example"]):
        with tracer.start_as_current_span("request") as root:
            print(answer("What's the weather in Paris?"))
            trace_id = format(root.get_span_context().trace_id, "032x")
    # False when a span was lost or a score not delivered in time: the WARNING above names the cause.
    ok = handle.force_flush(30_000)
    stats = handle.evaluation_processor.stats()
    spans, scores = stats["exporters"]["langfuse"], stats["sinks"]["langfuse"]
    handle.shutdown()
    print(f"scores delivered={scores['successes']}; undelivered ones go to .evaltrace/dead-letter/langfuse.jsonl")
    if not ok or spans["lost"]:
        print(
            f"trace {trace_id} NOT all sent: {spans['lost']} span(s) lost, {spans['queued']} still queued",
            file=sys.stderr,
        )
        return 1
    print(f"trace {trace_id}: exported {spans['exported']} span(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
