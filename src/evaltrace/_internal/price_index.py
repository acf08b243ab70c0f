"""genai-prices' own table for the providers evaltrace prices, shipped with evaltrace, read without genai-prices.

Loading genai-prices' table costs a new process ~230M instructions (its pydantic types, ~100k objects for 47
providers, then a full pass of the cyclic collector over the application: issue 28's start-up row), and the file of
prices already looked up (``price_cache``) helps only processes after the first, and only where ``~/.cache`` is
kept. This index is that table, for one provider at a time: the models genai-prices would try for a provider id, in
its order (the provider's own, then its fallback providers'), each with its match clause and its prices converted
as :mod:`evaltrace.pricing` converts them, built from genai-prices' objects by ``scripts/build_price_index.py``.

It is used only for the exact genai-prices release it was built from: each file names that release's files as its
``RECORD`` lists them (sha256 and size of every module), and the installed ``RECORD`` must list the same, and the
files on disk have those sizes. Any other version, an editable or altered install, a missing or corrupt index file,
a model whose price depends on the time of day, or a user's own snapshot (``set_custom_snapshot``) gives ``MISS``,
and the price is looked up in genai-prices as before. For another release whose lookup code is the code this matcher
was verified against (``LOOKUP_CODE``), the same index is built from the installed genai-prices, one provider id at a
time as it is first priced, and kept beside the price cache (``price_index_local``), so only the first process to price
under each provider id loads genai-prices' table.
Matching repeats genai-prices' ``find_provider_model`` for a provider id: lower-cased name, the first model whose
clause matches, then the same with a compact date (``-20251211``) rewritten to ``-2025-12-11``; a dated price is
the last conditional price whose start date has come (UTC), as ``ModelInfo.get_prices`` picks it.
``tests/instrumentation/test_price_index.py`` holds both to genai-prices' own lookup over its whole table.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Final, Literal

from evaltrace._internal import price_cache
from evaltrace._internal.price_cache import MISS, Entry, Miss

__all__ = [
    "FORMAT",
    "INDEX_DIR",
    "LOOKUP_CODE",
    "UNCACHEABLE_PRICES",
    "find",
    "installed_source",
    "installed_version",
    "lookup_code_verified",
    "load",
    "lookup",
    "reset",
    "withdrawn_by",
]

FORMAT: Final = 1
INDEX_DIR: Final = Path(__file__).with_name("price_index_data")
UNCACHEABLE_PRICES: Final = "genai-prices"  # a model's prices this index cannot hold (an off-peak rate): look it up
_DIST_INFO: Final = ("genai_prices-", ".dist-info")
# genai-prices' modules that are not its lookup: its table (the data an index is built from) and its command line.
_NOT_LOOKUP_CODE: Final = frozenset({"genai_prices/data.py", "genai_prices/_cli.py", "genai_prices/__main__.py"})
# The RECORD digests of the genai-prices code this module's matcher repeats (every other module of the release the
# shipped index was built from: ``find_provider_model``, the clauses, ``get_prices``, what they import). The tests
# hold the matcher to that code over its whole table; ``test_price_index_pin.py`` holds this to the shipped index.
# An index is built at run time only for a release whose lookup code is this, byte for byte (``price_index_local``).
LOOKUP_CODE: Final = {
    "genai_prices/__init__.py": "sha256=QN2_IcIpNL2-I2HbqqRlXjnY_VqtZ6voJW7b9nK-0WI,3562",
    "genai_prices/_usage.py": "sha256=S1-EeoYNTURXM0hTyzuPDoaU5Vh45RBCzte9i1qGvg4,3094",
    "genai_prices/data_snapshot.py": "sha256=6C0ZxqLQrbPll2e4imOepnj-fuqh0X4exXsZL8b964U,7704",
    "genai_prices/data_units.py": "sha256=hRqrnb4ZLat7T-RyEBXC_u8lBzI20vLhwqt9EojlMSA,12906",
    "genai_prices/decompose.py": "sha256=3nDczUZ9ZN9rIHIE2312IXZcEa44t9KayrVFf77qNWQ,2447",
    "genai_prices/types.py": "sha256=3zVawWBBOfNbNEvOXFNvfLUt0c4wCP2K5qZa-Ua-Zs4,45531",
    "genai_prices/units.py": "sha256=OeyZGSZ1jMQo17GYRzZoEuKfz3qqpPu8ZjBy6r78b5Y,5461",
    "genai_prices/update_prices.py": "sha256=h7qqnBKTJ4-479E_ExdM-J0Y-SXgsEUGEkR-X2aBCfU,10904",
    "genai_prices/validation.py": "sha256=eSpdTxT2wc2FiitCOD_70G8PIfa58GdisPUNQygpMsI,4890",
}
logger = logging.getLogger("evaltrace")
_COMPACT_DATE = re.compile(r"(-)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=-|:|$)")  # genai-prices' own

# provider id -> its models (None: no usable file); "genai_prices <version>" -> installed_source(version).
_state: dict[str, Any] = {}


def reset() -> None:
    """Forget what this process read, checked and built (tests)."""
    from evaltrace._internal import price_index_local

    _state.clear()
    price_index_local.reset()


def find(provider_id: str, model: str, now: dt.datetime) -> tuple[Entry, dt.date | None] | Literal[Miss.MISS]:
    """Genai-prices' price of ``model`` at ``provider_id`` at ``now`` and the date it may change, or ``MISS``.

    The entry is ``None`` for a model genai-prices does not know (at that provider and its fallbacks).
    """
    if price_cache.custom_snapshot_set():
        return MISS
    try:
        models = _models(provider_id)
        if models is None:
            return MISS
        return lookup(models, model, now)
    except Exception:  # a file this version did not write, or any fault of the index: genai-prices decides
        logger.debug("evaltrace's price index of %s is not used", provider_id, exc_info=True)
        _state[provider_id] = None
        return MISS


def lookup(models: list[Any], model: str, now: dt.datetime) -> tuple[Entry, dt.date | None] | Literal[Miss.MISS]:
    """``find`` in one provider's ``models``.

    Raises:
        TypeError: ``models`` is not what this version writes (also ValueError, ``re.error``).
    """
    ref = model.lower()
    prices = _match(models, ref)
    if prices is None:
        normalized = _COMPACT_DATE.sub(_dashed_date, ref)
        if normalized != ref:
            prices = _match(models, normalized)
    if prices is None:
        return None, None
    if prices == UNCACHEABLE_PRICES:
        return MISS
    return _in_force(prices, now.astimezone(dt.UTC).date())


def withdrawn_by(provider_id: str) -> str | None:
    """What withdraws the prices ``find`` took from ``provider_id``'s index (``price_cache.put``), None if nothing.

    The index built here (``price_index_local``) is withdrawn when another process finds its release unindexable,
    as its marker (a path relative to the cache folder) then says; the shipped index never is.
    """
    marker: str | None = _state.get(f"withdrawn_by {provider_id}")
    return marker


def _models(provider_id: str) -> list[Any] | None:
    if provider_id not in _state:
        models = load(INDEX_DIR / f"{provider_id}.json")
        if models is None:  # another release (or a damaged file): the index built here for the installed one
            from evaltrace._internal import price_index_local

            models = price_index_local.models(provider_id)
            if models is not None:
                _state[f"withdrawn_by {provider_id}"] = price_index_local.marker()
        _state[provider_id] = models
    found: list[Any] | None = _state[provider_id]
    return found


def load(path: Path, evaltrace: str | None = None) -> list[Any] | None:
    """The models of the index file at ``path``, if that file was built from the installed genai-prices.

    With ``evaltrace``, only a file that names that evaltrace version as its builder (an index built at run time:
    another version may convert prices otherwise).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    if evaltrace is not None and document.get("evaltrace") != evaltrace:
        return None
    built_from = document.get("genai_prices")
    if not isinstance(built_from, dict) or built_from != _installed(built_from.get("version")):
        return None
    models = document.get("models")
    return models if isinstance(models, list) else None


