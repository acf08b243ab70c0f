"""Pure: a compound model's ``usage_breakdown`` (its usage per model it ran) -> a ``groq.usage.*`` attribute and cost.

A ``groq/compound`` call runs several models (one to plan, others to read search results, ...); its ``usage`` is
the total, written as ``gen_ai.usage.*`` as for every call, and ``usage_breakdown.models`` (a whole response's,
or ``x_groq``'s on a stream's last chunk) the usage of each model run, in order, one entry per run. The breakdown
is ``groq.usage.breakdown``: JSON ``[{"model", "input_tokens", "output_tokens"}]``, with ``cache_read_input_tokens``
and ``reasoning_output_tokens`` where the entry gives them (the ``gen_ai.usage.*`` names, without the prefix).

Groq bills a compound call as the tokens of each model it ran at that model's price, and the compound model itself
has none: its cost is the sum of the entries' costs, written in place of the cost of the total (none, for an
unpriced compound model) when every model of the breakdown has a price and the breakdown is a partition of the total
(its entries' input and output tokens sum to the call's ``usage``, as a whole answer's do); a model without a price,
or a breakdown that is no partition (a stream's ``x_groq`` was seen repeating the whole total in each entry, which
summed would price the call several times over), leaves the call's cost as the total gives it (never a partial or
inflated sum), with the breakdown still recorded.
"""

from __future__ import annotations

from typing import Any

from evaltrace import pricing
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Usage
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.encode import cost_split_json
from evaltrace._internal.openai.parts import field
from evaltrace._internal.openai.response import chat_usage

_COST_DETAILS_CAP = 4096
"""The cost details' JSON (six numbers) never nears it."""


def _entries(breakdown: Any) -> list[tuple[str, Usage]]:
    """``usage_breakdown.models`` -> (model, usage) per entry that names a model and counts its input."""
    out: list[tuple[str, Usage]] = []
    for entry in field(breakdown, "models") or ():
        model = field(entry, "model")
        usage = chat_usage(field(entry, "usage"))
        if isinstance(model, str) and model and usage is not None and isinstance(usage.input_tokens, int):
            out.append((model, usage))
    return out


def _entry_json(model: str, usage: Usage) -> dict[str, Any]:
    given = {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "reasoning_output_tokens": usage.reasoning_tokens,
    }
    return {key: value for key, value in given.items() if value is not None}


def _cost(entries: list[tuple[str, Usage]], provider: str) -> pricing.CostSplit | None:
    """The sum of the entries' cost splits; None when any model of them has no price."""
    total = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for model, usage in entries:
        writes = usage.cache_write_tokens
        split = pricing.cost_split_at(
            pricing.price_of(model, provider),
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            writes if isinstance(writes, int) else None,
        )
        if split is None:
            return None
        total = (
            total[0] + split[0],
            total[1] + split[1],
            total[2] + split[2],
            total[3] + split[3],
            total[4] + split[4],
            total[5] + split[5],
        )
    return total


def _partitions(entries: list[tuple[str, Usage]], total: Usage | None) -> bool:
    """Whether the entries' input and output tokens sum to the call's total usage (each entry counted once)."""
    if total is None or total.input_tokens is None or total.output_tokens is None:
        return False
    return (
        sum(usage.input_tokens or 0 for _, usage in entries) == total.input_tokens
        and sum(usage.output_tokens or 0 for _, usage in entries) == total.output_tokens
    )


def breakdown_attributes(breakdown: Any, total: Usage | None, provider: str) -> dict[str, Any] | None:
    """``groq.usage.breakdown`` and the call's cost from it when its entries are priced and partition ``total``.

    Returns None when there is no breakdown.
    """
    entries = _entries(breakdown)
    if not entries:
        return None
    attrs: dict[str, Any] = {
        sc.GROQ_USAGE_BREAKDOWN: capped_json([_entry_json(model, usage) for model, usage in entries], 1 << 20)
    }
    split = _cost(entries, provider) if _partitions(entries, total) else None
    if split is not None:
        attrs[sc.EVALTRACE_COST_USD] = split[5]
        if any(usage.reasoning_tokens for _, usage in entries):
            attrs[sc.EVALTRACE_COST_THINKING_USD] = split[3]
        attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS] = cost_split_json(split, _COST_DETAILS_CAP)
    return attrs
