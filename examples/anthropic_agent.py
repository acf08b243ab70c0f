"""A tool-using Claude agent with extended thinking, traced and evaluated live; offline by default.

What it shows: ``evaltrace.instrument_anthropic()`` turns ``messages.create`` and the ``messages.stream()`` helper
into ``chat {model}`` spans (provider ``anthropic``); ``@evaltrace.agent`` and ``@evaltrace.tool`` add the agent and
tool spans, so the local store holds one tree: agent -> chat (thinks, asks for the tool) -> tool run -> chat
(streams the answer). Claude's thinking is recorded as reasoning, never as answer text: the Trace has it in
``messages[].thinking`` and ``output.thinking``. Three evaluators judge the tree as soon as the agent returns:
``ToolCalled("get_weather")``, ``NoPII()`` and ``thinking_kept_apart`` (a function evaluator); their scores are
appended to ``.evaltrace/scores.jsonl``.

Offline (default), the client talks to a replay server on 127.0.0.1 (``_replay.py``) that answers with
``recordings/anthropic_weather_thinking.yaml``, a conversation written from the Anthropic API documentation's
examples (see ``recordings/README.md``). With a key it talks to the real API instead.

Run:
    python examples/anthropic_agent.py                                       # replayed, no network, no key
    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_agent.py --live   # the real API
    evaltrace traces show last --details
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
from _replay import RECORDINGS, ReplayServer

import evaltrace
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.evaluators import NoPII, ToolCalled
from evaltrace.schema import Trace

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a concise weather assistant. Use the tool for current conditions."
QUESTION = "What's the weather like in San Francisco right now?"
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "input_schema": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    }
]
THINKING: Any = {"type": "adaptive"}
STORE = Path(".evaltrace")
SCORES = STORE / "scores.jsonl"


@evaltrace.tool
def get_weather(location: str, unit: str = "celsius") -> str:
    """Get the current weather in a given location (canned: the values the recording was written with)."""
    return "15 degrees, partly cloudy" if location.startswith("San Francisco") else "no weather data"


@evaltrace.evaluator
def thinking_kept_apart(trace: Trace) -> bool:
    """Claude's thinking is in ``output.thinking``, and none of it leaked into the answer."""
    thinking, answer = trace.output.thinking, trace.output.final_answer or ""
    return bool(thinking) and thinking not in answer


class WeatherAgent:
    """Let Claude think and call the tool, run it, then stream Claude's answer from the tool's result."""

    def __init__(self, client: anthropic.Anthropic) -> None:
        self.client = client

    @evaltrace.agent(name="claude-weather-agent", evaluators=[ToolCalled("get_weather"), NoPII(), thinking_kept_apart])
    def run(self, question: str) -> str:
        messages: list[Any] = [{"role": "user", "content": question}]
        first = self.client.messages.create(
            model=MODEL, max_tokens=4096, system=SYSTEM, tools=TOOLS, thinking=THINKING, messages=messages
        )
        calls = [block for block in first.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in first.content if block.type == "text")
        # Thinking blocks go back unchanged (with their signatures), as the API requires with tool use.
        messages.append(
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]}
        )
        results = [
            {"type": "tool_result", "tool_use_id": call.id, "content": get_weather(**call.input)} for call in calls
        ]
        messages.append({"role": "user", "content": results})
        with self.client.messages.stream(
            model=MODEL, max_tokens=4096, system=SYSTEM, tools=TOOLS, thinking=THINKING, messages=messages
        ) as stream:
            for text in stream.text_stream:
                print(text, end="", flush=True)
            print()
            return stream.get_final_text()


def live_requested() -> bool:
    """The real API is used only when asked for (``--live`` / ``EVALTRACE_EXAMPLE_LIVE=1``) and a key is set."""
    asked = "--live" in sys.argv[1:] or os.environ.get("EVALTRACE_EXAMPLE_LIVE") == "1"
    if asked and not os.environ.get("ANTHROPIC_API_KEY"):
        sys.exit("--live needs ANTHROPIC_API_KEY; without it the example replays the recording")
    return asked


@contextlib.contextmanager
def anthropic_client(live: bool) -> Iterator[anthropic.Anthropic]:
    """The real client, or one pointed at the local replay server (the client adds ``/v1`` itself)."""
    if live:
        yield anthropic.Anthropic()
        return
    with ReplayServer(RECORDINGS / "anthropic_weather_thinking.yaml") as server:
        base_url = server.base_url.removesuffix("/v1")
        yield anthropic.Anthropic(api_key="replay-needs-no-key", base_url=base_url, max_retries=0)


def print_scores(offset: int) -> None:
    """Print the scores this run appended to the JSONL file."""
    with SCORES.open(encoding="utf-8") as f:
        f.seek(offset)
        for line in f:
            score = json.loads(line)
            detail = (score.get("metadata") or {}).get("reason") or score.get("comment") or ""
            print(f"  {score['name']:<20} value={score['value']!s:<5} {detail}")


def main() -> None:
    live = live_requested()
    offset = SCORES.stat().st_size if SCORES.exists() else 0
    handle = evaltrace.configure(
        service_name="anthropic-agent-example",
        local_store=STORE,
        sinks=[JsonlScoreSink(SCORES)],
        evaluation_options={"dead_letter_dir": STORE / "dead-letter", "sink_schedule_delay_s": 0.05},
    )
    evaltrace.instrument_anthropic()
    print(f"({'live Anthropic API' if live else 'replaying a recorded conversation on 127.0.0.1'})")
    with anthropic_client(live) as client:
        print(f"Q: {QUESTION}")
        print("A: ", end="")
        WeatherAgent(client).run(QUESTION)
    # Waits for the evaluators and the score sink; False when a span was lost (the WARNING above says why).
    stored = handle.force_flush()
    handle.shutdown()
    print(f"\nScores (appended to {SCORES}):")
    print_scores(offset)
    if not stored:
        sys.exit(f"\nNOT all written to {STORE / 'traces.sqlite3'}: see the warning above")
    print(f"\nTrace written to {STORE / 'traces.sqlite3'} — see it with: evaltrace traces show last --details")


if __name__ == "__main__":
    main()