def _installed(version: Any) -> dict[str, Any] | None:
    if not isinstance(version, str):
        return None
    key = f"genai_prices {version}"  # checked once per process (per release a file names)
    if key not in _state:
        _state[key] = installed_source(version)
    source: dict[str, Any] | None = _state[key]
    return source


def installed_source(version: str) -> dict[str, Any] | None:
    """The installed genai-prices ``version`` as its ``RECORD`` lists its modules, or None if it is not that one.

    Returns ``{"version": version, "files": {"genai_prices/x.py": "sha256=...,size"}}`` when the package found on
    ``sys.path`` sits beside ``genai_prices-<version>.dist-info`` and every module it lists has its recorded size on
    disk. A hash of the 1.6 MB table itself would cost more than the rest of a cold start's pricing, so the
    installer's record of it is trusted, and the sizes catch a file changed since.
    """
    package = price_cache.genai_prices_package()
    if package is None:
        return None
    record = package.parent / f"genai_prices-{version}.dist-info" / "RECORD"
    files: dict[str, str] = {}
    try:
        with open(record, encoding="utf-8") as handle:
            for line in handle:
                path, _, digest = line.rstrip("\r\n").partition(",")
                if path.startswith("genai_prices/") and path.endswith(".py") and "/__pycache__/" not in path:
                    files[path] = digest
        for path, digest in files.items():
            size = digest.rpartition(",")[2]
            if os.stat(package.parent / path).st_size != int(size):
                return None
    except (OSError, ValueError):
        return None
    if "genai_prices/data.py" not in files:
        return None
    return {"version": version, "files": files}


