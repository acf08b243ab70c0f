"""genai-prices' own answers and every name in its table: the oracle the price index tests hold evaltrace to."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from genai_prices import data_snapshot, types

from evaltrace import pricing
from evaltrace._internal import price_cache


def genai_prices_answer(provider_id: str, name: str, now: dt.datetime) -> Any:
    """genai-prices' own answer, in the index's form: (converted price or None, valid until), or MISS."""
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(name, None, provider_id, None)
    except LookupError:
        return None, None
    until = price_cache.valid_until(info, now)
    if until is not None and not isinstance(until, dt.date):
        return price_cache.MISS  # an off-peak rate: never served from the index
    price = pricing._convert(info.get_prices(now))
    entry = None if price is None else (price.input, price.output, price.cached_input, price.tiers, price.cache_write)
    return entry, until


def literals(clause: Any) -> Iterator[str]:
    for field in ("equals", "starts_with", "ends_with", "contains"):
        if isinstance(getattr(clause, field, None), str):
            yield getattr(clause, field)
    for inner in getattr(clause, "or_", None) or getattr(clause, "and_", None) or ():
        yield from literals(inner)


def all_models() -> list[types.ModelInfo]:
    return [model for provider in data_snapshot.get_snapshot().providers for model in provider.models]


def names() -> list[str]:
    """Every model id and every literal of every clause of genai-prices' table, each also dated, compact-dated,
    upper-cased and behind a region prefix (how APIs report them), plus names no model has."""
    found = dict.fromkeys(["", "no-such-model", "gpt-4o-mini-20241399", "claude-3-5-sonnet-20241022-v2:0"])
    for model in all_models():
        for base in (model.id, *literals(model.match)):
            for name in (base, f"{base}-2024-07-18", f"{base}-20240718", base.upper(), f"us.{base}"):
                found[name] = None
    return list(found)
