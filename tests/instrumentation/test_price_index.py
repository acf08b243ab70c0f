"""The price index evaltrace ships: genai-prices' own lookup, for its exact release, without loading its table.

A cold process (the first after an install, or any whose cache file cannot be kept) prices its first call from
``_internal/price_index_data/<provider>.json`` instead of importing genai-prices (issue 28's start-up row). These tests
hold the index to genai-prices' own ``find_provider_model`` + ``get_prices`` over its whole table: every name every
model's clauses list, at each provider id evaltrace uses (its fallback providers included), with and without a
date suffix, on each day a dated price starts; and check that it is never used where it could differ.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from evaltrace import pricing
from evaltrace._internal import price_cache, price_index
from evaltrace._internal.price_index_build import PROVIDER_IDS, build

genai_prices = pytest.importorskip("genai_prices")
from genai_prices import data_snapshot, types  # noqa: E402
from price_table import all_models as _all_models  # noqa: E402
from price_table import genai_prices_answer as _genai_prices  # noqa: E402
from price_table import literals as _literals  # noqa: E402
from price_table import names as _names  # noqa: E402

REPO_SRC = Path(__file__).resolve().parents[2] / "src"
INSTALLED = version("genai-prices")


def _shipped() -> dict[str, dict[str, Any]]:
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(price_index.INDEX_DIR.glob("*.json"))
    }


SHIPPED_VERSION = next(iter(_shipped().values()))["genai_prices"]["version"]
INDEX_IN_USE = SHIPPED_VERSION == INSTALLED and price_index.installed_source(INSTALLED) is not None


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, "off")  # the cold case: no file of earlier lookups
    price_cache.reset()
    price_index.reset()
    pricing.clear_model_prices()
    yield
    price_cache.reset()
    price_index.reset()
    pricing.clear_model_prices()


pytestmark = pytest.mark.skipif(not INDEX_IN_USE, reason="the shipped index is for another genai-prices release")


def test_the_shipped_index_is_what_the_installed_genai_prices_builds() -> None:
    """Exactness starts here: the files are genai-prices' own table, converted (``scripts/build_price_index.py``)."""
    assert _shipped() == json.loads(json.dumps(build(INSTALLED)))
    assert set(_shipped()) == set(PROVIDER_IDS)


def test_every_name_of_every_model_is_priced_by_the_index_as_by_genai_prices() -> None:
    """Over genai-prices' whole table, at every provider id evaltrace prices under: the same price to the last bit
    (or the same "unknown"), the same date it changes, or the index steps aside (off-peak rates)."""
    now = dt.datetime.now(tz=dt.UTC)
    names = _names()
    assert len(names) > 15_000
    served = stepped_aside = 0
    for provider_id in PROVIDER_IDS:
        for name in names:
            expected = _genai_prices(provider_id, name, now)
            got = price_index.find(provider_id, name, now)
            if expected is price_cache.MISS:
                assert got is price_cache.MISS, (provider_id, name)
                stepped_aside += 1
                continue
            assert got == expected, (provider_id, name)
            served += expected[0] is not None
    assert served > 5_000 and 0 < stepped_aside < served / 20, (served, stepped_aside)


def test_a_dated_price_is_the_one_genai_prices_picks_on_every_day_a_price_starts() -> None:
    """Each start date in the table, the day before it and the day itself (UTC), for every model with dated
    prices: the index picks genai-prices' price and the same next change."""
    dated = [
        model
        for model in _all_models()
        if isinstance(model.prices, list)
        and any(isinstance(p.constraint, types.StartDateConstraint) for p in model.prices)
    ]
    days = sorted(
        {
            p.constraint.start_date + dt.timedelta(days=shift)
            for model in dated
            for p in model.prices
            if isinstance(p.constraint, types.StartDateConstraint)
            for shift in (-1, 0)
        }
    )
    assert len(dated) > 50 and len(days) > 20
    names = [name for model in dated for name in dict.fromkeys([model.id, *_literals(model.match)])]
    dated_ids = {id(model) for model in dated}
    snapshot = data_snapshot.get_snapshot()
    pairs = []  # each (provider id, name) that genai-prices resolves to a model with dated prices
    for provider_id in PROVIDER_IDS:
        for name in names:
            try:
                found = snapshot.find_provider_model(name, None, provider_id, None)[1]
            except LookupError:
                continue
            if id(found) in dated_ids:
                pairs.append((provider_id, name))
    assert len(pairs) > 100
    checked = 0
    for day in days:
        # late in the day at UTC-2 is already the next day in UTC: genai-prices' rule
        for now in (
            dt.datetime.combine(day, dt.time(12), dt.UTC),
            dt.datetime(day.year, day.month, day.day, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2))),
        ):
            for provider_id, name in pairs:
                expected = _genai_prices(provider_id, name, now)
                assert price_index.find(provider_id, name, now) == expected, (provider_id, name, now)
                checked += expected is not price_cache.MISS and expected[1] is not None
    assert checked > 1000


