"""Model prices: a thin override layer over the ``genai-prices`` package, with a small fallback table.

Lookup order for a model name: prices set with :func:`set_model_price`, then ``genai-prices`` (install the
``evaltrace[prices]`` extra; its bundled snapshot is used, never the network), then ``FALLBACK_PRICES`` below.
A model found nowhere has no cost: we never guess. Prices found in genai-prices are kept in a file
(``~/.cache/evaltrace/prices.json``, ``$EVALTRACE_PRICE_CACHE``; ``_internal/price_cache.py``) that later processes
read instead of loading genai-prices' whole table, only where that gives exactly the same price; a process without
that file reads the same prices from the index evaltrace ships for the installed genai-prices release
(``_internal/price_index.py``), or, under another release, from the same index built by the first process that
loaded genai-prices' table (``_internal/price_index_local.py``), also without importing genai-prices
(``docs/pricing.md``). Reasoning tokens are billed at the output rate, and they
are a subset of the output tokens, so the reasoning cost is part of the total, not added to it.

Example:
    >>> from evaltrace.pricing import set_model_price, cost_of
    >>> set_model_price("my-finetune", input=1.0, cached_input=0.5, output=2.0)
    >>> cost_of("my-finetune", input_tokens=1_000_000, output_tokens=0).total_usd
    1.0
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["FALLBACK_PRICES", "Cost", "ModelPrice", "clear_model_prices", "cost_of", "set_model_price"]

_PER = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per 1M tokens; ``cached_input`` (``cache_write``) None means cache reads (writes) cost the input rate.

    ``tiers`` holds (input-token threshold, input, cached_input, output) rows: above a threshold every token
    is billed at that row's rates (the "cliff" model genai-prices uses).
    """

    input: float
    output: float = 0.0
    cached_input: float | None = None
    tiers: tuple[tuple[int, float, float | None, float], ...] = ()
    cache_write: float | None = None

    def at(self, input_tokens: int) -> ModelPrice:
        """Return the flat price in force for a request with ``input_tokens`` input tokens."""
        for start, inp, cached, out in reversed(self.tiers):
            if input_tokens > start:
                return ModelPrice(inp, out, cached, cache_write=self.cache_write)
        return self


@dataclass(frozen=True, slots=True)
class Cost:
    """The cost of one call, in USD, split as Langfuse's ``cost_details`` expects."""

    input_usd: float
    cached_input_usd: float
    output_usd: float
    reasoning_usd: float
    cache_write_usd: float = 0.0

    @property
    def total_usd(self) -> float:
        """Input + cached input + cache writes + output (reasoning is inside output)."""
        return self.input_usd + self.cached_input_usd + self.cache_write_usd + self.output_usd

    def details(self) -> dict[str, float]:
        """Langfuse ``cost_details``, keyed like ``usage_details`` (cache writes only when there were some)."""
        return _details(
            self.input_usd, self.cached_input_usd, self.output_usd, self.reasoning_usd, self.cache_write_usd
        )


def _details(
    input_usd: float, cached_usd: float, output_usd: float, reasoning_usd: float, write_usd: float
) -> dict[str, float]:
    return split_details(_split(input_usd, cached_usd, output_usd, reasoning_usd, write_usd))


CostSplit = tuple[float, float, float, float, float, float]
"""The cost details' values in their key order: input, input_cached_tokens, output (reasoning excluded),
output_reasoning_tokens, input_cache_creation (0.0 when none), total."""


def _split(input_usd: float, cached_usd: float, output_usd: float, reasoning_usd: float, write_usd: float) -> CostSplit:
    # The total as Cost.total_usd adds it, in the same order.
    total = input_usd + cached_usd + write_usd + output_usd
    return input_usd, cached_usd, output_usd - reasoning_usd, reasoning_usd, write_usd, total


def split_details(split: CostSplit) -> dict[str, float]:
    """Langfuse ``cost_details`` of a split: ``input_cache_creation`` only when there were cache writes."""
    input_usd, cached_usd, output_usd, reasoning_usd, write_usd, total = split
    details = {
        "input": input_usd,
        "input_cached_tokens": cached_usd,
        "output": output_usd,
        "output_reasoning_tokens": reasoning_usd,
    }
    if write_usd:
        details["input_cache_creation"] = write_usd
    details["total"] = total
    return details


