"""Jaeger: traces of a small agent, with evaluation scores on the spans, in Jaeger v2.

Shows: OTLP export (HTTP or gRPC) straight to Jaeger, live evaluators whose results ride on the spans
(`evaltrace.eval.*` attributes, searchable; `gen_ai.evaluation.result` span events, under "Events"/"Logs").

Run:
    docker run --rm -p 16686:16686 -p 4317:4317 -p 4318:4318 cr.jaegertracing.io/jaegertracing/jaeger:2.20.0
    python examples/jaeger.py                 # OTLP/HTTP to http://localhost:4318/v1/traces
    python examples/jaeger.py --grpc          # OTLP/gRPC to localhost:4317
    # then open the printed link, or search service "evaltrace-jaeger-demo" at http://localhost:16686
    # search by score: Tags  evaltrace.eval.tool_called.passed=true

Environment: JAEGER_OTLP_HTTP (default http://localhost:4318), JAEGER_OTLP_GRPC (default http://localhost:4317),
JAEGER_UI (default http://localhost:16686).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from opentelemetry import trace as otel_trace

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluators import ToolCalled


@evaltrace.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (canned)."""
    return {"city": city, "sky": "sunny", "temp_c": 24}


@evaltrace.llm(name="chat demo-model", attributes={"gen_ai.request.model": "demo-model"})
def call_model(prompt: str) -> str:
    """A stand-in for an LLM call, so the example needs no API key."""
    return f"Answer based on: {prompt}"


@evaluator(name="mentions_city")
def mentions_city(trace: Any) -> bool:
    return "Paris" in (trace.output.final_answer or "")


@evaltrace.agent(name="weather-bot")
def answer(question: str) -> str:
    weather = get_weather("Paris")
    return call_model(f"{question} -> {weather['sky']}, {weather['temp_c']}C in {weather['city']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", action="store_true", help="export over OTLP/gRPC instead of OTLP/HTTP")
    args = parser.parse_args()
    if args.grpc:
        endpoint, protocol = os.environ.get("JAEGER_OTLP_GRPC", "http://localhost:4317"), "grpc"
    else:
        endpoint, protocol = os.environ.get("JAEGER_OTLP_HTTP", "http://localhost:4318"), "http/protobuf"
    handle = evaltrace.configure(
        "evaltrace-jaeger-demo",
        otlp_endpoint=endpoint,  # HTTP: /v1/traces is appended
        protocol=protocol,
        evaluators=[EvaluatorSpec(ToolCalled("get_weather"), span_kinds={"agent"}), EvaluatorSpec(mentions_city)],
    )
    tracer = otel_trace.get_tracer("examples.jaeger", tracer_provider=handle.provider)
    with tracer.start_as_current_span("request") as root:
        with evaltrace.context(session_id="demo-session", user_id="demo-user"):
            print(answer("What's the weather in Paris?"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    # False when a span was lost (Jaeger down, refused, too slow): the WARNING above names the cause.
    ok = handle.force_flush(30_000)
    spans = handle.evaluation_processor.stats()["exporters"]["otlp"]
    handle.shutdown()
    if not ok:
        print(
            f"NOT all sent to {endpoint}: {spans['lost']} span(s) lost, {spans['queued']} still queued", file=sys.stderr
        )
        return 1
    ui = os.environ.get("JAEGER_UI", "http://localhost:16686")
    print(f"exported {spans['exported']} span(s) via {protocol} to {endpoint}")
    print(f"trace: {ui}/trace/{trace_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
