"""A tool-calling OpenAI agent, traced and evaluated live; offline by default.

What it shows: ``evaltrace.instrument_openai()`` turns every ``chat.completions.create`` into a ``chat {model}``
span; ``@evaltrace.agent`` and ``@evaltrace.tool`` add the agent and tool spans around them, so the local store
holds one tree: agent -> chat (asks for tools) -> two tool runs -> chat (answers). Two evaluators attached to the
agent judge that tree as soon as the agent returns: ``ToolCalled("get_current_weather")`` and ``NoPII()``; their
scores are appended to ``.evaltrace/scores.jsonl``.

Offline (default), the OpenAI client talks to a replay server on 127.0.0.1 (``_replay.py``) that answers with a
real recorded conversation (``recordings/test_chat_completion_tool_calls_with_content.yaml``). The agent sends
exactly the messages of that recording, so the replayed answers fit. With a key it talks to the real API instead.

Run:
    python examples/openai_agent.py                                 # replayed, no network, no key
    OPENAI_API_KEY=sk-... python examples/openai_agent.py --live    # the real API (or EVALTRACE_EXAMPLE_LIVE=1)
    evaltrace traces show last --details
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
from _replay import RECORDINGS, ReplayServer
from openai.types.chat import (
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallParam,
    ChatCompletionToolParam,
)

import evaltrace
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.evaluators import NoPII, ToolCalled

MODEL = "gpt-4o-mini"
SYSTEM = "You're a helpful assistant."
QUESTION = "What's the weather in Seattle and San Francisco today?"
TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and state, e.g. Boston, MA"},
                },
                "required": ["location"],
                "additionalProperties": False,
            },
        },
    }
]
WEATHER = {"Seattle, WA": "50 degrees and raining", "San Francisco, CA": "70 degrees and sunny"}
STORE = Path(".evaltrace")
SCORES = STORE / "scores.jsonl"


@evaltrace.tool
def get_current_weather(location: str) -> str:
    """Get the current weather in a given location (canned: the same values the recording was made with)."""
    return WEATHER.get(location, "no weather data for that location")


TOOL_FUNCTIONS: dict[str, Callable[..., str]] = {"get_current_weather": get_current_weather}


class WeatherAgent:
    """Ask the model which tools to run, run them, then ask it to answer from their results."""

    def __init__(self, client: openai.OpenAI) -> None:
        self.client = client

    @evaltrace.agent(name="weather-agent", evaluators=[ToolCalled("get_current_weather"), NoPII()])
    def run(self, question: str) -> str:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ]
        first = self.client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto")
        reply = first.choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        calls = [call for call in reply.tool_calls if call.type == "function"]
        messages.append({"role": "assistant", "tool_calls": [_as_message_part(call) for call in calls]})
        for call in calls:
            result = TOOL_FUNCTIONS[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "content": result, "tool_call_id": call.id})
        # The tools are not offered again: this turn only writes the answer (as in the recording).
        final = self.client.chat.completions.create(model=MODEL, messages=messages)
        return final.choices[0].message.content or ""


def _as_message_part(call: Any) -> ChatCompletionMessageToolCallParam:
    """A tool call as the request shape expects it back (only the fields the API accepts)."""
    function = call.function
    return {"id": call.id, "function": {"arguments": function.arguments, "name": function.name}, "type": "function"}


def live_requested() -> bool:
    """The real API is used only when asked for (``--live`` / ``EVALTRACE_EXAMPLE_LIVE=1``) and a key is set."""
    asked = "--live" in sys.argv[1:] or os.environ.get("EVALTRACE_EXAMPLE_LIVE") == "1"
    if asked and not os.environ.get("OPENAI_API_KEY"):
        sys.exit("--live needs OPENAI_API_KEY; without it the example replays the recording")
    return asked


@contextlib.contextmanager
def openai_client(live: bool) -> Iterator[openai.OpenAI]:
    """The real client, or one pointed at the local replay server."""
    if live:
        yield openai.OpenAI()
        return
    with ReplayServer(RECORDINGS / "test_chat_completion_tool_calls_with_content.yaml") as server:
        yield openai.OpenAI(api_key="replay-needs-no-key", base_url=server.base_url, max_retries=0)


def print_scores(offset: int) -> None:
    """Print the scores this run appended to the JSONL file."""
    with SCORES.open(encoding="utf-8") as f:
        f.seek(offset)
        for line in f:
            score = json.loads(line)
            detail = (score.get("metadata") or {}).get("reason") or score.get("comment") or ""
            print(f"  {score['name']:<14} value={score['value']!s:<5} {detail}")


def main() -> None:
    live = live_requested()
    offset = SCORES.stat().st_size if SCORES.exists() else 0
    handle = evaltrace.configure(
        service_name="openai-agent-example",
        local_store=STORE,
        sinks=[JsonlScoreSink(SCORES)],
        evaluation_options={"dead_letter_dir": STORE / "dead-letter", "sink_schedule_delay_s": 0.05},
    )
    evaltrace.instrument_openai()
    print(f"({'live OpenAI API' if live else 'replaying a recorded conversation on 127.0.0.1'})")
    with openai_client(live) as client:
        print(f"Q: {QUESTION}")
        print(f"A: {WeatherAgent(client).run(QUESTION)}")
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
