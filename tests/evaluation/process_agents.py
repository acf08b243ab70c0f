"""Quickstart-style decorated functions for the process-engine tests: evaluators attached inline.

``ToolCalled("get_weather")`` is an instance made in the decorator call, not a module-level name: the evaluation
process finds it again by importing this module, which re-runs the decorators.
"""

from __future__ import annotations

import evaltrace
from evaltrace.evaluators import ContainsText, ToolCalled


@evaltrace.tool
def get_weather(city: str) -> dict[str, object]:
    return {"city": city, "condition": "light rain", "temp_c": 11}


@evaltrace.agent(name="weather-assistant", evaluators=[ToolCalled("get_weather"), ContainsText("umbrella")])
def answer(question: str) -> str:
    city = question.rsplit(" in ", 1)[-1].rstrip("?") if " in " in question else "Paris"
    weather = get_weather(city)
    return f"It is {weather['condition']} in {weather['city']}."


@evaltrace.agent(name="umbrella-assistant", evaluators=[ContainsText("umbrella")])
def advise(question: str) -> str:
    return "Take an umbrella." if "rain" in question else "Sunglasses, then."


def _late(question: str) -> str:
    return "hello"


late = _late


def decorate_late() -> None:
    """Decorate ``late`` at run time, as a conditional set-up does: importing this module does not."""
    global late
    late = evaltrace.agent(name="late", evaluators=[ContainsText("hello")])(_late)