def test_a_cold_process_prices_its_first_call_without_loading_genai_prices(tmp_path: Path) -> None:
    """The start-up saving: no cache file, yet the first price is genai-prices' and genai-prices is not imported."""
    code = (
        "import sys, json; from evaltrace import pricing\n"
        "p = pricing.price_of('gpt-4o-mini-2024-07-18', 'openai'); a = pricing.price_of('claude-sonnet-4-5', 'anthropic')\n"
        "u = pricing.price_of('no-such-model', 'openai')\n"
        "print(json.dumps([repr(p), repr(a), repr(u), sorted(m for m in sys.modules if m.startswith('genai_prices'))]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_SRC), price_cache.PRICE_CACHE_ENV: "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
    )
    p, a, u, loaded = json.loads(out.stdout)
    assert loaded == []
    now = dt.datetime.now(tz=dt.UTC)
    assert p == repr(pricing.ModelPrice(*_genai_prices("openai", "gpt-4o-mini-2024-07-18", now)[0]))
    assert a == repr(pricing.ModelPrice(*_genai_prices("anthropic", "claude-sonnet-4-5", now)[0]))
    assert u == "None"


def test_an_off_peak_model_and_a_users_own_snapshot_go_to_genai_prices() -> None:
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("deepseek", "deepseek-reasoner", now) is price_cache.MISS
    assert pricing.price_of("deepseek-reasoner", "deepseek") == pricing._convert(
        data_snapshot.get_snapshot().find_provider_model("deepseek-reasoner", None, "deepseek", None)[1].get_prices(now)
    )
    custom = types.Provider(
        id="openai",
        name="OpenAI",
        api_pattern="x",
        models=[
            types.ModelInfo(
                id="gpt-4o-mini",
                match=types.ClauseEquals(equals="gpt-4o-mini"),
                prices=types.ModelPrice(input_mtok=Decimal(7), output_mtok=Decimal(9)),
            )
        ],
    )
    assert price_index.find("openai", "gpt-4o-mini", now) != price_cache.MISS
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[custom], from_auto_update=True))
    try:
        assert price_index.find("openai", "gpt-4o-mini", now) is price_cache.MISS
        assert pricing.price_of("gpt-4o-mini", "openai") == pricing.ModelPrice(7.0, 9.0)
    finally:
        data_snapshot.set_custom_snapshot(None)


def _damage(folder: Path, damage: str) -> None:
    path = folder / "openai.json"
    document = json.loads(path.read_text())
    if damage == "missing":
        path.unlink()
    elif damage == "corrupt":
        path.write_text(path.read_text()[:-20])
    elif damage == "another format":
        document["format"] += 1
        path.write_text(json.dumps(document))
    elif damage == "another release":
        document["genai_prices"]["version"] = "0.0.1"
        path.write_text(json.dumps(document))
    elif damage == "another table":
        document["genai_prices"]["files"]["genai_prices/data.py"] = "sha256=AAAA,1593104"
        path.write_text(json.dumps(document))
    elif damage == "unknown clause":
        document["models"][0][0] = ["~", "gpt"]
        document["models"].insert(0, [["~", "gpt"], [["", [9.0, 9.0, None, [], None]]]])
        path.write_text(json.dumps(document))
    else:
        document["models"][0][1] = [["not a date", [9.0, 9.0, None, [], None]]]
        document["models"].insert(0, [["^", "gpt"], [["yesterday", [9.0, 9.0, None, [], None]]]])
        path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    "damage",
    ["missing", "corrupt", "another format", "another release", "another table", "unknown clause", "bad price"],
)
def test_an_unusable_index_file_never_changes_a_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A missing, corrupt or stale file (another release or table), or one this version cannot read: genai-prices'
    price, looked up in genai-prices; the other providers' files are still used."""
    folder = tmp_path / "index"
    shutil.copytree(price_index.INDEX_DIR, folder)
    _damage(folder, damage)
    monkeypatch.setattr(price_index, "INDEX_DIR", folder)
    now = dt.datetime.now(tz=dt.UTC)
    if damage not in ("unknown clause", "bad price"):  # those are found unusable only when read at lookup
        assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
    for name in ("gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-5", "no-such-model"):
        expected = _genai_prices("openai", name, now)[0]
        assert pricing.price_of(name, "openai") == (None if expected is None else pricing.ModelPrice(*expected))
    assert price_index.find("anthropic", "claude-sonnet-4-5", now) == _genai_prices(
        "anthropic", "claude-sonnet-4-5", now
    )


def test_an_altered_or_unrecorded_install_is_not_trusted(tmp_path: Path) -> None:
    """The index is for the release its files name: a copy of genai-prices whose table was edited after install
    (its size no longer the one RECORD lists), or one with no RECORD (an editable or vendored copy), is looked up
    in genai-prices, in a process of its own."""
    installed = Path(genai_prices.__file__).parent
    record = installed.parent / f"genai_prices-{INSTALLED}.dist-info"
    code = (
        "import sys, json, datetime as dt; from evaltrace._internal import price_index\n"
        "import genai_prices as g; assert g.__file__.startswith(sys.argv[1])\n"
        "found = price_index.find('openai', 'gpt-4o', dt.datetime.now(tz=dt.UTC))\n"
        "print(json.dumps(isinstance(found, tuple)))"
    )
    results = {}
    for case in ("exact copy", "edited table", "no record"):
        site = tmp_path / case.replace(" ", "-")
        shutil.copytree(installed, site / "genai_prices", ignore=shutil.ignore_patterns("__pycache__"))
        if case != "no record":
            shutil.copytree(record, site / record.name)
        if case == "edited table":
            with open(site / "genai_prices" / "data.py", "a", encoding="utf-8") as handle:
                handle.write("# edited\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_SRC)])}
        out = subprocess.run(
            [sys.executable, "-c", code, str(site)], env=env, capture_output=True, text=True, check=True
        )
        results[case] = json.loads(out.stdout)
    assert results == {"exact copy": True, "edited table": False, "no record": False}
