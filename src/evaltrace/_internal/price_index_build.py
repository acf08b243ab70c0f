"""Build ``price_index``'s files from the installed genai-prices.

Used by ``scripts/build_price_index.py``, the tests, and an application's first process under a genai-prices release
evaltrace ships no index for (``price_index_local``). Imports genai-prices and walks its objects: imported by an
application only where genai-prices' table is loaded anyway.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace._internal import price_cache, price_index

__all__ = ["PROVIDER_IDS", "agrees", "build", "text", "write"]


def _provider_ids() -> tuple[str, ...]:
    from evaltrace import pricing

    return tuple(dict.fromkeys(pricing._GENAI_PRICES_PROVIDER.values()))


PROVIDER_IDS = _provider_ids()  # the genai-prices provider ids evaltrace looks prices up under


def build(
    version: str, providers: list[Any] | None = None, provider_ids: Sequence[str] = PROVIDER_IDS
) -> dict[str, dict[str, Any]]:
    """One index document per provider id of ``provider_ids`` that genai-prices' ``providers`` has.

    ``providers`` defaults to genai-prices' bundled table, ``provider_ids`` to every id evaltrace prices under (an
    application's process builds only the one it prices: ``price_index_local``).

    Raises:
        RuntimeError: The installed genai-prices is not the exact ``version`` release (its RECORD and files).
        ValueError: A clause kind the index does not know (a newer genai-prices): the matcher needs it first.
    """
    from genai_prices import data_snapshot

    source = price_index.installed_source(version)
    if source is None:
        raise RuntimeError(f"the installed genai-prices is not the {version} release as its RECORD lists it")
    table = data_snapshot.get_snapshot().providers if providers is None else providers
    documents = {}
    for provider_id in provider_ids:
        provider = data_snapshot.find_provider_by_id(table, provider_id)
        if provider is None:
            continue
        candidates = _candidates(table, provider)
        documents[provider_id] = {
            "format": price_index.FORMAT,
            "genai_prices": source,
            "provider": provider.id,
            "models": [[_clause(model.match), _prices(model.prices)] for model in candidates],
        }
    return documents


def write(documents: dict[str, dict[str, Any]], folder: Path) -> None:
    """Write each document as ``<provider id>.json`` in ``folder`` (one line each: the index is data)."""
    folder.mkdir(parents=True, exist_ok=True)
    for provider_id, document in documents.items():
        (folder / f"{provider_id}.json").write_text(text(document), encoding="utf-8")


def text(document: dict[str, Any]) -> str:
    """A document as its file holds it."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"


_CHECK_STRIDE = 32  # ``agrees`` checks every 32nd model of a provider: each genai-prices lookup costs ~1M instructions


def agrees(documents: dict[str, dict[str, Any]], now: dt.datetime) -> bool:
    """Whether the index prices a sample of each document's models, by id, as genai-prices' own lookup does at ``now``.

    The check an index built at run time passes before it is used (``price_index_local``): the shipped one is held
    to genai-prices over its whole table by the tests, but a release the tests never saw could change its lookup
    (a fallback rule, an order, a price constraint), and a difference would otherwise be a wrong price. The sample
    (a provider's first and last model, and every ``_CHECK_STRIDE``-th) keeps the check a small part of the cost
    of loading genai-prices' table; checking every model cost ~3 times that load (``benchmarks/README.md``).
    """
    from genai_prices import data_snapshot

    from evaltrace import pricing

    snapshot = data_snapshot.get_snapshot()
    for provider_id, document in documents.items():
        models = document["models"]
        provider = data_snapshot.find_provider_by_id(snapshot.providers, provider_id)
        ids = list(
            dict.fromkeys(model.id for model in ([] if provider is None else _candidates(snapshot.providers, provider)))
        )
        for model_id in dict.fromkeys([*ids[::_CHECK_STRIDE], *ids[-1:]]):
            got = price_index.lookup(models, model_id, now)
            try:
                _, info = snapshot.find_provider_model(model_id, None, provider_id, None)
            except LookupError:
                if got != (None, None):
                    return False
                continue
            until = price_cache.valid_until(info, now)
            if until is not None and not isinstance(until, dt.date):  # an off-peak price: never served by the index
                if got is not price_cache.MISS:
                    return False
                continue
            price = pricing._convert(info.get_prices(now))
            entry = (
                None
                if price is None
                else (price.input, price.output, price.cached_input, price.tiers, price.cache_write)
            )
            if got != (entry, until):
                return False
    return True


def _candidates(table: list[Any], provider: Any) -> list[Any]:
    """The models genai-prices tries for ``provider``, in ``Provider.find_model``'s order.

    Its own, then each fallback provider's own (one step, no further).
    """
    candidates = list(provider.models)
    for fallback_id in provider.fallback_model_providers or ():
        fallback = next((p for p in table if p.id == fallback_id), None)
        if fallback is not None:
            candidates.extend(fallback.models)
    return candidates


def _clause(clause: Any) -> list[Any]:
    from genai_prices import types

    if type(clause) is types.ClauseEquals:
        return ["=", clause.equals.lower()]
    if type(clause) is types.ClauseStartsWith:
        return ["^", clause.starts_with.lower()]
    if type(clause) is types.ClauseEndsWith:
        return ["$", clause.ends_with.lower()]
    if type(clause) is types.ClauseContains:
        return ["in", clause.contains.lower()]
    if type(clause) is types.ClauseRegex:
        return ["re", clause.regex]  # searched in the lower-cased name, the pattern as written
    if type(clause) is types.ClauseOr:
        return ["or", [_clause(inner) for inner in clause.or_]]
    if type(clause) is types.ClauseAnd:
        return ["and", [_clause(inner) for inner in clause.and_]]
    raise ValueError(f"genai-prices clause {type(clause).__name__} is not known to evaltrace's price index")


def _prices(prices: Any) -> Any:
    """``[[start date or "", converted price], ...]`` in genai-prices' order, or UNCACHEABLE_PRICES."""
    from genai_prices import types

    from evaltrace import pricing

    conditional = prices if isinstance(prices, list) else [types.ConditionalPrice(prices=prices)]
    rows = []
    for price in conditional:
        constraint = price.constraint
        if constraint is None:
            start = ""
        elif type(constraint) is types.StartDateConstraint:
            start = constraint.start_date.isoformat()
        else:  # an off-peak (time-of-day) rate, or a constraint of a later version: genai-prices decides
            return price_index.UNCACHEABLE_PRICES
        converted = pricing._convert(price.prices)
        entry = (
            None
            if converted is None
            else (
                converted.input,
                converted.output,
                converted.cached_input,
                converted.tiers,
                converted.cache_write,
            )
        )
        rows.append([start, price_cache.encode(entry)])
    return rows