# Standard-tier OpenAI list prices, USD per 1M tokens (openai.com/api/pricing, checked against the
# genai-prices 0.2.3 snapshot, 2026-11). Used only when genai-prices is not installed.
FALLBACK_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": ModelPrice(2.5, 10.0, 1.25),
    "gpt-4o-mini": ModelPrice(0.15, 0.6, 0.075),
    "gpt-4.1": ModelPrice(2.0, 8.0, 0.5),
    "gpt-4.1-mini": ModelPrice(0.4, 1.6, 0.1),
    "gpt-4.1-nano": ModelPrice(0.1, 0.4, 0.025),
    "o3": ModelPrice(2.0, 8.0, 0.5),
    "o4-mini": ModelPrice(1.1, 4.4, 0.275),
    "gpt-5": ModelPrice(1.25, 10.0, 0.125),
    "gpt-5-mini": ModelPrice(0.25, 2.0, 0.025),
    "gpt-5-nano": ModelPrice(0.05, 0.4, 0.005),
    "text-embedding-3-small": ModelPrice(0.02),
    "text-embedding-3-large": ModelPrice(0.13),
}

_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
# gen_ai.provider.name -> genai-prices provider id; the fallback table holds OpenAI prices only.
_GENAI_PRICES_PROVIDER = {
    "openai": "openai",
    "azure.ai.openai": "azure",
    "deepseek": "deepseek",
    "groq": "groq",
    "x_ai": "x-ai",
    "mistral_ai": "mistral",
    "perplexity": "perplexity",
    "anthropic": "anthropic",
    "aws.bedrock": "aws",  # Bedrock model ids, inference profiles (us., eu., global.) included
    "cohere": "cohere",
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
}
_FALLBACK_PROVIDERS = frozenset({"openai", "azure.ai.openai"})
_overrides: dict[str, ModelPrice] = {}
_resolved: dict[tuple[str, str], ModelPrice | None] = {}  # per-process cache: lookups are on every LLM span


def set_model_price(
    model: str,
    *,
    input: float,
    output: float = 0.0,
    cached_input: float | None = None,
    cache_write: float | None = None,
) -> None:
    """Set (or replace) the price of ``model`` in USD per 1M tokens; it wins over every other source.

    Instrumented calls are priced when their span is first read (by the exporter, usually within seconds, off the
    application thread), so set prices at start-up: a change applies to calls whose spans are not read yet.

    Args:
        model: Model name as the API reports it; a dated snapshot (``-2024-07-18``) also matches.
        input: Price of uncached input tokens.
        output: Price of output tokens (reasoning tokens included).
        cached_input: Price of cached input tokens; None bills them at ``input``.
        cache_write: Price of input tokens written to the prompt cache; None bills them at ``input``.
    """
    _overrides[model] = ModelPrice(input, output, cached_input, cache_write=cache_write)
    _resolved.clear()


def clear_model_prices() -> None:
    """Forget every price set with :func:`set_model_price`."""
    _overrides.clear()
    _resolved.clear()


def price_of(model: str, provider: str = "openai") -> ModelPrice | None:
    """Return the price of ``model`` (overrides, genai-prices, fallback table), or None when unknown.

    Args:
        model: Model name as the API reports it.
        provider: ``gen_ai.provider.name`` of the endpoint that served it (prices differ between providers).
    """
    key = (provider, model)
    try:
        return _resolved[key]
    except KeyError:
        pass
    price = _lookup(model, provider)
    if len(_resolved) > 4096:  # bounded: model names come from responses
        _resolved.clear()
    _resolved[key] = price
    return price


def _lookup(model: str, provider: str) -> ModelPrice | None:
    base = _DATE_SUFFIX.sub("", model)
    for name in (model, base):
        if name in _overrides:
            return _overrides[name]
    genai_provider = _GENAI_PRICES_PROVIDER.get(provider)
    found = _from_genai_prices(model, genai_provider) if genai_provider else None
    if found is not None or provider not in _FALLBACK_PROVIDERS:
        return found
    return FALLBACK_PRICES.get(model) or FALLBACK_PRICES.get(base)


def _from_genai_prices(model: str, provider_id: str) -> ModelPrice | None:
    # A price an earlier process looked up is read from the cache file: genai-prices' whole table (and the
    # collector pass its objects set off) is then never loaded (issue 28's start-up row).
    from evaltrace._internal import price_cache

    cached = price_cache.get(provider_id, model)
    if cached is not price_cache.MISS:
        return None if cached is None else ModelPrice(*cached)
    # A first process (or one whose cache file cannot be kept) reads the same table from the index evaltrace ships
    # for the installed genai-prices release, one provider's file at a time (``_internal/price_index.py``).
    from evaltrace._internal import price_index

    now = dt.datetime.now(tz=dt.UTC)
    indexed = price_index.find(provider_id, model, now)
    if indexed is not price_cache.MISS:
        entry, until = indexed
        price_cache.put(provider_id, model, entry, until, price_index.withdrawn_by(provider_id))
        return None if entry is None else ModelPrice(*entry)
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        price_cache.put(provider_id, model, None, None)
        return None
    price = _convert(info.get_prices(now))
    entry = None if price is None else (price.input, price.output, price.cached_input, price.tiers, price.cache_write)
    price_cache.put(provider_id, model, entry, price_cache.valid_until(info, now))
    return price


