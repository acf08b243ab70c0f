"""Phoenix: traces in a project, evaluation events on the spans, scores as span annotations, read back over REST.

Shows the one Phoenix setup, `configure(phoenix=URL, phoenix_project=NAME)`: OTLP/HTTP to `{URL}/v1/traces`, the
spans filed under project NAME (resource attribute `openinference.project.name`), and scores posted as span
annotations to `{URL}/v1/span_annotations` (the Phoenix score sink that `phoenix=` adds); then Phoenix's REST API
returns both.

Run:
    pip install arize-phoenix && phoenix serve     # or: bash scripts/ci_phoenix.sh (own venv, loopback only)
    python examples/phoenix.py                     # PHOENIX_URL defaults to http://127.0.0.1:6006
    # then open http://127.0.0.1:6006 -> project "evaltrace-demo" -> the trace; annotations sit on the agent span.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import httpx

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluators import ToolCalled

PHOENIX_URL = os.environ.get("PHOENIX_URL", "http://127.0.0.1:6006").rstrip("/")
PROJECT = os.environ.get("PHOENIX_PROJECT_NAME", "evaltrace-demo")


@evaltrace.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (canned)."""
    return {"city": city, "sky": "sunny", "temp_c": 24}


@evaltrace.llm(name="chat demo-model", attributes={"gen_ai.request.model": "demo-model"})
def call_model(prompt: str) -> str:
    """A stand-in for an LLM call, so the example needs no API key."""
    return f"It is sunny and 24C in Paris ({prompt})."


@evaluator(name="mentions_city")
def mentions_city(trace: Any) -> bool:
    return "Paris" in (trace.output.final_answer or "")


@evaltrace.agent(name="weather-bot")
def answer(question: str) -> str:
    return call_model(f"{question} {get_weather('Paris')}")


def wait_for(url: str, params: dict[str, Any], timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Phoenix ingests asynchronously: poll until data shows up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = httpx.get(url, params=params, timeout=10)
        if response.status_code == 200 and response.json()["data"]:
            return list(response.json()["data"])
        time.sleep(0.3)
    return []


def main() -> int:
    handle = evaltrace.configure(
        "evaltrace-phoenix-demo",
        phoenix=PHOENIX_URL,
        phoenix_project=PROJECT,  # the spans' project; the scores go to Phoenix as span annotations
        evaluators=[EvaluatorSpec(ToolCalled("get_weather"), span_kinds={"agent"}), EvaluatorSpec(mentions_city)],
    )
    with evaltrace.context(session_id="phoenix-demo-session", user_id="demo-user"):
        print(answer("What's the weather in Paris?"))
    ok = handle.force_flush(30_000)  # False when a span was lost: the WARNING above names the cause
    lost = handle.evaluation_processor.stats()["exporters"]["phoenix"]["lost"]
    handle.shutdown()
    if not ok or lost:
        print(f"NOT all sent to {PHOENIX_URL}: {lost} span(s) lost; is Phoenix running?", file=sys.stderr)
        return 1

    spans = wait_for(f"{PHOENIX_URL}/v1/projects/{PROJECT}/spans", {"limit": 20})
    agent = next((s for s in spans if s["name"] == "invoke_agent weather-bot"), None)
    if agent is None:
        print(f"no spans in project {PROJECT!r} yet; is Phoenix running at {PHOENIX_URL}?")
        return 1
    print(f"{len(spans)} spans in project {PROJECT!r}; newest trace {agent['context']['trace_id']}")
    for event in agent["events"]:
        print(f"  event {event['name']}: {event['attributes']}")
    annotations = wait_for(
        f"{PHOENIX_URL}/v1/projects/{PROJECT}/span_annotations", {"span_ids": agent["context"]["span_id"]}
    )
    for note in annotations:
        print(f"  annotation {note['name']}: {note['result']} ({note['annotator_kind']})")
    print(f"open {PHOENIX_URL}/projects and pick {PROJECT!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
