"""A small tool-using support agent, evaluated offline by ``eval.yaml`` (see ``run.py``).

One function, :func:`answer`, serves two variants: eval.yaml passes ``model`` through the variant's ``kwargs``.
The "careful" model looks everything up with its tools and thinks out loud in ``<think>`` tags (evaltrace moves that
into ``output.thinking``, never into the answer); the "quick" model guesses exchange rates without the tool and,
when it saves a note, also rewrites ``config/settings.toml``, a file the cases forbid it to touch. No LLM and no
network: the differences between the variants are scripted, so the run is deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import evaltrace

WEATHER = {"paris": (18, "sunny"), "oslo": (4, "rainy"), "lisbon": (24, "clear")}
ORDERS = {"A100": "shipped", "B200": "processing", "C300": "delivered"}
RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93, ("GBP", "EUR"): 1.17}
_ORDER = re.compile(r"\b([A-Z]\d{3})\b")
_MONEY = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Z]{3})\s+(?:to|in)\s+([A-Z]{3})")


@evaltrace.tool
def get_weather(city: str) -> dict[str, object]:
    """The weather of a city, from a fixed table."""
    temperature, sky = WEATHER[city]
    return {"temperature_c": temperature, "sky": sky}


@evaltrace.tool
def order_status(order_id: str) -> str:
    """An order's state, from a fixed table."""
    return ORDERS.get(order_id, "unknown")


@evaltrace.tool
def convert(amount: float, source: str, target: str) -> float:
    """Convert money at a fixed rate."""
    return round(amount * RATES[(source, target)], 2)


@evaltrace.tool
def save_note(text: str, workspace: str) -> str:
    """Write a note into the workspace's ``notes/`` folder and return its path."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "note"
    path = Path(workspace) / "notes" / f"{slug}.md"
    path.write_text(f"# Note\n\n{text}\n", encoding="utf-8")
    return str(path.relative_to(workspace))


@dataclass
class Reply:
    """What the agent thought, answered, and which tools it called (name, arguments)."""

    thinking: str
    text: str
    tools: list[tuple[str, dict[str, object]]] = field(default_factory=list)


def reply(question: str, model: str, workspace: str | None) -> Reply:
    """Answer ``question`` as ``model`` would. Shared with the HTTP server in servers.py."""
    tools: list[tuple[str, dict[str, object]]] = []
    thinking, text = _reply(question, model, workspace, tools)
    return Reply(thinking, text, tools)


def _reply(
    question: str, model: str, workspace: str | None, tools: list[tuple[str, dict[str, object]]]
) -> tuple[str, str]:
    q = question.strip()
    lower = q.lower()
    city = next((c for c in WEATHER if c in lower), None)
    if not q:
        return "The question is empty.", "Hello! Ask me about the weather, your orders, prices or notes."
    if lower.startswith("save a note:"):
        if workspace is None:
            return "No workspace to write to.", "I cannot save notes here."
        text = q.split(":", 1)[1].strip()
        where = save_note(text, workspace)
        tools.append(("save_note", {"text": text}))
        if model == "quick":  # the bug the filesystem checks catch: it "remembers" the note in the settings
            settings = Path(workspace) / "config" / "settings.toml"
            settings.write_text(settings.read_text(encoding="utf-8") + f'last_note = "{where}"\n', encoding="utf-8")
        return f"Saving to {where}.", f"Saved your note as {where}."
    if "weather" in lower:
        if city is None:
            return "Unknown city: I must not invent a forecast.", "Sorry, I don't know that city."
        report = get_weather(city)
        tools.append(("get_weather", {"city": city}))
        return (
            f"Look up {city} with get_weather.",
            f"It is {report['temperature_c']} °C and {report['sky']} in {city.title()}.",
        )
    money = _MONEY.search(q)
    if money:
        amount, source, target = float(money.group(1)), money.group(2), money.group(3)
        if (source, target) not in RATES:
            return f"No rate for {source}->{target}.", f"Sorry, I cannot convert {source} to {target}."
        if model == "quick":  # guesses the rate instead of calling the tool
            return "Roughly one to one.", f"That is about {amount:.2f} {target}."
        value = convert(amount, source, target)
        tools.append(("convert", {"amount": amount, "source": source, "target": target}))
        return f"Convert {amount} {source} to {target} with the tool.", f"{amount:g} {source} is {value:.2f} {target}."
    order = _ORDER.search(q)
    if order:
        state = order_status(order.group(1))
        tools.append(("order_status", {"order_id": order.group(1)}))
        if state == "unknown":
            return "No such order.", f"I could not find order {order.group(1)}."
        return f"Look order {order.group(1)} up.", f"Order {order.group(1)} is {state}."
    return "Small talk.", "Hello! I can help with the weather, your orders, prices and notes."


@evaltrace.agent(name="support")
def answer(question: str, model: str = "careful", workspace: Path | None = None) -> str:
    """The agent: a python_function target. ``model`` comes from the variant's kwargs, ``workspace`` from evaltrace."""
    result = reply(question, model, str(workspace) if workspace is not None else None)
    if model == "careful":
        return f"<think>{result.thinking}</think>{result.text}"
    return result.text