def _convert(prices: Any) -> ModelPrice | None:
    inp, cached, out, write = (
        getattr(prices, k, None) for k in ("input_mtok", "cache_read_mtok", "output_mtok", "cache_write_mtok")
    )
    if inp is None:
        return None
    thresholds = sorted({t.start for p in (inp, cached, out) if p is not None for t in getattr(p, "tiers", ())})
    tiers = tuple(
        (start, _rate(inp, start) or 0.0, _rate(cached, start), _rate(out, start) or 0.0) for start in thresholds
    )
    return ModelPrice(_rate(inp, -1) or 0.0, _rate(out, -1) or 0.0, _rate(cached, -1), tiers, _rate(write, -1))


def _rate(price: Any, above: int) -> float | None:
    """Rate of a Decimal or TieredPrices for requests with more than ``above`` input tokens."""
    if price is None:
        return None
    tiers = getattr(price, "tiers", None)
    if tiers is None:
        return float(price)
    rate = price.base
    for tier in tiers:
        if above >= tier.start:
            rate = tier.price
    return float(rate)


def cost_of(
    model: str | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    provider: str = "openai",
    cache_write_tokens: int | None = None,
) -> Cost | None:
    """Return the cost of one call, or None when the model or the input token count is unknown.

    Token counts follow OTel: ``input_tokens`` includes ``cached_tokens`` and ``cache_write_tokens``,
    ``output_tokens`` includes ``reasoning_tokens``. ``provider`` is the ``gen_ai.provider.name`` of the endpoint.
    """
    if not model or input_tokens is None:
        return None
    return cost_at(
        price_of(model, provider),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        reasoning_tokens=reasoning_tokens,
        cache_write_tokens=cache_write_tokens,
    )


def cost_at(
    price: ModelPrice | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> Cost | None:
    """Return the cost of one call at ``price`` (already looked up), or None without a price or input count.

    Token counts follow :func:`cost_of`. The instrumentation looks the price up and computes the cost when the
    span's attributes are first read, off the application thread (so install ``set_model_price`` overrides at
    start-up).
    """
    if price is None or input_tokens is None:
        return None
    return Cost(*_amounts(price, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens))


def cost_details_at(
    price: ModelPrice | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None,
    reasoning_tokens: int | None,
    cache_write_tokens: int | None,
) -> dict[str, float] | None:
    """``cost_at(...).details()`` (with ``total``), without the ``Cost``."""
    split = cost_split_at(price, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens)
    return None if split is None else split_details(split)


def cost_split_at(
    price: ModelPrice | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None,
    reasoning_tokens: int | None,
    cache_write_tokens: int | None,
) -> CostSplit | None:
    """``cost_details_at``'s values as one tuple (see ``CostSplit``): the instrumentation's per-call form.

    No dict: the span gets the total and the details' JSON text (``encode.cost_split_json``) straight from it.
    """
    if price is None or input_tokens is None:
        return None
    return _split(*_amounts(price, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens))


def _amounts(
    price: ModelPrice,
    input_tokens: int,
    output_tokens: int | None,
    cached_tokens: int | None,
    reasoning_tokens: int | None,
    cache_write_tokens: int | None,
) -> tuple[float, float, float, float, float]:
    """USD of (uncached input, cached input, output, reasoning within output, cache writes): ``Cost``'s fields."""
    if price.tiers:  # else ``at`` returns the price itself: no call for a flat price, the common one
        price = price.at(input_tokens)
    cached = cached_tokens or 0
    writes = cache_write_tokens or 0
    cached_rate = price.input if price.cached_input is None else price.cached_input
    write_rate = price.input if price.cache_write is None else price.cache_write
    return (
        max(input_tokens - cached - writes, 0) * price.input / _PER,
        cached * cached_rate / _PER,
        (output_tokens or 0) * price.output / _PER,
        (reasoning_tokens or 0) * price.output / _PER,
        writes * write_rate / _PER,
    )
