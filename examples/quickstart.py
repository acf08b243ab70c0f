"""Quickstart: decorators + the local trace store, fully offline.

What it shows: a tiny support agent made of plain functions (@evaltrace.agent, @evaltrace.tool,
@evaltrace.trace) traced into the embedded local store (.evaltrace/traces.sqlite3), with a session and user stamped
on every span, and two checks judging every answer as it is produced: one it passes (the weather tool was called)
and one it fails (the answer never mentions an umbrella), so the failure can be found from the CLI.

Run:
    python examples/quickstart.py
    evaltrace traces list --failed-evals
    evaltrace traces show last
"""

from __future__ import annotations

import sys

import evaltrace
from evaltrace.evaluators import ContainsText, ToolCalled


@evaltrace.tool
def get_weather(city: str) -> dict[str, object]:
    """Look up the current weather for a city (canned data: this example needs no network)."""
    return {"city": city, "condition": "light rain", "temp_c": 11}


@evaltrace.tool
def get_forecast(city: str, days: int = 2) -> list[str]:
    """Forecast for the next days."""
    return ["showers", "sunny"][:days]


@evaltrace.trace
def compose_answer(weather: dict[str, object], forecast: list[str]) -> str:
    return f"It is {weather['condition']} and {weather['temp_c']}°C in {weather['city']}; next: {', '.join(forecast)}."


# Evaluators attached here run off the application's thread when the agent's span ends; their verdicts ride on
# the span (evaltrace.eval.<name>.*) and show in `evaltrace traces show`.
@evaltrace.agent(name="weather-assistant", evaluators=[ToolCalled("get_weather"), ContainsText("umbrella")])
def answer(question: str) -> str:
    city = question.rsplit(" in ", 1)[-1].rstrip("?") if " in " in question else "Paris"
    return compose_answer(get_weather(city), get_forecast(city))


def main() -> int:
    handle = evaltrace.configure(service_name="quickstart")
    with evaltrace.context(session_id="session-42", user_id="ada", tags=["quickstart"]):
        print(answer("What's the weather in Paris?"))
    # Waits for the evaluations too; False when a span was lost (the WARNING above says why) or not stored in time.
    if not handle.force_flush():
        print("NOT all written to .evaltrace/traces.sqlite3: see the warning above", file=sys.stderr)
        return 1
    print("Trace and its evaluations written to .evaltrace/traces.sqlite3. See them with:")
    print("  evaltrace traces list --failed-evals    # the traces with a failed check")
    print("  evaltrace traces show last              # the tree, with each check's verdict")
    return 0


if __name__ == "__main__":
    sys.exit(main())