def lookup_code_verified(source: dict[str, Any]) -> bool:
    """Whether the install ``installed_source`` describes has ``LOOKUP_CODE`` for its code, module for module.

    Its table (``data.py``) may differ: that is what an index built at run time is built from. Any other module
    added, removed or changed (a name normalisation, a fallback, how a dated price is chosen) may change the lookup in
    a way the matcher does not repeat, so no index is built for it.
    """
    files = source.get("files", {})
    return {path: digest for path, digest in files.items() if path not in _NOT_LOOKUP_CODE} == LOOKUP_CODE


def installed_version() -> str | None:
    """The installed genai-prices release, named by the one ``genai_prices-<version>.dist-info`` beside it.

    None when genai-prices is not installed, or its folder has no such record or several (a leftover of an upgrade:
    which one describes the files is not known).
    """
    package = price_cache.genai_prices_package()
    if package is None:
        return None
    try:
        names = [name for name in os.listdir(package.parent) if name.startswith(_DIST_INFO[0])]
    except OSError:
        return None
    records = [name[len(_DIST_INFO[0]) : -len(_DIST_INFO[1])] for name in names if name.endswith(_DIST_INFO[1])]
    return records[0] if len(records) == 1 else None


def _match(models: list[Any], ref: str) -> Any:
    for clause, prices in models:
        if _is_match(clause, ref):
            return prices
    return None


def _is_match(clause: list[Any], text: str) -> bool:
    """genai-prices' ``Clause*.is_match`` on an already lower-cased name (literals are stored lower-cased)."""
    kind, value = clause
    if kind == "=":
        return bool(text == value)
    if kind == "^":
        return text.startswith(value)
    if kind == "in":
        return value in text
    if kind == "$":
        return text.endswith(value)
    if kind == "re":
        return re.search(value, text) is not None
    if kind == "or":
        return any(_is_match(inner, text) for inner in value)
    if kind == "and":
        return all(_is_match(inner, text) for inner in value)
    raise ValueError(kind)  # the builder writes only the kinds above


def _dashed_date(match: re.Match[str]) -> str:
    """genai-prices' ``_normalize_compact_dated_ref``: ``-20251211`` -> ``-2025-12-11`` when it is a real date."""
    year, month, day = (int(match.group(index)) for index in range(2, 5))
    try:
        dt.date(year, month, day)
    except ValueError:
        return match.group(0)
    return f"{match.group(1)}{year:04d}-{month:02d}-{day:02d}"


def _in_force(prices: list[Any], today: dt.date) -> tuple[Entry, dt.date | None]:
    """The last price whose start date has come (else the first), and the next start date after ``today``."""
    starts = [dt.date.fromisoformat(start) if start else None for start, _ in prices]
    chosen = prices[0][1]
    for start, (_, entry) in zip(reversed(starts), reversed(prices), strict=True):
        if start is None or today >= start:
            chosen = entry
            break
    upcoming = [start for start in starts if start is not None and start > today]
    return price_cache.decode(chosen), min(upcoming) if upcoming else None
