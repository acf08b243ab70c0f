"""Prices: override hook, genai-prices, fallback table, tiers, and 'unknown means no cost'."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evaltrace import pricing


@pytest.fixture(autouse=True)
def clean_prices() -> Iterator[None]:
    pricing.clear_model_prices()
    yield
    pricing.clear_model_prices()


def test_override_wins_and_matches_dated_snapshots() -> None:
    pricing.set_model_price("gpt-4o-mini", input=1.0, cached_input=0.5, output=2.0)
    cost = pricing.cost_of(
        "gpt-4o-mini-2024-07-18",
        input_tokens=1_000_000,
        output_tokens=500_000,
        cached_tokens=200_000,
        reasoning_tokens=100_000,
    )
    assert cost is not None and cost.input_usd == pytest.approx(0.8)
    assert cost.cached_input_usd == pytest.approx(0.1)
    assert cost.output_usd == pytest.approx(1.0)
    assert cost.reasoning_usd == pytest.approx(0.2)
    assert cost.total_usd == pytest.approx(1.9)
    assert cost.details() == pytest.approx(
        {"input": 0.8, "input_cached_tokens": 0.1, "output": 0.8, "output_reasoning_tokens": 0.2, "total": 1.9}
    )


def test_cache_writes_cost_their_own_rate_or_the_input_rate() -> None:
    pricing.set_model_price("cached-model", input=1.0, cached_input=0.1, cache_write=1.25, output=2.0)
    pricing.set_model_price("plain-model", input=1.0, output=2.0)
    usage = {"input_tokens": 1_000_000, "output_tokens": 0, "cached_tokens": 200_000, "cache_write_tokens": 400_000}
    cost = pricing.cost_of("cached-model", **usage)
    assert cost is not None and (cost.input_usd, cost.cached_input_usd, cost.cache_write_usd) == pytest.approx(
        (0.4, 0.02, 0.5)
    )
    assert cost.total_usd == pytest.approx(0.92)
    assert cost.details()["input_cache_creation"] == pytest.approx(0.5)
    plain = pricing.cost_of("plain-model", **usage)  # no cache prices: every input token at the input rate
    assert plain is not None and plain.total_usd == pytest.approx(1.0)
    assert "input_cache_creation" in plain.details()
    no_writes = pricing.cost_of("plain-model", input_tokens=10, output_tokens=0)
    assert no_writes is not None and "input_cache_creation" not in no_writes.details()


def test_unknown_model_has_no_cost() -> None:
    assert pricing.cost_of("my-local-llama", input_tokens=10, output_tokens=10) is None
    assert pricing.cost_of(None, input_tokens=10, output_tokens=10) is None
    assert pricing.cost_of("gpt-4o", input_tokens=None, output_tokens=10) is None


def test_genai_prices_snapshot_is_used_offline() -> None:
    pytest.importorskip("genai_prices")
    price = pricing.price_of("gpt-4o-mini-2024-07-18")
    assert price is not None and (price.input, price.cached_input, price.output) == (0.15, 0.075, 0.6)


def test_fallback_table_when_genai_prices_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, "_from_genai_prices", lambda model, provider: None)
    assert pricing.price_of("gpt-4.1-mini-2025-04-14") == pricing.FALLBACK_PRICES["gpt-4.1-mini"]
    assert pricing.price_of("gpt-9-ultra") is None


def test_tiers_bill_every_token_at_the_crossed_rate() -> None:
    price = pricing.ModelPrice(2.5, 15.0, 0.25, tiers=((272_000, 5.0, 0.5, 22.5),))
    assert price.at(272_000) is price
    assert price.at(272_001) == pricing.ModelPrice(5.0, 22.5, 0.5)


def test_prices_depend_on_the_provider() -> None:
    pytest.importorskip("genai_prices")
    assert pricing.price_of("deepseek-reasoner", "openai") is None
    deepseek = pricing.price_of("deepseek-reasoner", "deepseek")
    assert deepseek is not None and deepseek.output > 0
    assert pricing.price_of("llama-3-8b", "vllm-unknown") is None


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens", "cached", "reasoning", "writes"),
    [(12, 5, 0, 0, None), (1270, 155, 1000, 64, 200), (300_000, 10, None, None, None), (5, None, None, None, 0)],
)
def test_cost_details_at_is_cost_at_details(
    input_tokens: int, output_tokens: int | None, cached: int | None, reasoning: int | None, writes: int | None
) -> None:
    """The instrumentation's per-call form gives the same numbers as ``Cost.details()``, tiers included."""
    price = pricing.ModelPrice(2.0, 8.0, 0.5, tiers=((272_000, 4.0, 1.0, 16.0),), cache_write=2.5)
    cost = pricing.cost_at(
        price,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached,
        reasoning_tokens=reasoning,
        cache_write_tokens=writes,
    )
    assert cost is not None
    details = pricing.cost_details_at(price, input_tokens, output_tokens, cached, reasoning, writes)
    assert details == cost.details() and details["total"] == cost.total_usd
    assert pricing.cost_details_at(None, input_tokens, output_tokens, cached, reasoning, writes) is None
