"""Offline evaluation example: a small deterministic support agent evaluated with `evaltrace run`.

What it shows:
    * two variants of the same agent (``answer`` = v1, ``answer_v2`` = v2, async) run over the cases of
      ``cases.yaml`` under tracing: the ``@evaltrace.agent`` and ``@evaltrace.tool`` spans of each case become
      its Trace (tool calls included), with no LLM and no network;
    * deterministic evaluators from eval.yaml (tool_called, contains_text, not_contains, latency) judging each
      trace against the case's expected behaviour;
    * a comparison of v2 with the baseline variant v1: v2 answers order questions without looking the order
      up, so the ``order_shipped`` case regresses, and it crashes on an empty question (a Trace.error);
    * the run directory ``runs/<run_id>/`` (config.yaml, config_hash.txt, traces.jsonl, results.jsonl,
      summary.yaml).

How to run (from the repository root, after ``pip install -e .``)::

    evaltrace run examples/offline_eval/eval.yaml            # writes ./runs/<run_id>/
    evaltrace re-evaluate <run_id>                           # evaluators again, from traces.jsonl only
    evaltrace promote <run_id>                               # ./runs/baselines/support_bot/
    evaltrace run examples/offline_eval/eval.yaml --drift    # compare with the promoted run
    evaltrace compare <run_id_a> <run_id_b>
"""

from __future__ import annotations

import re

import evaltrace

WEATHER = {"paris": {"temperature_c": 18, "sky": "sunny"}, "oslo": {"temperature_c": 4, "sky": "rainy"}}
ORDERS = {"A100": "shipped", "B200": "processing"}
_ORDER_ID = re.compile(r"\b([A-Z]\d{3})\b")


@evaltrace.tool
def get_weather(city: str) -> dict[str, object]:
    """Look the weather up in a fixed table."""
    return WEATHER.get(city.lower(), {"error": f"unknown city {city}"})


@evaltrace.tool
def order_status(order_id: str) -> str:
    """Look an order up in a fixed table."""
    return ORDERS.get(order_id, "unknown")


def _city(question: str) -> str | None:
    return next((c for c in WEATHER if c in question.lower()), None)


@evaltrace.agent(name="support")
def answer(question: str) -> str:
    """v1: route by keyword and always use the matching tool."""
    city = _city(question)
    if "weather" in question.lower() and city:
        report = get_weather(city)
        return f"It is {report['temperature_c']} °C and {report['sky']} in {city.title()}."
    match = _ORDER_ID.search(question)
    if match:
        return f"Order {match.group(1)} is {order_status(match.group(1))}."
    if "weather" in question.lower():
        return "Sorry, I don't know that city."
    return "Hello! I can help with the weather and with your orders."


@evaltrace.agent(name="support")
async def answer_v2(question: str) -> str:
    """v2: friendlier wording, but it guesses order states without the tool and fails on empty questions."""
    if not question.strip():
        raise ValueError("empty question")
    city = _city(question)
    if "weather" in question.lower() and city:
        report = get_weather(city)
        return f"Good news: {city.title()} has {report['temperature_c']} °C, {report['sky']} skies."
    match = _ORDER_ID.search(question)
    if match:
        return f"Order {match.group(1)} is on its way!"
    if "weather" in question.lower():
        return "Sorry, I don't know that city."
    return "Hi there! How can I help you today?"
